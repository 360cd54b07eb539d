package wal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

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
