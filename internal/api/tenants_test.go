package api

import (
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/testkit"
)

// TestStorageOutageIs503 is issue 8 §3 over the API: while the store
// fails, callers whose rights depend on the failing records get 503 (not
// 404, 403 or a silently shortened list), the body does not leak the
// store's error, and a log line records it.
func TestStorageOutageIs503(t *testing.T) {
	objects := &testkit.FailGet{Store: memstore.New()}
	var logs testkit.Buffer
	f := newFixtureOn(t, objects, slog.New(slog.NewTextHandler(&logs, nil)))
	f.run([]step{
		{"create org repo", "POST", "/api/repos/acme", f.bobW, `{"name":"secret"}`, 201},
		{"create owner repo", "POST", "/api/repos/alice", f.aliceW, `{"name":"mine"}`, 201},
		{"member reads", "GET", "/api/repos/acme/secret", f.bobW, "", 200},
	})

	objects.Fail("meta/members/")
	f.run([]step{
		{"member get", "GET", "/api/repos/acme/secret", f.bobW, "", 503},
		{"member list", "GET", "/api/repos/acme", f.bobW, "", 503},
		{"member create", "POST", "/api/repos/acme", f.bobW, `{"name":"new"}`, 503},
		{"member patch", "PATCH", "/api/repos/acme/secret", f.bobW, `{"public":true}`, 503},
		{"member delete", "DELETE", "/api/repos/acme/secret", f.bobW, "", 503},
		{"fork into org", "POST", "/api/repos/alice/mine/fork", f.admin, `{"owner":"acme"}`, 201}, // admin needs no membership
		{"member forks into org", "POST", "/api/repos/acme/secret/fork", f.bobW, `{"owner":"acme","name":"copy"}`, 503},
		{"owner unaffected", "GET", "/api/repos/alice/mine", f.aliceW, "", 200},
	})
	r := f.do("GET", "/api/repos/acme/secret", f.bobW, "")
	if strings.Contains(string(r.body), "meta/") || strings.Contains(string(r.body), "refused") || !strings.Contains(string(r.body), "unavailable") {
		t.Errorf("503 body %s: want plain words, no store internals", r.body)
	}
	if l := logs.String(); !strings.Contains(l, "api request failed") || !strings.Contains(l, "status=503") || !strings.Contains(l, "connection refused") {
		t.Errorf("no log line for the outage:\n%s", l)
	}

	// The tenant records: the owner's token cannot be checked.
	objects.Fail("meta/tenants/")
	f.run([]step{{"owner get during tenant outage", "GET", "/api/repos/alice/mine", f.aliceW, "", 503}})

	objects.Heal()
	f.run([]step{{"healed", "GET", "/api/repos/acme/secret", f.bobW, "", 200}})
}

// TestRemoveMemberAPI: after DELETE /api/tenants/{org}/members/{user} the
// user can neither see nor change the org's private repositories.
func TestRemoveMemberAPI(t *testing.T) {
	f := newFixture(t)
	f.run([]step{
		{"create org repo", "POST", "/api/repos/acme", f.admin, `{"name":"secret"}`, 201},
		{"member reads", "GET", "/api/repos/acme/secret", f.bobW, "", 200},
		{"member lists", "GET", "/api/repos/acme", f.bobW, "", 200},
		{"remove needs admin", "DELETE", "/api/tenants/acme/members/bob", f.bobW, "", 403},
		{"remove anonymous", "DELETE", "/api/tenants/acme/members/bob", "", "", 401},
		{"remove", "DELETE", "/api/tenants/acme/members/bob", f.admin, "", 204},
		{"removed member reads", "GET", "/api/repos/acme/secret", f.bobW, "", 404},
		{"removed member patches", "PATCH", "/api/repos/acme/secret", f.bobW, `{"public":true}`, 404},
		{"removed member deletes", "DELETE", "/api/repos/acme/secret", f.bobW, "", 404},
		{"removed member creates", "POST", "/api/repos/acme", f.bobW, `{"name":"x"}`, 403},
		{"remove again", "DELETE", "/api/tenants/acme/members/bob", f.admin, "", 404},
		{"remove from a user", "DELETE", "/api/tenants/alice/members/bob", f.admin, "", 400},
		{"remove from missing org", "DELETE", "/api/tenants/nobody/members/bob", f.admin, "", 404},
	})
	var rs []repoJSON
	f.do("GET", "/api/repos/acme", f.bobW, "").json(t, &rs)
	if len(rs) != 0 {
		t.Errorf("removed member still lists %v", rs)
	}
}

