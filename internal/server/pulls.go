package server

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/gitsvc/cacheadapter"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/pulls"
	"github.com/ghost-scm/ghost/internal/pushprotect"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// pullSyncTimeout bounds the background update of the pull-request refs
// after one push.
const pullSyncTimeout = 5 * time.Minute

// newPulls builds the pull-request service over the node's git service
// (whose server-side pushes carry what pull requests change through the
// push path) and its cache (docs/adr/0119-server-side-merge.md).
func (s *Server) newPulls(git *gitsvc.Service, cache *repocache.Cache) (*pulls.Service, error) {
	return pulls.New(pulls.Options{
		Store:   pulls.NewStore(s.opts.Store),
		Repos:   s.meta,
		Copies:  cacheadapter.PullCopies{Repos: cacheadapter.Repos{Cache: cache, Log: s.log}},
		Pusher:  cacheadapter.PullPusher{Service: git},
		Git:     cache.Git(),
		TempDir: cache.TempDir,
		Refs:    logRefs(s.log),
		Pushes:  s.log,
		Events:  pullEvents{s},
		Logger:  s.logger,
	})
}

// pullSyncs coalesces the background updates of pull-request refs: one
// at a time per pushed branch, and a push that comes while one runs
// makes it run once more rather than start another.
type pullSyncs struct {
	mu      sync.Mutex
	running map[string]bool // repo + "\x00" + ref: again?
}

// pullsAfterCommit moves, in the background, the refs/pull/<n>/head of
// the open pull requests whose head branch the committed push moved
// (docs/adr/0117-pull-request-refs.md): a follow-up commit, never part
// of the push's own. A push to a repository no pull request has had its
// head in costs one GET (Store.HasHeads); otherwise it reads the entry's
// header for the refs the push moved (one ranged GET) and lists the
// head keys of each branch it moved (a LIST each).
func (s *Server) pullsAfterCommit(req gitsvc.Request, res wal.Result) {
	if s.pulls == nil {
		return
	}
	s.background(pullSyncTimeout, func(ctx context.Context) {
		if has, err := s.pulls.Store().HasHeads(ctx, req.Repo); err != nil {
			s.logger.Warn("pull requests: looking for pull requests of a pushed repository failed; their refs move at the next push or read", "repo", req.Repo, "err", err)
			return
		} else if !has {
			return
		}
		h, err := s.log.ReadEntryHeader(ctx, req.Repo, res.ULID)
		if err != nil {
			s.logger.Warn("pull requests: reading a push's refs failed; their refs move at the next push or read", "repo", req.Repo, "err", err)
			return
		}
		for _, t := range h.Transitions {
			if !strings.HasPrefix(t.Ref, "refs/heads/") || wal.IsZero(t.New) {
				continue
			}
			s.syncBranch(ctx, req.Repo, t.Ref)
		}
	})
}

// syncBranch runs HeadPushed for one branch, coalesced.
func (s *Server) syncBranch(ctx context.Context, repo, ref string) {
	key := repo + "\x00" + ref
	ps := &s.pullSyncs
	ps.mu.Lock()
	if again, running := ps.running[key]; running {
		if !again {
			ps.running[key] = true
		}
		ps.mu.Unlock()
		return
	}
	if ps.running == nil {
		ps.running = map[string]bool{}
	}
	ps.running[key] = false
	ps.mu.Unlock()
	for {
		s.pulls.HeadPushed(ctx, repo, []string{ref})
		ps.mu.Lock()
		if !ps.running[key] || ctx.Err() != nil {
			delete(ps.running, key)
			ps.mu.Unlock()
			return
		}
		ps.running[key] = false
		ps.mu.Unlock()
	}
}

// OpenPulls returns a pull-request service over store for a process that
// does not serve: the CLI on the store (docs/adr/0100-cli-modes.md). Its
// merges go through the same push path as a server's, push protection
// included, with a cache of their own in cacheDir; what a server does in
// the background after a commit (a push run, a compaction, moving
// pull-request refs) is left to the servers, whose reconciler and next
// reads catch up. close releases the cache.
func OpenPulls(store objstore.Store, cacheDir, git string, logger *slog.Logger) (ps *pulls.Service, close func(), err error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	log := wal.New(store, wal.Options{})
	cache, err := repocache.New(cacheDir, log, repocache.Options{Git: &gitexec.Runner{Path: git}, Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			cache.Close()
		}
	}()
	svc := cacheadapter.Options(cache, log)
	svc.Logger = logger
	protect, err := pushprotect.New(nil, alerts.New(store), pushprotect.Options{})
	if err != nil {
		return nil, nil, err
	}
	svc.PushProtect = protect
	gs, err := gitsvc.New(svc)
	if err != nil {
		return nil, nil, err
	}
	ps, err = pulls.New(pulls.Options{
		Store: pulls.NewStore(store), Repos: meta.New(store, log),
		Copies:  cacheadapter.PullCopies{Repos: cacheadapter.Repos{Cache: cache, Log: log}},
		Pusher:  cacheadapter.PullPusher{Service: gs},
		Git:     cache.Git(),
		TempDir: cache.TempDir,
		Refs:    logRefs(log),
		Pushes:  log,
		Logger:  logger,
	})
	if err != nil {
		return nil, nil, err
	}
	return ps, cache.Close, nil
}

// logRefs reads a repository's refs from its index: one GET.
func logRefs(log *wal.Log) func(context.Context, string) (map[string]string, error) {
	return func(ctx context.Context, repoID string) (map[string]string, error) {
		x, err := log.Head(ctx, repoID)
		if err != nil {
			return nil, err
		}
		refs := make(map[string]string, len(x.Refs))
		for _, r := range x.Refs {
			refs[r.Name] = r.ID
		}
		return refs, nil
	}
}
