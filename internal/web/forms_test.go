package web_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
)

// TestFormsNeedCSRF: every form that changes something refuses a post
// without the session's token, and changes nothing.
func TestFormsNeedCSRF(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	alice := f.signedIn(f.alice)
	for path, form := range map[string]url.Values{
		"/-/new":                           {"owner": {"alice"}, "name": {"sneaky"}},
		"/alice/priv/-/settings":           {"visibility": {"public"}},
		"/alice/priv/-/delete":             {"confirm": {"alice/priv"}},
		"/alice/priv/-/scans":              {},
		"/-/settings/tokens":               {"scope": {"write"}},
		"/-/settings/keys":                 {"key": {"x"}},
		"/-/settings/tokens/x/revoke":      {},
		"/-/settings/keys/SHA256:x/remove": {},
	} {
		form.Set("csrf", "forged")
		if res := alice.post(path, form); res.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s with a forged token: %d", path, res.StatusCode)
		}
	}
	ctx := context.Background()
	if _, err := f.meta.Repo(ctx, "alice", "sneaky"); !errors.Is(err, meta.ErrNotFound) {
		t.Errorf("a forged form created a repository: %v", err)
	}
	if r, _ := f.meta.Repo(ctx, "alice", "priv"); r.Public {
		t.Error("a forged form changed the visibility")
	}
}

// csrfFor reads the form token of the page at path.
func (c *client) csrfFor(path string) string {
	c.f.t.Helper()
	_, body := c.get(path)
	return csrfOf(c.f.t, body)
}

