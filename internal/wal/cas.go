package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/oklog/ulid/v2"
)

// writeIndex CASes next over the index read with etag ("" = absent).
func (l *Log) writeIndex(ctx context.Context, repo string, next *Index, etag string) error {
	b, err := next.MarshalBinary()
	if err != nil {
		return err
	}
	if etag == "" {
		_, err = l.store.PutIfAbsent(ctx, IndexKey(repo), bytes.NewReader(b), int64(len(b)))
	} else {
		_, err = l.store.PutIfMatch(ctx, IndexKey(repo), bytes.NewReader(b), int64(len(b)), etag)
	}
	return err
}

// backoff returns the pause before attempt n+1 (n counts from 0): base
// doubling per attempt, capped, times a uniform factor in [0.5, 1.5).
func (l *Log) backoff(n int) time.Duration {
	d := float64(l.opts.BackoffBase) * math.Pow(2, float64(n))
	d = min(d, float64(l.opts.BackoffMax))
	l.mu.Lock()
	f := 0.5 + l.jitter.Float64()
	l.mu.Unlock()
	return time.Duration(d * f)
}

// commitState is what a writer of the index knows about its own write
// when the loop returns.
type commitState int

const (
	// notCommitted: the index does not reference the write, and no
	// request of ours can still make it do so.
	notCommitted commitState = iota
	// committed: the index references the write.
	committed
	// unknown: a write of ours may have applied, or may still apply.
	unknown
)

// loop is the state of one casLoop: what it sent and what it learned.
type loop struct {
	repo   string
	mine   ulid.ULID // the layer being committed; zero for tombstones
	writes int       // index writes sent
	// pending is set while an index write of ours has an unknown outcome
	// (docs/adr/0006-write-outcomes.md). It was sent over the index at
	// pendingSeq, so it can still land only while the index stays there:
	// every write raises the seq, so once a read shows a higher seq without
	// our layer, the pending write is dead. Compaction is the one writer
	// that does not raise the seq; see observe for what it changes.
	pending    bool
	pendingSeq uint64
	contended  bool  // a write lost the CAS, or a pending one was overtaken
	lastErr    error // the last failure, for the report
	// landed reports whether an index holds this loop's write (the layer
	// mine, or a compaction's checkpoint).
	landed func(*Index) bool
	// blind is set when a pending write's seq was folded into a
	// checkpoint, so no read of the index can settle it (observe).
	blind bool
}

// observe folds a successfully read index into the loop state and reports
// whether it already holds our write.
//
// A pending write of ours would have become the layer at pendingSeq+1.
// When a checkpoint has since folded that seq (CompactedThroughSeq >
// pendingSeq), the layer list no longer says whose layer it was, so the
// index cannot tell whether our write landed: observe marks the loop
// blind, and the caller ends with an unknown outcome rather than guess
// (docs/adr/0050-compaction.md). A compaction writes the same seq it read,
// so it never makes a pending write look dead by itself. Only a layer can
// be folded: a tombstone is never folded, and a compaction pending under
// a later checkpoint can no longer land.
func (st *loop) observe(cur *Index) bool {
	if st.landed != nil && st.landed(cur) {
		return true
	}
	if st.pending && st.mine != (ulid.ULID{}) && cur.CompactedThroughSeq > st.pendingSeq && !cur.Deleted {
		st.blind = true
		return false
	}
	if st.pending && cur.Seq > st.pendingSeq {
		st.pending = false
		st.contended = true
	}
	return false
}

// state reports what is known when the loop stops without having seen
// its layer in a read that followed every answer.
func (st *loop) state() commitState {
	if st.pending {
		return unknown
	}
	return notCommitted
}

// sent records the answer to an index write sent over cur.
func (st *loop) sent(cur *Index, err error) {
	st.writes++
	st.lastErr = err
	switch {
	case errors.Is(err, objstore.ErrPreconditionFailed):
		st.contended = true
	default:
		// Not a definite refusal: the write may have applied. Any error
		// but a lost CAS is treated so, marked or not (objstore.Store).
		st.pending, st.pendingSeq = true, cur.Seq
	}
}

// casLoop runs the bounded optimistic loop shared by every index writer.
// next builds the new index from the current one, or returns a final error;
// it must be deterministic, because a write with an unknown outcome is
// resent as is. When mine is non-zero, an index already holding that layer
// means an earlier attempt landed, and the commit is reported as done.
//
// The loop never writes without first reading the index and checking for
// its own layer, so a write that landed unseen is found rather than
// appended twice. When attempts run out, or the context ends, settle reads
// the index once more before anything is reported.
func (l *Log) casLoop(ctx context.Context, repo string, next func(*Index) (*Index, error), mine ulid.ULID) (Result, commitState, error) {
	var landed func(*Index) bool
	if mine != (ulid.ULID{}) {
		landed = func(x *Index) bool { return x.HasLayer(mine) }
	}
	return l.casLoopFunc(ctx, repo, next, mine, landed)
}

