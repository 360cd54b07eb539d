package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/api"
	"github.com/ghost-scm/ghost/internal/web"
)

// routeCase is what one registered route answers a visitor who may not
// read alice/priv: with no cookies at all (a post then has no form
// token), and for a post, with the form token of an anonymous session.
type routeCase struct {
	path string // the pattern's path for alice/priv
	// anon is the status with no cookies; plain routes identify no
	// visitor, every other one is a page.
	anon  int
	plain bool
	// form is a post's status with a valid form token, and to its
	// Location's prefix when it redirects.
	form   int
	formTo string
}

// routeCases covers every pattern the UI registers (TestEveryRoute
// checks that against web.Patterns).
func routeCases(f *fixture) map[string]routeCase {
	priv := "/alice/priv"
	login := func(p string) string { return "/login?next=" + url.QueryEscape(p) }
	post := func(p string) routeCase { return routeCase{path: p, anon: 403, form: 303, formTo: login(p)} }
	return map[string]routeCase{
		"GET /{$}":                                                          {path: "/", anon: 200},
		"GET /favicon.ico":                                                  {path: "/favicon.ico", anon: 200, plain: true},
		"GET /static/{hash}/{file}":                                         {path: "/static/000000000000/style.css", anon: 404, plain: true},
		"GET /-/explore":                                                    {path: "/-/explore", anon: 200},
		"GET /-/new":                                                        {path: "/-/new", anon: 303},
		"POST /-/new":                                                       post("/-/new"),
		"GET /-/settings/tokens":                                            {path: "/-/settings/tokens", anon: 303},
		"POST /-/settings/tokens":                                           post("/-/settings/tokens"),
		"POST /-/settings/tokens/{id}/revoke":                               post("/-/settings/tokens/x/revoke"),
		"GET /-/settings/keys":                                              {path: "/-/settings/keys", anon: 303},
		"POST /-/settings/keys":                                             post("/-/settings/keys"),
		"POST /-/settings/keys/{id}/remove":                                 post("/-/settings/keys/SHA256:x/remove"),
		"GET /-/alerts/{owner}":                                             {path: "/-/alerts/alice", anon: 404},
		"GET /login":                                                        {path: "/login", anon: 200},
		"POST /login":                                                       {path: "/login", anon: 403, form: 401},
		"POST /logout":                                                      {path: "/logout", anon: 403, form: 303, formTo: "/"},
		"GET /{owner}":                                                      {path: "/alice", anon: 200},
		"GET /{owner}/{repo}":                                               {path: priv, anon: 404},
		"GET /{owner}/{repo}/-/tree/{rest...}":                              {path: priv + "/-/tree/main/src", anon: 404},
		"GET /{owner}/{repo}/-/blob/{rest...}":                              {path: priv + "/-/blob/main/README.md", anon: 404},
		"GET /{owner}/{repo}/-/raw/{rest...}":                               {path: priv + "/-/raw/main/README.md", anon: 404},
		"GET /{owner}/{repo}/-/commits/{rest...}":                           {path: priv + "/-/commits/main", anon: 404},
		"GET /{owner}/{repo}/-/commit/{id}":                                 {path: priv + "/-/commit/" + f.head, anon: 404},
		"GET /{owner}/{repo}/-/compare/{rest...}":                           {path: priv + "/-/compare/" + f.head + "..." + f.head, anon: 404},
		"GET /{owner}/{repo}/-/branches":                                    {path: priv + "/-/branches", anon: 404},
		"GET /{owner}/{repo}/-/tags":                                        {path: priv + "/-/tags", anon: 404},
		"GET /{owner}/{repo}/-/pulls":                                       {path: priv + "/-/pulls", anon: 404},
		"POST /{owner}/{repo}/-/pulls":                                      post(priv + "/-/pulls"),
		"GET /{owner}/{repo}/-/pull/{number}":                               {path: priv + "/-/pull/1", anon: 404},
		"POST /{owner}/{repo}/-/pull/{number}":                              post(priv + "/-/pull/1"),
		"POST /{owner}/{repo}/-/pull/{number}/state":                        post(priv + "/-/pull/1/state"),
		"POST /{owner}/{repo}/-/pull/{number}/merge":                        post(priv + "/-/pull/1/merge"),
		"GET /{owner}/{repo}/-/pull/{number}/files":                         {path: priv + "/-/pull/1/files", anon: 404},
		"POST /{owner}/{repo}/-/pull/{number}/comments":                     post(priv + "/-/pull/1/comments"),
		"POST /{owner}/{repo}/-/pull/{number}/reviews":                      post(priv + "/-/pull/1/reviews"),
		"GET /{owner}/{repo}/-/alerts":                                      {path: priv + "/-/alerts", anon: 404},
		"POST /{owner}/{repo}/-/alerts/{id}/resolve":                        {path: priv + "/-/alerts/" + f.fp + "/resolve", anon: 403, form: 404},
		"GET /{owner}/{repo}/-/scans":                                       {path: priv + "/-/scans", anon: 404},
		"POST /{owner}/{repo}/-/scans":                                      post(priv + "/-/scans"),
		"GET /{owner}/{repo}/-/settings":                                    {path: priv + "/-/settings", anon: 404},
		"POST /{owner}/{repo}/-/settings":                                   post(priv + "/-/settings"),
		"POST /{owner}/{repo}/-/delete":                                     post(priv + "/-/delete"),
		"GET /{owner}/{repo}/-/hooks":                                       {path: priv + "/-/hooks", anon: 404},
		"POST /{owner}/{repo}/-/hooks":                                      post(priv + "/-/hooks"),
		"POST /{owner}/{repo}/-/hooks/{id}/remove":                          post(priv + "/-/hooks/1/remove"),
		"POST /{owner}/{repo}/-/hooks/{id}/ping":                            post(priv + "/-/hooks/1/ping"),
		"POST /{owner}/{repo}/-/hooks/{id}/active":                          post(priv + "/-/hooks/1/active"),
		"POST /{owner}/{repo}/-/hooks/{id}/deliveries/{delivery}/redeliver": post(priv + "/-/hooks/1/deliveries/d1/redeliver"),
		"GET /{owner}/{$}":                                                  {path: "/alice/", anon: 301, plain: true},
		"GET /{owner}/{repo}/{$}":                                           {path: priv + "/", anon: 301, plain: true},
		"/":                                                                 {path: priv + "/x", anon: 404},
	}
}

