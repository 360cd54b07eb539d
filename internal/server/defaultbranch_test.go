package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/wal"
)

// TestDefaultBranch is the default-branch setting through real git
// clients over HTTP (docs/adr/0110-default-branch.md): set through the
// API, only to an existing branch; a clone over protocol v0 and v2 checks
// it out, on the node that took the change and on another node whose
// cache had HEAD elsewhere, and SSH advertises it; a push may not delete it; and a setting whose branch went
// missing (deleted in a race with the change) serves the server's own
// choice until the branch is pushed again.
func TestDefaultBranch(t *testing.T) {
	ctx := context.Background()
	store, err := fsstore.Open(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	node := func() (*server.Server, string) {
		s, err := server.New(ctx, server.Options{Store: store, CacheDir: filepath.Join(t.TempDir(), "cache")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		ts := httptest.NewServer(s.Handler()) // 127.0.0.1
		t.Cleanup(ts.Close)
		return s, ts.URL
	}
	srv1, first := node()
	_, second := node()
	tok, repo := seed(t, srv1)

	remote := func(base string) string {
		return "http://x:" + tok + "@" + strings.TrimPrefix(base, "http://") + "/alice/demo.git"
	}
	src := t.TempDir()
	git(t, src, "init", "-q", "-b", "main")
	git(t, src, "commit", "-q", "--allow-empty", "-m", "one")
	git(t, src, "branch", "dev")
	git(t, src, "branch", "tmp")
	git(t, src, "push", "-q", remote(first), "main", "dev", "tmp")

	patch := func(body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("PATCH", first+"/api/repos/alice/demo", strings.NewReader(body))
		req.SetBasicAuth("x", tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	// head says which branch HEAD names, as ls-remote over protocol v
	// sees it (v0: the symref capability; v2: ls-refs symrefs); with
	// clone, it also clones and says which branch was checked out.
	head := func(base, v string, clone bool) string {
		t.Helper()
		dir := t.TempDir()
		symref := git(t, dir, "-c", "protocol.version="+v, "ls-remote", "--symref", remote(base), "HEAD")
		symref, _, _ = strings.Cut(symref, "\n")
		ref, ok := strings.CutSuffix(strings.TrimPrefix(symref, "ref: refs/heads/"), "\tHEAD")
		if !ok {
			t.Fatalf("ls-remote --symref HEAD = %q", symref)
		}
		if !clone {
			return ref
		}
		git(t, dir, "-c", "protocol.version="+v, "clone", "-q", remote(base), "c")
		if got := git(t, filepath.Join(dir, "c"), "branch", "--show-current"); got != ref {
			return "ls-remote " + ref + ", clone " + got
		}
		return ref
	}
	expect := func(what, want, base, v string, clone bool) {
		t.Helper()
		if got := head(base, v, clone); got != want {
			t.Errorf("%s, node %s, protocol v%s: HEAD is %s, want %s", what, base, v, got, want)
		}
	}
	expect("unset", "main", first, "2", false)

	for _, tc := range []struct {
		body, want string
	}{
		{`{"default_branch":"nope"}`, "no such branch"},
		{`{"default_branch":"a..b"}`, "not a valid branch name"},
		{`{"default_branch":""}`, "empty branch name"},
		{`{"default_branch":"refs/heads/dev"}`, "no such branch"},
		{`{"default_branch":"nope","public":true}`, "no such branch"},
	} {
		if code, body := patch(tc.body); code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("PATCH %s = %d %s; want 400 %q", tc.body, code, body, tc.want)
		}
	}
	if r, err := srv1.Meta().Repo(ctx, "alice", "demo"); err != nil || r.DefaultBranch != "" || r.Public {
		t.Fatalf("refused changes changed the record: %+v, %v", r, err)
	}
	if code, body := patch(`{"default_branch":"dev"}`); code != http.StatusOK || !strings.Contains(body, `"default_branch":"dev"`) {
		t.Fatalf("PATCH dev = %d %s", code, body)
	}
	// The second node's cache had HEAD at main: it learns the change
	// from the record at its next request.
	expect("dev", "dev", first, "0", true)
	expect("dev", "dev", second, "2", true)
	// Over SSH too: the symref capability of the v0 advertisement.
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv1.Meta().AddSSHKey(ctx, "alice", "test", ssh.MarshalAuthorizedKey(key.PublicKey())); err != nil {
		t.Fatal(err)
	}
	sess, err := serveSSH(t, srv1, key).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	sess.Stdin = strings.NewReader("0000")
	if adv, err := sess.Output("git-upload-pack 'alice/demo.git'"); err != nil || !strings.Contains(string(adv), "symref=HEAD:refs/heads/dev") {
		t.Errorf("SSH advertisement (%v):\n%s", err, adv)
	}

	// A push may not delete the default branch; another branch it may.
	out, err := gittest.Combined(gitEnv(t), src, nil, "push", remote(first), ":dev")
	if err == nil || !strings.Contains(out, "deletion of the current branch prohibited") || !strings.Contains(out, "--default-branch") {
		t.Fatalf("deleting the default branch by push: %v\n%s", err, out)
	}
	git(t, src, "push", "-q", remote(second), ":main")

	// The setting names a branch deleted behind its back (a push that
	// raced the change): HEAD falls back to the server's choice, dev
	// being the only branch left with tmp and first by name.
	if code, body := patch(`{"default_branch":"tmp"}`); code != http.StatusOK {
		t.Fatalf("PATCH tmp = %d %s", code, body)
	}
	expect("tmp", "tmp", second, "0", false)
	x, err := srv1.Log().Head(ctx, repo.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv1.Log().Commit(ctx, repo.ID, wal.Push{
		Transitions: []wal.Transition{{Ref: "refs/heads/tmp", Old: x.Ref("refs/heads/tmp"), New: wal.ZeroID}},
		PushedBy:    "race", Pack: strings.NewReader(""),
	}); err != nil {
		t.Fatal(err)
	}
	expect("tmp deleted", "dev", second, "2", false)
	git(t, src, "push", "-q", remote(first), "tmp")
	expect("tmp pushed again", "tmp", first, "0", false)
}
