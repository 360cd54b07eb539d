package web_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/memcoord"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/server"
)

// chromium returns the browser for the end-to-end test, or skips.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed (apt-get install -y chromium); skipping the browser test")
	return ""
}

// TestBrowser drives a real headless Chromium against a real server
// (ghost serve's handler, the node cache, repositories pushed over git):
// an anonymous visitor does not see a private repository; a user signs in
// with a token, opens the repository, a file, a commit, resolves a secret
// alert, looks at the scan runs, walks every form (walkForms) and signs
// out. Screenshots of the pages go to $GHOST_SCREENSHOTS
// (default: a temporary directory).
func TestBrowser(t *testing.T) {
	exe := chromium(t)
	shots := os.Getenv("GHOST_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, err := fsstore.Open(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	// Scanning on, over an in-memory coordinator: each push starts a run
	// (no worker here, so the runs wait), and the scan-runs page lists them.
	mem := memcoord.New(coord.DefaultLimits())
	s, err := server.New(ctx, server.Options{Store: store, CacheDir: filepath.Join(t.TempDir(), "cache"),
		Scan: scanner.Options{Coord: func() coord.Backend { return mem }}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	m := s.Meta()
	if _, err := m.CreateTenant(ctx, "alice", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	tok, _, err := m.CreateToken(ctx, "alice", meta.ScopeWrite, "browser")
	if err != nil {
		t.Fatal(err)
	}
	priv, err := m.CreateRepo(ctx, "alice", "secret-project", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateRepo(ctx, "alice", "hello", true); err != nil {
		t.Fatal(err)
	}
	bare, head := buildRepo(t, 12)
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("alice", tok)
	env := gittest.Env(t.TempDir())
	for _, name := range []string{"secret-project", "hello"} {
		gittest.Git(t, env, bare, "push", "-q", u.String()+"/alice/"+name+".git", "main", "feature/x", "v1.0")
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		runs, err := s.Scanner().Runs(ctx, priv.ID, 10)
		if err == nil && len(runs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scan run after the push: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	as := alerts.New(store)
	if err := as.Record(ctx, "alice", priv.ID, []alerts.Finding{{
		RuleID: "github-pat", Description: "GitHub personal access token", Commit: head, Path: "config.env", Line: 1, Column: 7,
		BlobID: strings.Repeat("a", 40), Match: "TOKEN=ghp_****", Secret: secret,
	}}, alerts.RunRef{ID: "run1", Seq: 1}); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t, exe, shots, "")
	tctx := b.ctx
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	shot, do, text := b.shot, b.do, b.text
	base := srv.URL

	// Anonymous: the private repository is neither listed nor readable.
	do("anonymous list", chromedp.Navigate(base+"/alice"))
	if body := text(); !strings.Contains(body, "hello") || strings.Contains(body, "secret-project") {
		t.Fatalf("anonymous list:\n%s", body)
	}
	do("anonymous private", chromedp.Navigate(base+"/alice/secret-project"))
	if body := text(); !strings.Contains(body, "Not found") {
		t.Fatalf("anonymous sees the private repository:\n%s", body)
	}

	// Sign in with the token.
	do("sign in",
		chromedp.Navigate(base+"/"),
		chromedp.Click(css("#signin")),
		chromedp.WaitVisible(css("#token")),
		chromedp.SendKeys(css("#token"), tok),
		shot("signin"),
		chromedp.Click(css("#signin-submit")),
		chromedp.WaitVisible(css("#signout")),
		shot("repos"))
	loc, err := chromedp.Run(tctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	// Signed in, home is the dashboard: the visitor's repositories.
	if body := text(); !strings.HasSuffix(loc, "/") || !strings.Contains(body, "secret-project") {
		t.Fatalf("after sign-in at %s:\n%s", loc, body)
	}

	// Open the repository, a directory, a file.
	do("repository",
		chromedp.Click(css(`a[href="/alice/secret-project"]`)),
		chromedp.WaitVisible(css(".readme")), shot("repo"))
	if body := text(); !strings.Contains(body, "Demo") || !strings.Contains(body, "feature/x") {
		t.Fatalf("repository home:\n%s", body)
	}
	do("file",
		chromedp.Click(css(`a[href="/alice/secret-project/-/tree/main/src"]`)),
		chromedp.WaitVisible(css(`a[href="/alice/secret-project/-/blob/main/src/main.go"]`)),
		chromedp.Click(css(`a[href="/alice/secret-project/-/blob/main/src/main.go"]`)),
		chromedp.WaitVisible(css(".chroma")), shot("blob"))
	if body := text(); !strings.Contains(body, "func main()") {
		t.Fatalf("file page:\n%s", body)
	}

	// The log, then a commit.
	do("commit",
		chromedp.Click(css(`.tabs a[href^="/alice/secret-project/-/commits/"]`)),
		chromedp.WaitVisible(css("table.log")), shot("log"),
		chromedp.Click(css("table.log td.subject a")),
		chromedp.WaitVisible(css("pre.diff")), shot("commit"))
	if body := text(); !strings.Contains(body, "change 11") || !strings.Contains(body, "+entry 11") {
		t.Fatalf("commit page:\n%s", body)
	}

	// Resolve the alert and see its state change.
	do("alerts",
		chromedp.Click(css(`.tabs a[href="/alice/secret-project/-/alerts"]`)),
		chromedp.WaitVisible(css("tr.alert")), shot("alerts"))
	if body := text(); !strings.Contains(body, "open") || strings.Contains(body, secret) {
		t.Fatalf("alerts page:\n%s", body)
	}
	do("resolve",
		chromedp.SetValue(css(`form.resolve select`), "false_positive"),
		chromedp.SendKeys(css(`form.resolve input[name="comment"]`), "test fixture"),
		chromedp.Click(css(`form.resolve button`)),
		chromedp.WaitVisible(css(`td.state.resolved`)), shot("alerts-resolved"))
	if body := text(); !strings.Contains(body, "resolved (false_positive)") || !strings.Contains(body, "test fixture") {
		t.Fatalf("after resolving:\n%s", body)
	}
	a, err := as.Get(ctx, "alice", priv.ID, alertFingerprint(t, as, priv.ID))
	if err != nil || a.State != alerts.StateResolved {
		t.Fatalf("alert in the store: %v %v", a.State, err)
	}

	// The scan runs.
	do("scans",
		chromedp.Click(css(`.tabs a[href="/alice/secret-project/-/scans"]`)),
		chromedp.WaitVisible(css("tr.run")), shot("scans"))
	if body := text(); !strings.Contains(body, "push at seq") {
		t.Fatalf("scan runs page:\n%s", body)
	}

	// The forms of issue 21 §3, each walked as a person would.
	walkForms(t, formWalk{m: m, sc: s.Scanner(), priv: priv.ID, base: base, do: do, text: text, shot: shot, tctx: tctx})

	// Sign out: the private repository is gone again.
	do("sign out",
		chromedp.Click(css("#signout")),
		chromedp.WaitVisible(css("#signin")),
		chromedp.Navigate(base+"/alice/secret-project"))
	if body := text(); !strings.Contains(body, "Not found") {
		t.Fatalf("after sign-out:\n%s", body)
	}
}

func alertFingerprint(t *testing.T, as *alerts.Store, repoID string) string {
	t.Helper()
	pg, err := as.List(context.Background(), alerts.Filter{Tenant: "alice", RepoID: repoID}, "", 10)
	if err != nil || len(pg.Alerts) != 1 {
		t.Fatalf("alerts: %v %v", pg.Alerts, err)
	}
	return pg.Alerts[0].Fingerprint
}

// formWalk is what walkForms needs of TestBrowser: the server's records,
// the browser, and the page helpers.
type formWalk struct {
	m    *meta.Store
	sc   *scanner.Scanner
	priv string // secret-project's id
	base string
	do   func(step string, steps ...chromedp.Action[chromedp.Void])
	text func() string
	shot func(name string) chromedp.Action[chromedp.Void]
	tctx context.Context
}

// walkForms drives each form of the web UI in the signed-in browser and
// checks the change in the server's records, not only on the page: a
// full-history scan, the branch switcher, repository settings, a new
// repository and its deletion, a token created and revoked, an SSH key
// added and removed, a tenant's alerts, the explore page, and a phone's
// width.
func walkForms(t *testing.T, w formWalk) {
	t.Helper()
	ctx := context.Background()
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	loc := func() string {
		t.Helper()
		l, err := chromedp.Run(w.tctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	// Scan the whole history, from the scan-runs page.
	w.do("full scan",
		chromedp.Navigate(w.base+"/alice/secret-project/-/scans"),
		chromedp.WaitVisible(css("#scan-all")),
		chromedp.Click(css("#scan-all")),
		chromedp.WaitVisible(css("p.notice")), w.shot("scans-full"))
	if body := w.text(); !strings.Contains(body, "A scan of the whole history was started") {
		t.Fatalf("after starting a full scan:\n%s", body)
	}
	runs, err := w.sc.Runs(ctx, w.priv, 10)
	full := false
	for _, r := range runs {
		full = full || r.Kind == scanner.KindFull
	}
	if err != nil || !full {
		t.Fatalf("no full run after the form: %v %v", runs, err)
	}

	// Switch the code view to another branch.
	w.do("switcher",
		chromedp.Navigate(w.base+"/alice/secret-project"),
		chromedp.Click(css("#switcher summary")),
		chromedp.WaitVisible(css(`#switcher a[href="/alice/secret-project/-/tree/feature/x"]`)), w.shot("switcher"),
		chromedp.Click(css(`#switcher a[href="/alice/secret-project/-/tree/feature/x"]`)),
		chromedp.WaitVisible(css("table.files")))
	if l := loc(); !strings.HasSuffix(l, "/alice/secret-project/-/tree/feature/x") {
		t.Fatalf("the switcher went to %s", l)
	}

	// Repository settings: push protection on, feature/x the default
	// branch, which the repository page then shows first.
	w.do("settings",
		chromedp.Click(css("#settings")),
		chromedp.WaitVisible(css("#settings-form")),
		chromedp.Click(css("#push-protection")),
		chromedp.SendKeys(css("#default-branch"), "feature/x"), w.shot("settings"),
		chromedp.Click(css("#save")),
		chromedp.WaitVisible(css("p.notice")))
	if r, err := w.m.Repo(ctx, "alice", "secret-project"); err != nil || !r.PushProtection || r.Public || r.DefaultBranch != "feature/x" {
		t.Fatalf("after saving the settings: %+v %v", r, err)
	}
	w.do("default branch",
		chromedp.Click(css(`.tabs a[href="/alice/secret-project"]`)),
		chromedp.WaitVisible(css("#default-mark")))
	if body := w.text(); !strings.Contains(body, "Branches\nfeature/x default") {
		t.Errorf("the repository page does not list the default branch first:\n%s", body)
	}

	// A new repository, then its deletion with the typed name.
	w.do("new repository",
		chromedp.Click(css("#new")),
		chromedp.WaitVisible(css("#new-form")),
		chromedp.SendKeys(css("#name"), "scratch"), w.shot("new"),
		chromedp.Click(css("#create")),
		chromedp.WaitVisible(css(".repohead")))
	if l := loc(); !strings.HasSuffix(l, "/alice/scratch") {
		t.Fatalf("after creating: %s", l)
	}
	if r, err := w.m.Repo(ctx, "alice", "scratch"); err != nil || r.Public {
		t.Fatalf("the new repository: %+v %v", r, err)
	}
	w.do("delete repository",
		chromedp.Click(css("#settings")),
		chromedp.WaitVisible(css("#delete-form")),
		chromedp.SendKeys(css("#confirm"), "alice/scratch"),
		chromedp.Click(css("#delete")),
		chromedp.WaitVisible(css("#new-repo")))
	if _, err := w.m.Repo(ctx, "alice", "scratch"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("after deleting: %v", err)
	}

	// A token: created, shown once, then revoked.
	w.do("create token",
		chromedp.Click(css("#tokens")),
		chromedp.WaitVisible(css("#token-form")),
		chromedp.SendKeys(css("#description"), "ci"),
		chromedp.Click(css("#create-token")),
		chromedp.WaitVisible(css("#new-token")), w.shot("tokens"))
	tok, err := chromedp.Run(w.tctx, chromedp.Value(css("#new-token")))
	if err != nil {
		t.Fatal(err)
	}
	p, err := w.m.Authenticate(ctx, tok)
	if err != nil || p.Scope != meta.ScopeRead {
		t.Fatalf("the shown token: %+v %v", p, err)
	}
	w.do("revoke token",
		chromedp.Click(css(`#token-`+p.TokenID+` button.revoke`)),
		chromedp.WaitNotPresent(css(`#token-`+p.TokenID)), // not a notice: the page may show one already
		chromedp.WaitVisible(css("p.notice")))
	if _, err := w.m.Authenticate(ctx, tok); !errors.Is(err, meta.ErrUnauthenticated) {
		t.Fatalf("the revoked token: %v", err)
	}

	// An SSH key: added, then removed.
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	w.do("add key",
		chromedp.Click(css("#keys")),
		chromedp.WaitVisible(css("#key-form")),
		chromedp.SendKeys(css("#key-title"), "laptop"),
		chromedp.SendKeys(css("#key"), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp)))),
		chromedp.Click(css("#add-key")),
		chromedp.WaitVisible(css("tr.sshkey")), w.shot("keys"))
	if keys, err := w.m.ListSSHKeys(ctx, "alice"); err != nil || len(keys) != 1 || keys[0].Title != "laptop" {
		t.Fatalf("keys after adding: %+v %v", keys, err)
	}
	w.do("remove key",
		chromedp.Click(css("tr.sshkey button.remove")),
		// Adding left a notice on the page: wait for the row to go, not
		// for a notice, or the check below races the removal.
		chromedp.WaitNotPresent(css("tr.sshkey")),
		chromedp.WaitVisible(css("p.notice")))
	if keys, err := w.m.ListSSHKeys(ctx, "alice"); err != nil || len(keys) != 0 {
		t.Fatalf("keys after removing: %+v %v", keys, err)
	}

	// The tenant's alerts, filtered by rule through the form.
	w.do("tenant alerts",
		chromedp.Navigate(w.base+"/"),
		chromedp.Click(css(`a[href="/-/alerts/alice"]`)),
		chromedp.WaitVisible(css("#alert-filters")),
		chromedp.SetValue(css("#f-state"), "all"),
		chromedp.SendKeys(css("#f-rule"), "github-pat"),
		chromedp.Click(css("#filter")),
		chromedp.WaitVisible(css("tr.alert")), w.shot("tenant-alerts"))
	if body := w.text(); !strings.Contains(body, "alice/secret-project") || strings.Contains(body, secret) {
		t.Fatalf("tenant alerts:\n%s", body)
	}

	// Explore lists the public repository, not the private one.
	w.do("explore",
		chromedp.Click(css("#explore")),
		chromedp.WaitVisible(css("ul.repos")), w.shot("explore"))
	if body := w.text(); !strings.Contains(body, "alice/hello") || strings.Contains(body, "secret-project") {
		t.Fatalf("explore:\n%s", body)
	}

	// A phone's width: nothing wider than the screen.
	w.do("phone",
		chromedp.EmulateViewport(375, 740),
		chromedp.Navigate(w.base+"/alice/secret-project/-/blob/main/src/main.go"),
		chromedp.WaitVisible(css(".chroma")), w.shot("phone"))
	wide, err := chromedp.Run(w.tctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	if err != nil || wide > 375 {
		t.Fatalf("at 375 px the page is %d px wide (%v)", wide, err)
	}
	w.do("desktop", chromedp.EmulateViewport(1100, 760))
}
