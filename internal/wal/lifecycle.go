package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/oklog/ulid/v2"
)

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