func methodOf(pattern string) string {
	if m, _, ok := strings.Cut(pattern, " "); ok {
		return m
	}
	return "GET"
}

// TestEveryRoute walks the UI's routes: each page identifies its visitor
// before anything else (a session whose authentication fails is 503 on
// every page, never an anonymous answer, and a first visit is given its
// form cookie), and a visitor who may not read alice/priv gets the same
// refusal on every one of its pages: the page of a missing repository, a
// sign-in, or a refused form, never its contents.
func TestEveryRoute(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	cases := routeCases(f)
	patterns := web.Patterns(f.handler)
	for _, p := range patterns {
		if _, ok := cases[p]; !ok {
			t.Errorf("route %q has no case here", p)
		}
	}
	if len(patterns) != len(cases) {
		t.Errorf("%d routes, %d cases", len(patterns), len(cases))
	}
	// A second node on the same store whose authentication is down: the
	// session alice opened on the first is refused with 503 on each page.
	down, err := web.New(context.Background(), web.Options{Store: f.store, Auth: failAuth{}, Repos: f.meta, Authz: f.meta, Cache: f.cache, Alerts: f.alerts, API: api.NewHandler(f.meta, nil)})
	if err != nil {
		t.Fatal(err)
	}
	downSrv := httptest.NewServer(down)
	defer downSrv.Close()
	alice := f.signedIn(f.alice)
	u, _ := url.Parse(f.srv.URL)
	aliceCookies := alice.hc.Jar.Cookies(u)
	// missing reports whether body is what the same path of a missing
	// repository answers, the names aside.
	missing := func(method, path, body string) bool {
		req, _ := http.NewRequest(method, f.srv.URL+strings.ReplaceAll(path, "priv", "nope"), nil)
		res := f.client().do(req)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode == 404 && strings.ReplaceAll(body, "priv", "nope") == string(b)
	}
	anon := f.client()
	csrf := anon.csrfFor("/login")
	for pattern, rc := range cases {
		method := methodOf(pattern)
		// No cookies.
		req, _ := http.NewRequest(method, f.srv.URL+rc.path, nil)
		res := f.client().do(req)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != rc.anon {
			t.Errorf("%s %s anonymous: %d, want %d", method, rc.path, res.StatusCode, rc.anon)
		}
		if rc.anon == 404 && !rc.plain && !missing(method, rc.path, string(body)) {
			t.Errorf("%s %s anonymous: not the page of a missing repository:\n%s", method, rc.path, body)
		}
		gotCSRF := strings.Contains(strings.Join(res.Header.Values("Set-Cookie"), "\n"), "ghost_csrf=")
		if gotCSRF == rc.plain {
			t.Errorf("%s %s: form cookie set %v on a first visit, want %v", method, rc.path, gotCSRF, !rc.plain)
		}
		if res.StatusCode == 303 && method == "GET" && res.Header.Get("Location") != "/login?next="+url.QueryEscape(rc.path) {
			t.Errorf("%s %s anonymous: to %q, want the sign-in", method, rc.path, res.Header.Get("Location"))
		}
		// A post with an anonymous session's form token.
		if method == "POST" {
			res := anon.post(rc.path, url.Values{"csrf": {csrf}})
			if res.StatusCode != rc.form || rc.formTo != "" && res.Header.Get("Location") != rc.formTo {
				t.Errorf("POST %s anonymous with the form token: %d to %q, want %d to %q", rc.path, res.StatusCode, res.Header.Get("Location"), rc.form, rc.formTo)
			}
		}
		// alice's session on the node whose authentication is down.
		req, _ = http.NewRequest(method, downSrv.URL+rc.path, strings.NewReader(url.Values{"csrf": {"x"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for _, ck := range aliceCookies {
			req.AddCookie(ck)
		}
		res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if want := http.StatusServiceUnavailable; !rc.plain && res.StatusCode != want {
			t.Errorf("%s %s with authentication down: %d, want %d", method, rc.path, res.StatusCode, want)
		}
	}
}

// TestFormBodyPastItsBound: a form's body past its bound is refused and
// closes the connection, as http.MaxBytesReader does on the server's own
// writer, under the page adapter's.
func TestFormBodyPastItsBound(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	c := f.client()
	csrf := c.csrfFor("/login")
	for _, path := range []string{"/login", "/-/new"} {
		res := c.post(path, url.Values{"csrf": {csrf}, "token": {f.alice}, "pad": {strings.Repeat("x", 64<<10)}})
		if res.StatusCode != http.StatusForbidden || !res.Close {
			t.Errorf("POST %s past the bound: %d, connection closed %v; want 403, closed", path, res.StatusCode, res.Close)
		}
	}
}
