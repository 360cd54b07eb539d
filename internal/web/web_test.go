package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/api"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/web"
)

// escapedScript is how scriptName's first part must appear: git stores
// the name as a directory "<script>alert(1)<" holding "script>.txt".
const escapedScript = "&lt;script&gt;alert(1)&lt;"

func TestPages(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	anon := f.client()
	alice := f.signedIn(f.alice)
	scriptURL := url.PathEscape(scriptName)
	type check struct {
		path   string
		status int
		want   []string
		absent []string
	}
	cases := map[string][]check{
		"owner": {
			{path: "/alice", status: 200, want: []string{`href="/alice/pub"`}, absent: []string{"/alice/priv"}},
			{path: "/nobody", status: 404},
			{path: "/alice/pub/-/nothing", status: 404, want: []string{"Not found."}},
		},
		"repo": {
			{path: "/alice/pub", status: 200, want: []string{"<h1>Demo", "<em>world</em>", "http://127.0.0.1", "/alice/pub.git", "ssh://git@ghost.example:2222/alice/pub.git", "feature/x", "v1.0", escapedScript,
				`href="/alice/pub/-/blob/main/src/main.go"`, `href="/alice/pub/-/blob/main/etc/passwd#x"`, `href="https://example.com/a"`, `src="/alice/pub/-/raw/main/img/logo.png"`},
				absent: []string{"<script>alert", "<b>bold</b>", "javascript:"}},
			{path: "/alice/empty", status: 200, want: []string{"This repository is empty"}},
			{path: "/alice/nope", status: 404},
			{path: "/alice/priv", status: 404},
		},
		"tree": {
			{path: "/alice/pub/-/tree/main", status: 200, want: []string{"src/", escapedScript, "/-/tree/main/src"}, absent: []string{"<script>alert"}},
			{path: "/alice/pub/-/tree/main/src", status: 200, want: []string{"main.go"}},
			{path: "/alice/pub/-/tree/feature/x/src", status: 200, want: []string{"main.go", "feature/x"}},
			{path: "/alice/pub/-/tree/" + f.head, status: 200, want: []string{"README.md"}},
			{path: "/alice/pub/-/tree/nope", status: 404},
			{path: "/alice/pub/-/tree/main/nodir", status: 404},
			{path: "/alice/priv/-/tree/main", status: 404},
		},
		"blob": {
			{path: "/alice/pub/-/blob/main/src/main.go", status: 200, want: []string{`class="chroma"`, "&lt;hi&gt;", "/-/raw/main/src/main.go"}},
			{path: "/alice/pub/-/blob/main/" + scriptURL, status: 200, want: []string{escapedScript, "escaped?"}, absent: []string{"<script>alert"}},
			{path: "/alice/pub/-/blob/main/bin.dat", status: 200, want: []string{"Binary file"}},
			{path: "/alice/pub/-/blob/main/big.txt", status: 200, want: []string{"too large to show"}, absent: []string{"large line of text"}},
			{path: "/alice/pub/-/blob/main/mid.go", status: 200, want: []string{`<span class="ln">1</span><span class="cl">package mid`}},
			{path: "/alice/pub/-/blob/main/missing.txt", status: 404},
			{path: "/alice/priv/-/blob/main/src/main.go", status: 404},
		},
		"raw": {
			{path: "/alice/pub/-/raw/main/src/main.go", status: 200, want: []string{"package main"}},
			{path: "/alice/pub/-/raw/main/big.txt", status: 200, want: []string{"large line of text"}},
			{path: "/alice/pub/-/raw/main/missing.txt", status: 404},
			{path: "/alice/pub/-/raw/main/src", status: 404},
			{path: "/alice/priv/-/raw/main/src/main.go", status: 404},
		},
		"commits": {
			{path: "/alice/pub/-/commits/main", status: 200, want: []string{"change 2", "initial &lt;import&gt;", "/-/commit/" + f.head}, absent: []string{"<import>"}},
			{path: "/alice/pub/-/commits/main/src", status: 200, want: []string{"initial &lt;import&gt;"}, absent: []string{"change 2"}},
			{path: "/alice/pub/-/commits/nope", status: 404},
			{path: "/alice/priv/-/commits/main", status: 404},
		},
		"commit": {
			{path: "/alice/pub/-/commit/" + f.head, status: 200, want: []string{"change 2", `class="add"`, "log.txt"}},
			{path: "/alice/pub/-/commit/zzzz", status: 404},
			{path: "/alice/pub/-/commit/" + strings.Repeat("0", 40), status: 404},
			{path: "/alice/priv/-/commit/" + f.head, status: 404},
		},
		"alerts": {
			{path: "/alice/priv/-/alerts", status: 404},
			{path: "/alice/nope/-/alerts", status: 404},
		},
	}
	for name, cs := range cases {
		t.Run(name, func(t *testing.T) {
			for _, c := range cs {
				res, body := anon.get(c.path)
				if res.StatusCode != c.status {
					t.Errorf("GET %s: status %d, want %d", c.path, res.StatusCode, c.status)
					continue
				}
				for _, w := range c.want {
					if !strings.Contains(body, w) {
						t.Errorf("GET %s: no %q in page", c.path, w)
					}
				}
				for _, a := range c.absent {
					if strings.Contains(body, a) {
						t.Errorf("GET %s: %q in page", c.path, a)
					}
				}
			}
		})
	}
	// The owner reads the private repository on every page.
	for _, p := range []string{"/alice/priv", "/alice/priv/-/tree/main", "/alice/priv/-/blob/main/src/main.go", "/alice/priv/-/raw/main/src/main.go",
		"/alice/priv/-/commits/main", "/alice/priv/-/commit/" + f.head, "/alice/priv/-/alerts"} {
		if res, _ := alice.get(p); res.StatusCode != 200 {
			t.Errorf("alice GET %s: %d", p, res.StatusCode)
		}
	}
	if _, body := alice.get("/alice"); !strings.Contains(body, `href="/alice/priv"`) {
		t.Error("alice does not see her private repository on her page")
	}
	// Another tenant does not.
	bob := f.signedIn(f.bob)
	for _, p := range []string{"/alice/priv", "/alice/priv/-/alerts", "/alice/priv/-/commit/" + f.head} {
		if res, _ := bob.get(p); res.StatusCode != 404 {
			t.Errorf("bob GET %s: %d, want 404", p, res.StatusCode)
		}
	}
}