func TestNewRepositoryForm(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	ctx := context.Background()
	if _, err := f.meta.CreateTenant(ctx, "acme", meta.KindOrg); err != nil {
		t.Fatal(err)
	}
	if err := f.meta.AddMember(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	alice := f.signedIn(f.alice)
	res, body := alice.get("/-/new")
	if res.StatusCode != 200 || !strings.Contains(body, `<option value="acme"`) || !strings.Contains(body, `<option value="alice"`) {
		t.Fatalf("new form: %d\n%s", res.StatusCode, body)
	}
	csrf := csrfOf(t, body)
	res = alice.post("/-/new", url.Values{"csrf": {csrf}, "owner": {"acme"}, "name": {"site"}, "visibility": {"public"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/acme/site" {
		t.Fatalf("create: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	if r, err := f.meta.Repo(ctx, "acme", "site"); err != nil || !r.Public {
		t.Fatalf("created: %+v %v", r, err)
	}
	// A bad name comes back with the API's reason and what was typed.
	req, _ := http.NewRequest("POST", f.srv.URL+"/-/new", strings.NewReader(url.Values{"csrf": {csrf}, "owner": {"alice"}, "name": {"../x"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res = alice.do(req)
	defer res.Body.Close()
	b := make([]byte, 64<<10)
	n, _ := res.Body.Read(b)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b[:n]), "invalid name") {
		t.Errorf("bad name: %d\n%s", res.StatusCode, b[:n])
	}
	// Not under someone else's name; anonymous visitors sign in first.
	bob := f.signedIn(f.bob)
	if res := bob.post("/-/new", url.Values{"csrf": {bob.csrfFor("/-/new")}, "owner": {"alice"}, "name": {"mine"}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("bob creating under alice: %d", res.StatusCode)
	}
	if res, _ := f.client().get("/-/new"); res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/login?next=") {
		t.Errorf("anonymous new: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
}

func TestRepositorySettingsForm(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	ctx := context.Background()
	alice := f.signedIn(f.alice)
	res, body := alice.get("/alice/priv/-/settings")
	if res.StatusCode != 200 || !strings.Contains(body, `id="push-protection"`) || !strings.Contains(body, "Delete alice/priv") {
		t.Fatalf("settings page: %d", res.StatusCode)
	}
	csrf := csrfOf(t, body)
	res = alice.post("/alice/priv/-/settings", url.Values{"csrf": {csrf}, "visibility": {"public"}, "push_protection": {"on"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d", res.StatusCode)
	}
	r, err := f.meta.Repo(ctx, "alice", "priv")
	if err != nil || !r.Public || !r.PushProtection || r.AllowReplaceRefs {
		t.Fatalf("after save: %+v %v", r, err)
	}
	if _, body := alice.get("/alice/priv/-/settings?done=saved"); !strings.Contains(body, "Settings saved.") {
		t.Error("no notice after saving")
	}
	// Anyone who may not write gets the page of a missing repository.
	bob := f.signedIn(f.bob)
	for _, p := range []string{"/alice/priv/-/settings", "/alice/pub/-/settings"} {
		if res, _ := bob.get(p); res.StatusCode != 404 {
			t.Errorf("bob GET %s: %d", p, res.StatusCode)
		}
	}
	if res := bob.post("/alice/pub/-/settings", url.Values{"csrf": {bob.csrfFor("/")}, "visibility": {"private"}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("bob saving alice's settings: %d", res.StatusCode)
	}
	if _, body := f.client().get("/alice/pub"); strings.Contains(body, `id="settings"`) {
		t.Error("an anonymous visitor sees the Settings tab")
	}
	// Delete: only with the full name typed.
	if res := alice.post("/alice/priv/-/delete", url.Values{"csrf": {csrf}, "confirm": {"priv"}}); res.StatusCode != http.StatusBadRequest {
		t.Errorf("delete with a wrong confirmation: %d", res.StatusCode)
	}
	if _, err := f.meta.Repo(ctx, "alice", "priv"); err != nil {
		t.Fatalf("a wrong confirmation deleted: %v", err)
	}
	if res := alice.post("/alice/priv/-/delete", url.Values{"csrf": {csrf}, "confirm": {"alice/priv"}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("delete: %d", res.StatusCode)
	}
	if _, err := f.meta.Repo(ctx, "alice", "priv"); !errors.Is(err, meta.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
}

var tokenRE = regexp.MustCompile(`id="new-token" value="(ghost_[a-z0-9]+)"`)

func TestTokensForm(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	ctx := context.Background()
	alice := f.signedIn(f.alice)
	csrf := alice.csrfFor("/-/settings/tokens")
	req, _ := http.NewRequest("POST", f.srv.URL+"/-/settings/tokens", strings.NewReader(url.Values{"csrf": {csrf}, "scope": {"read"}, "description": {"ci"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res := alice.do(req)
	b := make([]byte, 256<<10)
	n, _ := res.Body.Read(b)
	res.Body.Close()
	m := tokenRE.FindStringSubmatch(string(b[:n]))
	if res.StatusCode != http.StatusCreated || m == nil || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("create: %d %q\n%s", res.StatusCode, res.Header.Get("Cache-Control"), b[:n])
	}
	p, err := f.meta.Authenticate(ctx, m[1])
	if err != nil || p.Tenant != "alice" || p.Scope != meta.ScopeRead {
		t.Fatalf("the shown token: %+v %v", p, err)
	}
	// Shown once: the list has its id, never the secret.
	_, body := alice.get("/-/settings/tokens")
	if strings.Contains(body, m[1]) || !strings.Contains(body, p.TokenID) || !strings.Contains(body, "this session") {
		t.Errorf("token list:\n%s", body)
	}
	// Admin scope is not offered, nor taken.
	if res := alice.post("/-/settings/tokens", url.Values{"csrf": {csrf}, "scope": {"admin"}}); res.StatusCode != http.StatusBadRequest {
		t.Errorf("admin scope: %d", res.StatusCode)
	}
	// Revoke it.
	if res := alice.post("/-/settings/tokens/"+p.TokenID+"/revoke", url.Values{"csrf": {csrf}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("revoke: %d", res.StatusCode)
	}
	if _, err := f.meta.Authenticate(ctx, m[1]); !errors.Is(err, meta.ErrUnauthenticated) {
		t.Errorf("a revoked token: %v", err)
	}
	// A read-only session creates nothing: the API's answer is shown.
	ro, _, err := f.meta.CreateToken(ctx, "alice", meta.ScopeRead, "ro")
	if err != nil {
		t.Fatal(err)
	}
	reader := f.signedIn(ro)
	if res := reader.post("/-/settings/tokens", url.Values{"csrf": {reader.csrfFor("/-/settings/tokens")}, "scope": {"read"}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("a read token creating a token: %d", res.StatusCode)
	}
	// Revoking the session's own token signs out.
	self := f.signedIn(ro)
	if res := self.post("/-/settings/tokens/"+mustPrincipal(t, f, ro).TokenID+"/revoke", url.Values{"csrf": {self.csrfFor("/-/settings/tokens")}}); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		t.Errorf("revoke own: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := self.get("/-/settings/tokens"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("after revoking its own token the session is still signed in: %d", res.StatusCode)
	}
}

func mustPrincipal(t *testing.T, f *fixture, tok string) meta.Principal {
	t.Helper()
	p, err := f.meta.Authenticate(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSSHKeysForm(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	ctx := context.Background()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, _ := ssh.NewPublicKey(pub)
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))) + " me@laptop"
	alice := f.signedIn(f.alice)
	csrf := alice.csrfFor("/-/settings/keys")
	if res := alice.post("/-/settings/keys", url.Values{"csrf": {csrf}, "title": {"laptop"}, "key": {line}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("add: %d", res.StatusCode)
	}
	keys, err := f.meta.ListSSHKeys(ctx, "alice")
	if err != nil || len(keys) != 1 || keys[0].Title != "laptop" {
		t.Fatalf("keys %+v %v", keys, err)
	}
	_, body := alice.get("/-/settings/keys?done=added")
	// html/template writes a fingerprint's "+" as "&#43;".
	if !strings.Contains(body, strings.ReplaceAll(keys[0].Fingerprint, "+", "&#43;")) || !strings.Contains(body, "The key was added.") {
		t.Errorf("key list:\n%s", body)
	}
	// A bad key comes back with the reason.
	req, _ := http.NewRequest("POST", f.srv.URL+"/-/settings/keys", strings.NewReader(url.Values{"csrf": {csrf}, "key": {"ssh-rsa nonsense"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if res := alice.do(req); res.StatusCode != http.StatusBadRequest {
		t.Errorf("a bad key: %d", res.StatusCode)
	}
	id := strings.NewReplacer("+", "-", "/", "_").Replace(keys[0].Fingerprint)
	if res := alice.post("/-/settings/keys/"+id+"/remove", url.Values{"csrf": {csrf}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("remove: %d", res.StatusCode)
	}
	if keys, _ := f.meta.ListSSHKeys(ctx, "alice"); len(keys) != 0 {
		t.Errorf("after remove: %+v", keys)
	}
}

func TestExploreAndDashboard(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	ctx := context.Background()
	if _, err := f.meta.CreateTenant(ctx, "acme", meta.KindOrg); err != nil {
		t.Fatal(err)
	}
	if err := f.meta.AddMember(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.meta.CreateRepo(ctx, "acme", "internal", false); err != nil {
		t.Fatal(err)
	}
	_, body := f.client().get("/-/explore")
	if !strings.Contains(body, `href="/alice/pub"`) || strings.Contains(body, "/alice/priv") || strings.Contains(body, "acme/internal") {
		t.Errorf("explore:\n%s", body)
	}
	_, body = f.signedIn(f.alice).get("/")
	for _, want := range []string{`href="/alice/priv"`, `href="/acme/internal"`, `href="/-/alerts/acme"`} {
		if !strings.Contains(body, want) {
			t.Errorf("dashboard lacks %s", want)
		}
	}
	if _, body := f.signedIn(f.bob).get("/"); strings.Contains(body, "acme/internal") || strings.Contains(body, "/alice/priv") {
		t.Error("bob's dashboard shows what he may not read")
	}
}

func TestTenantAlertsPage(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	alice := f.signedIn(f.alice)
	res, body := alice.get("/-/alerts/alice?state=all")
	if res.StatusCode != 200 || !strings.Contains(body, "alice/priv") || !strings.Contains(body, "github-pat") || strings.Contains(body, secret) {
		t.Fatalf("tenant alerts: %d\n%s", res.StatusCode, body)
	}
	const row = "<td>github-pat</td>"
	if _, body := alice.get("/-/alerts/alice?state=all&rule=github-pat&repo=priv"); !strings.Contains(body, row) {
		t.Error("the filters that fit do not list the alert")
	}
	if _, body := alice.get("/-/alerts/alice?state=resolved"); strings.Contains(body, row) {
		t.Error("state=resolved lists an open alert")
	}
	if _, body := alice.get("/-/alerts/alice?state=all&rule=aws"); strings.Contains(body, row) {
		t.Error("rule=aws lists a github-pat alert")
	}
	if _, body := alice.get("/-/alerts/alice?state=all&repo=pub"); strings.Contains(body, row) {
		t.Error("repo=pub lists priv's alert")
	}
	for _, c := range []*client{f.client(), f.signedIn(f.bob)} {
		if res, _ := c.get("/-/alerts/alice"); res.StatusCode != 404 {
			t.Errorf("someone else's tenant alerts: %d", res.StatusCode)
		}
	}
}

func TestFaviconAndPlainGoMod(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	res, body := f.client().get("/favicon.ico")
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Type"), "svg") || !strings.HasPrefix(body, "<svg") {
		t.Errorf("favicon: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	dir, env := bareRepo(t)
	work := t.TempDir()
	gittest.Git(t, env, "", "init", "-q", "-b", "main", work)
	// chroma takes *.mod for AMPL, which cannot place a pseudo-version.
	writeFile(t, work+"/go.mod", "module example.com/x\n\ngo 1.26\n\nrequire (\n\tgithub.com/spf13/cobra v1.10.2\n\tgithub.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect\n)\n")
	gittest.Git(t, env, work, "add", "-A")
	gittest.Git(t, env, work, "commit", "-q", "-m", "mod")
	// A commit that changes nothing, as a release commit does: its page
	// opens (git diff-tree --always).
	gittest.Git(t, env, work, "commit", "-q", "--allow-empty", "-m", "release 1.0")
	empty := strings.TrimSpace(gittest.Git(t, env, work, "rev-parse", "HEAD"))
	gittest.Git(t, env, work, "push", "-q", dir, "main")
	f.addRepo("mod", dir)
	_, body = f.client().get("/alice/mod/-/blob/main/go.mod")
	if strings.Contains(body, `class="err"`) || !strings.Contains(body, "example.com") {
		t.Errorf("go.mod page marks errors or lacks the text:\n%s", body)
	}
	if res, body := f.client().get("/alice/mod/-/commit/" + empty); res.StatusCode != 200 || !strings.Contains(body, "release 1.0") {
		t.Errorf("the page of a commit without changes: %d", res.StatusCode)
	}
	if _, body := f.client().get("/alice/mod"); !strings.Contains(body, `/alice/mod/-/commit/`+empty) {
		t.Error("the repository page does not link its latest commit")
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
