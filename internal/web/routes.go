package web

import "net/http"

// The UI's routes: every page behind serve, in one table that the tests
// walk.

// route is one pattern of the UI and what serves it: a page, which serve
// runs after identifying the visitor, or, for the few answers that need
// no visitor (static assets, a trailing slash's redirect), a plain
// handler.
type route struct {
	pattern string
	page    pageFunc
	plain   http.HandlerFunc
}

// Form bodies are bounded: a form's at formBytes, sign-in and sign-out's
// at signInBytes.
const (
	formBytes   = 64 << 10
	signInBytes = 16 << 10
)

// routeTable is every route of the UI.
func (h *Handler) routeTable() []route {
	return []route{
		{pattern: "GET /{$}", page: h.home},
		{pattern: "GET /favicon.ico", plain: h.favicon},
		{pattern: "GET /static/{hash}/{file}", plain: h.static},
		{pattern: "GET /-/explore", page: h.explore},
		{pattern: "GET /-/new", page: signedIn(h.newRepoForm)},
		{pattern: "POST /-/new", page: h.form(formBytes, true, h.newRepo)},
		{pattern: "GET /-/settings/tokens", page: signedIn(h.tokens)},
		{pattern: "POST /-/settings/tokens", page: h.form(formBytes, true, h.createToken)},
		{pattern: "POST /-/settings/tokens/{id}/revoke", page: h.form(formBytes, true, h.revokeToken)},
		{pattern: "GET /-/settings/keys", page: signedIn(h.sshKeys)},
		{pattern: "POST /-/settings/keys", page: h.form(formBytes, true, h.addKey)},
		{pattern: "POST /-/settings/keys/{id}/remove", page: h.form(formBytes, true, h.removeKey)},
		{pattern: "GET /-/alerts/{owner}", page: h.tenantAlerts},
		{pattern: "GET /login", page: h.loginPage},
		{pattern: "POST /login", page: h.form(signInBytes, false, h.login)},
		{pattern: "POST /logout", page: h.form(signInBytes, false, h.logout)},
		{pattern: "GET /{owner}", page: h.owner},
		{pattern: "GET /{owner}/{repo}", page: h.repoHome},
		{pattern: "GET /{owner}/{repo}/-/tree/{rest...}", page: h.tree},
		{pattern: "GET /{owner}/{repo}/-/blob/{rest...}", page: h.blob},
		{pattern: "GET /{owner}/{repo}/-/raw/{rest...}", page: h.raw},
		{pattern: "GET /{owner}/{repo}/-/commits/{rest...}", page: h.commits},
		{pattern: "GET /{owner}/{repo}/-/commit/{id}", page: h.commit},
		{pattern: "GET /{owner}/{repo}/-/compare/{rest...}", page: h.compare},
		{pattern: "GET /{owner}/{repo}/-/branches", page: h.branches},
		{pattern: "GET /{owner}/{repo}/-/tags", page: h.tags},
		{pattern: "GET /{owner}/{repo}/-/pulls", page: h.pullList},
		{pattern: "POST /{owner}/{repo}/-/pulls", page: h.form(pullFormBytes, true, h.createPull)},
		{pattern: "GET /{owner}/{repo}/-/pull/{number}", page: h.pullConversation},
		{pattern: "POST /{owner}/{repo}/-/pull/{number}", page: h.form(pullFormBytes, true, h.editPull)},
		{pattern: "POST /{owner}/{repo}/-/pull/{number}/state", page: h.form(formBytes, true, h.setPullState)},
		{pattern: "POST /{owner}/{repo}/-/pull/{number}/merge", page: h.form(formBytes, true, h.mergePull)},
		{pattern: "GET /{owner}/{repo}/-/pull/{number}/files", page: h.pullFiles},
		{pattern: "POST /{owner}/{repo}/-/pull/{number}/comments", page: h.form(pullFormBytes, true, h.commentPull)},
		{pattern: "POST /{owner}/{repo}/-/pull/{number}/reviews", page: h.form(pullFormBytes, true, h.reviewPull)},
		{pattern: "GET /{owner}/{repo}/-/alerts", page: h.alerts},
		// Not signed-in only: anyone who may not write gets the page of a
		// missing repository.
		{pattern: "POST /{owner}/{repo}/-/alerts/{id}/resolve", page: h.form(formBytes, false, h.resolveAlert)},
		{pattern: "GET /{owner}/{repo}/-/scans", page: h.scans},
		{pattern: "POST /{owner}/{repo}/-/scans", page: h.form(formBytes, true, h.startScan)},
		{pattern: "GET /{owner}/{repo}/-/settings", page: h.repoSettings},
		{pattern: "POST /{owner}/{repo}/-/settings", page: h.form(formBytes, true, h.saveSettings)},
		{pattern: "POST /{owner}/{repo}/-/delete", page: h.form(formBytes, true, h.deleteRepo)},
		{pattern: "GET /{owner}/{repo}/-/hooks", page: h.hooks},
		{pattern: "POST /{owner}/{repo}/-/hooks", page: h.form(formBytes, true, h.addHook)},
		{pattern: "POST /{owner}/{repo}/-/hooks/{id}/remove", page: h.form(formBytes, true, h.removeHook)},
		{pattern: "POST /{owner}/{repo}/-/hooks/{id}/ping", page: h.form(formBytes, true, h.pingHook)},
		{pattern: "POST /{owner}/{repo}/-/hooks/{id}/active", page: h.form(formBytes, true, h.toggleHook)},
		{pattern: "POST /{owner}/{repo}/-/hooks/{id}/deliveries/{delivery}/redeliver", page: h.form(formBytes, true, h.redeliverHook)},
		{pattern: "GET /{owner}/{$}", plain: h.trimSlash},
		{pattern: "GET /{owner}/{repo}/{$}", plain: h.trimSlash},
		{pattern: "/", page: h.notFound},
	}
}

func (h *Handler) routes() {
	m := http.NewServeMux()
	for _, rt := range h.routeTable() {
		if rt.page != nil {
			m.HandleFunc(rt.pattern, h.serve(rt.page))
		} else {
			m.HandleFunc(rt.pattern, rt.plain)
		}
	}
	h.mux = m
}
