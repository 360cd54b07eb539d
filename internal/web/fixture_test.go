package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/api"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
	"github.com/ghost-scm/ghost/internal/web"
)

// dirs is a Materializer over prepared bare repositories.
type dirs struct {
	mu sync.Mutex
	m  map[string]string
}

func (d *dirs) Materialize(ctx context.Context, id string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dir, ok := d.m[id]
	if !ok {
		return "", fmt.Errorf("materialize %s: %w", id, wal.ErrRepoDeleted)
	}
	return dir, nil
}

// The file whose name must come out escaped everywhere.
const scriptName = "<script>alert(1)</script>.txt"

// The clear-text secret of the seeded alert: no page may show it.
const secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"

type fixture struct {
	t         *testing.T
	meta      *meta.Store
	store     *memstore.Store
	cache     *dirs
	alerts    *alerts.Store
	handler   *web.Handler
	srv       *httptest.Server
	alice     string // write token of alice
	bob       string // read token of bob
	pub, priv meta.Repo
	empty     meta.Repo
	fp        string // the seeded alert's fingerprint
	head      string // head commit of the repositories
	commits   int
}

type fixtureOpts struct {
	commits int
	opts    func(*web.Options)
}

// buildRepo makes a bare repository with a README, a directory, the
// script-named file, a binary, a large file, a tag and a slashed branch,
// and n commits on main.
func buildRepo(t testing.TB, n int) (string, string) {
	t.Helper()
	env := gittest.Env(t.TempDir())
	work := filepath.Join(t.TempDir(), "work")
	gittest.Git(t, env, "", "init", "-q", "-b", "main", work)
	write := func(name, body string) {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Demo <b>bold</b>\n\nHello *world*.\n\n<script>alert('readme')</script>\n\n"+
		"[the code](src/main.go) [up](../../etc/passwd#x) [web](https://example.com/a) [js](javascript:alert(1)) ![logo](img/logo.png)\n")
	write("src/main.go", "package main\n\nfunc main() { println(\"<hi>\") }\n")
	write(scriptName, "escaped?\n")
	write("bin.dat", "\x00\x01\x02binary")
	write("img/logo.png", "\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR")
	write("img/logo.svg", "<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script>\x00</svg>")
	write("big.txt", strings.Repeat("large line of text\n", 1000))
	write("mid.go", "package mid\n\n"+strings.Repeat("var x = 1\n", 300))
	write("config.env", "TOKEN="+secret+"\n")
	gittest.Git(t, env, work, "add", "-A")
	gittest.Git(t, env, work, "commit", "-q", "-m", "initial <import>")
	for i := 1; i < n; i++ {
		write("log.txt", fmt.Sprintf("entry %d\n", i))
		gittest.Git(t, env, work, "add", "-A")
		gittest.Git(t, env, work, "commit", "-q", "-m", fmt.Sprintf("change %d", i))
	}
	gittest.Git(t, env, work, "tag", "v1.0")
	gittest.Git(t, env, work, "branch", "feature/x")
	head := strings.TrimSpace(gittest.Git(t, env, work, "rev-parse", "HEAD"))
	bare := filepath.Join(t.TempDir(), "repo.git")
	gittest.Git(t, env, "", "clone", "-q", "--bare", work, bare)
	return bare, head
}

