package api

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/hooks"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/testkit"
	"github.com/ghost-scm/ghost/internal/wal"
	"github.com/ghost-scm/ghost/internal/webhook"
)

// hookFixture serves the API with webhooks over the fixture's store:
// alice/web (private) and acme/app (an org's, bob a member).
type hookFixture struct {
	*fixture
	objects objstore.Store
	logs    *testkit.Buffer
}

func newHookFixture(t *testing.T) *hookFixture {
	t.Helper()
	objects := memstore.New()
	logs := &testkit.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := newFixtureOn(t, objects, logger)
	hs := hooks.New(hooks.Options{Store: objects, Log: wal.New(objects, wal.Options{}), Meta: f.s, Logger: logger})
	srv := httptest.NewServer(NewHandler(f.s, logger, WithHooks(hs))) // 127.0.0.1
	t.Cleanup(srv.Close)
	f.srv = srv
	ctx := context.Background()
	if _, err := f.s.CreateRepo(ctx, "alice", "web", false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.CreateRepo(ctx, "acme", "app", true); err != nil {
		t.Fatal(err)
	}
	return &hookFixture{fixture: f, objects: objects, logs: logs}
}

const secretValue = "hunter2-hook-secret"

// TestHooksAPI: create, list, get, change, ping, test and delete, in
// GitHub's fields, with the secret never shown again.
func TestHooksAPI(t *testing.T) {
	f := newHookFixture(t)
	body := fmt.Sprintf(`{"name":"web","config":{"url":"https://ci.example.com/hook","content_type":"json","secret":%q,"insecure_ssl":"0"},"events":["push","create"],"active":true}`, secretValue)
	r := f.do("POST", "/api/repos/alice/web/hooks", f.aliceW, body)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var h hookJSON
	r.json(t, &h)
	if h.ID <= 0 || h.Type != "Repository" || h.Config.URL != "https://ci.example.com/hook" || h.Config.Secret != "********" || !h.Active || strings.Join(h.Events, ",") != "create,push" {
		t.Errorf("created %+v", h)
	}
	base := fmt.Sprintf("/api/repos/alice/web/hooks/%d", h.ID)
	for _, path := range []string{"/api/repos/alice/web/hooks", base} {
		r := f.do("GET", path, f.aliceW, "")
		if r.status != 200 || !bytes.Contains(r.body, []byte(`"secret":"********"`)) {
			t.Errorf("GET %s: %d %s", path, r.status, r.body)
		}
	}
	r = f.do("PATCH", base, f.aliceW, `{"add_events":["repository"],"remove_events":["create"],"config":{"insecure_ssl":1}}`)
	r.json(t, &h)
	if r.status != 200 || strings.Join(h.Events, ",") != "push,repository" || h.Config.InsecureSSL != "1" || h.Config.URL != "https://ci.example.com/hook" || h.Config.Secret != "********" {
		t.Errorf("patch: %d %+v", r.status, h)
	}
	r = f.do("PATCH", base, f.aliceW, `{"active":false}`)
	r.json(t, &h)
	if r.status != 200 || h.Active {
		t.Errorf("turn off: %d %+v", r.status, h)
	}
	f.run([]step{
		{"ping", "POST", base + "/pings", f.aliceW, "", 204},
		{"test", "POST", base + "/tests", f.aliceW, "", 204},
		{"deliveries (none yet)", "GET", base + "/deliveries", f.aliceW, "", 200},
		{"a delivery that does not exist", "GET", base + "/deliveries/0123456789abcdef01234567", f.aliceW, "", 404},
		{"redeliver one that does not exist", "POST", base + "/deliveries/0123456789abcdef01234567/attempts", f.aliceW, "", 404},
		{"an id that is not a number", "GET", "/api/repos/alice/web/hooks/x", f.aliceW, "", 404},
		{"another repository's hook id", "GET", fmt.Sprintf("/api/repos/acme/app/hooks/%d", h.ID), f.bobW, "", 404},
		{"delete", "DELETE", base, f.aliceW, "", 204},
		{"deleted", "GET", base, f.aliceW, "", 404},
		{"delete again", "DELETE", base, f.aliceW, "", 404},
	})
	if strings.Contains(f.logs.String(), secretValue) {
		t.Errorf("the secret is in the server's log")
	}
	// Nothing the API answers, nor anything the store holds but the
	// hook's own set, carries the secret.
	_ = objstore.Walk(context.Background(), f.objects, "", func(o objstore.Info) error {
		if strings.HasPrefix(o.Key, "hooks/sets/") {
			return nil
		}
		b, _, err := objstore.ReadAll(context.Background(), f.objects, o.Key, 64<<20)
		if err == nil && bytes.Contains(b, []byte(secretValue)) {
			t.Errorf("the secret is stored in %s", o.Key)
		}
		return nil
	})
}

// TestHooksAPIAccess: hooks are for those who may write the repository,
// or create repositories under the tenant; anyone else gets 404.
func TestHooksAPIAccess(t *testing.T) {
	f := newHookFixture(t)
	create := `{"config":{"url":"https://ci.example.com/hook"}}`
	f.run([]step{
		{"anonymous, private repository", "GET", "/api/repos/alice/web/hooks", "", "", 404},
		{"read token", "GET", "/api/repos/alice/web/hooks", f.aliceR, "", 404},
		{"another tenant", "POST", "/api/repos/alice/web/hooks", f.carolW, create, 404},
		{"public repository, not a writer", "GET", "/api/repos/acme/app/hooks", f.carolW, "", 404},
		{"org member", "POST", "/api/repos/acme/app/hooks", f.bobW, create, 201},
		{"admin", "GET", "/api/repos/alice/web/hooks", f.admin, "", 200},
		{"tenant: anonymous", "GET", "/api/tenants/acme/hooks", "", "", 401},
		{"tenant: not a member", "GET", "/api/tenants/acme/hooks", f.carolW, "", 404},
		{"tenant: read token of the tenant", "GET", "/api/tenants/alice/hooks", f.aliceR, "", 404},
		{"tenant: member", "POST", "/api/tenants/acme/hooks", f.bobW, create, 201},
		{"tenant: itself", "GET", "/api/tenants/alice/hooks", f.aliceW, "", 200},
		{"tenant: none such", "GET", "/api/tenants/nobody/hooks", f.admin, "", 404},
	})
}

// TestHooksAPIRefusesBadInput: each bad definition is a 400 that names
// the problem, and creates nothing.
func TestHooksAPIRefusesBadInput(t *testing.T) {
	f := newHookFixture(t)
	for _, body := range []string{
		`{}`,
		`{"config":{}}`,
		`{"config":{"url":"ftp://example.com/"}}`,
		`{"config":{"url":"https://user:pw@example.com/"}}`,
		`{"config":{"url":"not a url"}}`,
		`{"config":{"url":"http://127.0.0.1:9/"}}`,
		`{"config":{"url":"http://[::1]/"}}`,
		`{"config":{"url":"http://169.254.169.254/latest"}}`,
		`{"config":{"url":"https://example.com/","content_type":"form"}}`,
		`{"config":{"url":"https://example.com/","insecure_ssl":"maybe"}}`,
		`{"config":{"url":"https://example.com/"},"events":["pull"]}`,
		`{"config":{"url":"https://example.com/"},"events":[]}`,
		`{"config":{"url":"https://example.com/"},"name":"email"}`,
		`{"config":{"url":"https://example.com/"},"unknown":1}`,
		`{"config":{"url":"https://example.com/","secret":"` + strings.Repeat("s", hooks.MaxSecretBytes+1) + `"}}`,
		`{"config":{"url":"https://example.com/` + strings.Repeat("p", hooks.MaxURLBytes) + `"}}`,
	} {
		r := f.do("POST", "/api/repos/alice/web/hooks", f.aliceW, body)
		if r.status != 400 {
			t.Errorf("POST %.80s: %d %s, want 400", body, r.status, r.body)
		}
	}
	r := f.do("GET", "/api/repos/alice/web/hooks", f.aliceW, "")
	if r.status != 200 || strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("after the refusals: %d %s, want no hooks", r.status, r.body)
	}
}

