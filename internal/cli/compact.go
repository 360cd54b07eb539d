package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ghost-scm/ghost/internal/compact"
	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/wal"
)

// newRepoCompactCmd returns "ghost repo compact [--full] <owner>/<name>":
// fold the repository's log into a checkpoint now, whatever the policy
// says (docs/adr/0050-compaction.md): a geometric roll-up or a full
// repack, as the progression of its checkpoints says, or a full repack
// with --full, the one kind that drops unreachable objects
// (docs/adr/0051-geometric-checkpoints.md). Servers do this on their own
// after pushes; the command is for operators and benchmarks.
func newRepoCompactCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "compact <owner>/<name>",
		Short: "fold the repository's log into a checkpoint now, showing progress",
		Args:  exactArgs(1),
	}
	a := newAdmin(env, cmd)
	a.cfg.RegisterCache(cmd.Flags())
	var full bool
	var nice int
	cmd.Flags().BoolVar(&full, "full", false, "repack the whole repository into one checkpoint, dropping unreachable objects, instead of what the checkpoints' progression asks for")
	registerNice(cmd.Flags(), &nice)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := lowerProcess(env, nice); err != nil {
			return err
		}
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		return a.runE(true, func(ctx context.Context, s stores, _ []string) error {
			r, err := s.meta.Repo(ctx, owner, name)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "%s/%s is log %s in %s\n", owner, name, r.ID, a.cfg.Location())
			return compactRepo(ctx, s, a.cfg.Cache(), r.ID, full, env.Stdout)
		})(cmd, args)
	}
	return cmd
}

// compactRepo compacts one log, printing progress to out. It builds in
// the cache directory's scratch space, which a server on the same node
// may share (docs/design.md §5.1). It is independent of how the command
// line is parsed.
func compactRepo(ctx context.Context, s stores, cacheDir, repoID string, full bool, out io.Writer) error {
	cache, err := repocache.New(cacheDir, s.log, repocache.Options{})
	if err != nil {
		return err
	}
	defer cache.Close()
	// Serve scans every push, so a compaction by hand keeps what scans
	// have not read yet, as serve's own do (docs/adr/0033-scan-coverage.md).
	c := compact.New(s.log, cache, compact.Options{Progress: func(msg string) { fmt.Fprintln(out, msg) }, Coverage: scanner.NewCoverage(s.objects)})
	compactFn := c.Compact
	if full {
		compactFn = c.CompactFull
	}
	res, err := compactFn(ctx, repoID)
	switch {
	case errors.Is(err, compact.ErrNothingToCompact), errors.Is(err, wal.ErrAlreadyCompacted):
		fmt.Fprintf(out, "nothing to do: %v\n", err)
		return nil
	case errors.Is(err, wal.ErrOutcomeUnknown):
		return fmt.Errorf("%w (run the command again: it tells, and completes the compaction if it did not land)", err)
	case err != nil:
		return err
	}
	kind := "a geometric roll-up"
	if res.Full {
		kind = "a full repack"
	}
	fmt.Fprintf(out, "done: checkpoint %s (%s: %d objects, %d bytes)\n", wal.CheckpointKey(repoID, res.Checkpoint), kind, res.Objects, res.Checkpoint.Size)
	return nil
}

// compactFlags are ghost serve's settings of background compaction
// (docs/adr/0050-compaction.md).
type compactFlags struct {
	layers int
	bytes  int64
}

func (c *compactFlags) register(f *pflag.FlagSet) {
	def := compact.DefaultPolicy()
	config.IntVar(f, &c.layers, "compact-layers", "GHOST_COMPACT_LAYERS", def.MaxLayers, "compact a repository in the background once this many pushes followed its last checkpoint (0: never by count)")
	config.BytesVar(f, &c.bytes, "compact-bytes", "GHOST_COMPACT_BYTES", def.MaxBytes, "or once those pushes hold this many bytes of packs, such as 256MiB (0: never by size; both 0: no background compaction)")
}

// options turns the flags into the server's compaction settings; 0 means
// "never" here, where the Policy's zero value means the defaults.
func (c *compactFlags) options() compact.TriggerOptions {
	p := compact.Policy{MaxLayers: c.layers, MaxBytes: c.bytes}
	if p.MaxLayers <= 0 {
		p.MaxLayers = -1
	}
	if p.MaxBytes <= 0 {
		p.MaxBytes = -1
	}
	return compact.TriggerOptions{Policy: p}
}
