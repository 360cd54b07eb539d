// Package cacheadapter gives the git service (gitsvc) the node's
// repository cache and write-ahead log through the small interfaces the
// service declares: gitsvc.Materializer over *repocache.Cache and
// gitsvc.Committer over *wal.Log. It is wiring for the composition root
// (server) and tests; see docs/adr/0018-git-service-boundary.md.
package cacheadapter

import (
	"context"
	"io"

	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// Repos serves a cache and a log as gitsvc.Materializer and
// gitsvc.Committer.
type Repos struct {
	Cache *repocache.Cache
	Log   *wal.Log
}

var (
	_ gitsvc.Materializer = Repos{}
	_ gitsvc.Committer    = Repos{}
	_ gitsvc.Stager       = Repos{}
)

// Materialize brings the cache's copy forward (repocache.Cache.Materialize)
// with HEAD at the repository's default branch
// (repocache.Cache.SetDefaultBranch).
func (r Repos) Materialize(ctx context.Context, repo, defaultBranch string) (*gitsvc.LocalCopy, error) {
	r.Cache.SetDefaultBranch(repo, defaultBranch)
	snap, err := r.Cache.Materialize(ctx, repo)
	if err != nil {
		return nil, err
	}
	return &gitsvc.LocalCopy{
		Dir:    snap.Dir,
		Refs:   snap.Index.Refs,
		Head:   repocache.HeadBranch(snap.Index.Refs, defaultBranch),
		Healed: snap.Healed,
	}, nil
}

// Suspect marks the copy for verification (repocache.Cache.Suspect).
func (r Repos) Suspect(repo string) bool { return r.Cache.Suspect(repo) }

// Commit appends a push to the log (wal.Log.Commit).
func (r Repos) Commit(ctx context.Context, repo string, p wal.Push) (wal.Result, error) {
	return r.Log.Commit(ctx, repo, p)
}

// Stage stores a push's entry before it is validated (wal.Log.Stage).
func (r Repos) Stage(ctx context.Context, repo string, p wal.Push) (*wal.Staged, error) {
	return r.Log.Stage(ctx, repo, p)
}

// CommitStaged commits a staged entry (wal.Log.CommitStaged).
func (r Repos) CommitStaged(ctx context.Context, st *wal.Staged, idx io.Reader, idxSize int64) (wal.Result, error) {
	return r.Log.CommitStaged(ctx, st, idx, idxSize)
}

// Discard deletes a staged entry that will not be committed.
func (r Repos) Discard(st *wal.Staged) { r.Log.Discard(st) }

// Adopt installs the validated pack as the layer the push committed
// (repocache.Cache.Adopt).
func (r Repos) Adopt(ctx context.Context, repo string, res wal.Result, packDir, packHash string) error {
	_, err := r.Cache.Adopt(ctx, repo, res.Seq, res.ULID, packDir, packHash)
	return err
}

// Options returns gitsvc options served by c and log, with c's git runner
// and scratch directory.
func Options(c *repocache.Cache, log *wal.Log) gitsvc.Options {
	r := Repos{Cache: c, Log: log}
	return gitsvc.Options{Repos: r, Commits: r, Git: c.Git(), TempDir: c.TempDir}
}

// Observe returns a repocache Options.Observe that records
// materializations in m.
func Observe(m *gitsvc.Metrics) func(repocache.Event) {
	return func(ev repocache.Event) {
		outcome := "noop"
		switch {
		case ev.Err != nil:
			outcome = "error"
		case ev.Rebuilt:
			outcome = "rebuild"
		case ev.Layers > 0:
			outcome = "forward"
		}
		m.ObserveMaterialize(outcome, ev.Duration, ev.Layers)
	}
}
