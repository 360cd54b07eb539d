package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/memcoord"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/server"
)

// TestAlertVisibility is the access matrix of secret scanning on the
// whole server (issue 18): a public repository with an alert and a scan
// run, asked for by anonymous visitors, a read token of the owner, a
// write token of another tenant, and the owner's write token, on the API
// (alerts list, alert, tenant-wide list, scan runs) and in the web UI
// (alerts and scan-run pages). Only the owner sees anything; everyone
// else gets 404, the API's answer of a missing path and the web UI's page
// of a missing repository.
func TestAlertVisibility(t *testing.T) {
	ctx := context.Background()
	backend := memcoord.New(coord.Limits{})
	srv, err := server.New(ctx, server.Options{
		Store: memstore.New(), CacheDir: filepath.Join(t.TempDir(), "cache"),
		Scan: scanner.Options{Coord: func() coord.Backend { return backend }},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := httptest.NewServer(srv.Handler()) // 127.0.0.1
	t.Cleanup(ts.Close)
	m := srv.Meta()
	for _, tn := range []string{"alice", "bob"} {
		if _, err := m.CreateTenant(ctx, tn, meta.KindUser); err != nil {
			t.Fatal(err)
		}
	}
	token := func(tenant string, scope meta.Scope) string {
		tok, _, err := m.CreateToken(ctx, tenant, scope, "t")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	owner, reader, other := token("alice", meta.ScopeWrite), token("alice", meta.ScopeRead), token("bob", meta.ScopeWrite)
	repo, err := m.CreateRepo(ctx, "alice", "pub", true)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "commit", "-q", "--allow-empty", "-m", "token "+fakeToken("visibility"))
	git(t, dir, "push", "-q", "http://x:"+owner+"@"+strings.TrimPrefix(ts.URL, "http://")+"/alice/pub.git", "main")
	if _, err := srv.Scanner().Reconcile(ctx, "alice", repo.ID); err != nil {
		t.Fatal(err)
	}
	w, err := srv.Scanner().NewWorker(scanner.WorkerOptions{Cache: srv.Cache(), EngineWorkers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for {
		did, err := w.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !did {
			break
		}
	}
	as := srvAlerts(t, srv, repo)
	if len(as) != 1 {
		t.Fatalf("%d alerts after the push run, want 1 (the commit message's)", len(as))
	}

	get := func(path, tok string, session bool) (int, string) {
		t.Helper()
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		if tok != "" && !session {
			req.SetBasicAuth("x", tok)
		}
		if tok != "" && session {
			for _, ck := range signIn(t, ts.URL, tok) {
				req.AddCookie(ck)
			}
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	api := []string{
		"/api/repos/alice/pub/alerts",
		"/api/repos/alice/pub/alerts/" + as[0].Fingerprint,
		"/api/tenants/alice/alerts",
		"/api/repos/alice/pub/scans",
	}
	ui := []string{"/alice/pub/-/alerts", "/alice/pub/-/scans"}
	_, missingAPI := get("/api/repos/alice/pub/no-such-page", owner, false)
	for _, v := range []struct {
		who, tok string
		sees     bool
	}{{"anonymous", "", false}, {"read token", reader, false}, {"other tenant", other, false}, {"owner", owner, true}} {
		for _, p := range api {
			code, body := get(p, v.tok, false)
			switch {
			case v.sees && code != 200:
				t.Errorf("%s: GET %s = %d %s", v.who, p, code, body)
			case !v.sees && (code != 404 || body != missingAPI):
				t.Errorf("%s: GET %s = %d %s, want 404 %s", v.who, p, code, body, missingAPI)
			}
		}
		for _, p := range ui {
			code, body := get(p, v.tok, true)
			switch {
			case v.sees && code != 200:
				t.Errorf("%s: web %s = %d", v.who, p, code)
			case !v.sees && (code != 404 || !strings.Contains(body, "Not found.")):
				t.Errorf("%s: web %s = %d, want the 404 page", v.who, p, code)
			}
			if strings.Contains(body, "token ghp_") || !v.sees && strings.Contains(body, as[0].Fingerprint) {
				t.Errorf("%s: web %s shows the alert", v.who, p)
			}
		}
	}
}

// signIn signs in to the web UI with tok and returns the session cookies.
func signIn(t *testing.T, base, tok string) []*http.Cookie {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	cookies := res.Cookies()
	i := strings.Index(string(body), `name="csrf" value="`)
	if i < 0 {
		t.Fatal("no csrf token on the login page")
	}
	csrf := string(body)[i+len(`name="csrf" value="`):]
	csrf = csrf[:strings.IndexByte(csrf, '"')]
	req, _ := http.NewRequest("POST", base+"/login", strings.NewReader(url.Values{"csrf": {csrf}, "token": {tok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, ck := range cookies {
		req.AddCookie(ck)
	}
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", res.StatusCode)
	}
	return append(cookies, res.Cookies()...)
}

func srvAlerts(t *testing.T, srv *server.Server, repo meta.Repo) []alerts.Alert {
	t.Helper()
	p, err := srv.Alerts().List(context.Background(), alerts.Filter{Tenant: repo.Owner, RepoID: repo.ID}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	return p.Alerts
}
