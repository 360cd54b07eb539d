package web

import (
	"context"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/testkit"
	"github.com/ghost-scm/ghost/internal/wal"
)

// noCache is a Materializer with no repositories; the adapter's tests
// open none.
type noCache struct{}

func (noCache) Materialize(context.Context, string) (string, error) { return "", wal.ErrRepoDeleted }

// downAuth is an Authenticator whose store is down.
type downAuth struct{}

func (downAuth) Authenticate(context.Context, string) (meta.Principal, error) {
	return meta.Principal{}, fmt.Errorf("read token: %w", meta.ErrUnavailable)
}

// adapterHandler is a Handler over an empty in-memory store with alice
// and a token of hers, its log in the returned buffer. auth, when set,
// replaces the store as the Authenticator.
func adapterHandler(t *testing.T, auth Authenticator) (*Handler, string, *testkit.Buffer) {
	t.Helper()
	ctx := context.Background()
	store := memstore.New()
	m := meta.New(store, wal.New(store, wal.Options{}))
	if _, err := m.CreateTenant(ctx, "alice", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	tok, _, err := m.CreateToken(ctx, "alice", meta.ScopeWrite, "test")
	if err != nil {
		t.Fatal(err)
	}
	if auth == nil {
		auth = m
	}
	var log testkit.Buffer
	h, err := New(ctx, Options{Store: store, Auth: auth, Repos: m, Authz: m, Cache: noCache{}, API: http.NotFoundHandler(),
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return h, tok, &log
}

// TestPageErrorsBecomeErrorPages: what a page returns is the error page,
// its status from the layers' sentinels (classify) or the page's own
// httpError, and only server faults are logged.
func TestPageErrorsBecomeErrorPages(t *testing.T) {
	h, _, log := adapterHandler(t, nil)
	for _, c := range []struct {
		name   string
		err    error
		status int
		msg    string
	}{
		{"missing repository", fmt.Errorf("resolve: %w", meta.ErrNotFound), 404, "Not found."},
		{"invalid name", meta.ErrInvalidName, 404, "Not found."},
		{"deleted repository", fmt.Errorf("materialize: %w", wal.ErrRepoDeleted), 404, "Not found."},
		{"missing object", fmt.Errorf("cat-file: %w", errNoObject), 404, "Not found."},
		{"missing alert", alerts.ErrNotFound, 404, "Not found."},
		{"bad argument", meta.ErrInvalidArgument, 400, "Bad request."},
		{"git too slow", fmt.Errorf("git log: %w", errGitTimeout), 503, "This page took too long to build; try again shortly."},
		{"metadata outage", fmt.Errorf("read: %w", meta.ErrUnavailable), 503, "The service is unavailable; try again shortly."},
		{"anything else", errors.New("boom"), 500, "Internal error."},
		{"the page's own", &httpError{status: http.StatusConflict, msg: "Taken, try another."}, 409, "Taken, try another."},
		{"an alert store's bad input", alertError(fmt.Errorf("state: %w", alerts.ErrInvalidArgument)), 400, "Invalid request: state: " + alerts.ErrInvalidArgument.Error()},
		{"the form check", errCSRF, 403, errCSRF.msg},
		{"a page of a missing thing", errNotFound, 404, "Not found."},
	} {
		before := len(log.String())
		rec := httptest.NewRecorder()
		h.serve(func(w http.ResponseWriter, r *http.Request, v *visitor) error { return c.err })(rec, httptest.NewRequest("GET", "/x", nil))
		body := rec.Body.String()
		if rec.Code != c.status || !strings.Contains(body, "<p>"+html.EscapeString(c.msg)+"</p>") || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
			t.Errorf("%s: %d %q\n%s", c.name, rec.Code, rec.Header().Get("Content-Type"), body)
		}
		if logged := strings.Contains(log.String()[before:], "web: request failed"); logged != (c.status >= 500) {
			t.Errorf("%s: logged %v, want %v", c.name, logged, c.status >= 500)
		}
	}
}

// TestPageAnswerIsKept: a page that has begun its answer keeps it when it
// fails after; the failure is logged, not rendered over the answer.
func TestPageAnswerIsKept(t *testing.T) {
	h, _, log := adapterHandler(t, nil)
	boom := errors.New("boom after the answer")
	for _, c := range []struct {
		name   string
		page   pageFunc
		status int
		body   string
	}{
		{"a redirect", func(w http.ResponseWriter, r *http.Request, v *visitor) error {
			w.Header().Set("Location", "/there")
			w.WriteHeader(http.StatusSeeOther)
			return boom
		}, 303, ""},
		{"a download cut short", func(w http.ResponseWriter, r *http.Request, v *visitor) error {
			_, _ = w.Write([]byte("the first bytes"))
			return boom
		}, 200, "the first bytes"},
	} {
		rec := httptest.NewRecorder()
		h.serve(c.page)(rec, httptest.NewRequest("GET", "/x", nil))
		if rec.Code != c.status || rec.Body.String() != c.body {
			t.Errorf("%s: %d %q, want %d %q", c.name, rec.Code, rec.Body.String(), c.status, c.body)
		}
		if c.status == 303 && rec.Header().Get("Location") != "/there" {
			t.Errorf("%s: Location %q", c.name, rec.Header().Get("Location"))
		}
	}
	if n := strings.Count(log.String(), "web: page failed after answering"); n != 2 {
		t.Errorf("%d failures after an answer logged, want 2:\n%s", n, log.String())
	}
}

// TestPageVisitor: serve identifies the visitor before the page runs: a
// session's tenant, an anonymous visitor given a form token, and a
// session whose authentication fails is 503 without running the page,
// never an anonymous visit.
func TestPageVisitor(t *testing.T) {
	h, tok, _ := adapterHandler(t, nil)
	var got *visitor
	p := h.serve(func(w http.ResponseWriter, r *http.Request, v *visitor) error {
		got = v
		return nil
	})
	session := &http.Cookie{Name: sessionCookie, Value: h.keys.seal(tok, time.Now().Add(time.Hour))}

	req := httptest.NewRequest("GET", "/x", nil)
	req.AddCookie(session)
	rec := httptest.NewRecorder()
	p(rec, req)
	if got == nil || got.p == nil || got.p.Tenant != "alice" || got.token != tok || got.csrf == "" {
		t.Fatalf("signed-in visitor: %+v", got)
	}

	got = nil
	rec = httptest.NewRecorder()
	p(rec, httptest.NewRequest("GET", "/x", nil))
	if got == nil || got.p != nil || got.csrf == "" || !strings.Contains(rec.Header().Get("Set-Cookie"), csrfCookie+"=") {
		t.Fatalf("anonymous visitor: %+v, cookies %q", got, rec.Header().Values("Set-Cookie"))
	}

	down, _, _ := adapterHandler(t, downAuth{})
	ran := false
	req = httptest.NewRequest("GET", "/x", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: down.keys.seal(tok, time.Now().Add(time.Hour))})
	rec = httptest.NewRecorder()
	down.serve(func(w http.ResponseWriter, r *http.Request, v *visitor) error {
		ran = true
		return nil
	})(rec, req)
	if ran || rec.Code != http.StatusServiceUnavailable {
		t.Errorf("authentication down: page ran %v, status %d", ran, rec.Code)
	}
}
