package wal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

func oid(n int) string { return fmt.Sprintf("%040x", n) }

// noSleep makes backoff instant so fault tests run fast.
func noSleep(ctx context.Context, d time.Duration) error { return ctx.Err() }

func newLog(s objstore.Store) *wal.Log { return wal.New(s, wal.Options{Sleep: noSleep}) }

func push(ref, old, new, pack string) wal.Push {
	return wal.Push{
		Transitions: []wal.Transition{{Ref: ref, Old: old, New: new}},
		PushedBy:    "tester",
		Pack:        strings.NewReader(pack),
		PackSize:    int64(len(pack)),
	}
}

func entries(t *testing.T, s objstore.Store, repo string) []string {
	t.Helper()
	var keys []string
	if err := objstore.Walk(context.Background(), s, "repos/"+repo+"/entries/", func(o objstore.Info) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestCommitAndRead(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := newLog(s)
	x, etag, err := l.ReadIndex(ctx, "r1")
	if err != nil || etag != "" || x.Seq != 0 || len(x.Refs) != 0 {
		t.Fatalf("empty repo: %+v %q %v", x, etag, err)
	}
	r1, err := l.Commit(ctx, "r1", push("refs/heads/main", wal.ZeroID, oid(1), "PACK-one"))
	if err != nil || r1.Seq != 1 || r1.Attempts != 1 {
		t.Fatalf("first commit = %+v, %v", r1, err)
	}
	r2, err := l.Commit(ctx, "r1", wal.Push{
		Transitions: []wal.Transition{
			{Ref: "refs/tags/v1", Old: wal.ZeroID, New: oid(2)},
			{Ref: "refs/heads/main", Old: oid(1), New: oid(3)},
		},
		Pack: strings.NewReader("PACK-two"), PackSize: 8,
	})
	if err != nil || r2.Seq != 2 {
		t.Fatalf("second commit = %+v, %v", r2, err)
	}
	x, err = l.Head(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if x.Seq != 2 || len(x.Layers) != 2 || x.Ref("refs/heads/main") != oid(3) || x.Ref("refs/tags/v1") != oid(2) {
		t.Fatalf("index = %+v", x)
	}
	for i, want := range []string{"PACK-one", "PACK-two"} {
		rc, h, err := l.OpenPack(ctx, "r1", x.Layers[i])
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(b) != want {
			t.Fatalf("layer %d pack = %q, %v; want %q", i, b, err, want)
		}
		if h.ULID != x.Layers[i].ULID || h.PushedBy == "" && i == 0 {
			t.Fatalf("layer %d header = %+v", i, h)
		}
	}
	// Delete a ref.
	if _, err := l.Commit(ctx, "r1", push("refs/tags/v1", oid(2), wal.ZeroID, "")); err != nil {
		t.Fatal(err)
	}
	if x, _ := l.Head(ctx, "r1"); x.Ref("refs/tags/v1") != "" || x.Seq != 3 {
		t.Fatalf("after delete: %+v", x)
	}
}

func TestCommitRejections(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := newLog(s)
	if _, err := l.Commit(ctx, "r", push("refs/heads/a", wal.ZeroID, oid(1), "p")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		p    wal.Push
		want func(error) bool
	}{
		{"create existing", push("refs/heads/a", wal.ZeroID, oid(2), "p"), isNFF("refs/heads/a")},
		{"stale old", push("refs/heads/a", oid(7), oid(2), "p"), isNFF("refs/heads/a")},
		{"update missing", push("refs/heads/b", oid(7), oid(2), "p"), isNFF("refs/heads/b")},
		{"delete missing", push("refs/heads/b", oid(7), wal.ZeroID, "p"), isNFF("refs/heads/b")},
		{"child of a ref", push("refs/heads/a/b", wal.ZeroID, oid(2), "p"), isRefConflict},
		{"parent of a ref", push("refs/heads", wal.ZeroID, oid(2), "p"), is(wal.ErrInvalid)},
		{"bad ref name", push("refs/heads/a..b", wal.ZeroID, oid(2), "p"), is(wal.ErrInvalid)},
		{"bad id", push("refs/heads/c", wal.ZeroID, "xyz", "p"), is(wal.ErrInvalid)},
		{"no transitions", wal.Push{Pack: strings.NewReader(""), PackSize: 0}, is(wal.ErrInvalid)},
		{"pack shorter than declared", wal.Push{Transitions: []wal.Transition{{Ref: "refs/heads/c", Old: wal.ZeroID, New: oid(2)}}, Pack: strings.NewReader("ab"), PackSize: 5}, func(err error) bool { return err != nil }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := l.Commit(ctx, "r", c.p)
			if !c.want(err) {
				t.Fatalf("err = %v", err)
			}
			x, _ := l.Head(ctx, "r")
			if x.Seq != 1 || len(entries(t, s, "r")) != 1 {
				t.Fatalf("a rejected push changed the log: seq %d, %d entries", x.Seq, len(entries(t, s, "r")))
			}
		})
	}
	if _, err := l.Commit(ctx, "../x", push("refs/heads/a", wal.ZeroID, oid(1), "p")); !errors.Is(err, wal.ErrInvalid) {
		t.Fatalf("bad repo id: err = %v", err)
	}
	// A parent ref with a child below it is a D/F conflict too.
	if _, err := l.Commit(ctx, "r2", push("refs/heads/x/y", wal.ZeroID, oid(1), "p")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Commit(ctx, "r2", push("refs/heads/x", wal.ZeroID, oid(1), "p")); !isRefConflict(err) {
		t.Fatalf("parent of existing ref: err = %v", err)
	}
	// ... and the reverse within one push: delete the child, create the parent.
	if _, err := l.Commit(ctx, "r2", wal.Push{Transitions: []wal.Transition{
		{Ref: "refs/heads/x/y", Old: oid(1), New: wal.ZeroID},
		{Ref: "refs/heads/x", Old: wal.ZeroID, New: oid(2)},
	}, Pack: strings.NewReader(""), PackSize: 0}); err != nil {
		t.Fatalf("replace child by parent in one push: %v", err)
	}
}

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

func isNFF(ref string) func(error) bool {
	return func(err error) bool {
		var nff *wal.NonFastForwardError
		return errors.As(err, &nff) && nff.Ref == ref
	}
}

func isRefConflict(err error) bool {
	var rc *wal.RefConflictError
	return errors.As(err, &rc)
}

func TestLongHeaderReads(t *testing.T) {
	ctx := context.Background()
	l := newLog(memstore.New())
	var ts []wal.Transition
	for i := range 300 { // ~ 300 * 60 bytes: far past the 4 KiB first probe
		ts = append(ts, wal.Transition{Ref: fmt.Sprintf("refs/heads/branch-%04d", i), Old: wal.ZeroID, New: oid(i + 1)})
	}
	if _, err := l.Commit(ctx, "r", wal.Push{Transitions: ts, Pack: strings.NewReader("pack"), PackSize: 4}); err != nil {
		t.Fatal(err)
	}
	x, _ := l.Head(ctx, "r")
	rc, h, err := l.OpenPack(ctx, "r", x.Layers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	if string(b) != "pack" || len(h.Transitions) != 300 || h.Len < 8192 {
		t.Fatalf("pack %q, %d transitions, header %d bytes", b, len(h.Transitions), h.Len)
	}
}

func TestOpenPackDetectsDamage(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := newLog(s)
	if _, err := l.Commit(ctx, "r", push("refs/heads/a", wal.ZeroID, oid(1), "the real pack")); err != nil {
		t.Fatal(err)
	}
	x, _ := l.Head(ctx, "r")
	key := wal.EntryKey("r", x.Layers[0].ULID)
	b, _, _ := objstore.ReadAll(ctx, s, key, 1<<20)
	b[len(b)-1] ^= 1
	s.Put(ctx, key, bytes.NewReader(b), int64(len(b)))
	rc, _, err := l.OpenPack(ctx, "r", x.Layers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadAll(rc); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("damaged pack read: err = %v, want ErrCorrupt", err)
	}
	s.Delete(ctx, key)
	if _, _, err := l.OpenPack(ctx, "r", x.Layers[0]); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("missing entry: err = %v, want ErrCorrupt", err)
	}
	s.Put(ctx, wal.IndexKey("r"), strings.NewReader("garbage!"), 8)
	if _, _, err := l.ReadIndex(ctx, "r"); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("garbage index: err = %v, want ErrCorrupt", err)
	}
}

func TestDeleteAndFork(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := newLog(s)
	if err := l.Init(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := l.Init(ctx, "src"); !errors.Is(err, wal.ErrRepoExists) {
		t.Fatalf("second Init: %v", err)
	}
	for i := 1; i <= 3; i++ {
		old := wal.ZeroID
		if i > 1 {
			old = oid(i - 1)
		}
		if _, err := l.Commit(ctx, "src", push("refs/heads/main", old, oid(i), fmt.Sprintf("pack%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Fork(ctx, "src", "dst"); err != nil {
		t.Fatal(err)
	}
	if err := l.Fork(ctx, "src", "dst"); !errors.Is(err, wal.ErrRepoExists) {
		t.Fatalf("fork onto existing: %v", err)
	}
	d, err := l.Head(ctx, "dst")
	if err != nil || d.Seq != 3 || d.Ref("refs/heads/main") != oid(3) || len(entries(t, s, "dst")) != 3 {
		t.Fatalf("fork = %+v, %v", d, err)
	}
	rc, _, err := l.OpenPack(ctx, "dst", d.Layers[1])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "pack2" {
		t.Fatalf("forked layer = %q", b)
	}

	if err := l.Delete(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Head(ctx, "src"); !errors.Is(err, wal.ErrRepoDeleted) {
		t.Fatalf("Head of deleted = %v", err)
	}
	if n := len(entries(t, s, "src")); n != 0 {
		t.Fatalf("delete left %d entries", n)
	}
	if _, err := l.Commit(ctx, "src", push("refs/heads/main", oid(3), oid(4), "p")); !errors.Is(err, wal.ErrRepoDeleted) {
		t.Fatalf("push to deleted: %v", err)
	}
	if n := len(entries(t, s, "src")); n != 0 {
		t.Fatalf("rejected push to deleted repo left %d entries", n)
	}
	if err := l.Init(ctx, "src"); !errors.Is(err, wal.ErrRepoExists) {
		t.Fatalf("Init over tombstone: %v", err)
	}
	if err := l.Fork(ctx, "dst", "src"); !errors.Is(err, wal.ErrRepoExists) {
		t.Fatalf("fork onto tombstone: %v", err)
	}
	if err := l.Delete(ctx, "src"); !errors.Is(err, wal.ErrRepoDeleted) {
		t.Fatalf("second delete: %v", err)
	}
	// The fork is independent of its deleted source.
	if d, err := l.Head(ctx, "dst"); err != nil || d.Seq != 3 {
		t.Fatalf("fork after source delete: %+v %v", d, err)
	}
}

// The fault-injection tests below wrap the store in faultstore, a
// fault-injection fake whose plan decides the fate of every call.

func TestCommitTimeoutAfterLanding(t *testing.T) {
	ctx := context.Background()
	fs := faultstore.New(memstore.New())
	l := newLog(fs)
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.CAS == 1 { // landed, but the caller saw a timeout
			return faultstore.Fault{Outcome: faultstore.LandedThenError, Err: context.DeadlineExceeded}
		}
		return faultstore.Fault{}
	})
	res, err := l.Commit(ctx, "r", push("refs/heads/main", wal.ZeroID, oid(1), "pack"))
	if err != nil {
		t.Fatalf("commit whose CAS landed but timed out: %v", err)
	}
	x, _ := l.Head(ctx, "r")
	if len(x.Layers) != 1 || x.Seq != 1 || res.Seq != 1 || x.Layers[0].ULID != res.ULID {
		t.Fatalf("index = %+v, result %+v: want exactly one layer, ours", x, res)
	}
	if fs.CASCount() != 1 {
		t.Fatalf("%d CAS attempts, want 1 (the second attempt must find its own layer)", fs.CASCount())
	}
}

// refuseCAS answers every conditional put with a definite lost
// compare-and-swap, as if another writer always got there first.
func refuseCAS(c faultstore.Call) faultstore.Fault {
	if c.Op.Conditional() {
		return faultstore.Fault{Outcome: faultstore.Refused, Err: objstore.ErrPreconditionFailed}
	}
	return faultstore.Fault{}
}

func TestCommitContention(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	fs := faultstore.New(inner)
	l := newLog(fs)
	fs.SetPlan(refuseCAS)
	res, err := l.Commit(ctx, "r", push("refs/heads/main", wal.ZeroID, oid(1), "pack"))
	if !errors.Is(err, wal.ErrContention) {
		t.Fatalf("err = %v, want contention (503)", err)
	}
	if fs.CASCount() != 8 || res.Attempts != 8 {
		t.Fatalf("%d CAS attempts (result says %d), want 8", fs.CASCount(), res.Attempts)
	}
	if n := len(entries(t, inner, "r")); n != 0 {
		t.Fatalf("contention left %d entries; the entry must be deleted", n)
	}
}

func TestBackoffIsJitteredExponential(t *testing.T) {
	var waits []time.Duration
	fs := faultstore.New(memstore.New())
	fs.SetPlan(refuseCAS)
	l := wal.New(fs, wal.Options{Sleep: func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	}})
	l.Commit(context.Background(), "r", push("refs/heads/main", wal.ZeroID, oid(1), "p"))
	if len(waits) != 7 {
		t.Fatalf("%d waits, want 7 between 8 attempts", len(waits))
	}
	for i, d := range waits {
		base := min(50*time.Millisecond<<i, time.Second)
		if d < base/2 || d >= base*3/2 {
			t.Errorf("wait %d = %v, want in [%v, %v)", i, d, base/2, base*3/2)
		}
	}
}

func TestConcurrentDisjointCommits(t *testing.T) {
	for name, s := range map[string]func(t *testing.T) objstore.Store{
		"mem": func(t *testing.T) objstore.Store { return memstore.New() },
		"fs": func(t *testing.T) objstore.Store {
			s, err := fsstore.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := s(t)
			l := wal.New(st, wal.Options{}) // real backoff: this is the production path
			const n = 32
			var wg sync.WaitGroup
			errs := make([]error, n)
			seqs := make([]uint64, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := l.Commit(ctx, "r", push(fmt.Sprintf("refs/heads/b%02d", i), wal.ZeroID, oid(i+1), fmt.Sprint(i)))
					errs[i], seqs[i] = err, r.Seq
				}()
			}
			wg.Wait()
			seen := make(map[uint64]bool)
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("committer %d: %v", i, errs[i])
				}
				if seqs[i] < 1 || seqs[i] > n || seen[seqs[i]] {
					t.Fatalf("committer %d got seq %d: gap or duplicate", i, seqs[i])
				}
				seen[seqs[i]] = true
			}
			x, _ := l.Head(ctx, "r")
			if x.Seq != n || len(x.Layers) != n || len(x.Refs) != n {
				t.Fatalf("index seq %d, %d layers, %d refs; want %d each", x.Seq, len(x.Layers), len(x.Refs), n)
			}
			if len(entries(t, st, "r")) != n {
				t.Fatalf("%d entries, want %d", len(entries(t, st, "r")), n)
			}
		})
	}
}

