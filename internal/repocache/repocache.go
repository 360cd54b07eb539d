package repocache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/wal"
)

// Options tune a Cache. The zero value is usable.
type Options struct {
	// Git runs git; nil means "git" from PATH.
	Git *gitexec.Runner
	// Logger receives rebuild notices; nil discards them.
	Logger *slog.Logger
	// Observe, when set, is called after every materialization (for
	// metrics). It must be fast and safe for concurrent use.
	Observe func(Event)
	// Timeout bounds one materialization (default 30 minutes). A
	// materialization runs detached from the request that started it,
	// because other requests may be waiting for it.
	Timeout time.Duration
	// MaxPacks bounds the packs a repository keeps before the cache
	// consolidates them with a geometric repack and a multi-pack index
	// with a bitmap (default 16; negative disables). Every push adds a
	// pack, and git's cost per request grows with their number
	// (docs/design.md §5.6).
	MaxPacks int
	// Background, when set, makes consolidating packs (MaxPacks)
	// background work: it runs after the materialization that found too
	// many packs, not inside it, its git processes yield to serving, and
	// it holds the repository's lock only to read and record the state
	// (docs/design.md §5.6, docs/adr/0051-geometric-checkpoints.md). Nil
	// consolidates inside the materialization.
	Background *gitexec.Background
	// BitmapMinBytes is the size of a repository's packs from which the
	// cache, with a Background, writes a multi-pack index with a
	// reachability bitmap when the repository has none (default 4 MiB;
	// negative disables). Consolidating (MaxPacks) writes one too, but a
	// node that installed a repository's checkpoints, or holds fewer
	// packs than MaxPacks, would otherwise serve every clone by counting
	// every object (docs/design.md §5.6).
	BitmapMinBytes int64
	// VerifyInterval is how often, at most, one repository's packs are
	// checksummed after Suspect (default 1 minute): a client that makes
	// git fail on purpose must not make the node hash a large repository
	// on every request (docs/adr/0016-cache-self-healing.md).
	VerifyInterval time.Duration
}

// Event describes one materialization, for metrics and logs.
type Event struct {
	Repo     string
	Duration time.Duration
	Layers   int // layers indexed by this materialization
	// Installed counts the Layers installed from a stored pack index,
	// without running git index-pack.
	Installed int
	Rebuilt   bool // the repository was rebuilt from scratch
	// Checkpoint is set when a checkpoint was installed.
	Checkpoint bool
	// Consolidated is set when the packs were consolidated (MaxPacks).
	Consolidated bool
	// Healed is set when verification after Suspect found the cached
	// packs damaged, and the repository was rebuilt for that reason.
	Healed bool
	Err    error
}

// Snapshot is a materialized repository: a bare git repository whose
// objects hold every layer through Index.Seq and whose refs equal
// Index.Refs (as of the materialization; later ones may move it forward).
type Snapshot struct {
	Repo  string
	Dir   string
	Index *wal.Index
	// Healed reports that this materialization verified the repository
	// (after Suspect), found it damaged and rebuilt it from the log: a
	// request that failed on the old copy is worth retrying.
	Healed bool
}

// Cache is a directory of materialized repositories. It is safe for
// concurrent use, and several processes may share one directory: each
// repository's materialization is serialized by a file lock.
type Cache struct {
	dir     string
	log     *wal.Log
	git     *gitexec.Runner
	logger  *slog.Logger
	observe func(Event)
	timeout time.Duration
	maxPks  int

	base   context.Context
	cancel context.CancelFunc

	verifyEvery time.Duration
	tmpLock     *os.File // shared lock on tmp/ held while the cache is open
	closeOnce   sync.Once

	bg *gitexec.Background // nil: consolidate inside materializations
	// bitmapMin is Options.BitmapMinBytes.
	bitmapMin int64
	bgWG      sync.WaitGroup // background consolidations
	// testHook, when set, runs at the steps of a background consolidation.
	testHook func(step string)

	// heads holds each repository's default-branch setting as the last
	// request said (SetDefaultBranch).
	heads sync.Map

	mu       sync.Mutex
	slots    map[string]*slot
	suspects map[string]bool      // repositories to verify at their next materialization
	verified map[string]time.Time // when each was last verified
	// consolidating holds the repositories being consolidated in the
	// background.
	consolidating map[string]bool
	// bitmapTried holds when a bitmap was last started for a repository
	// (bitmapDue).
	bitmapTried map[string]time.Time
}