// TestHooksAPIAllowsLiteralAddressesThePolicyAllows: an allow-list
// admits its networks at creation as it does at delivery.
func TestHooksAPIAllowsLiteralAddressesThePolicyAllows(t *testing.T) {
	f := newHookFixture(t)
	hs := hooks.New(hooks.Options{Store: f.objects, Log: wal.New(f.objects, wal.Options{}), Meta: f.s, Policy: webhook.Policy{AllowPrivate: true}})
	srv := httptest.NewServer(NewHandler(f.s, nil, WithHooks(hs)))
	t.Cleanup(srv.Close)
	f.srv = srv
	if r := f.do("POST", "/api/repos/alice/web/hooks", f.aliceW, `{"config":{"url":"http://127.0.0.1:9/"}}`); r.status != 201 {
		t.Errorf("with private addresses allowed: %d %s", r.status, r.body)
	}
}

// TestHooksOfADeletedOwnerGo: a deleted tenant's hooks, and a deleted
// repository's, go with them: a tenant created again under the name
// never inherits them.
func TestHooksOfADeletedOwnerGo(t *testing.T) {
	f := newHookFixture(t)
	create := `{"config":{"url":"https://ci.example.com/hook"}}`
	f.run([]step{
		{"create dora", "POST", "/api/tenants", f.admin, `{"name":"dora"}`, 201},
		{"a tenant hook", "POST", "/api/tenants/dora/hooks", f.admin, create, 201},
		{"a repository", "POST", "/api/repos/dora", f.admin, `{"name":"site"}`, 201},
		{"its hook", "POST", "/api/repos/dora/site/hooks", f.admin, create, 201},
		{"delete the repository", "DELETE", "/api/repos/dora/site", f.admin, "", 204},
		{"delete dora", "DELETE", "/api/tenants/dora", f.admin, "", 204},
		{"create dora again", "POST", "/api/tenants", f.admin, `{"name":"dora"}`, 201},
		{"a repository again", "POST", "/api/repos/dora", f.admin, `{"name":"site"}`, 201},
	})
	for _, path := range []string{"/api/tenants/dora/hooks", "/api/repos/dora/site/hooks"} {
		if r := f.do("GET", path, f.admin, ""); r.status != 200 || strings.TrimSpace(string(r.body)) != "[]" {
			t.Errorf("GET %s: %d %s, want no hooks", path, r.status, r.body)
		}
	}
	if keys := storeKeys(t, f.objects, "hooks/sets/"); len(keys) != 0 {
		t.Errorf("hook sets left: %v", keys)
	}
}

