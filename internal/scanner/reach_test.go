package scanner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/secretscan"
)

// TestRunsFindWhatDiffsMiss: push runs and a full run find secrets that
// no ordinary diff shows, and record each where it is: a commit message
// and a tag message at their objects, a blob tagged directly and a blob
// in a tagged tree under their tags (no commit), a file an evil merge
// adds at the merge, and a blob that a deleted branch left behind at no
// ref. The full run adds no alert.
func TestRunsFindWhatDiffsMiss(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	repo := f.repo("alice", "demo")
	remote := f.remote("alice", "demo")
	ctx := context.Background()
	s := f.scanner(scanner.Options{InitialShards: 2})
	w := f.worker(s, scanner.WorkerOptions{})
	pushRuns := func() {
		t.Helper()
		if _, err := s.Reconcile(ctx, "alice", repo.ID); err != nil {
			t.Fatal(err)
		}
		drain(t, s, w)
	}

	dir := t.TempDir()
	write := func(p, c string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hashObject := func(content string) string {
		write(".tmp", content)
		id := git(t, dir, "hash-object", "-w", ".tmp")
		os.Remove(filepath.Join(dir, ".tmp"))
		return id
	}
	git(t, dir, "init", "-q", "-b", "main")
	write("README", "hello\n")
	git(t, dir, "add", "README")
	git(t, dir, "commit", "-q", "-m", "the token is "+secret(10))
	msgCommit := git(t, dir, "rev-parse", "HEAD")
	git(t, dir, "push", "-q", remote, "main")

	blob := hashObject("key " + secret(11) + "\n")
	git(t, dir, "tag", "-a", "-m", "notes "+secret(12), "blobtag", blob)
	tagObj := git(t, dir, "rev-parse", "blobtag")
	inner := hashObject("x = " + secret(13) + "\n")
	sub := strings.TrimSpace(gitStdin(t, dir, "100644 blob "+inner+"\tk.txt\n", "mktree"))
	tree := strings.TrimSpace(gitStdin(t, dir, "040000 tree "+sub+"\tconf\n", "mktree"))
	git(t, dir, "tag", "-a", "-m", "a tree", "treetag", tree)
	git(t, dir, "push", "-q", remote, "blobtag", "treetag")

	git(t, dir, "checkout", "-q", "-b", "side")
	write("side.txt", "side\n")
	git(t, dir, "add", "side.txt")
	git(t, dir, "commit", "-q", "-m", "side")
	git(t, dir, "checkout", "-q", "main")
	git(t, dir, "merge", "-q", "--no-commit", "--no-ff", "side")
	write("evil.txt", "evil "+secret(14)+"\n")
	git(t, dir, "add", "evil.txt")
	git(t, dir, "commit", "-q", "-m", "merge side")
	merge := git(t, dir, "rev-parse", "HEAD")
	git(t, dir, "push", "-q", remote, "main")

	git(t, dir, "checkout", "-q", "-b", "tmp")
	write("tmp.txt", "tmp "+secret(15)+"\n")
	git(t, dir, "add", "tmp.txt")
	git(t, dir, "commit", "-q", "-m", "tmp")
	tmp := git(t, dir, "rev-parse", "HEAD")
	git(t, dir, "push", "-q", remote, "tmp")
	pushRuns()
	git(t, dir, "push", "-q", remote, ":tmp")
	// A blob pushed on a branch deleted before its push run scans it.
	git(t, dir, "checkout", "-q", "-b", "gone", "main")
	write("gone.txt", "gone "+secret(16)+"\n")
	git(t, dir, "add", "gone.txt")
	git(t, dir, "commit", "-q", "-m", "gone")
	gone := git(t, dir, "rev-parse", "HEAD:gone.txt")
	git(t, dir, "push", "-q", remote, "gone")
	git(t, dir, "push", "-q", remote, ":gone")
	pushRuns()

	loc := func(i int) alerts.Location {
		t.Helper()
		fp, err := f.srv.Alerts().Fingerprint(ctx, "alice", secret(i))
		if err != nil {
			t.Fatal(err)
		}
		a, err := f.srv.Alerts().Get(ctx, "alice", repo.ID, fp)
		if err != nil {
			t.Fatalf("secret %d has no alert: %v", i, err)
		}
		if len(a.Locations) != 1 {
			t.Errorf("secret %d: %d locations: %+v", i, len(a.Locations), a.Locations)
		}
		return a.Locations[0]
	}
	check := func() {
		t.Helper()
		if l := loc(10); l.Source != alerts.SourceCommitMessage || l.Commit != msgCommit || l.BlobID != msgCommit {
			t.Errorf("commit message: %+v", l)
		}
		if l := loc(11); l.Commit != "" || l.Ref != "refs/tags/blobtag" || l.BlobID != blob {
			t.Errorf("tagged blob: %+v", l)
		}
		if l := loc(12); l.Source != alerts.SourceTagMessage || l.BlobID != tagObj {
			t.Errorf("tag message: %+v", l)
		}
		if l := loc(13); l.Commit != "" || l.Ref != "refs/tags/treetag" || l.Path != "conf/k.txt" {
			t.Errorf("blob in a tagged tree: %+v", l)
		}
		if l := loc(14); l.Commit != merge || l.Path != "evil.txt" {
			t.Errorf("evil merge: %+v", l)
		}
		if l := loc(15); l.Commit != tmp || l.Path != "tmp.txt" {
			t.Errorf("branch scanned before its deletion: %+v", l)
		}
		if l := loc(16); l.Commit != "" || l.Ref != "" || l.Path != "" || l.BlobID != gone {
			t.Errorf("blob of a deleted branch: %+v", l)
		}
	}
	check()
	before := view(t, f.srv.Alerts(), "alice", repo.ID)
	if len(before) != 7 {
		t.Fatalf("%d alerts, want 7: %+v", len(before), before)
	}

	// The full run finds the same secrets; tmp.txt's blob is now
	// reachable from no ref, a second place of the same alert.
	if _, _, err := s.StartFull(ctx, "alice", repo.ID); err != nil {
		t.Fatal(err)
	}
	drain(t, s, w)
	after := view(t, f.srv.Alerts(), "alice", repo.ID)
	if len(after) != 7 {
		t.Fatalf("the full run changed the number of alerts: %d, want 7: %+v", len(after), after)
	}
	for i := 10; i <= 16; i++ {
		if i == 15 {
			continue
		}
		loc(i) // still one location each
	}

	// A full run alone, with no push run before it, finds the same.
	repo2 := f.repo("alice", "copy")
	git(t, dir, "push", "-q", f.remote("alice", "copy"), "main", "blobtag", "treetag")
	if _, _, err := s.StartFull(ctx, "alice", repo2.ID); err != nil {
		t.Fatal(err)
	}
	drain(t, s, w)
	for i := 10; i <= 14; i++ {
		fp, err := f.srv.Alerts().Fingerprint(ctx, "alice", secret(i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.srv.Alerts().Get(ctx, "alice", repo2.ID, fp); err != nil {
			t.Errorf("the full run alone did not find secret %d: %v", i, err)
		}
	}
}

// TestRejectedFindingSpared: a finding the alert store refuses for good
// (here a rule whose id is longer than a record keeps) is logged and
// skipped; the other findings of the same batch are recorded and the run
// completes instead of failing until its shard is parked.
func TestRejectedFindingSpared(t *testing.T) {
	long := strings.Repeat("x", 5000)
	cfg, err := secretscan.ParseConfig([]byte(fmt.Sprintf(`
[[rules]]
id = "%s"
regex = '''sk_live_[0-9a-z]{24}'''
keywords = ["sk_live_"]

[[rules]]
id = "github-pat"
regex = '''ghp_[0-9a-zA-Z]{36}'''
keywords = ["ghp_"]
`, long)))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	repo := f.repo("alice", "demo")
	ctx := context.Background()
	s := f.scanner(scanner.Options{Rules: cfg, InitialShards: 1})
	w := f.worker(s, scanner.WorkerOptions{})
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("k = sk_live_0123456789abcdefghijklmn\nt = "+secret(1)+"\n"), 0o644)
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "both")
	git(t, dir, "push", "-q", f.remote("alice", "demo"), "main")
	run, _, err := s.StartFull(ctx, "alice", repo.ID)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, s, w)
	st, err := s.Status(ctx, mustGet(t, s, run.Spec()))
	if err != nil || st.State != "done" || len(st.Parked) != 0 {
		t.Fatalf("run %+v (%v)", st, err)
	}
	got := view(t, f.srv.Alerts(), "alice", repo.ID)
	if len(got) != 1 || got[0].Rule != "github-pat" {
		t.Fatalf("alerts %+v: want the GitHub token's only", got)
	}
}

func gitStdin(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	return gittest.Input(t, gittest.Env(t.TempDir()), dir, strings.NewReader(stdin), args...)
}
