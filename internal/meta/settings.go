package meta

import (
	"context"
	"errors"
	"fmt"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// SetPushProtection turns push protection of owner/name on or off
// (docs/adr/0031-push-protection.md), by compare-and-swap on its record so
// a concurrent delete or visibility change is never undone (setFlag).
func (s *Store) SetPushProtection(ctx context.Context, owner, name string, on bool) error {
	return s.setFlag(ctx, owner, name, "push protection", func(r *repoRecord) *bool { return &r.PushProtection }, on)
}

// SetAllowReplaceRefs lets pushes to refs/replace/* into owner/name, or
// refuses them again (the default): a replace ref changes what a client
// that honours it sees in place of an object, which is how a secret could
// be shown as something harmless (docs/adr/0031-push-protection.md). The
// server's own git processes never honour replace refs either way.
func (s *Store) SetAllowReplaceRefs(ctx context.Context, owner, name string, on bool) error {
	return s.setFlag(ctx, owner, name, "replace refs", func(r *repoRecord) *bool { return &r.AllowReplaceRefs }, on)
}

// setFlag sets one boolean setting of owner/name's record to on, by
// compare-and-swap.
//
// It follows the write-outcome contract (docs/adr/0006-write-outcomes.md):
// a lost compare-and-swap certainly did not apply and is retried over a
// fresh read; after any other write error the record is read back. If it
// holds the wanted value the call succeeded, whoever wrote it. If it has
// changed without that value, the failed write (conditional on the old
// ETag) can never land, and the loop tries again. If it is unchanged, the
// write may still land: the error then matches objstore.ErrOutcomeUnknown,
// and calling again is the remedy, since setting a value is idempotent.
func (s *Store) setFlag(ctx context.Context, owner, name, what string, flag func(*repoRecord) *bool, on bool) error {
	key, err := repoRef(owner, name)
	if err != nil {
		return fmt.Errorf("set %s: %w", what, err)
	}
	rec, etag, err := s.readRepo(ctx, owner, name)
	if err != nil {
		return fmt.Errorf("set %s: %w", what, err)
	}
	for attempt := 0; ; attempt++ {
		if *flag(&rec) == on {
			return nil
		}
		sent := etag
		*flag(&rec) = on
		_, werr := s.replaceRecord(ctx, key, &rec, sent)
		if werr == nil {
			return nil
		}
		var rerr error
		rec, etag, rerr = s.readRepo(ctx, owner, name)
		switch {
		case rerr != nil && errors.Is(rerr, ErrNotFound):
			return fmt.Errorf("set %s: %w", what, rerr)
		case rerr != nil:
			if errors.Is(werr, objstore.ErrPreconditionFailed) {
				return fmt.Errorf("set %s of %s/%s: %w", what, owner, name, rerr)
			}
			return fmt.Errorf("set %s of %s/%s: %w: %w (and reading it back: %v)", what, owner, name, objstore.ErrOutcomeUnknown, werr, rerr)
		case *flag(&rec) == on:
			return nil
		case etag == sent && !errors.Is(werr, objstore.ErrPreconditionFailed):
			// Unchanged: the write is neither seen nor ruled out.
			if errors.Is(werr, objstore.ErrOutcomeUnknown) {
				return fmt.Errorf("set %s of %s/%s: %w", what, owner, name, werr)
			}
			return fmt.Errorf("set %s of %s/%s: %w: %w", what, owner, name, objstore.ErrOutcomeUnknown, werr)
		}
		if attempt+1 >= maxCASAttempts || ctx.Err() != nil {
			return fmt.Errorf("set %s of %s/%s: record kept changing: %w", what, owner, name, werr)
		}
	}
}
