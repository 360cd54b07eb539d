package secretscan

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
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

// TestSkips: binary and oversized blobs are skipped and counted.
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
	e, err := New(cfg, Options{Workers: 1, MaxBlobSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := e.ScanRepo(context.Background(), Repo{Dir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := bs.Stats
	if st.Blobs != 3 || st.BlobsScanned != 1 || st.BinarySkipped != 1 || st.LargeSkipped != 1 || st.LargeBytes != 2040 {
		t.Errorf("stats = %+v", st)
	}
}

// FuzzParseLog: the git log decoder never panics on any input.
func FuzzParseLog(f *testing.F) {
	f.Add([]byte("\x01c3dc6312763\x02A\x02a@b\x022026\x02two\n\x03\x00\n:100644 100644 7898192 422c2b7 R050\x00f\x00g\x00\x01c204\x02A\x02a@b\x022026\x02one\x03\x00\n:000000 100644 0000 7898 A\x00f\x00"))
	f.Add([]byte(":1 2 3 4 C\x00a\x00b\x00"))
	e := defaultEngine(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		bs := &BlobScan{e: e, blobs: map[string][]candidate{"422c2b7": {{rule: 0, secret: "s"}}, "7898": {{rule: e.pathOut[0], pathOnly: true}}}}
		bs.parseLog(bufio.NewReader(strings.NewReader(string(data))))
	})
}
