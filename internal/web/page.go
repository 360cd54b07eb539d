package web

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/wal"
)

// The page adapter: serve identifies the visitor before every page and
// renders the error page from what the page returns; and what every
// page shares, the visitor, the error pages and the template's frame.

// pageFunc is a page of the UI: it answers r for the visitor v, whom
// serve has identified, or returns the error whose page is shown instead.
// A page that has begun its answer (a redirect, a download) keeps it: an
// error it returns after that is logged, never written over.
type pageFunc func(w http.ResponseWriter, r *http.Request, v *visitor) error

// serve adapts a page to the mux: it identifies the visitor (who) before
// the page runs, so that no page can skip that check, then renders the
// error page from the page's error (fail, with classify's statuses).
func (h *Handler) serve(p pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := h.who(w, r)
		if err != nil {
			h.fail(w, r, v, err)
			return
		}
		aw := &answerWriter{ResponseWriter: w}
		err = p(aw, r, v)
		switch {
		case err == nil:
		case aw.answered:
			h.opts.Logger.WarnContext(r.Context(), "web: page failed after answering", "path", r.URL.Path, "err", err)
		default:
			h.fail(w, r, v, err)
		}
	}
}

// answerWriter records whether a page has begun its answer.
type answerWriter struct {
	http.ResponseWriter
	answered bool
}

func (a *answerWriter) WriteHeader(status int) {
	a.answered = true
	a.ResponseWriter.WriteHeader(status)
}

func (a *answerWriter) Write(b []byte) (int, error) {
	a.answered = true
	return a.ResponseWriter.Write(b)
}

// Unwrap is the server's writer, for http.ResponseController and
// limitBody.
func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// limitBody bounds r's body at n bytes as http.MaxBytesReader does, on
// the server's own writer under any wrapper, so that a body past the
// bound also closes the connection.
func limitBody(w http.ResponseWriter, r *http.Request, n int64) {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	r.Body = http.MaxBytesReader(w, r.Body, n)
}

// visitor is who is asking.
type visitor struct {
	p       *meta.Principal // nil: anonymous
	token   string          // the session's token, for the API calls of forms
	session string          // the session cookie's value
	csrf    string          // the form token
}

// httpError is an error page's status and message.
type httpError struct {
	status int
	msg    string
	err    error
}

func (e *httpError) Error() string { return e.msg }

func (e *httpError) Unwrap() error { return e.err }

var (
	errNotFound = &httpError{status: http.StatusNotFound, msg: "Not found."}
	errCSRF     = &httpError{status: http.StatusForbidden, msg: "The form expired or came from another site; reload the page and try again."}
)

// classify turns a lookup or authorization failure into a page status:
// absent is 404, a storage outage 503, anything else 500.
func classify(what string, err error) error {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return err
	case errors.Is(err, meta.ErrNotFound), errors.Is(err, meta.ErrInvalidName), errors.Is(err, wal.ErrRepoDeleted), errors.Is(err, errNoObject), errors.Is(err, alerts.ErrNotFound):
		return &httpError{status: http.StatusNotFound, msg: "Not found.", err: err}
	case errors.Is(err, meta.ErrInvalidArgument):
		return &httpError{status: http.StatusBadRequest, msg: "Bad request.", err: err}
	case errors.Is(err, errGitTimeout):
		return &httpError{status: http.StatusServiceUnavailable, msg: "This page took too long to build; try again shortly.", err: fmt.Errorf("%s: %w", what, err)}
	case errors.Is(err, meta.ErrUnavailable):
		return &httpError{status: http.StatusServiceUnavailable, msg: "The service is unavailable; try again shortly.", err: fmt.Errorf("%s: %w", what, err)}
	}
	return &httpError{status: http.StatusInternalServerError, msg: "Internal error.", err: fmt.Errorf("%s: %w", what, err)}
}

// who authenticates the session cookie. A cookie that does not open or
// whose token no longer authenticates is dropped: the visitor is
// anonymous. A storage failure is an error (503), never anonymous.
func (h *Handler) who(w http.ResponseWriter, r *http.Request) (*visitor, error) {
	v := &visitor{}
	csrf := ""
	if c, err := r.Cookie(csrfCookie); err == nil && c.Value != "" {
		csrf = c.Value
	} else {
		csrf = randomValue()
		http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: csrf, Path: "/", HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteLaxMode})
	}
	if c, err := r.Cookie(sessionCookie); err == nil && c.Value != "" {
		tok, ok := h.keys.open(c.Value, h.opts.Now())
		if ok {
			p, err := h.opts.Auth.Authenticate(r.Context(), tok)
			switch {
			case err == nil:
				v.p, v.session, v.token = &p, c.Value, tok
			case errors.Is(err, meta.ErrUnauthenticated):
			default:
				return nil, classify("authenticate", err)
			}
		}
		if v.p == nil {
			h.clearSession(w, r)
		}
	}
	v.csrf = h.keys.csrfToken(csrf, v.session)
	return v, nil
}

func (h *Handler) clearSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteLaxMode})
}

// page is what every template gets.
type page struct {
	Title  string
	CSS    string
	Icon   string
	User   string // signed-in tenant, or ""
	CSRF   string
	Path   string // the request path, for sign-in's return
	Repo   *repoView
	Tab    string
	Notice string
	Data   any
}

func (h *Handler) show(w http.ResponseWriter, r *http.Request, v *visitor, status int, name string, p page) {
	p.CSS, p.Icon, p.CSRF, p.Path = h.css, h.iconURL, v.csrf, r.URL.Path
	if v.p != nil {
		p.User = v.p.Tenant
	}
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "base.html", p); err != nil {
		h.opts.Logger.ErrorContext(r.Context(), "web: render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders an error page.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, v *visitor, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = classify("web", err).(*httpError)
	}
	if he.status >= 500 {
		h.opts.Logger.ErrorContext(r.Context(), "web: request failed", "path", r.URL.Path, "status", he.status, "err", err)
	}
	if v == nil {
		v = &visitor{}
	}
	h.show(w, r, v, he.status, "error", page{Title: http.StatusText(he.status), Data: he.msg})
}
