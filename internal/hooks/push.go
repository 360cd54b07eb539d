package hooks

import (
	"context"
)

// logHooks returns the active hooks of the repository and of its owner
// that follow the log (push, create, delete), as work on the repository's
// stream. It costs two GETs, whatever the installation holds.
func (s *Store) logHooks(ctx context.Context, tenant, repoID, name string) ([]Work, error) {
	var out []Work
	for _, key := range []string{setsPrefix + "r/" + repoID, Scope{Tenant: tenant}.setKey()} {
		set, err := s.readSet(ctx, key)
		if err != nil {
			return nil, err
		}
		if set.Tenant == "" {
			continue
		}
		for i := range set.Hooks {
			h := &set.Hooks[i]
			if h.Active && followsLog(h.Events) {
				out = append(out, Work{Hook: hookKey(set.scope(), h.ID), Stream: repoID, Tenant: tenant, Name: name})
			}
		}
	}
	return out, nil
}

// BeforePush is the push path's step before its commit point
// (gitsvc.Options.BeforeCommit): when the repository or its owner has a
// hook that follows the log, it marks the repository pending, so that a
// node that dies right after the commit leaves the push to the
// reconciler. An error refuses the push, with nothing changed.
func (s *Store) BeforePush(ctx context.Context, tenant, repoID, name string) error {
	work, err := s.logHooks(ctx, tenant, repoID, name)
	if err != nil {
		return err
	}
	if len(work) == 0 {
		return nil
	}
	return s.MarkPending(ctx, repoID, tenant, name)
}

// AfterPush wakes the dispatcher for a committed push (gitsvc.Options
// .OnCommit): it posts the push's hooks on the board and takes them here.
// A failure loses nothing: the mark BeforePush wrote is the reconciler's.
func (d *Dispatcher) AfterPush(ctx context.Context, tenant, repoID, name string) {
	work, err := d.store.logHooks(ctx, tenant, repoID, name)
	if err != nil {
		d.logger.WarnContext(ctx, "waking webhooks after a push failed; the reconciler delivers them", "repo", repoID, "err", err)
		return
	}
	d.Notify(ctx, work)
}