// TestDeleteTenantAPI: a tenant owning repositories is refused (409)
// unless forced; afterwards its tokens are 401 at once.
func TestDeleteTenantAPI(t *testing.T) {
	f := newFixture(t)
	f.run([]step{
		{"create", "POST", "/api/repos/alice", f.aliceW, `{"name":"proj"}`, 201},
		{"delete needs admin", "DELETE", "/api/tenants/alice", f.aliceW, "", 403},
		{"delete owner", "DELETE", "/api/tenants/alice", f.admin, "", 409},
		{"still works", "GET", "/api/repos/alice/proj", f.aliceW, "", 200},
		{"bad force", "DELETE", "/api/tenants/alice?force=maybe", f.admin, "", 400},
		{"forced", "DELETE", "/api/tenants/alice?force=true", f.admin, "", 204},
		{"token dead", "GET", "/api/repos/carol", f.aliceW, "", 401},
		{"read token dead", "GET", "/api/repos/carol", f.aliceR, "", 401},
		{"write dead", "POST", "/api/repos/carol", f.aliceW, `{"name":"x"}`, 401},
		{"repo gone", "GET", "/api/repos/alice/proj", f.admin, "", 404},
		{"tenant gone", "GET", "/api/repos/alice", f.admin, "", 404},
		{"again", "DELETE", "/api/tenants/alice", f.admin, "", 404},
		{"no repos", "DELETE", "/api/tenants/carol", f.admin, "", 204},
		{"carol dead", "GET", "/api/repos/bob", f.carolW, "", 401},
	})
	f.run([]step{
		{"force=1", "DELETE", "/api/tenants/bob?force=1", f.admin, "", 204},
		{"org without repositories", "DELETE", "/api/tenants/acme", f.admin, "", 204},
	})
}

// goWords matches what encoding/json's messages say and API users should
// never read.
var goWords = regexp.MustCompile(`json:|\bGo\b|\bstruct\b|unmarshal|of type|\b(bool|int|int64|float64)\b|\[\]`)

// TestJSONErrorsInPlainWords: a malformed body is described in terms of
// the API's fields and JSON's kinds, never encoding/json's Go type names.
func TestJSONErrorsInPlainWords(t *testing.T) {
	f := newFixture(t)
	f.run([]step{{"create", "POST", "/api/repos/alice", f.aliceW, `{"name":"proj"}`, 201}})
	tests := []struct {
		method, path, body string
		want               string
	}{
		{"POST", "/api/repos/alice", `{"name":"x","public":"yes"}`, `field "public" must be a boolean`},
		{"POST", "/api/repos/alice", `{"name":5}`, `field "name" must be a string`},
		{"PATCH", "/api/repos/alice/proj", `{"public":"true"}`, `field "public" must be a boolean`},
		{"PATCH", "/api/repos/alice/proj", `{"public":{}}`, `field "public" must be a boolean`},
		{"POST", "/api/repos/alice/proj/fork", `{"owner":1}`, `field "owner" must be a string`},
		{"POST", "/api/tenants/alice/tokens", `{"scope":["write"]}`, `field "scope" must be a string`},
		{"POST", "/api/repos/alice", `["x"]`, `must be a JSON object`},
		{"POST", "/api/repos/alice", `"x"`, `must be a JSON object`},
		{"POST", "/api/repos/alice", `{"name":`, `not valid JSON`},
		{"POST", "/api/repos/alice", `{"name" "x"}`, `not valid JSON`},
		{"POST", "/api/repos/alice", `{"publc":true}`, `unknown field "publc"`},
		{"POST", "/api/repos/alice", `{"name":"x"} {}`, `data after the JSON object`},
	}
	big := `{"name":"` + strings.Repeat("x", MaxBodyBytes) + `"}`
	r := f.do("POST", "/api/repos/alice", f.aliceW, big)
	var e errorBody
	r.json(t, &e)
	if r.status != 413 || e.Error != "request body larger than 1048576 bytes" {
		t.Errorf("oversized body: %d %q", r.status, e.Error)
	}
	for _, tt := range tests {
		auth := f.aliceW
		if strings.Contains(tt.path, "tokens") {
			auth = f.admin
		}
		r := f.do(tt.method, tt.path, auth, tt.body)
		var e errorBody
		r.json(t, &e)
		if r.status != 400 || !strings.Contains(e.Error, tt.want) {
			t.Errorf("%s %s %s: %d %q, want 400 containing %q", tt.method, tt.path, tt.body, r.status, e.Error, tt.want)
		}
		if leak := goWords.FindString(e.Error); leak != "" {
			t.Errorf("%s %s %s: error %q shows %q", tt.method, tt.path, tt.body, e.Error, leak)
		}
	}
}