func TestEscapingInCommit(t *testing.T) {
	f := newFixture(t, fixtureOpts{commits: 1})
	_, body := f.client().get("/alice/pub/-/commit/" + f.head)
	if !strings.Contains(body, escapedScript) || strings.Contains(body, "<script>alert") {
		t.Errorf("commit page does not escape the file name:\n%s", body)
	}
}

func TestRawHeaders(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	c := f.client()
	res, _ := c.get("/alice/pub/-/raw/main/src/main.go")
	if ct := res.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("text raw Content-Type %q", ct)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") {
		t.Errorf("raw CSP %q has no sandbox", csp)
	}
	res, body := c.get("/alice/pub/-/raw/main/bin.dat")
	if ct := res.Header.Get("Content-Type"); ct != "application/octet-stream" || !strings.HasPrefix(res.Header.Get("Content-Disposition"), "attachment") {
		t.Errorf("binary raw: Content-Type %q, Content-Disposition %q", ct, res.Header.Get("Content-Disposition"))
	}
	if body != "\x00\x01\x02binary" {
		t.Errorf("binary raw body %q", body)
	}
	// Raster images are shown inline (READMEs embed them); SVG never is.
	res, _ = c.get("/alice/pub/-/raw/main/img/logo.png")
	if ct := res.Header.Get("Content-Type"); ct != "image/png" || res.Header.Get("Content-Disposition") != "" {
		t.Errorf("png raw: Content-Type %q, Content-Disposition %q", ct, res.Header.Get("Content-Disposition"))
	}
	res, _ = c.get("/alice/pub/-/raw/main/img/logo.svg")
	if ct := res.Header.Get("Content-Type"); strings.Contains(ct, "svg") || !strings.HasPrefix(res.Header.Get("Content-Disposition"), "attachment") {
		t.Errorf("svg raw: Content-Type %q, Content-Disposition %q", ct, res.Header.Get("Content-Disposition"))
	}
}

