package secretscan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/gittest"
)

// TestScanLFS: a scan of objects collects the Git LFS pointer blobs it
// reads, and the objects they name, scanned with ScanLFS, are placed by
// attribution at the commit and path that add the pointer, with the
// object's lines; a later version of the file that keeps the secret is
// not reported again, one that adds a secret is.
func TestScanLFS(t *testing.T) {
	dir := t.TempDir()
	env := gittest.Env(t.TempDir())
	git := func(args ...string) string {
		out, err := gittest.Run(env, dir, nil, args...)
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(out)
	}
	git("init", "-q", "-b", "main")
	objects := map[string][]byte{}
	commitLFS := func(path, content, msg string) (commit, blob string) {
		sum := sha256.Sum256([]byte(content))
		oid := hex.EncodeToString(sum[:])
		objects[oid] = []byte(content)
		ptr := fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", oid, len(content))
		if err := os.WriteFile(filepath.Join(dir, path), []byte(ptr), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", "-A")
		git("commit", "-q", "-m", msg)
		return git("rev-parse", "HEAD"), git("rev-parse", "HEAD:"+path)
	}
	other := "ghp_" + "Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8Ii9Jj0Kk1Ll2M"
	c1, b1 := commitLFS("app.env", "# settings\nTOKEN="+fakePAT+"\n", "first")
	c2, b2 := commitLFS("app.env", "# settings\nTOKEN="+fakePAT+"\nOTHER="+other+"\n", "second")

	e := defaultEngine(t)
	repo := Repo{Dir: dir}
	ctx := context.Background()
	bs, err := e.ScanObjects(ctx, repo, []string{b1, b2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bs.FindingBlobs() != 0 {
		t.Fatalf("the pointers themselves had findings: %d", bs.FindingBlobs())
	}
	ptrs := bs.LFSPointers()
	if len(ptrs) != 2 || objects[ptrs[b1]] == nil || objects[ptrs[b2]] == nil {
		t.Fatalf("LFSPointers = %v", ptrs)
	}
	for _, id := range []string{b1, b2} {
		if st := bs.ScanLFS(id, objects[ptrs[id]]); st.BlobsScanned != 1 {
			t.Fatalf("ScanLFS stats %+v", st)
		}
	}
	fs, err := bs.AttributeAll(ctx, repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs.Findings) != 2 || len(fs.Unplaced) != 0 {
		t.Fatalf("findings = %+v, unplaced %v", fs.Findings, fs.Unplaced)
	}
	byCommit := map[string]Finding{}
	for _, f := range fs.Findings {
		byCommit[f.Commit] = f
	}
	if f := byCommit[c1]; f.Path != "app.env" || f.StartLine != 2 || f.BlobID != b1 {
		t.Errorf("the first version's finding = %+v", f)
	}
	if f := byCommit[c2]; f.Path != "app.env" || f.StartLine != 3 || f.BlobID != b2 {
		t.Errorf("the second version's finding = %+v (only the added secret, on the object's line 3)", f)
	}

	// Binary objects are skipped as binary blobs are, when asked.
	cfg, err := DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := New(cfg, Options{Workers: 2, FingerprintKey: []byte("k"), SkipBinary: true})
	if err != nil {
		t.Fatal(err)
	}
	bs2, err := bin.ScanObjects(ctx, repo, []string{b1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := bs2.ScanLFS(b1, append([]byte{0}, objects[ptrs[b1]]...)); st.BinarySkipped != 1 || bs2.FindingBlobs() != 0 {
		t.Errorf("a binary object: stats %+v, finding blobs %d", st, bs2.FindingBlobs())
	}
}
