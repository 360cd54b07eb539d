package cacheadapter

import (
	"context"
	"errors"
	"fmt"

	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/pulls"
	"github.com/ghost-scm/ghost/internal/wal"
)

// PullCopies serves a node's copies (a gitsvc.Materializer, such as
// Repos) as pulls.Copies.
type PullCopies struct {
	Repos gitsvc.Materializer
}

var _ pulls.Copies = PullCopies{}

// Materialize brings the copy of repo up to the log.
func (c PullCopies) Materialize(ctx context.Context, repo string) (pulls.Copy, error) {
	// A merge does not read HEAD: no default-branch setting is passed
	// (every git request sets its own before it serves).
	lc, err := c.Repos.Materialize(ctx, repo, "")
	if errors.Is(err, wal.ErrRepoDeleted) {
		return pulls.Copy{}, fmt.Errorf("%w: %w", pulls.ErrNotFound, err)
	}
	if err != nil {
		return pulls.Copy{}, err
	}
	refs := make(map[string]string, len(lc.Refs))
	for _, r := range lc.Refs {
		refs[r.Name] = r.ID
	}
	return pulls.Copy{Dir: lc.Dir, Refs: refs, Head: lc.Head}, nil
}

// PullPusher serves a git service's server-side pushes (gitsvc.Service
// Push) as pulls.Pusher, so that what pull requests change goes through
// the push path (docs/adr/0119-server-side-merge.md).
type PullPusher struct {
	Service *gitsvc.Service
}

var _ pulls.Pusher = PullPusher{}

// Push runs p as a server push.
func (p PullPusher) Push(ctx context.Context, pp pulls.Push) (pulls.PushResult, error) {
	req := gitsvc.Request{
		Repo: pp.Repo.ID, Principal: pp.By, Tenant: pp.Repo.Owner,
		PushProtection: pp.Repo.PushProtection, AllowReplaceRefs: pp.Repo.AllowReplaceRefs,
		BranchRules: pp.Repo.BranchRules, AllowMissingLFS: pp.Repo.AllowMissingLFS, LFSScanAfterPush: pp.Repo.LFSScanAfterPush,
	}
	sp := gitsvc.ServerPush{Request: req, Pack: pp.Pack}
	for _, u := range pp.Updates {
		sp.Updates = append(sp.Updates, gitsvc.RefUpdate{Ref: u.Ref, Old: u.Old, New: u.New})
	}
	res, err := p.Service.Push(ctx, sp)
	var ge *gitsvc.Error
	switch {
	case err == nil:
	case errors.Is(err, wal.ErrOutcomeUnknown), errors.As(err, new(*wal.CorruptError)):
		return pulls.PushResult{}, fmt.Errorf("%w: %w", pulls.ErrOutcomeUnknown, err)
	case errors.As(err, &ge) && ge.Kind == gitsvc.NotFound:
		return pulls.PushResult{}, fmt.Errorf("%w: %w", pulls.ErrNotFound, err)
	case errors.As(err, &ge) && (ge.Kind == gitsvc.Busy || ge.Kind == gitsvc.Contention):
		return pulls.PushResult{}, fmt.Errorf("%w: %w", pulls.ErrContention, err)
	default:
		return pulls.PushResult{}, err
	}
	return pulls.PushResult{
		Committed: res.Committed(), Moved: res.Moved, Blocked: res.Blocked,
		Message: res.Message, Reasons: res.Reasons,
	}, nil
}
