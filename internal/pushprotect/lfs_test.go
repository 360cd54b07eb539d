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
	"github.com/ghost-scm/ghost/internal/lfs/pointer"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/secretscan"
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
// scanned as the pointers' files, whatever their size: one read whole,
// one past the whole bound streamed; past the push's budget an object is
// not read and refuses the push naming it, unless the repository scans
// LFS objects after the push; the budget goes to the riskiest files
// first, so a .env is read before large models; an object that cannot be
// read, or is not its size, fails the check.
func TestLFSObjectsScanned(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	old := f.rev("main")
	small := []byte("# config\ntoken " + fakePAT + "\n")
	large := []byte(strings.Repeat("padding line\n", 200) + "token " + fakePAT + "\n")
	model := bytes.Repeat([]byte("weights\n"), 250)
	oidS, ptrS := lfsPointer(small)
	oidL, ptrL := lfsPointer(large)
	oidM, ptrM := lfsPointer(model)
	tip := f.commit("lfs files", map[string]string{"conf/app.env": ptrS, "big.env": ptrL, "model.bin": ptrM})
	pointers := map[string]pointer.Pointer{
		f.rev(tip + ":conf/app.env"): {OID: oidS, Size: int64(len(small))},
		f.rev(tip + ":big.env"):      {OID: oidL, Size: int64(len(large))},
		f.rev(tip + ":model.bin"):    {OID: oidM, Size: int64(len(model))},
	}
	check := func(objects LFSObjects, opts Options, later bool, options ...string) (*Verdict, error) {
		s := newChecker(t, alerts.New(memstore.New()), opts)
		return s.Check(ctx, Push{Tenant: "alice", RepoID: repoID, Pusher: "alice", Repo: f.push(tip),
			Updates: []Update{{Ref: "refs/heads/main", Old: old, New: tip}}, LFSPointers: pointers, LFS: objects,
			LFSScanAfterPush: later, Options: options})
	}
	objects := lfsMap{oidS: small, oidL: large, oidM: model}
	// Read whole or streamed, both are scanned: two findings.
	for _, opts := range []Options{{}, {WholeLFSObject: 1024}} {
		v, err := check(objects, opts, false)
		if err != nil {
			t.Fatal(err)
		}
		if !v.Blocked || len(v.Findings) != 2 || v.Reason != Reason || len(v.Unscanned) != 0 {
			t.Fatalf("%+v: verdict %+v", opts, v)
		}
		for _, fd := range v.Findings {
			// Placed as a git blob's: at the commit that adds the pointer.
			if fd.Commit != tip || !(fd.Path == "conf/app.env" && fd.StartLine == 2 || fd.Path == "big.env" && fd.StartLine == 201) {
				t.Errorf("finding %+v", fd)
			}
		}
	}
	// A budget that holds the two .env files but not the model: the .env
	// files, riskier, are read first, whatever the order of their ids;
	// the model refuses the push, named, with a reason of its own.
	budget := Options{MaxLFSBytes: int64(len(small) + len(large) + 10)}
	v, err := check(objects, budget, false)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Blocked || len(v.Findings) != 2 || len(v.Unscanned) != 1 || v.Unscanned[0].Path != "model.bin" || v.Unscanned[0].OID != oidM {
		t.Fatalf("past the budget: %+v", v)
	}
	if msg := strings.Join(v.Message, "\n"); !strings.Contains(msg, "model.bin") || !strings.Contains(msg, "--lfs-scan-after-push on") {
		t.Errorf("the message does not name the object and the remedy:\n%s", msg)
	}
	// Without secrets, the unscanned model alone refuses the push.
	clean := lfsMap{oidS: []byte("x=1\n"), oidL: []byte("y=2\n"), oidM: model}
	pointers[f.rev(tip+":conf/app.env")] = pointer.Pointer{OID: oidS, Size: 4}
	pointers[f.rev(tip+":big.env")] = pointer.Pointer{OID: oidL, Size: 4}
	v, err = check(clean, Options{MaxLFSBytes: 100}, false)
	if err != nil || !v.Blocked || v.Reason != ReasonUnscanned || len(v.Unscanned) != 1 {
		t.Fatalf("an unscanned object alone: %+v, %v", v, err)
	}
	// A bypass does not let an unscanned object through either.
	v, err = check(clean, Options{MaxLFSBytes: 100}, false, BypassOption+"=used_in_tests")
	if err != nil || !v.Blocked || v.Reason != ReasonUnscanned {
		t.Fatalf("an unscanned object with a bypass: %+v, %v", v, err)
	}
	// With the repository's setting, it lands, and the pusher is told.
	v, err = check(clean, Options{MaxLFSBytes: 100}, true)
	if err != nil || v.Blocked || len(v.Unscanned) != 1 || !strings.Contains(strings.Join(v.Message, "\n"), "scans them after it") {
		t.Fatalf("scanned after the push: %+v, %v", v, err)
	}
	// A pointer that understates its object's size is read and counted
	// at the object's size: past the budget, it refuses the push.
	pointers[f.rev(tip+":model.bin")] = pointer.Pointer{OID: oidM, Size: 1}
	v, err = check(clean, Options{MaxLFSBytes: 100}, false)
	if err != nil || !v.Blocked || len(v.Unscanned) != 1 || v.Unscanned[0].Size != int64(len(model)) {
		t.Fatalf("an understated size: %+v, %v", v, err)
	}
	// Without the LFS reader the pointers are all the push has: clean.
	if v, err := check(nil, Options{}, false); err != nil || v.Blocked {
		t.Fatalf("no LFS reader: %+v, %v", v, err)
	}
	// An object that cannot be read: no verdict, the push is refused.
	if _, err := check(lfsMap{oidS: small}, Options{}, false); err == nil {
		t.Fatal("a check whose LFS object could not be read decided")
	}
	// An object whose bytes are not its size, read whole or streamed.
	for _, opts := range []Options{{}, {WholeLFSObject: 1024}} {
		if _, err := check(shortMap{lfsMap: clean, oid: oidM}, opts, false); err == nil || !strings.Contains(err.Error(), "not 2000") {
			t.Fatalf("%+v: a short object: %v", opts, err)
		}
	}
}

// shortMap is a fault-injecting reader (a test double, declared): oid's
// object ends halfway through the size it gives.
type shortMap struct {
	lfsMap
	oid string
}

func (m shortMap) Open(ctx context.Context, oid string) (io.ReadCloser, int64, error) {
	rc, n, err := m.lfsMap.Open(ctx, oid)
	if oid != m.oid || err != nil {
		return rc, n, err
	}
	b, _ := io.ReadAll(rc)
	return io.NopCloser(bytes.NewReader(b[:n/2])), n, nil
}

func TestLFSRisk(t *testing.T) {
	e := newChecker(t, alerts.New(memstore.New()), Options{})
	eng, err := secretscan.New(e.cfg, secretscan.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]int{
		".env": riskSecret, "deploy/.env.production": riskSecret, "prod.env": riskSecret, "keys/server.pem": riskSecret,
		"home/.ssh/id_ed25519": riskSecret, "cert.p12": riskSecret, "aws_credentials.txt": riskSecret,
		"src/main.go": riskText, "Makefile": riskText, "notes.txt": riskText,
		"model.bin": riskOther, "art/hero.psd": riskOther, "data.tar.gz": riskOther,
	} {
		if got := lfsRisk(eng, p); got != want {
			t.Errorf("lfsRisk(%q) = %d, want %d", p, got, want)
		}
	}
}
