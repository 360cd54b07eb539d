package pushprotect

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// lfsMap is LFSObjects over a map, failing on an oid it lacks.
type lfsMap map[string][]byte

func (m lfsMap) Open(_ context.Context, oid string) (io.ReadCloser, int64, error) {
	b, ok := m[oid]
	if !ok {
		return nil, 0, errors.New("no such object")
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

func lfsPointer(content []byte) (oid, pointer string) {
	sum := sha256.Sum256(content)
	oid = hex.EncodeToString(sum[:])
	return oid, fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", oid, len(content))
}

// TestLFSObjectsScanned: the objects of the push's LFS pointers are
// scanned as the pointers' files, within the per-object bound; one past
// it is counted as skipped; one that cannot be read fails the check.
func TestLFSObjectsScanned(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	old := f.rev("main")
	small := []byte("# config\ntoken " + fakePAT + "\n")
	large := []byte(strings.Repeat("padding line\n", 200) + "token " + fakePAT + "\n")
	oidS, ptrS := lfsPointer(small)
	oidL, ptrL := lfsPointer(large)
	tip := f.commit("lfs files", map[string]string{"conf/app.env": ptrS, "big.env": ptrL})
	pointers := map[string]string{
		f.rev(tip + ":conf/app.env"): oidS,
		f.rev(tip + ":big.env"):      oidL,
	}
	check := func(objects LFSObjects, opts Options) (*Verdict, error) {
		s := newChecker(t, alerts.New(memstore.New()), opts)
		return s.Check(ctx, Push{Tenant: "alice", RepoID: repoID, Pusher: "alice", Repo: f.push(tip),
			Updates: []Update{{Ref: "refs/heads/main", Old: old, New: tip}}, LFSPointers: pointers, LFS: objects})
	}
	objects := lfsMap{oidS: small, oidL: large}
	v, err := check(objects, Options{MaxLFSObject: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Blocked || len(v.Findings) != 1 || v.Findings[0].Path != "conf/app.env" || v.Findings[0].StartLine != 2 || v.Findings[0].Ref != "refs/heads/main" {
		t.Fatalf("verdict %+v", v)
	}
	if v.Stats.LargeSkipped != 1 {
		t.Errorf("large skipped %d, want the object past the bound", v.Stats.LargeSkipped)
	}
	// A larger bound scans both.
	if v, err := check(objects, Options{}); err != nil || len(v.Findings) != 2 {
		t.Fatalf("default bound: %+v, %v", v, err)
	}
	// Without the LFS reader the pointers are all the push has: clean.
	if v, err := check(nil, Options{}); err != nil || v.Blocked {
		t.Fatalf("no LFS reader: %+v, %v", v, err)
	}
	// An object that cannot be read: no verdict, the push is refused.
	if _, err := check(lfsMap{oidS: small}, Options{}); err == nil {
		t.Fatal("a check whose LFS object could not be read decided")
	}
}