func storeKeys(t *testing.T, s objstore.Store, prefix string) []string {
	var out []string
	_ = objstore.Walk(context.Background(), s, prefix, func(o objstore.Info) error {
		out = append(out, o.Key)
		return nil
	})
	return out
}

// FuzzHookRequest: whatever a client sends to create or change a hook,
// the answer is a success or a 4xx naming the problem, never a 5xx, and
// no answer shows the secret.
func FuzzHookRequest(f *testing.F) {
	for _, s := range []string{
		`{"config":{"url":"https://ci.example.com/h","secret":"x"},"events":["push"]}`,
		`{"config":{"url":"https://a/","insecure_ssl":1},"add_events":["create"],"remove_events":["push"]}`,
		`{"active":false}`, `{"config":{"insecure_ssl":"2"}}`, `[]`, `null`, `{"events":null}`, `{"name":"web","config":null}`,
	} {
		f.Add(s)
	}
	objects := memstore.New()
	ms := meta.New(objects, wal.New(objects, wal.Options{}))
	ctx := context.Background()
	if _, err := ms.CreateTenant(ctx, "alice", meta.KindUser); err != nil {
		f.Fatal(err)
	}
	tok, _, err := ms.CreateToken(ctx, "alice", meta.ScopeWrite, "")
	if err != nil {
		f.Fatal(err)
	}
	if _, err := ms.CreateRepo(ctx, "alice", "web", false); err != nil {
		f.Fatal(err)
	}
	hs := hooks.New(hooks.Options{Store: objects, Log: wal.New(objects, wal.Options{}), Meta: ms})
	h := NewHandler(ms, nil, WithHooks(hs))
	secret := "fuzz-secret-do-not-show"
	created, err := hs.Create(ctx, hooks.Scope{Tenant: "alice", Repo: mustRepoID(f, ms), Name: "web"}, hooks.Input{URL: ptr("https://x.example/"), Secret: &secret}, "alice")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, req := range []struct{ method, path string }{
			{"POST", "/api/repos/alice/web/hooks"},
			{"PATCH", fmt.Sprintf("/api/repos/alice/web/hooks/%d", created.ID)},
		} {
			r := httptest.NewRequest(req.method, req.path, strings.NewReader(body))
			r.SetBasicAuth("x", tok)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code >= 500 || (w.Code >= 300 && !strings.Contains(w.Body.String(), `"error"`)) {
				t.Fatalf("%s %s with %q: %d %s", req.method, req.path, body, w.Code, w.Body.String())
			}
			if strings.Contains(w.Body.String(), secret) {
				t.Fatalf("the secret is in the answer to %q", body)
			}
		}
	})
}

func ptr[T any](v T) *T { return &v }

func mustRepoID(f *testing.F, ms *meta.Store) string {
	r, err := ms.Repo(context.Background(), "alice", "web")
	if err != nil {
		f.Fatal(err)
	}
	return r.ID
}