// casLoopFunc is casLoop with the test for "our write is in the index"
// given by the caller: a compaction has no layer of its own.
func (l *Log) casLoopFunc(ctx context.Context, repo string, next func(*Index) (*Index, error), mine ulid.ULID, landed func(*Index) bool) (Result, commitState, error) {
	st := &loop{repo: repo, mine: mine, landed: landed}
	for attempt := 0; attempt < l.opts.MaxAttempts; attempt++ {
		if attempt > 0 {
			if err := l.opts.Sleep(ctx, l.backoff(attempt-1)); err != nil {
				st.lastErr = err
				break
			}
		}
		cur, etag, err := l.ReadIndex(ctx, repo)
		if err != nil {
			if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrInvalid) {
				return Result{Attempts: st.writes}, unknownIfWritten(st), err
			}
			st.lastErr = err
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if st.observe(cur) {
			return resultOf(cur, seqOf(cur, mine), st.writes), committed, nil
		}
		if st.blind {
			return Result{Attempts: st.writes}, unknown, st.unknown(errFolded)
		}
		if cur.Deleted {
			return Result{Attempts: st.writes}, st.state(), fmt.Errorf("%s: %w", repo, ErrRepoDeleted)
		}
		nx, err := next(cur)
		if err != nil {
			return Result{Attempts: st.writes}, st.state(), err
		}
		err = l.writeIndex(ctx, repo, nx, etag)
		if err == nil {
			return resultOf(nx, nx.Seq, st.writes+1), committed, nil
		}
		if errors.Is(err, ErrInvalid) { // refused before anything was sent
			return Result{Attempts: st.writes}, st.state(), err
		}
		st.sent(cur, err)
		if ctx.Err() != nil {
			break
		}
	}
	return l.settle(ctx, st, next)
}

// unknownIfWritten is the state after a read that cannot be trusted: the
// write is certainly absent only if none was ever sent.
func unknownIfWritten(st *loop) commitState {
	if st.writes == 0 {
		return notCommitted
	}
	return unknown
}

// settleTimeout bounds the final reads of a loop whose context has ended.
const settleTimeout = 30 * time.Second

// settle decides a loop that ran out of attempts (or context) without an
// answer. It reads the index once more: our layer there means the write
// landed after all, even if a store broke its promise and reported a lost
// CAS for it. If a write of ours is still pending on an index nobody else
// has moved, settle resends that same write (conditional on the same
// state, so at most one copy can apply, and it is ours either way) until
// the outcome is known or MaxAttempts more tries are spent. It does not
// resend once ctx has ended, and reads on a context detached from ctx, so
// a cancelled caller still learns what happened. If that read fails after
// any write was sent, the outcome is unknown even when every write was
// refused: the read is the check against a store that broke its promise.
// settleReads is how many times settle reads the index before a failed
// read makes the outcome unknown.
const settleReads = 4

func (l *Log) settle(ctx context.Context, st *loop, next func(*Index) (*Index, error)) (Result, commitState, error) {
	rctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
	}
	failedReads := 0
	for try := 0; ; try++ {
		if try > 0 {
			// Errors are ignored: the detached read below still reports.
			_ = l.opts.Sleep(ctx, l.backoff(try-1))
		}
		cur, etag, err := l.ReadIndex(rctx, st.repo)
		if err != nil {
			if st.writes == 0 {
				return Result{}, notCommitted, st.report(ctx)
			}
			// One failed read says nothing about the write: read again,
			// a few times, within the settle deadline, before reporting
			// a push that may well have landed as unknown. A corrupt
			// index is not read better by waiting.
			if failedReads++; failedReads < settleReads && !errors.Is(err, ErrCorrupt) && rctx.Err() == nil {
				try--
				_ = l.opts.Sleep(rctx, l.backoff(failedReads))
				continue
			}
			return Result{Attempts: st.writes}, unknown, st.unknown(err)
		}
		if st.observe(cur) {
			return resultOf(cur, seqOf(cur, st.mine), st.writes), committed, nil
		}
		if st.blind {
			return Result{Attempts: st.writes}, unknown, st.unknown(errFolded)
		}
		if cur.Deleted {
			return Result{Attempts: st.writes}, st.state(), fmt.Errorf("%s: %w", st.repo, ErrRepoDeleted)
		}
		if !st.pending {
			return Result{Attempts: st.writes}, notCommitted, st.report(ctx)
		}
		// Our write may still land on cur: resend it.
		if ctx.Err() != nil || try >= l.opts.MaxAttempts {
			return Result{Attempts: st.writes}, unknown, st.unknown(st.lastErr)
		}
		nx, err := next(cur)
		if err != nil { // next accepted cur before; a refusal now (a stale checkpoint) leaves the earlier write unknown
			return Result{Attempts: st.writes}, unknown, st.unknown(err)
		}
		err = l.writeIndex(ctx, st.repo, nx, etag)
		if err == nil {
			return resultOf(nx, nx.Seq, st.writes+1), committed, nil
		}
		st.sent(cur, err)
	}
}

// report is the error of a loop that certainly did not commit.
func (st *loop) report(ctx context.Context) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("commit to %s: %w", st.repo, ctx.Err())
	case st.contended || st.lastErr == nil:
		return fmt.Errorf("%s after %d attempts: %w", st.repo, st.writes, ErrContention)
	default:
		return fmt.Errorf("commit to %s: %w", st.repo, st.lastErr)
	}
}

// unknown is the error of a loop whose write may or may not have applied.
func (st *loop) unknown(cause error) error {
	return fmt.Errorf("commit to %s: %w: %w", st.repo, ErrOutcomeUnknown, cause)
}

// seqOf is the seq of layer id in x, or x's seq for a write without a
// layer of its own (a compaction, a tombstone).
func seqOf(x *Index, id ulid.ULID) uint64 {
	if id == (ulid.ULID{}) {
		return x.Seq
	}
	for i, l := range x.Layers {
		if l.ULID == id {
			return x.CompactedThroughSeq + uint64(i) + 1
		}
	}
	return 0
}
