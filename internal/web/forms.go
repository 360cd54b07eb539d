package web

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/ghost-scm/ghost/internal/client"
)

// The pages that change things (docs/adr/0103-web-ui-forms.md): creating
// a repository, its settings and deletion, the visitor's tokens and SSH
// keys, a full-history scan; and the pages that find things: the signed-
// in home, the explore page of public repositories and a tenant's alerts
// across its repositories. Each is an HTML form that works without
// JavaScript, checked against the session's CSRF token, and each change
// is one call of the REST API, served in process (Options.API) with the
// visitor's own token: the same authorization, validation and messages
// as for git and the CLI, and no second copy of those rules here. What
// they share is here: the API client, its failures' pages, and the
// wrappers of forms and of pages for signed-in visitors.

// api returns a client of the API acting as v (anonymous when v is).
func (h *Handler) api(v *visitor) *client.Client {
	c, err := client.New("http://ghost.invalid", v.token, client.WithHandler(h.opts.API), client.WithUserAgent("ghost-web"))
	if err != nil {
		panic(err) // a constant URL
	}
	return c
}

// apiError turns an API failure into a page: the API's message, which is
// written for people, with its status.
func apiError(err error) error {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return classify("api", err)
	}
	status := ce.Status
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	msg := ce.Message
	if status >= 500 {
		msg = "The service is unavailable; try again shortly."
	}
	if status == http.StatusNotFound {
		msg = "Not found."
	}
	return &httpError{status: status, msg: msg, err: err}
}

// form wraps a page that takes a POST form: the body is bounded at
// limit bytes and the CSRF token checked before the page runs; with
// signedIn, an anonymous visitor is sent to sign in instead.
func (h *Handler) form(limit int64, signedIn bool, p pageFunc) pageFunc {
	return func(w http.ResponseWriter, r *http.Request, v *visitor) error {
		limitBody(w, r, limit)
		if !h.keys.checkCSRF(r) {
			return errCSRF
		}
		if signedIn && v.p == nil {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.Path), http.StatusSeeOther)
			return nil
		}
		return p(w, r, v)
	}
}

// signedIn wraps a GET page for signed-in visitors only: anyone else is
// sent to sign in first, and back after.
func signedIn(p pageFunc) pageFunc {
	return func(w http.ResponseWriter, r *http.Request, v *visitor) error {
		if v.p == nil {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return nil
		}
		return p(w, r, v)
	}
}
