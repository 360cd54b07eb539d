package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

type fixture struct {
	t   *testing.T
	srv *httptest.Server
	s   *meta.Store
	// tokens by role
	admin, aliceW, aliceR, bobW, carolW string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOn(t, memstore.New(), nil)
}

// newFixtureOn builds the fixture's tenants and tokens on objects, with
// the handler logging to logger (nil discards).
func newFixtureOn(t *testing.T, objects objstore.Store, logger *slog.Logger) *fixture {
	t.Helper()
	ctx := context.Background()
	s := meta.New(objects, wal.New(objects, wal.Options{}))
	for _, tn := range []struct{ name, kind string }{
		{"root", meta.KindUser}, {"alice", meta.KindUser}, {"bob", meta.KindUser},
		{"carol", meta.KindUser}, {"acme", meta.KindOrg},
	} {
		if _, err := s.CreateTenant(ctx, tn.name, tn.kind); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddMember(ctx, "acme", "bob"); err != nil {
		t.Fatal(err)
	}
	tok := func(tenant string, scope meta.Scope) string {
		plain, _, err := s.CreateToken(ctx, tenant, scope, "")
		if err != nil {
			t.Fatal(err)
		}
		return plain
	}
	srv := httptest.NewServer(NewHandler(s, logger)) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	return &fixture{
		t: t, srv: srv, s: s,
		admin:  tok("root", meta.ScopeAdmin),
		aliceW: tok("alice", meta.ScopeWrite),
		aliceR: tok("alice", meta.ScopeRead),
		bobW:   tok("bob", meta.ScopeWrite),
		carolW: tok("carol", meta.ScopeWrite),
	}
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// do sends a request; auth "" is anonymous, "bearer:<tok>" uses Bearer,
// "raw:<header>" sets Authorization verbatim, anything else is Basic.
func (f *fixture) do(method, path, auth, body string) resp {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	switch {
	case auth == "":
	case strings.HasPrefix(auth, "bearer:"):
		req.Header.Set("Authorization", "Bearer "+strings.TrimPrefix(auth, "bearer:"))
	case strings.HasPrefix(auth, "raw:"):
		req.Header.Set("Authorization", strings.TrimPrefix(auth, "raw:"))
	default:
		req.SetBasicAuth("anything", auth)
	}
	res, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

type step struct {
	name         string
	method, path string
	auth, body   string
	want         int
}

func (f *fixture) run(steps []step) {
	f.t.Helper()
	for _, st := range steps {
		r := f.do(st.method, st.path, st.auth, st.body)
		if r.status != st.want {
			f.t.Errorf("%s: %s %s = %d %s, want %d", st.name, st.method, st.path, r.status, bytes.TrimSpace(r.body), st.want)
			continue
		}
		if r.status >= 400 {
			var e errorBody
			if err := json.Unmarshal(r.body, &e); err != nil || e.Error == "" {
				f.t.Errorf("%s: error body %q is not {\"error\": ...}", st.name, r.body)
			}
			if got := r.header.Get("WWW-Authenticate"); (r.status == 401) != (got == `Basic realm="ghost"`) {
				f.t.Errorf("%s: status %d with WWW-Authenticate %q", st.name, r.status, got)
			}
		}
		if ct := r.header.Get("Content-Type"); r.status != 204 && !strings.HasPrefix(ct, "application/json") {
			f.t.Errorf("%s: Content-Type %q", st.name, ct)
		}
	}
}

func TestAuthentication(t *testing.T) {
	f := newFixture(t)
	f.run([]step{
		{"basic", "GET", "/api/tenants", f.admin, "", 200},
		{"bearer", "GET", "/api/tenants", "bearer:" + f.admin, "", 200},
		{"bearer lowercase scheme", "GET", "/api/tenants", "raw:bearer " + f.admin, "", 200},
		{"anonymous", "GET", "/api/tenants", "", "", 401},
		{"wrong token", "GET", "/api/tenants", "ghost_" + strings.Repeat("a", 52), "", 401},
		{"malformed token", "GET", "/api/tenants", "hunter2", "", 401},
		{"empty basic password", "GET", "/api/tenants", "raw:Basic " + "dXNlcjo=", "", 401},
		{"unknown scheme", "GET", "/api/tenants", "raw:Digest abc", "", 401},
		{"bad token on a public read is still 401", "GET", "/api/repos/alice", "nope", "", 401},
		{"non-admin", "GET", "/api/tenants", f.aliceW, "", 403},
	})
	// A revoked token stops working.
	ctx := context.Background()
	plain, tok, err := f.s.CreateToken(ctx, "carol", meta.ScopeRead, "")
	if err != nil {
		t.Fatal(err)
	}
	f.run([]step{{"before revoke", "GET", "/api/repos/carol", plain, "", 200}})
	if err := f.s.RevokeToken(ctx, "carol", tok.ID); err != nil {
		t.Fatal(err)
	}
	f.run([]step{{"after revoke", "GET", "/api/repos/carol", plain, "", 401}})
}

func TestTenantsAndTokens(t *testing.T) {
	f := newFixture(t)
	f.run([]step{
		{"create user", "POST", "/api/tenants", f.admin, `{"name":"dave"}`, 201},
		{"create org", "POST", "/api/tenants", f.admin, `{"name":"Initech","kind":"org"}`, 201},
		{"exists (case-insensitive)", "POST", "/api/tenants", f.admin, `{"name":"DAVE"}`, 409},
		{"invalid name", "POST", "/api/tenants", f.admin, `{"name":"../x"}`, 400},
		{"reserved name", "POST", "/api/tenants", f.admin, `{"name":"api"}`, 400},
		{"invalid kind", "POST", "/api/tenants", f.admin, `{"name":"eve","kind":"bot"}`, 400},
		{"unknown field", "POST", "/api/tenants", f.admin, `{"name":"eve","admin":true}`, 400},
		{"not json", "POST", "/api/tenants", f.admin, `name=eve`, 400},
		{"empty body", "POST", "/api/tenants", f.admin, ``, 400},
		{"trailing data", "POST", "/api/tenants", f.admin, `{"name":"eve"}{"name":"x"}`, 400},
		{"too large", "POST", "/api/tenants", f.admin, `{"name":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, 413},
		{"anonymous create", "POST", "/api/tenants", "", `{"name":"eve"}`, 401},
		{"non-admin create", "POST", "/api/tenants", f.aliceW, `{"name":"eve"}`, 403},

		{"member", "POST", "/api/tenants/initech/members", f.admin, `{"user":"dave"}`, 204},
		{"member of a user", "POST", "/api/tenants/alice/members", f.admin, `{"user":"dave"}`, 400},
		{"member of nobody", "POST", "/api/tenants/nobody/members", f.admin, `{"user":"dave"}`, 404},
		{"member non-admin", "POST", "/api/tenants/acme/members", f.bobW, `{"user":"carol"}`, 403},

		{"token for missing tenant", "POST", "/api/tenants/nobody/tokens", f.admin, `{"scope":"read"}`, 404},
		{"token bad scope", "POST", "/api/tenants/alice/tokens", f.admin, `{"scope":"root"}`, 400},
		// Self-service (docs/adr/0026-self-service-credentials.md): a
		// tenant's write token mints the tenant's read and write tokens,
		// never admin ones, never another tenant's; a read token none.
		{"token self read", "POST", "/api/tenants/alice/tokens", f.aliceW, `{"scope":"read"}`, 201},
		{"token self write", "POST", "/api/tenants/alice/tokens", f.aliceW, `{"scope":"write"}`, 201},
		{"token self admin", "POST", "/api/tenants/alice/tokens", f.aliceW, `{"scope":"admin"}`, 403},
		{"token from a read token", "POST", "/api/tenants/alice/tokens", f.aliceR, `{"scope":"read"}`, 403},
		{"token for another tenant", "POST", "/api/tenants/bob/tokens", f.aliceW, `{"scope":"read"}`, 403},
		{"token for an org by a member", "POST", "/api/tenants/acme/tokens", f.bobW, `{"scope":"read"}`, 403},
		{"token anonymous", "POST", "/api/tenants/alice/tokens", "", `{"scope":"read"}`, 401},
		{"list tokens self", "GET", "/api/tenants/alice/tokens", f.aliceR, "", 200},
		{"list tokens other", "GET", "/api/tenants/alice/tokens", f.carolW, "", 403},
		{"wrong method", "PUT", "/api/tenants", f.admin, `{}`, 405},
		{"no route", "GET", "/api/nothing", f.admin, "", 404},
	})

	var tenants []tenantJSON
	f.do("GET", "/api/tenants", f.admin, "").json(t, &tenants)
	if len(tenants) != 7 {
		t.Errorf("GET /api/tenants = %+v, want 7 tenants", tenants)
	}

	// Create a token, use it, list it, revoke it with itself.
	r := f.do("POST", "/api/tenants/dave/tokens", f.admin, `{"scope":"write","description":"ci"}`)
	if r.status != 201 {
		t.Fatalf("create token: %d %s", r.status, r.body)
	}
	var tok tokenJSON
	r.json(t, &tok)
	if !strings.HasPrefix(tok.Token, meta.TokenPrefix) || tok.ID == "" || tok.Scope != meta.ScopeWrite || tok.Tenant != "dave" {
		t.Errorf("token response %s", r.body)
	}
	var listed []map[string]any
	f.do("GET", "/api/tenants/dave/tokens", tok.Token, "").json(t, &listed)
	if len(listed) != 1 || listed[0]["id"] != tok.ID || listed[0]["token"] != nil {
		t.Errorf("listed tokens %+v (plaintext must never be listed)", listed)
	}
	f.run([]step{
		{"dave creates in initech", "POST", "/api/repos/initech", tok.Token, `{"name":"tps"}`, 201},
		{"revoke someone else's token", "DELETE", "/api/tenants/alice/tokens/" + tok.ID, f.carolW, "", 403},
		{"self revoke", "DELETE", "/api/tenants/dave/tokens/" + tok.ID, tok.Token, "", 204},
		{"revoked", "GET", "/api/repos/dave", tok.Token, "", 401},
		{"revoke again", "DELETE", "/api/tenants/dave/tokens/" + tok.ID, f.admin, "", 404},
	})
}

func TestRepos(t *testing.T) {
	f := newFixture(t)
	f.run([]step{
		{"create private", "POST", "/api/repos/alice", f.aliceW, `{"name":"secret"}`, 201},
		{"create public", "POST", "/api/repos/alice", f.aliceW, `{"name":"open","public":true}`, 201},
		{"create exists", "POST", "/api/repos/alice", f.aliceW, `{"name":"SECRET"}`, 409},
		{"create .git", "POST", "/api/repos/alice", f.aliceW, `{"name":"x.git"}`, 400},
		{"create bad name", "POST", "/api/repos/alice", f.aliceW, `{"name":"a/b"}`, 400},
		{"create unknown field", "POST", "/api/repos/alice", f.aliceW, `{"name":"x","private":true}`, 400},
		{"create read token", "POST", "/api/repos/alice", f.aliceR, `{"name":"x"}`, 403},
		{"create other tenant", "POST", "/api/repos/alice", f.carolW, `{"name":"x"}`, 403},
		{"create anonymous", "POST", "/api/repos/alice", "", `{"name":"x"}`, 401},
		{"create missing owner", "POST", "/api/repos/nobody", f.admin, `{"name":"x"}`, 404},
		{"create as org member", "POST", "/api/repos/acme", f.bobW, `{"name":"widgets"}`, 201},
		{"create as admin", "POST", "/api/repos/carol", f.admin, `{"name":"adm"}`, 201},

		{"get public anonymous", "GET", "/api/repos/alice/open", "", "", 200},
		{"get public .git", "GET", "/api/repos/alice/open.git", "", "", 200},
		{"get private anonymous", "GET", "/api/repos/alice/secret", "", "", 404},
		{"get private other", "GET", "/api/repos/alice/secret", f.carolW, "", 404},
		{"get private owner read", "GET", "/api/repos/alice/secret", f.aliceR, "", 200},
		{"get private admin", "GET", "/api/repos/alice/secret", f.admin, "", 200},
		{"get org private member", "GET", "/api/repos/acme/widgets", f.bobW, "", 200},
		{"get missing", "GET", "/api/repos/alice/none", f.aliceW, "", 404},
		{"get bad name", "GET", "/api/repos/alice/..", f.aliceW, "", 404}, // the mux cleans the path
		{"get invalid name", "GET", "/api/repos/alice/a%20b", f.aliceW, "", 400},

		{"patch no field", "PATCH", "/api/repos/alice/secret", f.aliceW, `{}`, 400},
		{"patch read token", "PATCH", "/api/repos/alice/secret", f.aliceR, `{"public":true}`, 403},
		{"patch unreadable", "PATCH", "/api/repos/alice/secret", f.carolW, `{"public":true}`, 404},
		{"patch readable not writable", "PATCH", "/api/repos/alice/open", f.carolW, `{"public":false}`, 403},
		{"patch anonymous", "PATCH", "/api/repos/alice/open", "", `{"public":false}`, 401},
		{"patch missing", "PATCH", "/api/repos/alice/none", f.aliceW, `{"public":false}`, 404},
	})

	// Listing shows what the caller may read.
	names := func(auth string) []string {
		var rs []repoJSON
		r := f.do("GET", "/api/repos/alice", auth, "")
		if r.status != 200 {
			t.Fatalf("list: %d %s", r.status, r.body)
		}
		r.json(t, &rs)
		var out []string
		for _, x := range rs {
			out = append(out, x.Name)
		}
		return out
	}
	if got := strings.Join(names(""), ","); got != "open" {
		t.Errorf("anonymous list = %s, want open", got)
	}
	if got := strings.Join(names(f.carolW), ","); got != "open" {
		t.Errorf("other tenant list = %s, want open", got)
	}
	if got := strings.Join(names(f.aliceR), ","); got != "open,secret" {
		t.Errorf("owner list = %s, want open,secret", got)
	}
	f.run([]step{{"list missing owner", "GET", "/api/repos/nobody", "", "", 404}})

	// PATCH makes it public and returns the repository.
	r := f.do("PATCH", "/api/repos/alice/secret.git", f.aliceW, `{"public":true}`)
	var repo repoJSON
	r.json(t, &repo)
	if r.status != 200 || !repo.Public || repo.FullName != "alice/secret" {
		t.Errorf("patch: %d %s", r.status, r.body)
	}
	f.run([]step{{"now public", "GET", "/api/repos/alice/secret", "", "", 200}})

	// Push protection: off by default, set alone or with the visibility,
	// refused to a read token and for a non-boolean.
	if repo.PushProtection {
		t.Errorf("push protection on by default: %s", r.body)
	}
	f.run([]step{
		{"push protection read token", "PATCH", "/api/repos/alice/secret", f.aliceR, `{"push_protection":true}`, 403},
		{"push protection not a bool", "PATCH", "/api/repos/alice/secret", f.aliceW, `{"push_protection":"on"}`, 400},
	})
	r = f.do("PATCH", "/api/repos/alice/secret", f.aliceW, `{"push_protection":true}`)
	repo = repoJSON{}
	r.json(t, &repo)
	if r.status != 200 || !repo.PushProtection || !repo.Public {
		t.Errorf("patch push protection: %d %s", r.status, r.body)
	}
	r = f.do("PATCH", "/api/repos/alice/secret", f.aliceW, `{"push_protection":false,"public":false}`)
	repo = repoJSON{}
	r.json(t, &repo)
	if r.status != 200 || repo.PushProtection || repo.Public {
		t.Errorf("patch both: %d %s", r.status, r.body)
	}
	f.do("PATCH", "/api/repos/alice/secret", f.aliceW, `{"public":true}`)

	// Replace refs: refused by default, allowed and refused again.
	if repo.AllowReplaceRefs {
		t.Errorf("replace refs allowed by default: %s", r.body)
	}
	f.run([]step{{"replace refs read token", "PATCH", "/api/repos/alice/secret", f.aliceR, `{"allow_replace_refs":true}`, 403}})
	for _, on := range []bool{true, false} {
		r = f.do("PATCH", "/api/repos/alice/secret", f.aliceW, fmt.Sprintf(`{"allow_replace_refs":%v}`, on))
		repo = repoJSON{}
		r.json(t, &repo)
		if r.status != 200 || repo.AllowReplaceRefs != on {
			t.Errorf("patch replace refs %v: %d %s", on, r.status, r.body)
		}
	}

	// Fork: read on the source, write on the destination owner.
	f.run([]step{
		{"fork anonymous", "POST", "/api/repos/alice/open/fork", "", `{}`, 401},
		{"fork unreadable source", "POST", "/api/repos/acme/widgets/fork", f.carolW, `{}`, 404},
		{"fork into unwritable owner", "POST", "/api/repos/alice/open/fork", f.carolW, `{"owner":"alice","name":"copy"}`, 403},
		{"fork into missing owner", "POST", "/api/repos/alice/open/fork", f.carolW, `{"owner":"nobody"}`, 404},
		{"fork bad body", "POST", "/api/repos/alice/open/fork", f.carolW, `{"owner":1}`, 400},
		{"fork to own tenant (defaults)", "POST", "/api/repos/alice/open/fork", f.carolW, `{}`, 201},
		{"fork again exists", "POST", "/api/repos/alice/open/fork", f.carolW, `{}`, 409},
		{"fork bad dest name", "POST", "/api/repos/alice/open/fork", f.carolW, `{"name":"x.git"}`, 400},
		{"fork missing source", "POST", "/api/repos/alice/none/fork", f.carolW, `{}`, 404},
		{"member forks org repo into org", "POST", "/api/repos/acme/widgets/fork", f.bobW, `{"owner":"acme","name":"widgets2"}`, 201},
	})
	r = f.do("GET", "/api/repos/carol/open", f.carolW, "")
	r.json(t, &repo)
	if r.status != 200 || repo.ForkedFrom != "alice/open" || repo.Owner != "carol" {
		t.Errorf("fork: %d %s", r.status, r.body)
	}

	// Delete.
	f.run([]step{
		{"delete anonymous", "DELETE", "/api/repos/alice/open", "", "", 401},
		{"delete readable not writable", "DELETE", "/api/repos/alice/open", f.carolW, "", 403},
		{"delete read token", "DELETE", "/api/repos/alice/open", f.aliceR, "", 403},
		{"delete org repo by member", "DELETE", "/api/repos/acme/widgets2", f.bobW, "", 204},
		{"delete", "DELETE", "/api/repos/alice/open.git", f.aliceW, "", 204},
		{"delete again", "DELETE", "/api/repos/alice/open", f.aliceW, "", 404},
		{"gone", "GET", "/api/repos/alice/open", f.aliceW, "", 404},
		{"recreate", "POST", "/api/repos/alice", f.aliceW, `{"name":"open"}`, 201},
	})
}