func newFixture(t *testing.T, fo fixtureOpts) *fixture {
	t.Helper()
	if fo.commits == 0 {
		fo.commits = 3
	}
	ctx := context.Background()
	store := memstore.New()
	m := meta.New(store, wal.New(store, wal.Options{}))
	f := &fixture{t: t, meta: m, store: store, alerts: alerts.New(store), commits: fo.commits}
	for _, tn := range []string{"alice", "bob"} {
		if _, err := m.CreateTenant(ctx, tn, meta.KindUser); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if f.alice, _, err = m.CreateToken(ctx, "alice", meta.ScopeWrite, "test"); err != nil {
		t.Fatal(err)
	}
	if f.bob, _, err = m.CreateToken(ctx, "bob", meta.ScopeWrite, "test"); err != nil {
		t.Fatal(err)
	}
	if f.pub, err = m.CreateRepo(ctx, "alice", "pub", true); err != nil {
		t.Fatal(err)
	}
	if f.priv, err = m.CreateRepo(ctx, "alice", "priv", false); err != nil {
		t.Fatal(err)
	}
	if f.empty, err = m.CreateRepo(ctx, "alice", "empty", true); err != nil {
		t.Fatal(err)
	}
	bare, head := buildRepo(t, fo.commits)
	f.head = head
	emptyDir := filepath.Join(t.TempDir(), "empty.git")
	gittest.Git(t, gittest.Env(t.TempDir()), "", "init", "-q", "--bare", emptyDir)
	cache := &dirs{m: map[string]string{f.pub.ID: bare, f.priv.ID: bare, f.empty.ID: emptyDir}}
	f.cache = cache
	err = f.alerts.Record(ctx, "alice", f.priv.ID, []alerts.Finding{{
		RuleID: "github-pat", Description: "GitHub token", Commit: head, Path: "config.env", Line: 1, Column: 7,
		BlobID: strings.Repeat("a", 40), Match: "TOKEN=ghp_****", Secret: secret,
	}}, alerts.RunRef{ID: "run1", Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	pg, err := f.alerts.List(ctx, alerts.Filter{Tenant: "alice", RepoID: f.priv.ID}, "", 10)
	if err != nil || len(pg.Alerts) != 1 {
		t.Fatalf("seeded alerts: %v %v", pg.Alerts, err)
	}
	f.fp = pg.Alerts[0].Fingerprint
	opts := web.Options{Store: store, Auth: m, Repos: m, Authz: m, Cache: cache, Alerts: f.alerts, API: api.NewHandler(m, nil, api.WithAlerts(f.alerts)),
		SSHURL: "ssh://git@ghost.example:2222", MaxBlobBytes: 8 << 10, MaxHighlightBytes: 2 << 10, MaxDiffBytes: 64 << 10}
	if fo.opts != nil {
		fo.opts(&opts)
	}
	f.handler, err = web.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(f.handler)
	t.Cleanup(f.srv.Close)
	return f
}

// client is a browser: it keeps cookies and does not follow redirects.
type client struct {
	f  *fixture
	hc *http.Client
}

func (f *fixture) client() *client {
	jar, _ := cookiejar.New(nil)
	return &client{f: f, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// signedIn returns a client with a session for token.
func (f *fixture) signedIn(token string) *client {
	f.t.Helper()
	c := f.client()
	_, body := c.get("/login")
	res := c.post("/login", url.Values{"csrf": {csrfOf(f.t, body)}, "token": {token}})
	if res.StatusCode != http.StatusSeeOther {
		f.t.Fatalf("sign in: %d", res.StatusCode)
	}
	return c
}

func (c *client) do(req *http.Request) *http.Response {
	c.f.t.Helper()
	res, err := c.hc.Do(req)
	if err != nil {
		c.f.t.Fatal(err)
	}
	return res
}

func (c *client) get(path string) (*http.Response, string) {
	c.f.t.Helper()
	req, err := http.NewRequest("GET", c.f.srv.URL+path, nil)
	if err != nil {
		c.f.t.Fatal(err)
	}
	res := c.do(req)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func (c *client) post(path string, form url.Values) *http.Response {
	c.f.t.Helper()
	req, err := http.NewRequest("POST", c.f.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		c.f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res := c.do(req)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no csrf token in page:\n%s", body)
	}
	return m[1]
}

func storeOf(f *fixture) *memstore.Store { return f.store }

func cacheOf(f *fixture) *dirs { return f.cache }

// addRepo registers a repository of alice's, public, served from the bare
// repository dir.
func (f *fixture) addRepo(name, dir string) meta.Repo {
	f.t.Helper()
	r, err := f.meta.CreateRepo(context.Background(), "alice", name, true)
	if err != nil {
		f.t.Fatal(err)
	}
	f.cache.mu.Lock()
	f.cache.m[r.ID] = dir
	f.cache.mu.Unlock()
	return r
}

// bareRepo makes an empty bare repository and returns it with its git
// environment.
func bareRepo(t testing.TB) (string, []string) {
	t.Helper()
	env := gittest.Env(t.TempDir())
	dir := filepath.Join(t.TempDir(), "repo.git")
	gittest.Git(t, env, "", "init", "-q", "--bare", "-b", "main", dir)
	return dir, env
}

// commitTree writes a commit of tree with message (read from a file, so
// it may be of any size) and parents, and returns its id.
func commitTree(t testing.TB, env []string, dir, tree, message string, parents ...string) string {
	t.Helper()
	msg := filepath.Join(t.TempDir(), "msg")
	if err := os.WriteFile(msg, []byte(message), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"commit-tree", tree, "-F", msg}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	return strings.TrimSpace(gittest.Git(t, env, dir, args...))
}

// emptyTree writes the empty tree into dir.
func emptyTree(t testing.TB, env []string, dir string) string {
	t.Helper()
	out, err := gittest.Run(env, dir, strings.NewReader(""), "mktree")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}
