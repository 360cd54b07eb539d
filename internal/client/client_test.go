package client

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/api"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// fixture is the real API handler over a memory store, on loopback.
type fixture struct {
	srv    *httptest.Server
	meta   *meta.Store
	alerts *alerts.Store
	admin  string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	objects := memstore.New()
	m := meta.New(objects, wal.New(objects, wal.Options{}))
	as := alerts.New(objects)
	if _, err := m.CreateTenant(ctx, "root", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	admin, _, err := m.CreateToken(ctx, "root", meta.ScopeAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.NewHandler(m, nil, api.WithAlerts(as))) // 127.0.0.1
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, meta: m, alerts: as, admin: admin}
}

// strict returns a client that refuses answers with fields it does not
// know: the client's types must hold everything the server sends.
func (f *fixture) strict(t *testing.T, token string) *Client {
	t.Helper()
	c, err := New(f.srv.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	c.strict = true
	return c
}

// TestContract runs every call against the real handler with strict
// decoding: a field the server adds or renames that the client does not
// know fails here, as does a request the server refuses.
func TestContract(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	root := f.strict(t, f.admin)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	u, err := root.User(ctx)
	must("user", err)
	if u.Tenant != "root" || u.Scope != "admin" || u.Kind != "user" || u.TokenID == "" {
		t.Errorf("user %+v", u)
	}
	_, err = root.CreateTenant(ctx, "alice", "user")
	must("create tenant", err)
	_, err = root.CreateTenant(ctx, "acme", "org")
	must("create org", err)
	ts, err := root.ListTenants(ctx)
	must("list tenants", err)
	if len(ts) != 3 {
		t.Errorf("tenants %+v", ts)
	}
	must("add member", root.AddMember(ctx, "acme", "alice"))
	tok, err := root.CreateToken(ctx, "alice", "write", "laptop")
	must("create token", err)
	if !strings.HasPrefix(tok.Token, meta.TokenPrefix) || tok.Scope != "write" || tok.Description != "laptop" {
		t.Errorf("token %+v", tok)
	}
	alice := f.strict(t, tok.Token)
	// Self-service: alice mints her own read token and adds her key.
	readTok, err := alice.CreateToken(ctx, "alice", "read", "ci")
	must("self-service token", err)
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	must("key", err)
	sp, err := ssh.NewPublicKey(pub)
	must("key", err)
	k, err := alice.AddSSHKey(ctx, "alice", "laptop", string(ssh.MarshalAuthorizedKey(sp)))
	must("add key", err)
	if !strings.HasPrefix(k.Fingerprint, "SHA256:") || k.Title != "laptop" {
		t.Errorf("key %+v", k)
	}
	ks, err := alice.ListSSHKeys(ctx, "alice")
	must("list keys", err)
	if len(ks) != 1 {
		t.Errorf("keys %+v", ks)
	}
	// A fingerprint holds '/' and '+': the client sends the URL-safe form.
	must("remove key", alice.RemoveSSHKey(ctx, "alice", k.Fingerprint))
	toks, err := alice.ListTokens(ctx, "alice")
	must("list tokens", err)
	if len(toks) != 2 {
		t.Errorf("tokens %+v", toks)
	}
	must("revoke", alice.RevokeToken(ctx, "alice", readTok.ID))

	r, err := alice.CreateRepo(ctx, "acme", "app", false)
	must("create repo", err)
	if r.FullName != "acme/app" || r.Public {
		t.Errorf("repo %+v", r)
	}
	on, public := true, true
	r, err = alice.UpdateRepo(ctx, "acme", "app", RepoSettings{PushProtection: &on, Public: &public})
	must("update repo", err)
	if !r.PushProtection || !r.Public {
		t.Errorf("updated repo %+v", r)
	}
	fork, err := alice.ForkRepo(ctx, "acme", "app", "alice", "")
	must("fork", err)
	if fork.FullName != "alice/app" || fork.ForkedFrom != "acme/app" {
		t.Errorf("fork %+v", fork)
	}
	rs, err := alice.ListRepos(ctx, "acme")
	must("list repos", err)
	if len(rs) != 1 {
		t.Errorf("repos %+v", rs)
	}

	// Alerts: list, one by a prefix, change, reveal.
	if err := f.alerts.Record(ctx, "acme", r.ID, []alerts.Finding{{RuleID: "github-pat", Path: "a.txt", Line: 2, Column: 3,
		Commit: strings.Repeat("c", 40), BlobID: strings.Repeat("b", 40), Match: "tok=ghp_…", Secret: "ghp_secret"}}, alerts.RunRef{ID: "r", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	page, err := alice.ListAlerts(ctx, "acme", "app", AlertFilter{State: "all", PerPage: 10})
	must("list alerts", err)
	if len(page.Alerts) != 1 || page.Alerts[0].Locations[0].Where == "" {
		t.Fatalf("alerts %+v", page)
	}
	id := page.Alerts[0].ID
	a, err := alice.Alert(ctx, "acme", "app", id[:7], 1)
	must("alert by prefix", err)
	if a.ID != id || !a.Revealable {
		t.Errorf("alert %+v", a)
	}
	a, err = alice.UpdateAlert(ctx, "acme", "app", id[:9], AlertChange{State: "resolved", Resolution: "revoked", Comment: "rotated"})
	must("resolve", err)
	if a.State != "resolved" || a.ResolvedBy != "alice" || len(a.History) != 1 {
		t.Errorf("resolved %+v", a)
	}
	secret, err := alice.RevealAlert(ctx, "acme", "app", id)
	must("reveal", err)
	if secret != "ghp_secret" {
		t.Errorf("secret %q", secret)
	}
	tp, err := alice.ListTenantAlerts(ctx, "acme", AlertFilter{Repo: "app"})
	must("tenant alerts", err)
	if len(tp.Alerts) != 1 {
		t.Errorf("tenant alerts %+v", tp)
	}

	must("delete repo", alice.DeleteRepo(ctx, "alice", "app"))
	must("remove member", root.RemoveMember(ctx, "acme", "alice"))
	must("delete tenant", root.DeleteTenant(ctx, "acme", true))
}

// TestTypedErrors: each status is its kind, with the server's message.
func TestTypedErrors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	anon := f.strict(t, "")
	root := f.strict(t, f.admin)
	if _, err := root.CreateTenant(ctx, "alice", "user"); err != nil {
		t.Fatal(err)
	}
	bad := f.strict(t, "ghost_nope")
	for what, c := range map[string]struct {
		err  error
		kind error
		msg  string
	}{
		"anonymous tenant list": {err: second(anon.ListTenants(ctx)), kind: ErrUnauthenticated, msg: "credentials required"},
		"bad token":             {err: second(bad.User(ctx)), kind: ErrUnauthenticated},
		"missing repo":          {err: second(root.Repo(ctx, "alice", "nope")), kind: ErrNotFound, msg: "not found"},
		"exists":                {err: second(root.CreateTenant(ctx, "alice", "user")), kind: ErrConflict},
		"invalid":               {err: second(root.CreateTenant(ctx, "../x", "user")), kind: ErrInvalid},
		"no alerts here":        {err: second(root.ListAlerts(ctx, "alice", "nope", AlertFilter{})), kind: ErrNotFound},
	} {
		var e *Error
		if !errors.As(c.err, &e) || !errors.Is(c.err, c.kind) || (c.msg != "" && !strings.Contains(e.Message, c.msg)) {
			t.Errorf("%s: %v (%T), want %v with %q", what, c.err, c.err, c.kind, c.msg)
		}
	}
	// Something that is not ghost: no JSON.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>nope</html>", http.StatusNotFound)
	}))
	defer plain.Close()
	c, _ := New(plain.URL, "")
	if _, err := c.User(ctx); !errors.Is(err, ErrNotGhost) || !strings.Contains(err.Error(), "ghost server") {
		t.Errorf("not ghost: %v", err)
	}
	// Nothing listening.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	c, _ = New(dead.URL, "")
	if _, err := c.User(ctx); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("nothing listening: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestParseServer(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080":         "http://127.0.0.1:8080",
		"https://git.example.com/":      "https://git.example.com",
		" https://h/ghost/ ":            "https://h/ghost",
		"http://[::1]:8080/prefix/sub/": "http://[::1]:8080/prefix/sub",
	} {
		u, err := ParseServer(in)
		if err != nil || u.String() != want {
			t.Errorf("ParseServer(%q) = %v, %v; want %q", in, u, err, want)
		}
	}
	for _, in := range []string{"", "127.0.0.1:8080", "ftp://h", "http://", "http://x:ghost_secret@h", "http://h/?a=b", "http://h/#x"} {
		if _, err := ParseServer(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseServer(%q): %v", in, err)
		} else if strings.Contains(err.Error(), "ghost_secret") {
			t.Errorf("ParseServer(%q) repeats the secret: %v", in, err)
		}
	}
}

