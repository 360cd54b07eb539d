package wal_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// The tests in this file run Commit against faultstore's matrix of
// outcomes (lost, landed then an error, refused) on every store operation
// Commit makes, on its first, a middle and its last attempt, and check the
// invariant of docs/adr/0006-write-outcomes.md after each: the index
// references the entry and the entry exists, or neither; and Commit's
// answer says which.

const maxAttempts = 8 // wal.Options' default, which these tests rely on

// faultRig is a repository with a base commit, a faulty view of its store,
// and a rival committer that writes straight to the inner store.
type faultRig struct {
	t     *testing.T
	inner *memstore.Store
	fs    *faultstore.Store
	log   *wal.Log // the committer under test, on fs
	rival *wal.Log // on inner: its writes are never faulted
	n     atomic.Int64
}

func newFaultRig(t *testing.T, seed bool) *faultRig {
	t.Helper()
	inner := memstore.New()
	r := &faultRig{t: t, inner: inner, fs: faultstore.New(inner), rival: newLog(inner)}
	r.log = newLog(r.fs)
	if seed {
		if _, err := r.rival.Commit(context.Background(), "r", push("refs/heads/base", wal.ZeroID, oid(1), "base")); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// rivalCommit lands another push on its own branch, so the next CAS of the
// committer under test genuinely loses.
func (r *faultRig) rivalCommit() {
	i := r.n.Add(1)
	if _, err := r.rival.Commit(context.Background(), "r", push(fmt.Sprintf("refs/heads/rival%d", i), wal.ZeroID, oid(1000+int(i)), "rival")); err != nil {
		r.t.Errorf("rival commit: %v", err)
	}
}

// check asserts the invariant after Commit returned res, err, and reports
// whether the push is in the log.
func (r *faultRig) check(res wal.Result, err error) bool {
	r.t.Helper()
	ctx := context.Background()
	x, _, rerr := r.rival.ReadIndex(ctx, "r")
	if rerr != nil {
		r.t.Fatalf("read index: %v", rerr)
	}
	copies := 0
	for _, l := range x.Layers {
		if l.ULID == res.ULID {
			copies++
		}
	}
	_, _, gerr := r.inner.Get(ctx, wal.EntryKey("r", res.ULID))
	entry := gerr == nil
	switch {
	case copies > 1:
		r.t.Fatalf("layer %s appended %d times", res.ULID, copies)
	case copies == 1 && !entry:
		r.t.Fatalf("the index references entry %s, which is gone: the repository is corrupt (Commit said %v)", res.ULID, err)
	case copies == 0 && entry:
		r.t.Fatalf("entry %s exists but the index does not reference it (Commit said %v)", res.ULID, err)
	case copies == 1 && err != nil:
		r.t.Fatalf("the push landed, but Commit reported %v", err)
	case copies == 0 && err == nil:
		r.t.Fatalf("Commit reported success (%+v), but the index does not reference the entry", res)
	case copies == 1 && res.Seq != layerSeq(x, res.ULID):
		r.t.Fatalf("Commit reported seq %d, the layer is at %d", res.Seq, layerSeq(x, res.ULID))
	}
	if errors.Is(err, wal.ErrOutcomeUnknown) {
		r.t.Fatalf("Commit reported an unknown outcome, but a single fault must be resolved: %v", err)
	}
	return copies == 1
}

func layerSeq(x *wal.Index, id ulid.ULID) uint64 {
	for i, l := range x.Layers {
		if l.ULID == id {
			return x.CompactedThroughSeq + uint64(i) + 1
		}
	}
	return 0
}

// TestCommitFaultMatrix injects each outcome into the index read and the
// index CAS of attempt 1, 4 and 8. Before every earlier attempt's CAS a
// rival lands a push, so those attempts lose genuinely.
func TestCommitFaultMatrix(t *testing.T) {
	ctx := context.Background()
	for _, attempt := range []int{1, 4, maxAttempts} {
		for _, op := range []faultstore.Op{faultstore.OpGet, faultstore.OpPutIfMatch} {
			for _, o := range faultstore.Faults() {
				t.Run(fmt.Sprintf("attempt%d/%s/%s", attempt, op, o), func(t *testing.T) {
					r := newFaultRig(t, true)
					r.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
						if c.Op.Conditional() && c.CAS < attempt {
							r.rivalCommit()
						}
						if c.Op == op && c.N == attempt {
							return faultstore.Fault{Outcome: o}
						}
						return faultstore.Fault{}
					})
					res, err := r.log.Commit(ctx, "r", push("refs/heads/main", wal.ZeroID, oid(2), "mine"))
					landed := r.check(res, err)
					// Only a fault in the last attempt's read can leave the
					// push uncommitted: every CAS before it lost to a rival.
					if want := !(op == faultstore.OpGet && attempt == maxAttempts); landed != want {
						t.Fatalf("landed = %v, want %v (err %v)", landed, want, err)
					}
					if !landed && !errors.Is(err, wal.ErrContention) {
						t.Fatalf("err = %v, want ErrContention", err)
					}
				})
			}
		}
	}
}

