package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/wal"
)

var firstBranchRE = regexp.MustCompile(`<h2>Branches</h2><ul><li><a href="[^"]*">([^<]*)</a>( <span class="badge" id="default-mark">default</span>)?`)

// TestDefaultBranchForm: the settings form offers the branches and sets
// an existing one as the default (docs/adr/0110-default-branch.md); a
// missing one is refused with the API's words and nothing changes; the
// repository page then opens on that branch and lists it first, marked;
// and saving the other settings later does not fail when the branch is
// gone, nor sends it again.
func TestDefaultBranchForm(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	ctx := context.Background()
	// The log, which the API checks, has the branches the served copy has.
	log := f.meta.Log()
	if _, err := log.Commit(ctx, f.pub.ID, wal.Push{Transitions: []wal.Transition{
		{Ref: "refs/heads/feature/x", Old: wal.ZeroID, New: f.head},
		{Ref: "refs/heads/main", Old: wal.ZeroID, New: f.head},
	}, PushedBy: "test", Pack: strings.NewReader("")}); err != nil {
		t.Fatal(err)
	}
	if m := firstBranchRE.FindStringSubmatch(mustGet(t, f.client(), "/alice/pub")); m == nil || m[1] != "main" || m[2] == "" {
		t.Fatalf("before: first branch %q, want main (HEAD's) marked default, before feature/x", m)
	}
	alice := f.signedIn(f.alice)
	body := mustGet(t, alice, "/alice/pub/-/settings")
	if !strings.Contains(body, `<option value="feature/x">`) || !strings.Contains(body, `placeholder="main"`) || !strings.Contains(body, "Not set: the server picks <code>main</code>") {
		t.Fatalf("settings page does not offer the branches:\n%s", body)
	}
	csrf := csrfOf(t, body)
	save := func(form url.Values) (int, string) {
		t.Helper()
		form.Set("csrf", csrf)
		req, _ := http.NewRequest("POST", f.srv.URL+"/alice/pub/-/settings", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res := alice.do(req)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := save(url.Values{"visibility": {"private"}, "default_branch": {"nope"}}); code != http.StatusBadRequest || !strings.Contains(body, "no such branch") {
		t.Fatalf("a missing branch: %d\n%s", code, body)
	}
	if r, _ := f.meta.Repo(ctx, "alice", "pub"); r.DefaultBranch != "" || !r.Public {
		t.Fatalf("a refused form changed the repository: %+v", r)
	}
	if code, body := save(url.Values{"visibility": {"public"}, "default_branch": {"feature/x"}}); code != http.StatusSeeOther {
		t.Fatalf("save: %d\n%s", code, body)
	}
	if r, _ := f.meta.Repo(ctx, "alice", "pub"); r.DefaultBranch != "feature/x" {
		t.Fatalf("after save: %+v", r)
	}
	page := mustGet(t, f.client(), "/alice/pub")
	if m := firstBranchRE.FindStringSubmatch(page); m == nil || m[1] != "feature/x" || m[2] == "" {
		t.Errorf("first branch %q, want feature/x marked default", m)
	}
	if !strings.Contains(page, `<span class="branch">feature/x</span>`) || !strings.Contains(page, "/-/tree/feature/x/src") {
		t.Error("the repository page does not open on the default branch")
	}
	if body := mustGet(t, alice, "/alice/pub/-/settings"); !strings.Contains(body, `value="feature/x" placeholder`) || strings.Contains(body, "Not set") {
		t.Error("the settings page does not show the setting")
	}

	// The branch goes (a push raced the change): the page falls back to
	// what HEAD names, and saving the other settings still works.
	x, _ := log.Head(ctx, f.pub.ID)
	if _, err := log.Commit(ctx, f.pub.ID, wal.Push{Transitions: []wal.Transition{
		{Ref: "refs/heads/feature/x", Old: x.Ref("refs/heads/feature/x"), New: wal.ZeroID},
	}, PushedBy: "test", Pack: strings.NewReader("")}); err != nil {
		t.Fatal(err)
	}
	if code, body := save(url.Values{"visibility": {"private"}, "default_branch": {"feature/x"}, "default_branch_was": {"feature/x"}}); code != http.StatusSeeOther {
		t.Fatalf("saving with the default branch gone: %d\n%s", code, body)
	}
	if r, _ := f.meta.Repo(ctx, "alice", "pub"); r.Public || r.DefaultBranch != "feature/x" {
		t.Fatalf("after saving the visibility: %+v", r)
	}
	f.cache.mu.Lock()
	bare := f.cache.m[f.pub.ID]
	f.cache.mu.Unlock()
	gittest.Git(t, gittest.Env(t.TempDir()), bare, "update-ref", "-d", "refs/heads/feature/x")
	page = mustGet(t, alice, "/alice/pub")
	if m := firstBranchRE.FindStringSubmatch(page); m == nil || m[1] != "main" || m[2] == "" {
		t.Errorf("with the default branch gone: first branch %q, want main marked default", m)
	}
}

func mustGet(t *testing.T, c *client, path string) string {
	t.Helper()
	res, body := c.get(path)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, res.StatusCode)
	}
	return body
}