// TestInProcess: WithHandler serves the API without a network, the way
// the CLI works on the store, with the operator's authority.
func TestInProcess(t *testing.T) {
	ctx := context.Background()
	objects := memstore.New()
	m := meta.New(objects, wal.New(objects, wal.Options{}))
	c, err := New("http://store.invalid", "", WithHandler(api.NewHandler(m, nil, api.WithOperator("ops@host (store)"))))
	if err != nil {
		t.Fatal(err)
	}
	c.strict = true
	if _, err := c.CreateTenant(ctx, "alice", "user"); err != nil {
		t.Fatal(err)
	}
	tok, err := c.CreateToken(ctx, "alice", "admin", "bootstrap")
	if err != nil || tok.Scope != "admin" {
		t.Fatalf("operator mints an admin token: %+v %v", tok, err)
	}
	u, err := c.User(ctx)
	if err != nil || u.Tenant != "ops@host (store)" || u.Scope != "admin" {
		t.Fatalf("user %+v %v", u, err)
	}
	if _, err := c.Repo(ctx, "alice", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("in-process error: %v", err)
	}
}

// TestExploreAndOrgs: the public repositories of every owner, a page at
// a time, never a private one; the orgs a user belongs to.
func TestExploreAndOrgs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, tn := range []struct{ name, kind string }{{"alice", "user"}, {"acme", "org"}, {"initech", "org"}} {
		if _, err := f.meta.CreateTenant(ctx, tn.name, tn.kind); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.meta.AddMember(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		if _, err := f.meta.CreateRepo(ctx, "alice", fmt.Sprintf("pub%d", i), true); err != nil {
			t.Fatal(err)
		}
		if _, err := f.meta.CreateRepo(ctx, "acme", fmt.Sprintf("priv%d", i), false); err != nil {
			t.Fatal(err)
		}
	}
	anon := f.strict(t, "")
	var got []string
	page := ""
	for range 10 {
		p, err := anon.PublicRepos(ctx, page, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Repos) > 3 {
			t.Fatalf("a page of %d", len(p.Repos))
		}
		for _, r := range p.Repos {
			got = append(got, r.FullName)
		}
		if page = p.NextPage; page == "" {
			break
		}
	}
	if len(got) != 7 || slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "priv") }) || !slices.IsSorted(got) {
		t.Errorf("explore listed %v", got)
	}
	tok, _, err := f.meta.CreateToken(ctx, "alice", meta.ScopeRead, "")
	if err != nil {
		t.Fatal(err)
	}
	orgs, err := f.strict(t, tok).UserOrgs(ctx)
	if err != nil || len(orgs) != 1 || orgs[0].Name != "acme" {
		t.Errorf("orgs %+v %v", orgs, err)
	}
	if _, err := anon.UserOrgs(ctx); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("anonymous orgs: %v", err)
	}
}