// New returns a cache rooted at dir, creating it if needed, and removes
// the leftovers of a crash (push spools, quarantines, half-built
// repositories) from its tmp directory: all of them when no other process
// has the directory open (a node owns its cache), otherwise those older
// than an hour. Call Close when done.
func New(dir string, log *wal.Log, opts Options) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("repocache: empty cache directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("repocache: %w", err)
	}
	if opts.Git == nil {
		opts.Git = &gitexec.Runner{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Minute
	}
	if opts.MaxPacks == 0 {
		opts.MaxPacks = 16
	}
	if opts.VerifyInterval <= 0 {
		opts.VerifyInterval = time.Minute
	}
	if opts.BitmapMinBytes == 0 {
		opts.BitmapMinBytes = 4 << 20
	}
	base, cancel := context.WithCancel(context.Background())
	c := &Cache{
		dir: abs, log: log, git: opts.Git, logger: opts.Logger, observe: opts.Observe,
		timeout: opts.Timeout, maxPks: opts.MaxPacks, base: base, cancel: cancel, slots: map[string]*slot{},
		verifyEvery: opts.VerifyInterval, suspects: map[string]bool{}, verified: map[string]time.Time{},
		bg: opts.Background, consolidating: map[string]bool{}, bitmapTried: map[string]time.Time{}, bitmapMin: opts.BitmapMinBytes,
	}
	if err := c.ensureDirs(); err != nil {
		cancel()
		return nil, err
	}
	lk, alone, err := claimTemp(filepath.Join(abs, "tmp.lock"))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("repocache: %w", err)
	}
	c.tmpLock = lk
	if alone {
		c.sweepTemp(0)
		if err := shareTemp(lk); err != nil {
			c.Close()
			return nil, fmt.Errorf("repocache: %w", err)
		}
	} else {
		c.sweepTemp(time.Hour)
	}
	return c, nil
}

// Close cancels materializations and background consolidations in
// flight (callers waiting on them get an error), waits for the
// consolidations, and lets a later process clear the scratch directory.
func (c *Cache) Close() {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.cancel()
		c.mu.Unlock()
		c.bgWG.Wait()
		if c.tmpLock != nil {
			c.tmpLock.Close()
		}
	})
}

// Consolidating returns how many repositories have background work of
// the cache in flight (a consolidation or a bitmap), so that a benchmark
// can wait for it to end.
func (c *Cache) Consolidating() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.consolidating)
}

// Dir returns the cache's root directory.
func (c *Cache) Dir() string { return c.dir }

// TempDir returns a directory for scratch files (push spools, quarantine
// object directories) on the same filesystem as the repositories, so a
// validated pack can be renamed into a repository instead of copied.
func (c *Cache) TempDir() (string, error) {
	d := filepath.Join(c.dir, "tmp")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", fmt.Errorf("repocache: %w", err)
	}
	return d, nil
}

// Git returns the runner the cache uses, so callers run git the same way.
func (c *Cache) Git() *gitexec.Runner { return c.git }

func (c *Cache) repoPath(id string) string { return filepath.Join(c.dir, "repos", id+".git") }

func (c *Cache) lockPath(id string) string { return filepath.Join(c.dir, "locks", id+".lock") }

// ensureDirs (re)creates the layout; it runs before every materialization
// because an operator may wipe the cache while the server runs.
func (c *Cache) ensureDirs() error {
	for _, d := range []string{"repos", "locks", "tmp"} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o755); err != nil {
			return fmt.Errorf("repocache: %w", err)
		}
	}
	return nil
}

func (c *Cache) sweepTemp(age time.Duration) {
	tmp := filepath.Join(c.dir, "tmp")
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range ents {
		if info, err := e.Info(); err == nil && (age == 0 || time.Since(info.ModTime()) > age) {
			_ = os.RemoveAll(filepath.Join(tmp, e.Name()))
		}
	}
}
