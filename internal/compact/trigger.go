package compact

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/ghost-scm/ghost/internal/wal"
)

// Policy says when a repository is due for compaction: when the layers
// after its last checkpoint number MaxLayers or more, or hold MaxBytes or
// more of packs (docs/adr/0050-compaction.md).
type Policy struct {
	MaxLayers int
	MaxBytes  int64
}

// DefaultPolicy compacts after 50 layers or 256 MiB of layer packs.
//
// 50 is git's gc.autoPackLimit, the pack count at which `git gc --auto`
// (which `git http-backend` runs after receive-pack) repacks: a cold node
// then installs at most about as many packs as a stock git server keeps.
// Each compaction rewrites the whole repository, so the count also
// amortizes that cost over 50 pushes. 256 MiB bounds what a cold node
// replays on top of the checkpoint when a few large pushes arrive, while
// keeping a repository that mostly gets large pushes from being
// rewritten after each.
func DefaultPolicy() Policy { return Policy{MaxLayers: 50, MaxBytes: 256 << 20} }

// Due reports whether a log with layers layers of layerBytes bytes after
// its last checkpoint should be compacted.
func (p Policy) Due(layers int, layerBytes int64) bool {
	return layers > 0 && (p.MaxLayers > 0 && layers >= p.MaxLayers || p.MaxBytes > 0 && layerBytes >= p.MaxBytes)
}

// Trigger runs compactions in the background after commits, off the
// push's response path. Any node that observes a due repository may
// compact it; racing nodes are harmless because the index CAS decides
// (docs/adr/0050-compaction.md). Within one process at most one
// compaction per repository runs at a time, and at most Concurrency in
// all; a trigger that finds no free slot is dropped, since the next push
// to the repository triggers again.
type Trigger struct {
	c      *Compactor
	policy Policy
	logger *slog.Logger
	sem    chan struct{}
	// Timeout bounds one background compaction.
	timeout time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	running map[string]bool
	// retryAt holds, for a repository whose last compaction here failed,
	// the layer count at which to try again: a compaction that fails for
	// a lasting reason is not retried on every push.
	retryAt map[string]int
	// done, when set, is told the outcome of each background run (tests).
	done func(repo string, res Result, err error)
}

// TriggerOptions tune a Trigger. The zero value means DefaultPolicy, one
// compaction at a time and a one-hour timeout.
type TriggerOptions struct {
	Policy      Policy
	Concurrency int
	Timeout     time.Duration
	Logger      *slog.Logger
	// Done, when set, is called after each background compaction.
	Done func(repo string, res Result, err error)
}

// NewTrigger returns a Trigger that runs c.
func NewTrigger(c *Compactor, opts TriggerOptions) *Trigger {
	if opts.Policy == (Policy{}) {
		opts.Policy = DefaultPolicy()
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 1
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Trigger{
		c: c, policy: opts.Policy, logger: opts.Logger, sem: make(chan struct{}, opts.Concurrency),
		timeout: opts.Timeout, ctx: ctx, cancel: cancel, running: map[string]bool{}, retryAt: map[string]int{}, done: opts.Done,
	}
}

// AfterCommit is called by the push path once a commit landed. It never
// blocks: when the repository is due and a slot is free, the compaction
// starts in the background. It reports whether one started.
//
// After a failed compaction of a repository, the next one starts only
// once a fifth of MaxLayers more layers (at least one) have landed.
func (t *Trigger) AfterCommit(repo string, res wal.Result) bool {
	if !t.policy.Due(res.Layers, res.LayerBytes) {
		return false
	}
	t.mu.Lock()
	at, failed := t.retryAt[repo]
	t.mu.Unlock()
	if failed && res.Layers < at {
		return false
	}
	return t.start(repo, res.Layers)
}

// Start compacts repo in the background unless it is already being
// compacted here or every slot is busy, and reports whether it started.
func (t *Trigger) Start(repo string) bool { return t.start(repo, -1) }

// start is Start for a repository whose log has layers layers after its
// checkpoint (-1: unknown).
func (t *Trigger) start(repo string, layers int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running[repo] || t.ctx.Err() != nil {
		return false
	}
	select {
	case t.sem <- struct{}{}:
	default:
		return false
	}
	t.running[repo] = true
	t.wg.Add(1)
	go t.run(repo, layers)
	return true
}

func (t *Trigger) run(repo string, layers int) {
	defer t.wg.Done()
	ctx, cancel := context.WithTimeout(t.ctx, t.timeout)
	defer cancel()
	res, err := t.c.Compact(ctx, repo)
	failed := err != nil && !errors.Is(err, wal.ErrAlreadyCompacted) && !errors.Is(err, ErrNothingToCompact) && !errors.Is(err, wal.ErrRepoDeleted)
	// Free the repository and the slot before reporting, so that whoever
	// hears the report may start the next compaction.
	t.mu.Lock()
	if failed && layers >= 0 {
		t.retryAt[repo] = layers + max(1, t.policy.MaxLayers/5)
	} else if !failed {
		delete(t.retryAt, repo)
	}
	delete(t.running, repo)
	t.mu.Unlock()
	<-t.sem
	switch {
	case err == nil:
		t.logger.Info("compacted", "repo", repo, "seq", res.Checkpoint.Seq, "full", res.Full, "folded", res.Folded, "replaced", res.Replaced,
			"objects", res.Objects, "bytes", res.Checkpoint.Size, "duration", res.Took)
	case errors.Is(err, wal.ErrAlreadyCompacted), errors.Is(err, ErrNothingToCompact), errors.Is(err, wal.ErrRepoDeleted):
		t.logger.Debug("compaction not needed", "repo", repo, "err", err)
	default:
		// Nothing to undo: a failed compaction leaves the index as it was
		// (or, with an unknown outcome, compacted or not, both valid).
		t.logger.Warn("compaction failed; a later push retries", "repo", repo, "err", err)
	}
	if t.done != nil {
		t.done(repo, res, err)
	}
}

// Close stops starting compactions, cancels the running ones and waits
// for them.
func (t *Trigger) Close() {
	t.mu.Lock()
	t.cancel()
	t.mu.Unlock()
	t.wg.Wait()
}
