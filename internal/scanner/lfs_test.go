package scanner_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/lfs"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// TestScanRunReadsLFS: a scan run reads the Git LFS object of each
// pointer it scans, as the pointer's file: a secret in an LFS-tracked
// config file is reported at the commit and path that added the pointer,
// on the object's line; a binary object is scanned as a binary blob is
// (a NUL byte hides nothing, docs/adr/0035-binary-blobs.md); an object
// over the size bound and one the repository does not hold (a mirror's
// history) raise nothing and do not hold up the run; a read that fails
// as an outage is retried; without a reader the secrets go unseen, which
// is what this closes.
func TestScanRunReadsLFS(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	repo := f.repo("alice", "assets")
	ctx := context.Background()
	if err := f.srv.Meta().SetAllowMissingLFS(ctx, "alice", "assets", true); err != nil {
		t.Fatal(err)
	}
	reader, err := lfs.NewReader(f.srv.Store())
	if err != nil {
		t.Fatal(err)
	}
	store := reader.Repo(access.Grant{RepoID: repo.ID, Tenant: "alice", Level: access.Write})
	upload := func(content []byte) string {
		sum := sha256.Sum256(content)
		oid := hex.EncodeToString(sum[:])
		if err := store.Put(ctx, oid, int64(len(content)), bytes.NewReader(content)); err != nil {
			t.Fatal(err)
		}
		return oid
	}
	pointer := func(oid string, size int) string {
		return fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", oid, size)
	}
	envFile := []byte("# production\n\nTOKEN=" + secret(1) + "\n")
	bigFile := append(bytes.Repeat([]byte("# padding\n"), 200), []byte("TOKEN="+secret(2)+"\n")...)
	binFile := append([]byte{0, 1, 2}, []byte("TOKEN="+secret(3)+"\n")...)
	files := map[string]string{
		"README":          "hello\n",
		"conf/prod.env":   pointer(upload(envFile), len(envFile)),
		"conf/big.env":    pointer(upload(bigFile), len(bigFile)),
		"model.dat":       pointer(upload(binFile), len(binFile)),
		"mirror/gone.env": pointer(hex.EncodeToString(make([]byte, 32)), 10),
	}
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	for p, c := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "assets")
	commit := git(t, dir, "rev-parse", "HEAD")
	git(t, dir, "push", "-q", f.remote("alice", "assets"), "main")

	scan := func(o scanner.WorkerOptions) []alertView {
		t.Helper()
		s := f.scanner(scanner.Options{})
		if _, isNew, err := s.StartFull(ctx, "alice", repo.ID); err != nil || !isNew {
			t.Fatalf("start a full run: new %v, %v", isNew, err)
		}
		drain(t, s, f.worker(s, o))
		return view(t, f.srv.Alerts(), "alice", repo.ID)
	}

	if got := scan(scanner.WorkerOptions{}); len(got) != 0 {
		t.Fatalf("without an LFS reader the scan saw into LFS objects: %+v", got)
	}
	// A full run at a new head: the first run's seq is done.
	os.WriteFile(filepath.Join(dir, "README"), []byte("hello again\n"), 0o644)
	git(t, dir, "commit", "-q", "-am", "again")
	git(t, dir, "push", "-q", f.remote("alice", "assets"), "main")
	var fails atomic.Int32
	fails.Store(1)
	flaky := failingLFS{LFSObjects: reader, fails: &fails}
	got := scan(scanner.WorkerOptions{LFS: flaky, MaxLFSObject: 1024, RetryDelay: 1})
	ptrBlob := git(t, dir, "rev-parse", "HEAD:conf/prod.env")
	binBlob := git(t, dir, "rev-parse", "HEAD:model.dat")
	places := map[string]bool{}
	for _, a := range got {
		for _, p := range a.Places {
			places[p] = true
		}
	}
	if len(got) != 2 || len(places) != 2 || !places["conf/prod.env:3:"+ptrBlob] || !places["model.dat:1:"+binBlob] {
		t.Fatalf("alerts = %+v, want one at conf/prod.env:3 (the object's line) in the pointer blob %s and one at model.dat:1", got, ptrBlob)
	}
	if fails.Load() > 0 {
		t.Error("the failing reader was never asked")
	}
	fp, err := f.srv.Alerts().Fingerprint(ctx, "alice", secret(1))
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.srv.Alerts().Get(ctx, "alice", repo.ID, fp)
	if err != nil || a.Locations[0].Commit != commit {
		t.Fatalf("the alert's commit: %+v, %v; want %s", a.Locations, err, commit)
	}
}

// failingLFS is a fault-injecting reader (a test double, declared): its
// first fails calls fail as a store outage would, then it reads through.
type failingLFS struct {
	scanner.LFSObjects
	fails *atomic.Int32
}

var errOutage = fmt.Errorf("injected: %w", objstore.ErrUnavailable)

