package meta

import (
	"context"
	"errors"
	"fmt"

	"github.com/ghost-scm/ghost/internal/ids"
	"github.com/ghost-scm/ghost/internal/wal"
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

// SetAllowMissingLFS lets pushes into owner/name name Git LFS objects the
// repository does not hold (a mirror of a repository whose LFS objects
// are elsewhere), or refuses them again (the default).
func (s *Store) SetAllowMissingLFS(ctx context.Context, owner, name string, on bool) error {
	return s.setFlag(ctx, owner, name, "missing LFS objects", func(r *repoRecord) *bool { return &r.AllowMissingLFS }, on)
}

// SetLFSScanAfterPush lets pushes into owner/name land with Git LFS
// objects too large for push protection's budget, leaving them to the
// push's scan run, or refuses such pushes again (the default;
// docs/adr/0130-lfs-push-protection.md).
func (s *Store) SetLFSScanAfterPush(ctx context.Context, owner, name string, on bool) error {
	return s.setFlag(ctx, owner, name, "LFS scan after push", func(r *repoRecord) *bool { return &r.LFSScanAfterPush }, on)
}

// setFlag sets one boolean setting of owner/name's record to on, by
// compare-and-swap (record.Update): the outcome follows
// docs/adr/0006-write-outcomes.md, and setting a value is idempotent, so a
// write of unknown outcome is settled by reading the value back.
func (s *Store) setFlag(ctx context.Context, owner, name, what string, flag func(*repoRecord) *bool, on bool) error {
	key, err := repoRef(owner, name)
	if err != nil {
		return fmt.Errorf("set %s: %w", what, err)
	}
	if _, _, err := s.readRepo(ctx, owner, name); err != nil {
		return fmt.Errorf("set %s: %w", what, err)
	}
	_, err = s.updateListedRepo(ctx, key, func(cur *repoRecord) (*repoRecord, error) {
		if cur == nil || cur.Deleted {
			return nil, fmt.Errorf("repository %s/%s: %w", owner, name, ErrNotFound)
		}
		if *flag(cur) == on {
			return nil, nil
		}
		next := *cur
		*flag(&next) = on
		return &next, nil
	})
	if err != nil {
		return fmt.Errorf("set %s of %s/%s: %w", what, owner, name, err)
	}
	return nil
}

// ErrNoSuchBranch reports a default branch that the repository does not
// have: only an existing branch can be made the default
// (docs/adr/0110-default-branch.md). It is an ErrInvalidArgument too, so
// that the API answers 400.
var ErrNoSuchBranch error = invalidArgument("no such branch")

// invalidArgument is an ErrInvalidArgument whose message is only its
// own words.
type invalidArgument string

func (e invalidArgument) Error() string { return string(e) }

// Is makes it an ErrInvalidArgument.
func (e invalidArgument) Is(target error) bool { return target == ErrInvalidArgument }

// SetDefaultBranch makes branch (a name below refs/heads/, given without
// that prefix) the default branch of owner/name: the branch HEAD names,
// which clones check out. The branch must exist now (ErrNoSuchBranch
// otherwise), read from the repository's log before the record is
// changed by compare-and-swap (setFlag's outcomes). A push that deletes
// the branch between the two leaves a setting that names a missing
// branch, which serves as if unset until the branch is pushed again: the
// server never deletes the default branch itself, and a push that would
// is refused while the setting is in force.
func (s *Store) SetDefaultBranch(ctx context.Context, owner, name, branch string) error {
	if err := CheckBranchName(branch); err != nil {
		return fmt.Errorf("set default branch: %w", err)
	}
	rec, _, err := s.readRepo(ctx, owner, name)
	if err != nil {
		return fmt.Errorf("set default branch: %w", err)
	}
	x, err := s.log.Head(ctx, rec.ID)
	if err != nil {
		if errors.Is(err, wal.ErrRepoDeleted) {
			return fmt.Errorf("set default branch: repository %s/%s: %w", owner, name, ErrNotFound)
		}
		if errors.Is(err, context.Canceled) {
			return err
		}
		// %v: a log that cannot be read is the server's trouble, never
		// the caller's bad input, whatever the log's error says.
		return fmt.Errorf("set default branch of %s/%s: %w: reading its log: %v", owner, name, ErrUnavailable, err)
	}
	if x.Ref("refs/heads/"+branch) == "" {
		return fmt.Errorf("default branch %q of %s/%s: %w (push it first)", branch, owner, name, ErrNoSuchBranch)
	}
	key, err := repoRef(owner, name)
	if err != nil {
		return fmt.Errorf("set default branch: %w", err)
	}
	_, err = s.updateListedRepo(ctx, key, func(cur *repoRecord) (*repoRecord, error) {
		if cur == nil || cur.Deleted || cur.ID != rec.ID {
			return nil, fmt.Errorf("repository %s/%s: %w", owner, name, ErrNotFound)
		}
		if cur.DefaultBranch == branch {
			return nil, nil
		}
		next := *cur
		next.DefaultBranch = branch
		return &next, nil
	})
	if err != nil {
		return fmt.Errorf("set default branch of %s/%s: %w", owner, name, err)
	}
	return nil
}

// CheckBranchName reports whether branch is a valid branch name as git
// allows it below refs/heads/ (git check-ref-format), given without that
// prefix: ErrInvalidArgument otherwise.
func CheckBranchName(branch string) error {
	if branch == "" {
		return invalidArgument("empty branch name")
	}
	if err := ids.CheckRefName("refs/heads/" + branch); err != nil {
		return invalidArgument(fmt.Sprintf("branch %q is not a valid branch name", branch))
	}
	return nil
}

// MergeMethods changes which strategies may merge owner/name's pull
// requests (docs/adr/0119-server-side-merge.md): each of merge, squash
// and rebase that is non-nil is allowed (true) or not. The three are
// changed by one compare-and-swap, which refuses to leave none allowed
// (ErrInvalidArgument), so concurrent changes cannot add up to that
// either.
type MergeMethods struct {
	Merge, Squash, Rebase *bool
}

// SetMergeMethods applies m to owner/name's record.
func (s *Store) SetMergeMethods(ctx context.Context, owner, name string, m MergeMethods) error {
	key, err := repoRef(owner, name)
	if err != nil {
		return fmt.Errorf("set merge methods: %w", err)
	}
	if _, _, err := s.readRepo(ctx, owner, name); err != nil {
		return fmt.Errorf("set merge methods: %w", err)
	}
	_, err = s.updateListedRepo(ctx, key, func(cur *repoRecord) (*repoRecord, error) {
		if cur == nil || cur.Deleted {
			return nil, fmt.Errorf("repository %s/%s: %w", owner, name, ErrNotFound)
		}
		next := *cur
		for _, f := range []struct {
			allow *bool
			deny  *bool
		}{{m.Merge, &next.DenyMergeCommit}, {m.Squash, &next.DenySquashMerge}, {m.Rebase, &next.DenyRebaseMerge}} {
			if f.allow != nil {
				*f.deny = !*f.allow
			}
		}
		if next.DenyMergeCommit && next.DenySquashMerge && next.DenyRebaseMerge {
			return nil, fmt.Errorf("%w: at least one merge method must stay allowed", ErrInvalidArgument)
		}
		if next.DenyMergeCommit == cur.DenyMergeCommit && next.DenySquashMerge == cur.DenySquashMerge && next.DenyRebaseMerge == cur.DenyRebaseMerge {
			return nil, nil
		}
		return &next, nil
	})
	if err != nil {
		return fmt.Errorf("set merge methods of %s/%s: %w", owner, name, err)
	}
	return nil
}
