package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/ghost-scm/ghost/internal/compact"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// repoCompact is "ghost repo compact <owner>/<name>": fold the
// repository's log into a checkpoint now, whatever the policy says
// (docs/adr/0050-compaction.md). Servers do this on their own after
// pushes; the command is for operators and benchmarks.
func repoCompact(ctx context.Context, env *Env, args []string) error {
	l := newLeaf(env, "repo compact <owner>/<name>")
	pos, err := l.parse(args, 1, 1)
	if err != nil {
		return err
	}
	owner, name, err := l.splitRepo(pos[0])
	if err != nil {
		return err
	}
	objects, err := l.cfg.OpenStore(ctx)
	if err != nil {
		return err
	}
	s, err := l.open(ctx)
	if err != nil {
		return err
	}
	r, err := s.Repo(ctx, owner, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s/%s is log %s\n", owner, name, r.ID)
	return compactRepo(ctx, objects, l.cfg.Cache(), r.ID, env.Stdout)
}

// compactRepo compacts one log, printing progress to out. It builds in
// the cache directory's scratch space, which a server on the same node
// may share (docs/design.md §5.1). It is independent of how the command
// line is parsed.
func compactRepo(ctx context.Context, objects objstore.Store, cacheDir, repoID string, out io.Writer) error {
	log := wal.New(objects, wal.Options{})
	cache, err := repocache.New(cacheDir, log, repocache.Options{})
	if err != nil {
		return err
	}
	defer cache.Close()
	c := compact.New(log, cache, compact.Options{Progress: func(msg string) { fmt.Fprintln(out, msg) }})
	res, err := c.Compact(ctx, repoID)
	switch {
	case errors.Is(err, compact.ErrNothingToCompact), errors.Is(err, wal.ErrAlreadyCompacted):
		fmt.Fprintf(out, "nothing to do: %v\n", err)
		return nil
	case errors.Is(err, wal.ErrOutcomeUnknown):
		return fmt.Errorf("%w (run the command again: it tells, and completes the compaction if it did not land)", err)
	case err != nil:
		return err
	}
	fmt.Fprintf(out, "done: checkpoint %s (%d objects, %d bytes)\n", wal.CheckpointKey(repoID, res.Checkpoint), res.Objects, res.Checkpoint.Size)
	return nil
}