func (f failingLFS) OpenLFS(ctx context.Context, tenant, repoID, oid string) (io.ReadCloser, int64, bool, error) {
	if f.fails.Add(-1) >= 0 {
		return nil, 0, false, errOutage
	}
	return f.LFSObjects.OpenLFS(ctx, tenant, repoID, oid)
}

// TestScanRunRefusesShortLFSObject: an object whose body ends before the
// size the store gave fails the batch rather than being scanned cut (a
// secret past the cut would be missed while the run reported it read).
func TestScanRunRefusesShortLFSObject(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	repo := f.repo("alice", "assets")
	ctx := context.Background()
	if err := f.srv.Meta().SetAllowMissingLFS(ctx, "alice", "assets", true); err != nil {
		t.Fatal(err)
	}
	oid := hex.EncodeToString(make([]byte, 32))
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	ptr := fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 100\n", oid)
	if err := os.WriteFile(filepath.Join(dir, "prod.env"), []byte(ptr), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "cut")
	git(t, dir, "push", "-q", f.remote("alice", "assets"), "main")

	s := f.scanner(scanner.Options{})
	if _, _, err := s.StartFull(ctx, "alice", repo.ID); err != nil {
		t.Fatal(err)
	}
	w := f.worker(s, scanner.WorkerOptions{LFS: shortLFS{}})
	var err error
	for range 20 {
		if _, err = w.Step(ctx); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "not 100") {
		t.Fatalf("a cut LFS object was scanned: step error %v", err)
	}
}

// shortLFS is a fault-injecting reader (a test double, declared): every
// object it opens says 100 bytes and ends after 10.
type shortLFS struct{}

func (shortLFS) OpenLFS(context.Context, string, string, string) (io.ReadCloser, int64, bool, error) {
	return io.NopCloser(strings.NewReader("TOKEN=abc\n")), 100, true, nil
}

// TestScanRunReadsLargeLFS: a scan run reads Git LFS objects of any size
// (issue 43): a secret after 5 MiB of an object (past the size held whole
// and past a stream window) is alerted at the object's line, also when
// the file was renamed in a later commit; an object cut short of its size
// fails the batch rather than being reported scanned.
func TestScanRunReadsLargeLFS(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	repo := f.repo("alice", "assets")
	ctx := context.Background()
	reader, err := lfs.NewReader(f.srv.Store())
	if err != nil {
		t.Fatal(err)
	}
	store := reader.Repo(access.Grant{RepoID: repo.ID, Tenant: "alice", Level: access.Write})
	const fillerLines = 5 << 20 / 10
	big := append(bytes.Repeat([]byte("# padding\n"), fillerLines), []byte("TOKEN="+secret(7)+"\n")...)
	sum := sha256.Sum256(big)
	oid := hex.EncodeToString(sum[:])
	if err := store.Put(ctx, oid, int64(len(big)), bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	ptr := fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", oid, len(big))
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "secret.env"), []byte(ptr), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "settings")
	ptrBlob := git(t, dir, "rev-parse", "HEAD:secret.env")
	git(t, dir, "mv", "secret.env", "notes.bin")
	git(t, dir, "commit", "-q", "-m", "renamed")
	git(t, dir, "push", "-q", f.remote("alice", "assets"), "main")

	s := f.scanner(scanner.Options{})
	if _, _, err := s.StartFull(ctx, "alice", repo.ID); err != nil {
		t.Fatal(err)
	}
	drain(t, s, f.worker(s, scanner.WorkerOptions{LFS: reader}))
	got := view(t, f.srv.Alerts(), "alice", repo.ID)
	want := fmt.Sprintf("secret.env:%d:%s", fillerLines+1, ptrBlob)
	if len(got) != 1 || !slices.Contains(got[0].Places, want) {
		t.Fatalf("alerts = %+v, want one at %s", got, want)
	}

	// A cut stream: the store says 3 MiB and the body ends at 2.
	s = f.scanner(scanner.Options{})
	os.WriteFile(filepath.Join(dir, "README"), []byte("again\n"), 0o644)
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "again")
	git(t, dir, "push", "-q", f.remote("alice", "assets"), "main")
	if _, _, err := s.StartFull(ctx, "alice", repo.ID); err != nil {
		t.Fatal(err)
	}
	w := f.worker(s, scanner.WorkerOptions{LFS: cutLFS{}})
	for range 20 {
		if _, err = w.Step(ctx); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("not %d", 3<<20)) {
		t.Fatalf("a cut LFS stream was scanned: step error %v", err)
	}
}

// cutLFS is a fault-injecting reader (a test double, declared): every
// object it opens says 3 MiB and ends after 2.
type cutLFS struct{}

func (cutLFS) OpenLFS(context.Context, string, string, string) (io.ReadCloser, int64, bool, error) {
	return io.NopCloser(bytes.NewReader(bytes.Repeat([]byte("x\n"), 1<<20))), 3 << 20, true, nil
}
