package server_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/meta"
)

// TestPullConversationAccess: who may read and write a pull request's
// conversation through the API, on a private and a public repository:
// readers read; a write token of anyone who can read comments and
// reviews; anonymous callers and read tokens change nothing; a private
// repository answers a stranger as a missing one. Only the author edits
// a comment; the repository's owner deletes anyone's.
func TestPullConversationAccess(t *testing.T) {
	e := newPullEnv(t)
	ctx := context.Background()
	m := e.srv.Meta()
	read, _, err := m.CreateToken(ctx, "alice", meta.ScopeRead, "read")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateTenant(ctx, "bob", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	bob, _, err := m.CreateToken(ctx, "bob", meta.ScopeWrite, "bob")
	if err != nil {
		t.Fatal(err)
	}
	e.branch("topic", "b.txt")
	if _, err := m.CreateRepo(ctx, "alice", "pub", true); err != nil {
		t.Fatal(err)
	}
	pubRemote := strings.Replace(e.remote, "/alice/app.git", "/alice/pub.git", 1)
	git(t, e.work, "push", "-q", pubRemote, "main")
	dir := t.TempDir()
	git(t, dir, "clone", "-q", e.remote, ".")
	git(t, dir, "push", "-q", pubRemote, "origin/topic:refs/heads/topic")
	if code, b := e.api("POST", "/api/repos/alice/pub/pulls", e.tok, map[string]string{"title": "t", "head": "topic", "base": "main"}); code != 201 {
		t.Fatalf("create in pub: %d %s", code, b)
	}
	ids := map[string]string{}
	for _, repo := range []string{"app", "pub"} {
		base := "/api/repos/alice/" + repo
		code, b := e.api("POST", base+"/issues/1/comments", e.tok, map[string]string{"body": "first"})
		var c struct{ ID uint64 }
		if json.Unmarshal(b, &c); code != 201 || c.ID == 0 {
			t.Fatalf("%s: comment: %d %s", repo, code, b)
		}
		ids[repo+"c"] = strconv.FormatUint(c.ID, 10)
		code, b = e.api("POST", base+"/pulls/1/comments", e.tok, map[string]any{"body": "this line", "path": "b.txt", "line": 1})
		if json.Unmarshal(b, &c); code != 201 || c.ID == 0 {
			t.Fatalf("%s: line comment: %d %s", repo, code, b)
		}
		ids[repo+"l"] = strconv.FormatUint(c.ID, 10)
		code, b = e.api("POST", base+"/pulls/1/reviews", e.tok, map[string]any{"event": "COMMENT", "body": "looks fine"})
		if json.Unmarshal(b, &c); code != 200 || c.ID == 0 {
			t.Fatalf("%s: review: %d %s", repo, code, b)
		}
		ids[repo+"r"] = strconv.FormatUint(c.ID, 10)
	}
	type route struct {
		method, path string
		body         any
		write        bool
	}
	callers := []struct{ name, token string }{{"anonymous", ""}, {"read", read}, {"other tenant", bob}, {"write", e.tok}}
	for _, repo := range []string{"app", "pub"} {
		public := repo == "pub"
		routes := []route{
			{"GET", "/issues/1/comments", nil, false},
			{"GET", "/issues/comments/" + ids[repo+"c"], nil, false},
			{"GET", "/pulls/1/comments", nil, false},
			{"GET", "/pulls/comments/" + ids[repo+"l"], nil, false},
			{"GET", "/pulls/1/reviews", nil, false},
			{"GET", "/pulls/1/reviews/" + ids[repo+"r"], nil, false},
			{"POST", "/issues/1/comments", map[string]string{"body": "hi"}, true},
			{"POST", "/pulls/1/comments", map[string]any{"body": "here", "path": "b.txt", "line": 1}, true},
			{"POST", "/pulls/1/comments/" + ids[repo+"l"] + "/replies", map[string]string{"body": "re"}, true},
			{"POST", "/pulls/1/reviews", map[string]string{"event": "COMMENT", "body": "ok"}, true},
		}
		for _, rt := range routes {
			for _, c := range callers {
				var want int
				switch {
				case !public && c.name == "other tenant":
					want = 404
				case !public && c.name == "anonymous" && !rt.write:
					want = 404
				case c.name == "anonymous" && rt.write:
					want = 401
				case c.name == "read" && rt.write:
					want = 403
				case rt.write && rt.method == "POST" && !strings.HasSuffix(rt.path, "/reviews"):
					want = 201
				default:
					want = 200
				}
				code, b := e.api(rt.method, "/api/repos/alice/"+repo+rt.path, c.token, rt.body)
				if code != want {
					t.Errorf("%s %s %s as %s: %d, want %d (%s)", repo, rt.method, rt.path, c.name, code, want, b)
				}
			}
		}
	}
	// bob's comment on pub: alice (the owner) deletes it, bob edits only
	// his own, and a stranger's edit of alice's is refused.
	code, b := e.api("POST", "/api/repos/alice/pub/issues/1/comments", bob, map[string]string{"body": "spam"})
	var c struct{ ID uint64 }
	json.Unmarshal(b, &c)
	if code != 201 {
		t.Fatalf("bob comments: %d %s", code, b)
	}
	bobs := strconv.FormatUint(c.ID, 10)
	if code, b := e.api("PATCH", "/api/repos/alice/pub/issues/comments/"+ids["pubc"], bob, map[string]string{"body": "mine now"}); code != 403 {
		t.Errorf("bob edits alice's comment: %d %s", code, b)
	}
	if code, b := e.api("PATCH", "/api/repos/alice/pub/issues/comments/"+bobs, bob, map[string]string{"body": "spam, edited"}); code != 200 {
		t.Errorf("bob edits his comment: %d %s", code, b)
	}
	if code, b := e.api("DELETE", "/api/repos/alice/pub/issues/comments/"+ids["pubc"], bob, nil); code != 403 {
		t.Errorf("bob deletes alice's comment: %d %s", code, b)
	}
	if code, b := e.api("DELETE", "/api/repos/alice/pub/issues/comments/"+bobs, e.tok, nil); code != 204 {
		t.Errorf("the owner deletes bob's comment: %d %s", code, b)
	}
	if code, _ := e.api("GET", "/api/repos/alice/pub/issues/comments/"+bobs, e.tok, nil); code != 404 {
		t.Errorf("a deleted comment: %d", code)
	}
	// An id of another repository, or of another kind, is not found.
	if code, _ := e.api("GET", "/api/repos/alice/pub/issues/comments/"+ids["appc"], e.tok, nil); code != 404 {
		t.Errorf("app's comment through pub: %d", code)
	}
	if code, _ := e.api("GET", "/api/repos/alice/app/pulls/comments/"+ids["appc"], e.tok, nil); code != 404 {
		t.Errorf("a comment's id as a line comment's: %d", code)
	}
	// Only writers dismiss; bad input is 400 or 422 and writes nothing.
	if code, _ := e.api("PUT", "/api/repos/alice/pub/pulls/1/reviews/"+ids["pubr"]+"/dismissals", bob, map[string]string{"message": "no"}); code != 403 {
		t.Errorf("bob dismisses: %d", code)
	}
	for _, bad := range []map[string]any{
		{"event": "MERGE", "body": "x"},
		{"body": "no event"},
		{"event": "COMMENT"},
		{"event": "COMMENT", "body": "x", "comments": []map[string]any{{"path": "b.txt", "line": 99, "body": "past the end"}}},
	} {
		if code, b := e.api("POST", "/api/repos/alice/app/pulls/1/reviews", e.tok, bad); code != 400 && code != 422 {
			t.Errorf("review %v: %d %s", bad, code, b)
		}
	}
	if code, b := e.api("GET", "/api/repos/alice/app/pulls/1/reviews", e.tok, nil); code != 200 || strings.Count(string(b), `"id"`) != 2 {
		t.Errorf("reviews after the refused ones: %d %s", code, b)
	}
	// The secret-scanning alerts in the pull request's commits: its
	// writers see them; a reader does not.
	topic := git(t, dir, "rev-parse", "origin/topic")
	if code, b := e.api("GET", "/api/repos/alice/app/pulls/1/secret-scanning-alerts", e.tok, nil); code != 200 || !strings.Contains(string(b), `"alerts":[]`) {
		t.Errorf("alerts before any: %d %s", code, b)
	}
	if err := e.srv.Alerts().Record(ctx, "alice", e.repo.ID, []alerts.Finding{{RuleID: "generic-api-key", Description: "Generic API key",
		Commit: topic, Path: "b.txt", Line: 1, BlobID: strings.Repeat("ab", 20), Match: "key = REDACTED", Secret: "s3cr3t-value-1"}}, alerts.RunRef{}); err != nil {
		t.Fatal(err)
	}
	if code, b := e.api("GET", "/api/repos/alice/app/pulls/1/secret-scanning-alerts", e.tok, nil); code != 200 || strings.Count(string(b), `"rule_id":"generic-api-key","description"`) != 1 {
		t.Errorf("alerts of the pull request: %d %s", code, b)
	}
	if code, b := e.api("GET", "/api/repos/alice/app/pulls/1/secret-scanning-alerts", read, nil); code != 404 {
		t.Errorf("alerts as a reader: %d %s", code, b)
	}
}

// TestPullRequiredApprovalsAPI: a branch rule's required approval holds a
// merge through the API with GitHub's 405 and words until another writer
// (a member of the owning org) approves; the author's own approval is
// refused.
func TestPullRequiredApprovalsAPI(t *testing.T) {
	e := newPullEnv(t)
	ctx := context.Background()
	m := e.srv.Meta()
	if _, err := m.CreateTenant(ctx, "acme", meta.KindOrg); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateTenant(ctx, "carol", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "carol"} {
		if err := m.AddMember(ctx, "acme", u); err != nil {
			t.Fatal(err)
		}
	}
	carol, _, err := m.CreateToken(ctx, "carol", meta.ScopeWrite, "carol")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateRepo(ctx, "acme", "lib", false); err != nil {
		t.Fatal(err)
	}
	if err := m.SetBranchRules(ctx, "acme", "lib", []access.BranchRule{{Pattern: "main", RequiredApprovals: 1}}); err != nil {
		t.Fatal(err)
	}
	remote := strings.Replace(e.remote, "/alice/app.git", "/acme/lib.git", 1)
	git(t, e.work, "push", "-q", remote, "main")
	git(t, e.work, "checkout", "-q", "-b", "topic")
	writeFile(t, e.work, "t.txt", "t\n")
	git(t, e.work, "add", "t.txt")
	git(t, e.work, "commit", "-q", "-m", "t")
	git(t, e.work, "push", "-q", remote, "topic")
	if code, b := e.api("POST", "/api/repos/acme/lib/pulls", e.tok, map[string]string{"title": "t", "head": "topic", "base": "main"}); code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}
	if code, b := e.api("PUT", "/api/repos/acme/lib/pulls/1/merge", e.tok, nil); code != 405 || !strings.Contains(string(b), "At least 1 approving review is required") {
		t.Fatalf("merge without approval: %d %s", code, b)
	}
	if code, b := e.api("GET", "/api/repos/acme/lib/pulls/1", e.tok, nil); code != 200 || !strings.Contains(string(b), `"mergeable_state":"blocked"`) {
		t.Fatalf("pull request without approval: %d %s", code, b)
	}
	if code, b := e.api("POST", "/api/repos/acme/lib/pulls/1/reviews", e.tok, map[string]string{"event": "APPROVE"}); code != 400 {
		t.Fatalf("the author approves: %d %s", code, b)
	}
	if code, b := e.api("POST", "/api/repos/acme/lib/pulls/1/reviews", carol, map[string]string{"event": "APPROVE"}); code != 200 || !strings.Contains(string(b), `"state":"APPROVED"`) {
		t.Fatalf("carol approves: %d %s", code, b)
	}
	if code, b := e.api("PUT", "/api/repos/acme/lib/pulls/1/merge", e.tok, nil); code != 200 {
		t.Fatalf("merge with carol's approval: %d %s", code, b)
	}
}