func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	res, body := f.client().get("/alice/pub")
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(body, "<script") || strings.Contains(body, " style=") {
		t.Error("page has inline script or style")
	}
	if res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Error("no nosniff")
	}
}

func TestLogPagination(t *testing.T) {
	f := newFixture(t, fixtureOpts{commits: 60})
	c := f.client()
	_, body := c.get("/alice/pub/-/commits/main")
	if n := strings.Count(body, `<td class="subject">`); n != 50 {
		t.Errorf("first page: %d commits, want 50", n)
	}
	if !strings.Contains(body, `href="?page=2"`) {
		t.Error("first page has no link to the next")
	}
	_, body = c.get("/alice/pub/-/commits/main?page=2")
	if n := strings.Count(body, `<td class="subject">`); n != 10 {
		t.Errorf("second page: %d commits, want 10", n)
	}
	if strings.Contains(body, `href="?page=3"`) || !strings.Contains(body, `href="?page=1"`) {
		t.Error("second page links wrong")
	}
}

func TestDiffLimitNotice(t *testing.T) {
	f := newFixture(t, fixtureOpts{commits: 1, opts: func(o *web.Options) { o.MaxDiffBytes = 2 << 10 }})
	_, body := f.client().get("/alice/pub/-/commit/" + f.head)
	if !strings.Contains(body, `id="truncated"`) {
		t.Error("a diff over the limit shows no notice")
	}
	f2 := newFixture(t, fixtureOpts{commits: 1})
	if _, body := f2.client().get("/alice/pub/-/commit/" + f2.head); strings.Contains(body, `id="truncated"`) {
		t.Error("a diff under the limit shows the notice")
	}
}