func TestSameRefOneWins(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	fs := faultstore.New(inner)
	l := newLog(fs)
	if _, err := l.Commit(ctx, "r", push("refs/heads/main", wal.ZeroID, oid(1), "base")); err != nil {
		t.Fatal(err)
	}
	// Both committers read the index before either writes: the hook holds
	// every CAS until both have arrived.
	var arrived sync.WaitGroup
	arrived.Add(2)
	var once sync.Once
	release := make(chan struct{})
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op.Conditional() && c.CAS <= 3 { // the two racing first attempts
			arrived.Done()
			once.Do(func() { go func() { arrived.Wait(); close(release) }() })
			<-release
		}
		return faultstore.Fault{}
	})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.Commit(ctx, "r", push("refs/heads/main", oid(1), oid(10+i), fmt.Sprint(i)))
		}()
	}
	wg.Wait()
	wins, nffs := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case isNFF("refs/heads/main")(err):
			nffs++
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	if wins != 1 || nffs != 1 {
		t.Fatalf("%d wins, %d non-fast-forwards; want 1 and 1", wins, nffs)
	}
	// 1 setup CAS + 2 racing CASes; the loser re-reads, sees the
	// non-fast-forward and stops without a third CAS.
	if fs.CASCount() != 3 {
		t.Fatalf("%d CAS attempts, want 3: a non-fast-forward is never retried", fs.CASCount())
	}
	if n := len(entries(t, inner, "r")); n != 2 {
		t.Fatalf("%d entries, want 2 (the loser's is deleted)", n)
	}
}

