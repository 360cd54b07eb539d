// Package wal is ghost's repository write-ahead log on object storage.
//
// Per repository there is one mutable object, repos/<id>/index, and one
// immutable object per push, repos/<id>/entries/<ULID>.pack (a header
// naming the ref transitions, then a self-contained packfile). A push
// becomes real at exactly one point: the compare-and-swap of the index that
// appends its entry as a layer. There is no lock service; concurrent
// pushers race the CAS and the losers re-validate and retry. See
// docs/design.md §3 (the log) and §4 (the commit point) for what this package implements.
package wal

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/ids"
	"github.com/ghost-scm/ghost/internal/objstore"
)

// Log commits to and reads repository logs in one object store. It is safe
// for concurrent use; it holds no per-repository state.
type Log struct {
	store objstore.Store
	opts  Options

	mu      sync.Mutex // guards entropy and jitter
	entropy *ulid.MonotonicEntropy
	jitter  *mrand.Rand
}

// Options tune the commit loop. The zero value means the defaults of
// docs/design.md §4.2.
type Options struct {
	// MaxAttempts bounds index CAS attempts per commit (default 8).
	MaxAttempts int
	// BackoffBase and BackoffMax shape the jittered exponential backoff
	// after a lost CAS (defaults 50 ms and 1 s).
	BackoffBase, BackoffMax time.Duration
	// Sleep waits between attempts; tests replace it to run instantly.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock for ULIDs and created-at stamps.
	Now func() time.Time
}

