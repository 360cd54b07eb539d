package server

import "github.com/ghost-scm/ghost/internal/coord"

// Coordination is a node's handle on the coordination store
// (docs/design.md §8.10). "ghost serve" opens the store in the background
// and keeps retrying while etcd is unreachable, because git requests must
// never wait for it (docs/adr/0025-serve-coordination-lifecycle.md); so the
// server is given a handle to ask, not a backend.
//
// The server holds it for the components that run on the node and
// coordinate through the store. None exists yet: the secret scanner
// (docs/design.md §10.1) is the first, and will take the coord.Admin that
// starts a scan run after a push and the coord.Worker that scans shards
// from the backend the handle returns.
type Coordination interface {
	// Backend returns the coordination backend once the store is open, and
	// false until then. It never blocks.
	Backend() (coord.Backend, bool)
}