func TestTombstoneRacesCommit(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	fs := faultstore.New(inner)
	l := newLog(fs)
	if _, err := l.Commit(ctx, "r", push("refs/heads/main", wal.ZeroID, oid(1), "base")); err != nil {
		t.Fatal(err)
	}
	var deleteErr error
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.CAS == 2 { // the commit's first CAS: a delete lands just before it
			fs.SetPlan(nil)
			deleteErr = l.Delete(ctx, "r")
		}
		return faultstore.Fault{}
	})
	_, err := l.Commit(ctx, "r", push("refs/heads/main", oid(1), oid(2), "new"))
	if deleteErr != nil {
		t.Fatal(deleteErr)
	}
	if !errors.Is(err, wal.ErrRepoDeleted) {
		t.Fatalf("commit racing a delete: err = %v, want ErrRepoDeleted", err)
	}
	x, _, _ := l.ReadIndex(ctx, "r")
	if !x.Deleted || len(x.Layers) != 0 {
		t.Fatalf("index after race = %+v, want tombstone", x)
	}
	if n := len(entries(t, inner, "r")); n != 0 {
		t.Fatalf("%d entries remain after delete and rejected push", n)
	}
}

func TestPackIndexBesideEntry(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := newLog(s)
	withIdx := func(ref, old, new, pack, idx string) wal.Push {
		p := push(ref, old, new, pack)
		p.PackIndex, p.PackIndexSize = strings.NewReader(idx), int64(len(idx))
		return p
	}
	if _, err := l.Commit(ctx, "r", withIdx("refs/heads/main", wal.ZeroID, oid(1), "pack1", "idx1")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Commit(ctx, "r", push("refs/heads/main", oid(1), oid(2), "pack2")); err != nil {
		t.Fatal(err)
	}
	x, _ := l.Head(ctx, "r")
	rc, n, err := l.OpenPackIndex(ctx, "r", x.Layers[0])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "idx1" || n != 4 {
		t.Fatalf("pack index = %q (%d bytes)", b, n)
	}
	if _, _, err := l.OpenPackIndex(ctx, "r", x.Layers[1]); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("layer pushed without an index: err = %v, want ErrNotFound", err)
	}
	// A rejected push leaves neither its entry nor its index behind.
	if _, err := l.Commit(ctx, "r", withIdx("refs/heads/main", oid(1), oid(3), "p", "i")); !isNFF("refs/heads/main")(err) {
		t.Fatalf("stale push: %v", err)
	}
	if keys := entries(t, s, "r"); len(keys) != 3 {
		t.Fatalf("entries after a rejected push: %v; want 2 packs and 1 index", keys)
	}
	// A fork carries the index; a delete purges it.
	if err := l.Fork(ctx, "r", "f"); err != nil {
		t.Fatal(err)
	}
	if rc, _, err := l.OpenPackIndex(ctx, "f", x.Layers[0]); err != nil {
		t.Fatalf("forked pack index: %v", err)
	} else {
		rc.Close()
	}
	if err := l.Delete(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if keys := entries(t, s, "r"); len(keys) != 0 {
		t.Fatalf("delete left %v", keys)
	}
}