// New returns a Log on store.
func New(store objstore.Store, opts Options) *Log {
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = 50 * time.Millisecond
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = time.Second
	}
	if opts.Sleep == nil {
		opts.Sleep = sleepCtx
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var seed [32]byte
	rand.Read(seed[:])
	return &Log{
		store:   store,
		opts:    opts,
		entropy: ulid.Monotonic(rand.Reader, 0),
		jitter:  mrand.New(mrand.NewChaCha8(seed)),
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// CheckRepoID validates a repository id, which becomes a key segment
// (ids.CheckRepoID), and answers the log's ErrInvalid.
func CheckRepoID(repo string) error { return asInvalid(ids.CheckRepoID(repo)) }

// IndexKey is the key of a repository's index.
func IndexKey(repo string) string { return "repos/" + repo + "/index" }

// EntryKey is the key of one entry.
func EntryKey(repo string, id ulid.ULID) string {
	return "repos/" + repo + "/entries/" + id.String() + ".pack"
}

// PackIndexKey is the key of an entry's derived pack index: git's .idx for
// the entry's pack, stored beside it so a node can install the pack
// without running git index-pack. It is optional and never authoritative:
// readers verify it against the pack and fall back to indexing.
func PackIndexKey(repo string, id ulid.ULID) string {
	return "repos/" + repo + "/entries/" + id.String() + ".idx"
}

func entriesPrefix(repo string) string { return "repos/" + repo + "/entries/" }

// ReadIndex returns the repository's index and its ETag. A missing index
// is the empty repository at seq 0 with etag "". A tombstone is returned
// as is (Deleted set); callers decide whether that is an error.
func (l *Log) ReadIndex(ctx context.Context, repo string) (*Index, string, error) {
	if err := CheckRepoID(repo); err != nil {
		return nil, "", err
	}
	key := IndexKey(repo)
	b, info, err := objstore.ReadAll(ctx, l.store, key, MaxIndexSize)
	if errors.Is(err, objstore.ErrNotFound) {
		return &Index{}, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read index of %s: %w", repo, err)
	}
	x, err := DecodeIndex(b, key)
	if err != nil {
		return nil, "", err
	}
	return x, info.ETag, nil
}

// Head returns the live index of an existing, undeleted repository:
// ErrRepoDeleted for a tombstone.
func (l *Log) Head(ctx context.Context, repo string) (*Index, error) {
	x, _, err := l.ReadIndex(ctx, repo)
	if err != nil {
		return nil, err
	}
	if x.Deleted {
		return nil, fmt.Errorf("%s: %w", repo, ErrRepoDeleted)
	}
	return x, nil
}

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

func (l *Log) newULID(now time.Time) (ulid.ULID, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ulid.New(ulid.Timestamp(now), l.entropy)
}

// Push is one commit request: the ref transitions and the self-contained
// pack that carries their objects.
type Push struct {
	Transitions []Transition
	PushedBy    string
	// Pack is read once, streamed into the entry. PackSize must be its
	// exact length.
	Pack     io.Reader
	PackSize int64
	// PackIndex, when set, is git's .idx for Pack (PackIndexSize bytes),
	// stored at PackIndexKey before the commit point so that every
	// reader who sees the layer can find it.
	PackIndex     io.Reader
	PackIndexSize int64
}

// Result describes a committed push.
type Result struct {
	ULID     ulid.ULID
	Seq      uint64 // the seq of the new layer
	Attempts int    // index CAS attempts, including the winning one
	// Layers and LayerBytes describe the log as the commit left it: how
	// many layers follow the last checkpoint and how many pack bytes they
	// hold. The compaction policy reads them (docs/adr/0050-compaction.md)
	// without another GET of the index.
	Layers     int
	LayerBytes int64
}

// resultOf is the Result of a commit seen in index x.
func resultOf(x *Index, seq uint64, attempts int) Result {
	r := Result{Seq: seq, Attempts: attempts, Layers: len(x.Layers)}
	for _, l := range x.Layers {
		r.LayerBytes += l.Size
	}
	return r
}

// Commit appends a push to the repository's log: PUT the entry, then
// CAS it into the index (docs/design.md §4, "The commit point").
//
// Errors: *NonFastForwardError or *RefConflictError when a transition no
// longer applies (final), ErrContention after MaxAttempts lost CASes,
// ErrRepoDeleted for a tombstoned repository, *InvalidError for a bad
// request, or a storage error. On all of those the push certainly did not
// commit and its entry is deleted. ErrOutcomeUnknown means Commit could
// not learn whether its index write applied (the store stopped answering,
// the context ended while a write was unanswered, or a checkpoint folded
// the seq the write would have taken: docs/design.md §3.8); the entry is then
// kept, because the log may reference it, and left for garbage collection
// if it does not. A nil error means the index references the entry. See
// docs/adr/0006-write-outcomes.md.
func (l *Log) Commit(ctx context.Context, repo string, p Push) (Result, error) {
	st, err := l.Stage(ctx, repo, Push{Transitions: p.Transitions, PushedBy: p.PushedBy, Pack: p.Pack, PackSize: p.PackSize})
	if err != nil {
		return Result{}, err
	}
	return l.CommitStaged(ctx, st, p.PackIndex, p.PackIndexSize)
}

// Staged is an entry in the store that no index references yet: the
// first half of Commit, done by Stage, so that a caller can upload the
// pack while it still validates it (docs/adr/0019-staged-entries.md).
// It is used once, by CommitStaged or Discard.
type Staged struct {
	repo  string
	ts    []Transition // sorted by ref
	layer Layer
}

// ULID is the staged entry's id.
func (s *Staged) ULID() ulid.ULID { return s.layer.ULID }

// Stage PUTs the entry of p (its header and pack, hashing the pack as it
// streams) without committing it; p.PackIndex is ignored. The entry's
// header holds only what the caller knows before any validation: its
// id, time, pusher and transitions.
//
// Errors: *InvalidError for a bad request, or a storage error, after
// which Stage has tried to delete the entry; an entry whose PUT had an
// unknown outcome and whose delete failed is an orphan that no index
// references, removed by garbage collection after its grace
// (docs/adr/0040-garbage-collection.md). A nil error means the entry is
// stored; the caller then calls CommitStaged or Discard.
func (l *Log) Stage(ctx context.Context, repo string, p Push) (*Staged, error) {
	if err := CheckRepoID(repo); err != nil {
		return nil, err
	}
	ts := slices.Clone(p.Transitions)
	slices.SortFunc(ts, func(a, b Transition) int { return strings.Compare(a.Ref, b.Ref) })
	now := l.opts.Now()
	id, err := l.newULID(now)
	if err != nil {
		return nil, fmt.Errorf("new entry id: %w", err)
	}
	hdr := &EntryHeader{ULID: id, CreatedAt: now, PushedBy: p.PushedBy, Transitions: ts}
	hb, err := hdr.MarshalBinary()
	if err != nil {
		return nil, err
	}
	if p.PackSize < 0 {
		return nil, invalid("negative pack size %d", p.PackSize)
	}

	// 3. PUT the entry, unconditionally, hashing the pack as it streams.
	key := EntryKey(repo, id)
	sum := sha256.New()
	body := io.MultiReader(bytes.NewReader(hb), io.TeeReader(p.Pack, sum))
	if _, err := l.store.Put(ctx, key, body, int64(len(hb))+p.PackSize); err != nil {
		l.discard(key)
		return nil, fmt.Errorf("put entry %s: %w", key, err)
	}
	layer := Layer{ULID: id, Size: p.PackSize}
	copy(layer.SHA256[:], sum.Sum(nil))
	return &Staged{repo: repo, ts: ts, layer: layer}, nil
}

// CommitStaged commits a staged entry: it PUTs the pack index, when idx
// is set (idxSize bytes of git's .idx for the staged pack), then CASes
// the entry into the index. Its errors and what they mean for the entry
// are Commit's.
func (l *Log) CommitStaged(ctx context.Context, st *Staged, idx io.Reader, idxSize int64) (Result, error) {
	repo, id := st.repo, st.layer.ULID
	key := EntryKey(repo, id)
	if idx != nil {
		if _, err := l.store.Put(ctx, PackIndexKey(repo, id), idx, idxSize); err != nil {
			l.discard(key, PackIndexKey(repo, id))
			return Result{}, fmt.Errorf("put pack index of %s: %w", key, err)
		}
	}

	res, state, err := l.casLoop(ctx, repo, func(cur *Index) (*Index, error) {
		return apply(cur, st.ts, st.layer)
	}, id)
	res.ULID = id
	if state == notCommitted {
		l.discard(key, PackIndexKey(repo, id))
	}
	return res, err
}

// Discard deletes a staged entry that will not be committed, best
// effort: what it fails to delete is an orphan for garbage collection.
func (l *Log) Discard(st *Staged) {
	l.discard(EntryKey(st.repo, st.layer.ULID))
}

// discardAttempts bounds the deletes of one discarded object: a single
// failed delete should not leave an orphan behind.
const discardAttempts = 3

// discard deletes objects of an entry that will never be referenced. It
// runs on a fresh context: the caller's may be the reason we are
// discarding.
func (l *Log) discard(keys ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, k := range keys {
		for try := 0; try < discardAttempts; try++ {
			// Best effort: an orphan is garbage, not corruption.
			if l.store.Delete(ctx, k) == nil {
				break
			}
		}
	}
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

// apply validates ts against the live refs and returns the next index.
func apply(cur *Index, ts []Transition, layer Layer) (*Index, error) {
	refs := make(map[string]string, len(cur.Refs)+len(ts))
	for _, r := range cur.Refs {
		refs[r.Name] = r.ID
	}
	for _, t := range ts {
		live := refs[t.Ref]
		switch {
		case IsZero(t.Old) && live != "":
			return nil, &NonFastForwardError{Ref: t.Ref, Expected: t.Old, Actual: live}
		case !IsZero(t.Old) && live != t.Old:
			actual := live
			if actual == "" {
				actual = zeroOf(t.Old)
			}
			return nil, &NonFastForwardError{Ref: t.Ref, Expected: t.Old, Actual: actual}
		}
		if IsZero(t.New) {
			delete(refs, t.Ref)
		} else {
			refs[t.Ref] = t.New
		}
	}
	next := &Index{
		Seq:                 cur.Seq + 1,
		CompactedThroughSeq: cur.CompactedThroughSeq,
		Checkpoints:         cur.Checkpoints,
		Refs:                make([]Ref, 0, len(refs)),
		Layers:              append(slices.Clip(cur.Layers), layer),
	}
	for name, id := range refs {
		next.Refs = append(next.Refs, Ref{Name: name, ID: id})
	}
	slices.SortFunc(next.Refs, func(a, b Ref) int { return strings.Compare(a.Name, b.Name) })
	if err := checkDF(next.Refs, ts); err != nil {
		return nil, err
	}
	return next, nil
}

// CheckDF refuses a set of refs holding both "x" and "x/..." where one of
// them is set by ts: refs is the set after ts, sorted by name. It reports
// the first conflict as a *RefConflictError. It is ghost's one
// directory/file check of ref names; the push path uses it to name every
// conflicting command before the pack is validated.
func CheckDF(refs []Ref, ts []Transition) error { return checkDF(refs, ts) }

// checkDF: after sorting, a conflicting pair is adjacent-or-near, and "x/"
// sorts right after "x".
func checkDF(refs []Ref, ts []Transition) error {
	for _, t := range ts {
		if IsZero(t.New) {
			continue
		}
		// Any ref below t.Ref?
		prefix := t.Ref + "/"
		i, _ := slices.BinarySearchFunc(refs, prefix, func(r Ref, n string) int { return strings.Compare(r.Name, n) })
		if i < len(refs) && strings.HasPrefix(refs[i].Name, prefix) {
			return &RefConflictError{Ref: t.Ref, Conflict: refs[i].Name}
		}
		// Any ref above it?
		for j := strings.LastIndexByte(t.Ref, '/'); j > 0; j = strings.LastIndexByte(t.Ref[:j], '/') {
			parent := t.Ref[:j]
			if _, ok := slices.BinarySearchFunc(refs, parent, func(r Ref, n string) int { return strings.Compare(r.Name, n) }); ok {
				return &RefConflictError{Ref: t.Ref, Conflict: parent}
			}
		}
	}
	return nil
}

// Init creates an empty repository log (seq 0), failing with ErrRepoExists
// if there is an index or a tombstone. A repository may also be pushed to
// without Init: an absent index reads as empty.
func (l *Log) Init(ctx context.Context, repo string) error {
	if err := CheckRepoID(repo); err != nil {
		return err
	}
	return l.createIndex(ctx, repo, &Index{})
}

// createIndex writes x as repo's first index, If-None-Match: ErrRepoExists
// when there is one. After a write whose outcome is unknown it reads the
// index back (docs/adr/0006-write-outcomes.md): the very bytes it sent mean
// the write applied; an absent index means it has not, and the same write
// is resent, which can apply at most once; anything else is another
// writer's index. ErrOutcomeUnknown if the outcome cannot be learned.
func (l *Log) createIndex(ctx context.Context, repo string, x *Index) error {
	b, err := x.MarshalBinary()
	if err != nil {
		return err
	}
	key := IndexKey(repo)
	pending := false // a write of ours has an unknown outcome
	var lastErr error
	for attempt := 0; attempt < l.opts.MaxAttempts; attempt++ {
		if attempt > 0 {
			if err := l.opts.Sleep(ctx, l.backoff(attempt-1)); err != nil {
				lastErr = err
				break
			}
		}
		_, err := l.store.PutIfAbsent(ctx, key, bytes.NewReader(b), int64(len(b)))
		if err == nil {
			return nil
		}
		if errors.Is(err, objstore.ErrPreconditionFailed) && !pending {
			return fmt.Errorf("%s: %w", repo, ErrRepoExists)
		}
		pending, lastErr = true, err
		got, _, rerr := objstore.ReadAll(ctx, l.store, key, MaxIndexSize)
		switch {
		case rerr == nil && bytes.Equal(got, b):
			return nil
		case rerr == nil:
			return fmt.Errorf("%s: %w", repo, ErrRepoExists)
		case !errors.Is(rerr, objstore.ErrNotFound):
			lastErr = rerr
		}
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("create index of %s: %w: %w", repo, ErrOutcomeUnknown, lastErr)
}

// Delete writes a tombstone (empty index, Deleted, seq+1) with the same CAS
// loop as a push, so a racing push loses, then purges the entries. The
// tombstone is never removed. Deleting a tombstoned repository reports
// ErrRepoDeleted (and purges again), which is also what a delete whose own
// tombstone landed unseen reports.
func (l *Log) Delete(ctx context.Context, repo string) error {
	if err := CheckRepoID(repo); err != nil {
		return err
	}
	_, _, err := l.casLoop(ctx, repo, func(cur *Index) (*Index, error) {
		return &Index{Seq: cur.Seq + 1, CompactedThroughSeq: cur.Seq + 1, Deleted: true}, nil
	}, ulid.ULID{})
	if err != nil && !errors.Is(err, ErrRepoDeleted) {
		return err
	}
	// Purge on ErrRepoDeleted too: it finishes a delete that was
	// interrupted, or whose tombstone write landed unseen.
	if perr := l.purge(ctx, repo); perr != nil {
		return perr
	}
	return err
}

func (l *Log) purge(ctx context.Context, repo string) error {
	var keys []string
	for _, prefix := range []string{entriesPrefix(repo), checkpointsPrefix(repo)} {
		if err := objstore.Walk(ctx, l.store, prefix, func(o objstore.Info) error {
			keys = append(keys, o.Key)
			return nil
		}); err != nil {
			return fmt.Errorf("purge %s: %w", repo, err)
		}
	}
	for _, k := range keys {
		if err := l.store.Delete(ctx, k); err != nil {
			return fmt.Errorf("purge %s: %w", repo, err)
		}
	}
	return nil
}

// Fork copies src's log to dst: every checkpoint and every layer's entry
// first (immutable, so no lock is needed), then dst's index with If-None-Match, so a fork onto
// an existing or deleted repository fails with ErrRepoExists.
func (l *Log) Fork(ctx context.Context, src, dst string) error {
	if err := CheckRepoID(dst); err != nil {
		return err
	}
	x, err := l.Head(ctx, src)
	if err != nil {
		return err
	}
	if _, etag, err := l.ReadIndex(ctx, dst); err != nil {
		return err
	} else if etag != "" {
		return fmt.Errorf("%s: %w", dst, ErrRepoExists)
	}
	for _, c := range x.Checkpoints {
		// A checkpoint is immutable like an entry: copy them first, so
		// the destination's index never names a missing object.
		if err := l.store.Copy(ctx, CheckpointKey(src, c), CheckpointKey(dst, c)); err != nil {
			return fmt.Errorf("fork %s to %s: copy checkpoint %d: %w", src, dst, c.Seq, err)
		}
		err := l.store.Copy(ctx, CheckpointIndexKey(src, c), CheckpointIndexKey(dst, c))
		if err != nil && !errors.Is(err, objstore.ErrNotFound) { // the index is optional
			return fmt.Errorf("fork %s to %s: copy checkpoint index %d: %w", src, dst, c.Seq, err)
		}
	}
	for _, layer := range x.Layers {
		if err := l.store.Copy(ctx, EntryKey(src, layer.ULID), EntryKey(dst, layer.ULID)); err != nil {
			return fmt.Errorf("fork %s to %s: copy %s: %w", src, dst, layer.ULID, err)
		}
		err := l.store.Copy(ctx, PackIndexKey(src, layer.ULID), PackIndexKey(dst, layer.ULID))
		if err != nil && !errors.Is(err, objstore.ErrNotFound) { // the index is optional
			return fmt.Errorf("fork %s to %s: copy pack index %s: %w", src, dst, layer.ULID, err)
		}
	}
	return l.createIndex(ctx, dst, x)
}

// OpenPackIndex opens the derived pack index stored beside a layer's
// entry. It fails with an error matching objstore.ErrNotFound when the
// entry has none (pushed without one, or by an older ghost).
func (l *Log) OpenPackIndex(ctx context.Context, repo string, layer Layer) (io.ReadCloser, int64, error) {
	rc, info, err := l.store.Get(ctx, PackIndexKey(repo, layer.ULID))
	if err != nil {
		return nil, 0, fmt.Errorf("pack index of %s: %w", layer.ULID, err)
	}
	return rc, info.Size, nil
}

// headerProbe is the first ranged read of an entry: most headers fit.
const headerProbe = 4096

// ReadEntryHeader reads an entry's header with one ranged GET, or two when
// the header is longer than the first probe.
func (l *Log) ReadEntryHeader(ctx context.Context, repo string, id ulid.ULID) (*EntryHeader, error) {
	key := EntryKey(repo, id)
	first, err := l.readRange(ctx, key, 0, headerProbe)
	if err != nil {
		return nil, err
	}
	n, err := entryHeaderLen(first, key)
	if err != nil {
		return nil, err
	}
	buf := first
	if n > int64(len(first)) {
		rest, err := l.readRange(ctx, key, int64(len(first)), n-int64(len(first)))
		if err != nil {
			return nil, err
		}
		buf = append(first, rest...)
	}
	if int64(len(buf)) < n {
		return nil, corrupt(key, "entry ends inside its %d-byte header", n)
	}
	h, err := DecodeEntryHeader(buf[:n], key)
	if err != nil {
		return nil, err
	}
	if h.ULID != id {
		return nil, corrupt(key, "header names entry %s", h.ULID)
	}
	return h, nil
}

func (l *Log) readRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	rc, err := l.store.GetRange(ctx, key, off, n)
	if err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return nil, corrupt(key, "entry referenced by the index is missing")
		}
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, n))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return b, nil
}

