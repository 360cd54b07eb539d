package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/testkit"
)

// orgFixture is a server with tenants alice (user), bob (user, member of
// org acme) and the private repository acme/secret, plus write tokens.
type orgFixture struct {
	objects      *testkit.FailGet
	logs         *testkit.Buffer
	s            *server.Server
	url          string
	alice, bob   string // write tokens
	secret, mine meta.Repo
}

func newOrgFixture(t *testing.T) *orgFixture {
	t.Helper()
	ctx := context.Background()
	fs, err := fsstore.Open(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	f := &orgFixture{objects: &testkit.FailGet{Store: fs}, logs: &testkit.Buffer{}}
	f.s, err = server.New(ctx, server.Options{
		Store: f.objects, CacheDir: filepath.Join(t.TempDir(), "cache"),
		Logger: slog.New(slog.NewTextHandler(f.logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.s.Close() })
	m := f.s.Meta()
	for _, tn := range []struct{ name, kind string }{{"alice", meta.KindUser}, {"bob", meta.KindUser}, {"acme", meta.KindOrg}} {
		if _, err := m.CreateTenant(ctx, tn.name, tn.kind); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.AddMember(ctx, "acme", "bob"); err != nil {
		t.Fatal(err)
	}
	if f.alice, _, err = m.CreateToken(ctx, "alice", meta.ScopeWrite, "test"); err != nil {
		t.Fatal(err)
	}
	if f.bob, _, err = m.CreateToken(ctx, "bob", meta.ScopeWrite, "test"); err != nil {
		t.Fatal(err)
	}
	if f.secret, err = m.CreateRepo(ctx, "acme", "secret", false); err != nil {
		t.Fatal(err)
	}
	if f.mine, err = m.CreateRepo(ctx, "alice", "mine", false); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(f.s.Handler()) // listens on 127.0.0.1
	t.Cleanup(ts.Close)
	f.url = ts.URL
	return f
}

// refs asks for repo's advertisement of service with token, as git's
// first request of a clone (upload-pack) or push (receive-pack) does, and
// returns the status.
func (f *orgFixture) refs(t *testing.T, repo, service, token string) int {
	t.Helper()
	req, err := http.NewRequest("GET", f.url+"/"+repo+".git/info/refs?service="+service, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.SetBasicAuth("x", token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	io.Copy(io.Discard, res.Body)
	return res.StatusCode
}

// post sends an empty service request (the second request of a fetch or
// push) for repo with token and returns the status.
func (f *orgFixture) post(t *testing.T, repo, service, token string) int {
	t.Helper()
	req, err := http.NewRequest("POST", f.url+"/"+repo+".git/"+service, strings.NewReader("0000"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-"+service+"-request")
	req.SetBasicAuth("x", token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	io.Copy(io.Discard, res.Body)
	return res.StatusCode
}

// TestGitStorageOutageIs503 is issue 8 §3 over git: an org member whose
// membership cannot be read during an outage gets 503 with a log line,
// not "repository not found".
func TestGitStorageOutageIs503(t *testing.T) {
	f := newOrgFixture(t)
	if code := f.refs(t, "acme/secret", "git-upload-pack", f.bob); code != 200 {
		t.Fatalf("member before the outage: %d", code)
	}
	f.objects.Fail("meta/members/")
	for _, svc := range []string{"git-upload-pack", "git-receive-pack"} {
		if code := f.refs(t, "acme/secret", svc, f.bob); code != http.StatusServiceUnavailable {
			t.Errorf("member during the outage, %s: %d, want 503", svc, code)
		}
	}
	if l := f.logs.String(); !strings.Contains(l, "authorize") || !strings.Contains(l, "connection refused") {
		t.Errorf("no log line for the outage:\n%s", l)
	}
	// The owner's own token needs no membership record.
	if code := f.refs(t, "alice/mine", "git-upload-pack", f.alice); code != 200 {
		t.Errorf("owner during a membership outage: %d", code)
	}
	// The tenant records: no token can be checked.
	f.objects.Fail("meta/tenants/")
	if code := f.refs(t, "alice/mine", "git-upload-pack", f.alice); code != http.StatusServiceUnavailable {
		t.Errorf("owner during a tenant outage: %d, want 503", code)
	}
	f.objects.Heal()
	if code := f.refs(t, "acme/secret", "git-upload-pack", f.bob); code != 200 {
		t.Errorf("member after the outage: %d", code)
	}
}

// TestGitRemovedMemberAndDeletedTenant: a removed member loses git access
// to the org's private repository at once, and a deleted tenant's token
// is refused at once, for fetch and push alike.
func TestGitRemovedMemberAndDeletedTenant(t *testing.T) {
	f := newOrgFixture(t)
	ctx := context.Background()
	m := f.s.Meta()
	if code := f.refs(t, "acme/secret", "git-receive-pack", f.bob); code != 200 {
		t.Fatalf("member may push: %d", code)
	}
	if err := m.RemoveMember(ctx, "acme", "bob"); err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{"git-upload-pack", "git-receive-pack"} {
		if code := f.refs(t, "acme/secret", svc, f.bob); code != http.StatusNotFound {
			t.Errorf("removed member, %s: %d, want 404", svc, code)
		}
	}

	// Only the tenant record goes (as after a crash inside DeleteTenant,
	// or a record removed by hand): the token must stop all the same.
	if code := f.refs(t, "alice/mine", "git-receive-pack", f.alice); code != 200 {
		t.Fatalf("owner may push: %d", code)
	}
	if err := f.objects.Delete(ctx, "meta/tenants/alice"); err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{"git-upload-pack", "git-receive-pack"} {
		if code := f.refs(t, "alice/mine", svc, f.alice); code != http.StatusUnauthorized {
			t.Errorf("token of a deleted tenant, %s advertisement: %d, want 401", svc, code)
		}
		if code := f.post(t, "alice/mine", svc, f.alice); code != http.StatusUnauthorized {
			t.Errorf("token of a deleted tenant, %s request: %d, want 401", svc, code)
		}
	}
	// DeleteTenant proper, forced: bob owns nothing, acme owns secret.
	if err := m.DeleteTenant(ctx, "acme", false); !errors.Is(err, meta.ErrNotEmpty) {
		t.Fatalf("unforced delete of acme: %v", err)
	}
	if err := m.AddMember(ctx, "acme", "bob"); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteTenant(ctx, "bob", false); err != nil {
		t.Fatal(err)
	}
	if code := f.refs(t, "acme/secret", "git-upload-pack", f.bob); code != http.StatusUnauthorized {
		t.Errorf("deleted member's token: %d, want 401", code)
	}
	if err := m.DeleteTenant(ctx, "acme", true); err != nil {
		t.Fatal(err)
	}
	if code := f.refs(t, "acme/secret", "git-upload-pack", ""); code != http.StatusUnauthorized {
		t.Errorf("anonymous fetch of a deleted org's repository: %d, want 401 (not found)", code)
	}
}