// TestCommitFaultFirstWrite covers the other operations of a commit: the
// entry PUT, the first CAS of a new repository (If-None-Match), and the
// delete of an entry that lost every CAS.
func TestCommitFaultFirstWrite(t *testing.T) {
	ctx := context.Background()
	for _, o := range faultstore.Faults() {
		t.Run("entry-put/"+o.String(), func(t *testing.T) {
			r := newFaultRig(t, true)
			r.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
				if c.Op == faultstore.OpPut {
					return faultstore.Fault{Outcome: o}
				}
				return faultstore.Fault{}
			})
			res, err := r.log.Commit(ctx, "r", push("refs/heads/main", wal.ZeroID, oid(2), "mine"))
			if err == nil {
				t.Fatal("Commit succeeded although its entry PUT failed")
			}
			if r.check(res, err) {
				t.Fatal("the push landed although its entry PUT failed")
			}
		})
		t.Run("put-if-absent/"+o.String(), func(t *testing.T) {
			r := newFaultRig(t, false)
			r.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
				if c.Op == faultstore.OpPutIfAbsent && c.N == 1 {
					return faultstore.Fault{Outcome: o}
				}
				return faultstore.Fault{}
			})
			res, err := r.log.Commit(ctx, "r", push("refs/heads/main", wal.ZeroID, oid(2), "mine"))
			if !r.check(res, err) {
				t.Fatalf("push to a new repository did not land after one %s CAS: %v", o, err)
			}
		})
		t.Run("discard/"+o.String(), func(t *testing.T) {
			r := newFaultRig(t, true)
			r.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
				if c.Op.Conditional() {
					r.rivalCommit()
				}
				if c.Op == faultstore.OpDelete && c.N == 1 {
					return faultstore.Fault{Outcome: o}
				}
				return faultstore.Fault{}
			})
			res, err := r.log.Commit(ctx, "r", push("refs/heads/main", wal.ZeroID, oid(2), "mine"))
			if r.check(res, err) || !errors.Is(err, wal.ErrContention) {
				t.Fatalf("err = %v, want ErrContention", err)
			}
		})
	}
}

// TestCommitLastCASLandsThen412 is issue 8's reproduction: the 8th and
// last CAS lands, and the caller is told it lost (a retrying SDK resent it
// and got 412). Commit must re-read, find its layer, report success and
// keep the entry.
func TestCommitLastCASLandsThen412(t *testing.T) {
	r := newFaultRig(t, true)
	r.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op.Conditional() && c.CAS < maxAttempts {
			r.rivalCommit()
		}
		if c.Op.Conditional() && c.CAS == maxAttempts {
			return faultstore.Fault{Outcome: faultstore.LandedThenError, Err: objstore.ErrPreconditionFailed}
		}
		return faultstore.Fault{}
	})
	res, err := r.log.Commit(context.Background(), "r", push("refs/heads/main", wal.ZeroID, oid(2), "mine"))
	if err != nil {
		t.Fatalf("Commit = %v, want success: the last CAS landed", err)
	}
	if !r.check(res, err) {
		t.Fatal("not landed")
	}
	if r.fs.CASCount() != maxAttempts {
		t.Fatalf("%d CASes, want %d", r.fs.CASCount(), maxAttempts)
	}
	// Every later read of the repository works.
	x, err := r.rival.Head(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range x.Layers {
		if _, err := r.rival.ReadEntryHeader(context.Background(), "r", l.ULID); err != nil {
			t.Fatalf("layer %s: %v", l.ULID, err)
		}
	}
}

