package web

// Patterns lists the patterns h serves, for the tests' walk of every
// route.
func Patterns(h *Handler) []string {
	var ps []string
	for _, rt := range h.routeTable() {
		ps = append(ps, rt.pattern)
	}
	return ps
}
