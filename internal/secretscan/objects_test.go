package secretscan

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ghost-scm/ghost/internal/gittest"
)

// TestScanObjectsQuarantine is push protection's call: blobs written to a
// quarantine object directory (as receive-pack does) are scanned by id and
// attributed over the new commits only.
func TestScanObjectsQuarantine(t *testing.T) {
	dir := t.TempDir()
	env := gittest.Env(t.TempDir())
	git := func(env []string, stdin string, args ...string) string {
		out, err := gittest.Run(env, dir, strings.NewReader(stdin), args...)
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(out)
	}
	git(env, "", "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(dir, "old.txt"), []byte("old "+"ghp_"+"Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8Ii9Jj0Kk1Ll2M\n"), 0o644)
	git(env, "", "add", "-A")
	git(env, "", "commit", "-q", "-m", "old")
	base := git(env, "", "rev-parse", "HEAD")

	quarantine := filepath.Join(t.TempDir(), "incoming")
	if err := os.MkdirAll(quarantine, 0o755); err != nil {
		t.Fatal(err)
	}
	qenv := []string{
		"GIT_OBJECT_DIRECTORY=" + quarantine,
		"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + filepath.Join(dir, ".git", "objects"),
	}
	qgit := append(append([]string(nil), env...), qenv...)
	blob := git(qgit, "line one\nkey "+fakePAT+"\n", "hash-object", "-w", "--stdin")
	tree := git(qgit, "100644 blob "+blob+"\tnew.txt\n", "mktree")
	commit := git(qgit, "", "commit-tree", tree, "-p", base, "-m", "push")
	if _, err := gittest.Run(env, dir, nil, "cat-file", "-e", blob); err == nil {
		t.Fatal("the blob leaked out of the quarantine")
	}

	e := defaultEngine(t)
	repo := Repo{Dir: dir, Env: qenv}
	ctx := context.Background()
	bs, err := e.ScanObjects(ctx, repo, []string{blob, blob, tree}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bs.Stats.BlobsScanned != 1 || bs.FindingBlobs() != 1 {
		t.Fatalf("stats %+v, finding blobs %d", bs.Stats, bs.FindingBlobs())
	}
	fs, err := bs.Attribute(ctx, repo, []string{commit, "--not", "--all"})
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Commit != commit || fs[0].Path != "new.txt" || fs[0].StartLine != 2 || fs[0].BlobID != blob {
		t.Fatalf("findings = %+v", fs)
	}
	if strings.Contains(fs[0].Match, fakePAT) || len(fs[0].Fingerprint) != 64 {
		t.Errorf("match %q not redacted or fingerprint %q not an HMAC", fs[0].Match, fs[0].Fingerprint)
	}
	if _, err := e.ScanObjects(ctx, Repo{Dir: dir}, []string{blob}, nil); err == nil {
		t.Error("scanning a quarantined blob without the quarantine env succeeded")
	}
}

const fakePAT = "ghp_" + "Xk2Lq9Zr7Tm4Vb8Nc3Wd6Yf1Hg5Js0Pa2Qe7"

// TestSkips: oversized blobs are skipped and counted; binary ones are
// scanned (a NUL byte hides nothing) unless SkipBinary asks for
// gitleaks' behaviour, and then they are counted.
func TestSkips(t *testing.T) {
	dir := t.TempDir()
	env := gittest.Env(t.TempDir())
	gittest.Git(t, env, dir, "init", "-q")
	os.WriteFile(filepath.Join(dir, "bin"), []byte("\x00\x01"+fakePAT), 0o644)
	os.WriteFile(filepath.Join(dir, "big"), []byte(strings.Repeat("x", 2000)+fakePAT), 0o644)
	os.WriteFile(filepath.Join(dir, "ok"), []byte(fakePAT), 0o644)
	gittest.Git(t, env, dir, "add", "-A")
	gittest.Git(t, env, dir, "commit", "-q", "-m", "c")
	cfg, _ := DefaultConfig()
	for _, skip := range []bool{false, true} {
		e, err := New(cfg, Options{Workers: 1, MaxBlobSize: 1000, SkipBinary: skip})
		if err != nil {
			t.Fatal(err)
		}
		bs, err := e.ScanRepo(context.Background(), Repo{Dir: dir}, nil)
		if err != nil {
			t.Fatal(err)
		}
		fs, err := bs.Attribute(context.Background(), Repo{Dir: dir}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, f := range fs {
			paths = append(paths, f.Path)
		}
		st := bs.Stats
		switch {
		case skip && (st.Blobs != 3 || st.BlobsScanned != 1 || st.BinarySkipped != 1 || st.BinaryScanned != 0 || st.LargeSkipped != 1 || st.LargeBytes != 2040):
			t.Errorf("SkipBinary: stats = %+v", st)
		case skip && strings.Join(paths, " ") != "ok":
			t.Errorf("SkipBinary: findings in %v, want ok only", paths)
		case !skip && (st.Blobs != 3 || st.BlobsScanned != 2 || st.BinarySkipped != 0 || st.BinaryScanned != 1 || st.LargeSkipped != 1):
			t.Errorf("stats = %+v", st)
		case !skip && strings.Join(paths, " ") != "bin ok" && strings.Join(paths, " ") != "ok bin":
			t.Errorf("findings in %v, want bin and ok", paths)
		}
	}
}

// FuzzParseLog: the git log decoder never panics on any input.
func FuzzParseLog(f *testing.F) {
	f.Add([]byte("\x01c3dc6312763\x02A\x02a@b\x022026\x02two\n\x03\x00\n:100644 100644 7898192 422c2b7 R050\x00f\x00g\x00\x01c204\x02A\x02a@b\x022026\x02one\x03\x00\n:000000 100644 0000 7898 A\x00f\x00"))
	f.Add([]byte(":1 2 3 4 C\x00a\x00b\x00"))
	e := defaultEngine(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		bs := &BlobScan{e: e, blobs: map[string][]candidate{"422c2b7": {{rule: 0, secret: "s"}}, "7898": {{rule: e.pathOut[0], pathOnly: true}}}}
		bs.parseLog(bufio.NewReader(strings.NewReader(string(data))), &attribution{seen: map[string]bool{}, replaced: map[string]bool{}})
	})
}

// countingMatcher counts how often each distinct content is matched.
type countingMatcher struct {
	Matcher
	mu   sync.Mutex
	seen map[string]int
}

func (c *countingMatcher) Match(content []byte, emit func(rule, start, end int)) {
	c.mu.Lock()
	c.seen[string(content)]++
	c.mu.Unlock()
	c.Matcher.Match(content, emit)
}

// TestEachBlobScannedOnce: content shared by many commits, paths and
// branches is matched exactly once.
func TestEachBlobScannedOnce(t *testing.T) {
	dir := t.TempDir()
	env := gittest.Env(t.TempDir())
	git := func(args ...string) { gittest.Git(t, env, dir, args...) }
	git("init", "-q", "-b", "main")
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "key "+fakePAT+"\n")
	write("b.txt", "key "+fakePAT+"\n") // same blob, second path
	git("add", "-A")
	git("commit", "-q", "-m", "one")
	git("checkout", "-q", "-b", "side")
	for i := range 5 { // five commits that keep a.txt and b.txt as they are
		write("c.txt", strings.Repeat("x\n", i+1))
		git("add", "-A")
		git("commit", "-q", "-m", "more")
	}
	git("checkout", "-q", "main")
	write("c.txt", "x\n") // same content as a blob on side
	git("add", "-A")
	git("commit", "-q", "-m", "main")

	cfg, _ := DefaultConfig()
	km, err := NewKeywordMatcher(cfg.Rules)
	if err != nil {
		t.Fatal(err)
	}
	cm := &countingMatcher{Matcher: km, seen: make(map[string]int)}
	e, err := New(cfg, Options{Workers: 2, Matcher: cm})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := e.ScanRepo(context.Background(), Repo{Dir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.seen) != 6 || bs.Stats.BlobsScanned != 6 {
		t.Errorf("matched %d distinct contents, scanned %d blobs; want 6 and 6", len(cm.seen), bs.Stats.BlobsScanned)
	}
	for c, n := range cm.seen {
		if n != 1 {
			t.Errorf("content %.20q matched %d times", c, n)
		}
	}
	fs, err := bs.Attribute(context.Background(), Repo{Dir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 2 { // a.txt and b.txt in commit one
		t.Errorf("findings = %+v, want 2", fs)
	}
}

// FuzzBatchHeader: the cat-file header decoder rejects what it cannot use
// and never returns a negative size.
func FuzzBatchHeader(f *testing.F) {
	f.Add("a474c4ea0792acac89eb88fd6b6415251f3e69e2 blob 143\n")
	f.Add("x missing\n")
	f.Fuzz(func(t *testing.T, hdr string) {
		oid, _, size, err := parseBatchHeader(hdr)
		if err == nil && (oid == "" || size < 0) {
			t.Fatalf("parseBatchHeader(%q) = %q, %d", hdr, oid, size)
		}
	})
}