// TestCommitPendingOvertaken: the last CAS is lost (ambiguous), and a rival
// moves the index before Commit re-reads. Our write can then never land,
// so the push certainly did not commit: contention, entry deleted.
func TestCommitPendingOvertaken(t *testing.T) {
	r := newFaultRig(t, true)
	r.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		switch {
		case c.Op.Conditional() && c.CAS < maxAttempts:
			r.rivalCommit()
		case c.Op.Conditional() && c.CAS == maxAttempts:
			return faultstore.Fault{Outcome: faultstore.Lost}
		case c.Op == faultstore.OpGet && c.N == maxAttempts+1: // the settling read
			r.rivalCommit()
		}
		return faultstore.Fault{}
	})
	res, err := r.log.Commit(context.Background(), "r", push("refs/heads/main", wal.ZeroID, oid(2), "mine"))
	if r.check(res, err) || !errors.Is(err, wal.ErrContention) {
		t.Fatalf("err = %v, want ErrContention", err)
	}
	if r.fs.CASCount() != maxAttempts {
		t.Fatalf("%d CASes, want %d: a dead write is not resent", r.fs.CASCount(), maxAttempts)
	}
}

// TestCommitOutcomeUnknown: the last CAS is lost (ambiguous) and the index
// then cannot be read or written (deletes still work). Commit cannot know
// whether its write will land, so it says so and keeps the entry: deleting
// it could corrupt the log.
func TestCommitOutcomeUnknown(t *testing.T) {
	r := newFaultRig(t, true)
	var down atomic.Bool
	r.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		switch {
		case down.Load() && c.Key == wal.IndexKey("r"):
			return faultstore.Fault{Outcome: faultstore.Refused}
		case c.Op.Conditional() && c.CAS < maxAttempts:
			r.rivalCommit()
		case c.Op.Conditional() && c.CAS == maxAttempts:
			down.Store(true)
			return faultstore.Fault{Outcome: faultstore.Lost}
		}
		return faultstore.Fault{}
	})
	res, err := r.log.Commit(context.Background(), "r", push("refs/heads/main", wal.ZeroID, oid(2), "mine"))
	if !errors.Is(err, wal.ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
	}
	if errors.Is(err, wal.ErrContention) {
		t.Fatalf("err = %v: an unknown outcome reported as contention", err)
	}
	if _, _, err := r.inner.Get(context.Background(), wal.EntryKey("r", res.ULID)); err != nil {
		t.Fatalf("entry deleted after an unknown outcome: %v", err)
	}
}

// TestInitAndForkFaults: the If-None-Match that creates an index, under
// each outcome, either creates it (and says so) or reports an error with
// no index written.
func TestInitAndForkFaults(t *testing.T) {
	ctx := context.Background()
	for _, o := range faultstore.Faults() {
		t.Run(o.String(), func(t *testing.T) {
			inner := memstore.New()
			fs := faultstore.New(inner)
			l := newLog(fs)
			fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
				if c.Op == faultstore.OpPutIfAbsent && c.N == 1 {
					return faultstore.Fault{Outcome: o}
				}
				return faultstore.Fault{}
			})
			if err := l.Init(ctx, "src"); err != nil {
				t.Fatalf("Init after one %s write: %v", o, err)
			}
			if _, etag, err := newLog(inner).ReadIndex(ctx, "src"); err != nil || etag == "" {
				t.Fatalf("index after Init: etag %q, %v", etag, err)
			}
			if err := l.Init(ctx, "src"); !errors.Is(err, wal.ErrRepoExists) {
				t.Fatalf("second Init: %v, want ErrRepoExists", err)
			}
		})
	}
}

// TestSettleRetriesAFailedRead: the last attempt's index write lands and
// reports a failure, and the first read that would settle it fails too.
// Settling reads again: the push is committed, not reported unknown (a
// single failed GET after the last CAS used to make a landed push
// "outcome unknown", issue 20).
func TestSettleRetriesAFailedRead(t *testing.T) {
	r := newFaultRig(t, true)
	var landed atomic.Bool
	failReads := atomic.Int64{}
	r.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		switch {
		case c.Op.Conditional() && c.CAS < maxAttempts:
			r.rivalCommit()
		case c.Op.Conditional() && c.CAS == maxAttempts:
			landed.Store(true)
			failReads.Store(2)
			return faultstore.Fault{Outcome: faultstore.LandedThenError}
		case landed.Load() && c.Op == faultstore.OpGet && c.Key == wal.IndexKey("r") && failReads.Add(-1) >= 0:
			return faultstore.Fault{Outcome: faultstore.Lost}
		}
		return faultstore.Fault{}
	})
	res, err := r.log.Commit(context.Background(), "r", push("refs/heads/main", wal.ZeroID, oid(2), "mine"))
	if err != nil {
		t.Fatalf("a landed push after two failed reads: %v", err)
	}
	if !r.check(res, err) {
		t.Fatal("the push is not in the log")
	}
}
