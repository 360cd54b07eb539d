package repocache

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ghost-scm/ghost/internal/wal"
)

// slot coalesces materializations of one repository in this process.
// Callers that arrive while no materialization has yet read the index join
// the pending flight; callers arriving after it started reading wait for
// the next one, so every caller sees a log state at least as new as the
// moment it asked.
type slot struct {
	mu   sync.Mutex
	next *flight       // the flight new callers join; nil when none is pending
	run  chan struct{} // 1-slot semaphore: one materialization (or adoption) at a time
}

type flight struct {
	done chan struct{}
	snap *Snapshot
	err  error
}

func (c *Cache) slot(id string) *slot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.slots[id]
	if s == nil {
		s = &slot{run: make(chan struct{}, 1)}
		c.slots[id] = s
	}
	return s
}

// Materialize brings the repository's cache forward to the log's current
// index and returns it. Concurrent calls for one repository collapse into
// one materialization. It fails with wal.ErrRepoDeleted for a tombstoned
// repository (and drops its cache). An absent index is an empty
// repository. A compacted log is installed from its checkpoint when the
// cache lacks layers the checkpoint folded (docs/design.md §5.2).
func (c *Cache) Materialize(ctx context.Context, repo string) (*Snapshot, error) {
	if err := wal.CheckRepoID(repo); err != nil {
		return nil, err
	}
	s := c.slot(repo)
	s.mu.Lock()
	f := s.next
	if f == nil {
		f = &flight{done: make(chan struct{})}
		s.next = f
		go c.fly(s, f, repo)
	}
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.snap, f.err
	case <-ctx.Done():
		return nil, fmt.Errorf("materialize %s: %w", repo, ctx.Err())
	}
}

func (c *Cache) fly(s *slot, f *flight, repo string) {
	defer close(f.done)
	select {
	case s.run <- struct{}{}:
	case <-c.base.Done():
		f.err = fmt.Errorf("materialize %s: %w", repo, c.base.Err())
		return
	}
	defer func() { <-s.run }()
	// From here on this flight reads the index: later callers must start
	// a new one.
	s.mu.Lock()
	if s.next == f {
		s.next = nil
	}
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(c.base, c.timeout)
	defer cancel()
	start := time.Now()
	ev := Event{Repo: repo}
	defer func() {
		if r := recover(); r != nil {
			f.snap, f.err = nil, fmt.Errorf("materialize %s: panic: %v", repo, r)
		}
		ev.Duration, ev.Err = time.Since(start), f.err
		if c.observe != nil {
			c.observe(ev)
		}
	}()
	f.snap, f.err = c.bringForward(ctx, repo, &ev)
	if f.err != nil {
		f.err = fmt.Errorf("materialize %s: %w", repo, f.err)
	}
}

// lockRepo (re)creates the cache's layout and takes the repository's file
// lock, which serializes its materializations and adoptions across the
// processes sharing the cache directory.
func (c *Cache) lockRepo(ctx context.Context, repo string) (*fileLock, error) {
	if err := c.ensureDirs(); err != nil {
		return nil, err
	}
	return lockFile(ctx, c.lockPath(repo))
}