// OpenPack streams a layer's pack with a ranged GET after its header. The
// reader verifies the pack's size and sha256 against the index and fails
// with a *CorruptError at the end if they differ, so a damaged entry is
// never applied silently.
func (l *Log) OpenPack(ctx context.Context, repo string, layer Layer) (io.ReadCloser, *EntryHeader, error) {
	h, err := l.ReadEntryHeader(ctx, repo, layer.ULID)
	if err != nil {
		return nil, nil, err
	}
	key := EntryKey(repo, layer.ULID)
	rc, err := l.store.GetRange(ctx, key, h.Len, layer.Size)
	if err != nil {
		return nil, nil, fmt.Errorf("open pack %s: %w", key, err)
	}
	return &verifyReader{rc: rc, key: key, want: layer.SHA256, size: layer.Size, sum: sha256.New()}, h, nil
}

type verifyReader struct {
	rc   io.ReadCloser
	key  string
	want [32]byte
	size int64
	n    int64
	sum  hash.Hash
}

func (v *verifyReader) Read(p []byte) (int, error) {
	n, err := v.rc.Read(p)
	v.sum.Write(p[:n])
	v.n += int64(n)
	if err == io.EOF {
		if v.n != v.size {
			return n, corrupt(v.key, "pack is %d bytes, index says %d", v.n, v.size)
		}
		if !bytes.Equal(v.sum.Sum(nil), v.want[:]) {
			return n, corrupt(v.key, "pack sha256 differs from the index")
		}
	}
	return n, err
}

func (v *verifyReader) Close() error { return v.rc.Close() }
