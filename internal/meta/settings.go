package meta

import (
	"context"
	"errors"
	"fmt"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// SetPushProtection turns push protection of owner/name on or off
// (docs/adr/0031-push-protection.md), by compare-and-swap on its record so
// a concurrent delete or visibility change is never undone.
//
// It follows the write-outcome contract (docs/adr/0006-write-outcomes.md):
// a lost compare-and-swap certainly did not apply and is retried over a
// fresh read; after any other write error the record is read back. If it
// holds the wanted value the call succeeded, whoever wrote it. If it has
// changed without that value, the failed write (conditional on the old
// ETag) can never land, and the loop tries again. If it is unchanged, the
// write may still land: the error then matches objstore.ErrOutcomeUnknown,
// and calling again is the remedy, since setting a value is idempotent.
func (s *Store) SetPushProtection(ctx context.Context, owner, name string, on bool) error {
	key, err := repoRef(owner, name)
	if err != nil {
		return fmt.Errorf("set push protection: %w", err)
	}
	rec, etag, err := s.readRepo(ctx, owner, name)
	if err != nil {
		return fmt.Errorf("set push protection: %w", err)
	}
	for attempt := 0; ; attempt++ {
		if rec.PushProtection == on {
			return nil
		}
		sent := etag
		rec.PushProtection = on
		intent, err := s.announceRepo(ctx, &rec, rec.Gen)
		if err != nil {
			return fmt.Errorf("set push protection: %w", err)
		}
		mine := rec
		_, werr := s.replaceRecord(ctx, key, &mine, sent)
		if werr == nil {
			s.finishRepo(&mine)
			return nil
		}
		var rerr error
		rec, etag, rerr = s.readRepo(ctx, owner, name)
		switch {
		case rerr != nil && errors.Is(rerr, ErrNotFound):
			s.abandon(intent) // the name is gone: a write conditional on its old ETag cannot land
			return fmt.Errorf("set push protection: %w", rerr)
		case rerr != nil:
			if errors.Is(werr, objstore.ErrPreconditionFailed) {
				s.abandon(intent)
				return fmt.Errorf("set push protection of %s/%s: %w", owner, name, rerr)
			}
			return fmt.Errorf("set push protection of %s/%s: %w: %w (and reading it back: %v)", owner, name, objstore.ErrOutcomeUnknown, werr, rerr)
		case rec.Nonce == mine.Nonce:
			s.finishRepo(&mine) // it landed after all
			return nil
		case rec.PushProtection == on:
			s.abandon(intent) // someone else set it; ours was conditional on the old ETag
			return nil
		case etag == sent && !errors.Is(werr, objstore.ErrPreconditionFailed):
			// Unchanged: the write is neither seen nor ruled out.
			if errors.Is(werr, objstore.ErrOutcomeUnknown) {
				return fmt.Errorf("set push protection of %s/%s: %w", owner, name, werr)
			}
			return fmt.Errorf("set push protection of %s/%s: %w: %w", owner, name, objstore.ErrOutcomeUnknown, werr)
		}
		s.abandon(intent)
		if attempt+1 >= maxCASAttempts || ctx.Err() != nil {
			return fmt.Errorf("set push protection of %s/%s: record kept changing: %w", owner, name, werr)
		}
	}
}