func TestSignInAndOut(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	c := f.client()
	_, body := c.get("/login?next=/alice/priv")
	res := c.post("/login", url.Values{"csrf": {csrfOf(t, body)}, "token": {f.alice}, "next": {"/alice/priv"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/alice/priv" {
		t.Fatalf("sign in: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	var sess *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == "ghost_session" {
			sess = ck
		}
	}
	if sess == nil || !sess.HttpOnly || sess.SameSite != http.SameSiteLaxMode || sess.Secure {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Lax, not Secure over plain HTTP", sess)
	}
	if strings.Contains(sess.Value, f.alice) || strings.Contains(sess.Value, strings.TrimPrefix(f.alice, "ghost_")) {
		t.Error("the session cookie holds the token in clear")
	}
	res, body = c.get("/alice/priv")
	if res.StatusCode != 200 || !strings.Contains(body, `id="signout"`) {
		t.Fatalf("signed in: %d", res.StatusCode)
	}
	// Sign out needs the form's token.
	if res := c.post("/logout", url.Values{}); res.StatusCode != http.StatusForbidden {
		t.Errorf("sign out without csrf: %d", res.StatusCode)
	}
	if res, _ := c.get("/alice/priv"); res.StatusCode != 200 {
		t.Error("a refused sign-out signed out")
	}
	if res := c.post("/logout", url.Values{"csrf": {csrfOf(t, body)}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("sign out: %d", res.StatusCode)
	}
	if res, _ := c.get("/alice/priv"); res.StatusCode != 404 {
		t.Errorf("after sign-out the private repository answers %d", res.StatusCode)
	}
	// Home shows a signed-in visitor their repositories, private ones
	// included.
	a := f.signedIn(f.alice)
	if res, body := a.get("/"); res.StatusCode != http.StatusOK || !strings.Contains(body, `href="/alice/priv"`) {
		t.Errorf("home: %d\n%s", res.StatusCode, body)
	}
}

func TestSignInGuards(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	c := f.client()
	_, body := c.get("/login")
	csrf := csrfOf(t, body)
	if res := c.post("/login", url.Values{"token": {f.alice}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("sign in without csrf: %d", res.StatusCode)
	}
	if res := c.post("/login", url.Values{"csrf": {csrf}, "token": {"ghost_nope"}}); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("bad token: %d", res.StatusCode)
	}
	// Only local paths are followed after signing in.
	for _, next := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example", "/\t/evil.example", "/\n/evil.example"} {
		c := f.client()
		_, body := c.get("/login")
		res := c.post("/login", url.Values{"csrf": {csrfOf(t, body)}, "token": {f.alice}, "next": {next}})
		if loc := res.Header.Get("Location"); loc != "/" {
			t.Errorf("next=%q: redirected to %q", next, loc)
		}
	}
	// Behind TLS the cookies are Secure.
	c = f.client()
	_, body = c.get("/login")
	csrf = csrfOf(t, body)
	req, _ := http.NewRequest("POST", f.srv.URL+"/login", strings.NewReader(url.Values{"csrf": {csrf}, "token": {f.alice}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-Proto", "https")
	for _, ck := range c.hc.Jar.Cookies(req.URL) {
		req.AddCookie(ck)
	}
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	found := false
	for _, ck := range rec.Result().Cookies() {
		if ck.Name == "ghost_session" {
			found = true
			if !ck.Secure {
				t.Error("session cookie behind TLS is not Secure")
			}
		}
	}
	if !found {
		t.Errorf("no session cookie behind TLS (status %d)", rec.Code)
	}
}

func TestCSRFTokenIsBoundToTheSession(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	alice := f.signedIn(f.alice)
	bob := f.signedIn(f.bob)
	_, bobPage := bob.get("/alice/pub")
	// Bob's token in Alice's browser does not pass.
	if res := alice.post("/logout", url.Values{"csrf": {csrfOf(t, bobPage)}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("another session's csrf token: %d", res.StatusCode)
	}
}

func TestSessionEnds(t *testing.T) {
	now := time.Now()
	clock := &now
	f := newFixture(t, fixtureOpts{opts: func(o *web.Options) { o.Now = func() time.Time { return *clock } }})
	ctx := context.Background()
	// A revoked token ends the session at once.
	tok, info, err := f.meta.CreateToken(ctx, "alice", meta.ScopeRead, "revoke me")
	if err != nil {
		t.Fatal(err)
	}
	c := f.signedIn(tok)
	if res, _ := c.get("/alice/priv"); res.StatusCode != 200 {
		t.Fatalf("signed in: %d", res.StatusCode)
	}
	if err := f.meta.RevokeToken(ctx, "alice", info.ID); err != nil {
		t.Fatal(err)
	}
	if res, _ := c.get("/alice/priv"); res.StatusCode != 404 {
		t.Errorf("revoked token's session: %d", res.StatusCode)
	}
	// An expired session is anonymous.
	c = f.signedIn(f.alice)
	later := now.Add(31 * 24 * time.Hour)
	clock = &later
	if res, _ := c.get("/alice/priv"); res.StatusCode != 404 {
		t.Errorf("expired session: %d", res.StatusCode)
	}
	clock = &now
	// A tampered cookie is anonymous.
	c = f.signedIn(f.alice)
	u, _ := url.Parse(f.srv.URL)
	var cks []*http.Cookie
	for _, ck := range c.hc.Jar.Cookies(u) {
		if ck.Name == "ghost_session" {
			b := []byte(ck.Value)
			b[len(b)/2] ^= 1
			if b[len(b)/2] == '-'^1 || b[len(b)/2] == '_'^1 {
				b[len(b)/2] = 'A'
			}
			ck.Value = string(b)
		}
		cks = append(cks, ck)
	}
	c.hc.Jar.SetCookies(u, cks)
	if res, _ := c.get("/alice/priv"); res.StatusCode != 404 {
		t.Errorf("tampered session: %d", res.StatusCode)
	}
}

func TestSessionsWorkOnAnyNode(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	c := f.signedIn(f.alice)
	// A second node on the same store opens the first one's cookie.
	other, err := web.New(context.Background(), web.Options{Store: storeOf(f), Auth: f.meta, Repos: f.meta, Authz: f.meta, Cache: cacheOf(f), API: api.NewHandler(f.meta, nil)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(other)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/alice/priv", nil)
	u, _ := url.Parse(f.srv.URL)
	for _, ck := range c.hc.Jar.Cookies(u) {
		req.AddCookie(ck)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("other node: %d", res.StatusCode)
	}
}

func TestAlerts(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	alice := f.signedIn(f.alice)
	res, body := alice.get("/alice/priv/-/alerts")
	if res.StatusCode != 200 || !strings.Contains(body, "TOKEN=ghp_****") || !strings.Contains(body, "config.env:1") {
		t.Fatalf("alerts page %d:\n%s", res.StatusCode, body)
	}
	if strings.Contains(body, secret) {
		t.Fatal("the alerts page shows the secret")
	}
	action := "/alice/priv/-/alerts/" + f.fp + "/resolve"
	form := url.Values{"csrf": {csrfOf(t, body)}, "resolution": {"revoked"}, "comment": {"rotated <now>"}}
	// Guards: csrf, write access, a valid resolution.
	noCSRF := url.Values{"resolution": {"revoked"}}
	if res := alice.post(action, noCSRF); res.StatusCode != http.StatusForbidden {
		t.Errorf("resolve without csrf: %d", res.StatusCode)
	}
	reader, _, err := f.meta.CreateToken(context.Background(), "alice", meta.ScopeRead, "ro")
	if err != nil {
		t.Fatal(err)
	}
	ro := f.signedIn(reader)
	if res, roPage := ro.get("/alice/priv/-/alerts"); res.StatusCode != http.StatusNotFound || strings.Contains(roPage, "/resolve") {
		t.Errorf("alerts to a reader: %d", res.StatusCode)
	}
	_, roPage := ro.get("/alice/priv")
	if res := ro.post(action, url.Values{"csrf": {csrfOf(t, roPage)}, "resolution": {"revoked"}}); res.StatusCode != http.StatusNotFound {
		t.Errorf("resolve with a read token: %d", res.StatusCode)
	}
	bob := f.signedIn(f.bob)
	_, bobPage := bob.get("/alice/pub")
	if res := bob.post(action, url.Values{"csrf": {csrfOf(t, bobPage)}, "resolution": {"revoked"}}); res.StatusCode != http.StatusNotFound {
		t.Errorf("resolve by a stranger: %d", res.StatusCode)
	}
	if res := alice.post(action, url.Values{"csrf": form["csrf"], "resolution": {"because"}}); res.StatusCode != http.StatusBadRequest {
		t.Errorf("resolve with a bad resolution: %d", res.StatusCode)
	}
	if res := alice.post("/alice/priv/-/alerts/"+strings.Repeat("b", 64)+"/resolve", form); res.StatusCode != http.StatusNotFound {
		t.Errorf("resolve a missing alert: %d", res.StatusCode)
	}
	a, err := f.alerts.Get(context.Background(), "alice", f.priv.ID, f.fp)
	if err != nil || a.State != alerts.StateOpen {
		t.Fatalf("refused changes changed the alert: %v %v", a.State, err)
	}
	res = alice.post(action, form)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("resolve: %d", res.StatusCode)
	}
	a, err = f.alerts.Get(context.Background(), "alice", f.priv.ID, f.fp)
	if err != nil || a.State != alerts.StateResolved || a.Resolution != alerts.ResolutionRevoked || a.ResolvedBy != "alice" {
		t.Fatalf("after resolve: %+v %v", a, err)
	}
	_, body = alice.get("/alice/priv/-/alerts?state=resolved")
	if !strings.Contains(body, "resolved (revoked)") || !strings.Contains(body, "rotated &lt;now&gt;") {
		t.Errorf("resolved list:\n%s", body)
	}
	if _, body = alice.get("/alice/priv/-/alerts"); strings.Contains(body, "config.env") {
		t.Error("the open list still shows the resolved alert")
	}
}

func TestStaticAssets(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	c := f.client()
	_, body := c.get("/alice/pub")
	i := strings.Index(body, `href="/static/`)
	if i < 0 {
		t.Fatal("no stylesheet link")
	}
	p := body[i+6:]
	p = p[:strings.IndexByte(p, '"')]
	res, css := c.get(p)
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Cache-Control"), "max-age=31536000") || !strings.Contains(css, ".chroma") {
		t.Errorf("asset %s: %d %q", p, res.StatusCode, res.Header.Get("Cache-Control"))
	}
	if res, _ := c.get("/static/000000000000/style.css"); res.StatusCode != 404 {
		t.Errorf("unknown asset: %d", res.StatusCode)
	}
}

func TestOwns(t *testing.T) {
	for path, want := range map[string]bool{
		"/": true, "/alice": true, "/alice/demo": true, "/alice/demo/": true, "/alice/demo/-/tree/main": true, "/static/x/style.css": true, "/login": true,
		"/favicon.ico": true, "/-/explore": true, "/-/settings/tokens": true, "/-/settings/keys/x/remove": true, "/-/alerts/alice": true, "/alice/demo/-/settings": true,
		"/alice/demo.git/info/refs": false, "/alice/demo/git-upload-pack": false, "/alice/demo.git/git-receive-pack": false, "/alice/demo/HEAD": false,
	} {
		if got := web.Owns(path); got != want {
			t.Errorf("Owns(%q) = %v, want %v", path, got, want)
		}
	}
}

// failAuth is an Authenticator whose store is down.
type failAuth struct{}

func (failAuth) Authenticate(context.Context, string) (meta.Principal, error) {
	return meta.Principal{}, fmt.Errorf("read token: %w", meta.ErrUnavailable)
}

func TestAuthenticationOutageIs503(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	c := f.signedIn(f.alice)
	// The same store, but authentication now fails: a signed-in visitor
	// gets 503, never an anonymous page.
	h, err := web.New(context.Background(), web.Options{Store: f.store, Auth: failAuth{}, Repos: f.meta, Authz: f.meta, Cache: f.cache, API: api.NewHandler(f.meta, nil)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/alice/pub", nil)
	u, _ := url.Parse(f.srv.URL)
	for _, ck := range c.hc.Jar.Cookies(u) {
		req.AddCookie(ck)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("authentication outage: %d, want 503", res.StatusCode)
	}
}

func TestSessionKeyIsSharedAndKept(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	// Nodes starting at once on a new store agree on one key: each opens
	// the others' cookies.
	store := memstore.New()
	hs := make([]*web.Handler, 4)
	errs := make(chan error, len(hs))
	for i := range hs {
		go func() {
			var err error
			hs[i], err = web.New(context.Background(), web.Options{Store: store, Auth: f.meta, Repos: f.meta, Authz: f.meta, Cache: f.cache, API: api.NewHandler(f.meta, nil)})
			errs <- err
		}()
	}
	for range hs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	rec := httptest.NewRecorder()
	hs[0].ServeHTTP(rec, httptest.NewRequest("GET", "/login", nil))
	csrf := csrfOf(t, rec.Body.String())
	req := httptest.NewRequest("POST", "/login", strings.NewReader(url.Values{"csrf": {csrf}, "token": {f.alice}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, ck := range rec.Result().Cookies() {
		req.AddCookie(ck)
	}
	rec = httptest.NewRecorder()
	hs[0].ServeHTTP(rec, req)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) == 0 {
		t.Fatalf("sign in: %d", rec.Code)
	}
	for i, h := range hs {
		req := httptest.NewRequest("GET", "/alice/priv", nil)
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Errorf("node %d: %d", i, rec.Code)
		}
	}
	// A corrupt stored key is an error, never silently replaced.
	bad := memstore.New()
	if _, err := bad.PutIfAbsent(context.Background(), web.SessionKeyObject, strings.NewReader("short"), 5); err != nil {
		t.Fatal(err)
	}
	if _, err := web.New(context.Background(), web.Options{Store: bad, Auth: f.meta, Repos: f.meta, Authz: f.meta, Cache: f.cache, API: api.NewHandler(f.meta, nil)}); err == nil {
		t.Error("a corrupt session key was accepted")
	}
}

func TestRedirectsBetweenTreeAndBlob(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	c := f.client()
	for path, want := range map[string]string{
		"/alice/pub/-/tree/main/src/main.go": "/alice/pub/-/blob/main/src/main.go",
		"/alice/pub/-/blob/main/src":         "/alice/pub/-/tree/main/src",
		"/alice/pub/":                        "/alice/pub",
		"/alice/":                            "/alice",
	} {
		res, _ := c.get(path)
		if res.StatusCode/100 != 3 || res.Header.Get("Location") != want {
			t.Errorf("GET %s: %d to %q, want %q", path, res.StatusCode, res.Header.Get("Location"), want)
		}
	}
}

func TestFormBodiesAreBounded(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	c := f.client()
	_, body := c.get("/login")
	form := url.Values{"csrf": {csrfOf(t, body)}, "token": {f.alice}, "pad": {strings.Repeat("x", 32<<10)}}
	if res := c.post("/login", form); res.StatusCode == http.StatusSeeOther {
		t.Error("a 32 KiB sign-in form was accepted")
	}
}

func TestAlertFromABypassedPush(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	_, err := f.alerts.RecordBypass(context.Background(), "alice", f.priv.ID, alerts.Finding{
		RuleID: "aws-access-token", Path: "keys.txt", Line: 3, BlobID: strings.Repeat("b", 40),
		Match: "AKIA****", Secret: "AKIAIOSFODNN7EXAMPLE",
	}, "alice", alerts.BypassWillFixLater)
	if err != nil {
		t.Fatal(err)
	}
	res, body := f.signedIn(f.alice).get("/alice/priv/-/alerts")
	if res.StatusCode != 200 || !strings.Contains(body, "pushed past protection by alice (will_fix_later)") || !strings.Contains(body, "keys.txt:3") {
		t.Errorf("alerts page %d:\n%s", res.StatusCode, body)
	}
	if strings.Contains(body, "AKIAIOSFODNN7EXAMPLE") {
		t.Error("the alerts page shows the secret")
	}
}

// TestSecurityPagesAccess is the web UI's access matrix for secret
// scanning: the alerts and scan-run pages, their tabs and the resolve
// form are for those who may write the repository. Anonymous visitors,
// read tokens and other tenants get the page of a missing repository,
// on a public repository as on a private one.
func TestSecurityPagesAccess(t *testing.T) {
	scans := &fakeScans{}
	f := newFixture(t, fixtureOpts{opts: func(o *web.Options) { o.Scans = scans }})
	scans.repoID = f.priv.ID
	reader, _, err := f.meta.CreateToken(context.Background(), "alice", meta.ScopeRead, "ro")
	if err != nil {
		t.Fatal(err)
	}
	visitors := []struct {
		who   string
		c     *client
		write bool
	}{
		{"anonymous", f.client(), false},
		{"read token", f.signedIn(reader), false},
		{"other tenant", f.signedIn(f.bob), false},
		{"owner", f.signedIn(f.alice), true},
	}
	// What a missing repository answers each visitor, with the path
	// taken out (the sign-in link carries it).
	norm := func(body, path string) string { return strings.ReplaceAll(body, path, "PATH") }
	for _, v := range visitors {
		missing := "/alice/nope/-/alerts"
		mres, mbody := v.c.get(missing)
		if mres.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: missing repository: %d", v.who, mres.StatusCode)
		}
		for _, repo := range []string{"pub", "priv"} {
			readable := repo == "pub" || v.who != "anonymous" && v.who != "other tenant"
			_, home := v.c.get("/alice/" + repo)
			for _, tab := range []string{"/-/alerts", "/-/scans"} {
				if strings.Contains(home, "/alice/"+repo+tab) != v.write {
					t.Errorf("%s on alice/%s: tab %s shown %v, want %v", v.who, repo, tab, !v.write, v.write)
				}
			}
			for _, page := range []string{"/-/alerts", "/-/scans", "/-/alerts?state=all"} {
				path := "/alice/" + repo + page
				res, body := v.c.get(path)
				switch {
				case v.write && res.StatusCode != http.StatusOK:
					t.Errorf("%s: %s = %d", v.who, path, res.StatusCode)
				case !v.write && res.StatusCode != http.StatusNotFound:
					t.Errorf("%s: %s = %d, want 404", v.who, path, res.StatusCode)
				case !v.write && norm(strings.Split(body, "?")[0], "/alice/"+repo+strings.Split(page, "?")[0]) != norm(strings.Split(mbody, "?")[0], missing):
					t.Errorf("%s: %s differs from a missing repository's page:\n%s\n---\n%s", v.who, path, body, mbody)
				}
			}
			if !readable || v.write {
				continue
			}
			_, login := v.c.get("/login") // a page with a form, for its csrf token
			res := v.c.post("/alice/"+repo+"/-/alerts/"+f.fp+"/resolve", url.Values{"csrf": {csrfOf(t, login)}, "resolution": {"revoked"}})
			if res.StatusCode != http.StatusNotFound {
				t.Errorf("%s: resolve on alice/%s = %d, want 404", v.who, repo, res.StatusCode)
			}
		}
	}
	if a, err := f.alerts.Get(context.Background(), "alice", f.priv.ID, f.fp); err != nil || a.State != alerts.StateOpen {
		t.Fatalf("the alert changed: %+v %v", a, err)
	}
}

// TestAlertLocationsInWords: a secret in a commit message links to the
// commit, and one in a blob no commit adds names the ref that reaches it.
func TestAlertLocationsInWords(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	ctx := context.Background()
	err := f.alerts.Record(ctx, "alice", f.priv.ID, []alerts.Finding{
		{RuleID: "github-pat", BlobID: f.head, Commit: f.head, Source: alerts.SourceCommitMessage, Line: 6, Match: "REDACTED", Secret: "ghp_message0123456789abcdefghijklmnopqr"},
		{RuleID: "github-pat", BlobID: strings.Repeat("e", 40), Path: "conf/key.txt", Ref: "refs/tags/<t>", Line: 1, Match: "REDACTED", Secret: "ghp_tagged00123456789abcdefghijklmnopqr"},
	}, alerts.RunRef{ID: "run2", Seq: 2})
	if err != nil {
		t.Fatal(err)
	}
	res, body := f.signedIn(f.alice).get("/alice/priv/-/alerts")
	for _, want := range []string{
		`<a href="/alice/priv/-/commit/` + f.head + `">commit message of ` + f.head + `, line 6</a>`,
		`conf/key.txt:1 in blob ` + strings.Repeat("e", 40) + `, reached from refs/tags/&lt;t&gt;`,
	} {
		if res.StatusCode != 200 || !strings.Contains(body, want) {
			t.Errorf("alerts page %d lacks %s", res.StatusCode, want)
		}
	}
}
