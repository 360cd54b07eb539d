package scanner

import (
	"context"
	"sync"
	"time"
)

// DefaultSafetyPoll is how often an idle worker looks for work when the
// coordination store wakes it on new work (etcdcoord's WatchClaimable): a
// shard whose lease ran out is claimable again but writes nothing that
// could wake anyone, so a rare poll still finds it.
const DefaultSafetyPoll = time.Minute

// claimWatcher is what a coordination backend offers when it can wake
// idle workers instead of having them poll (etcdcoord.Backend does).
type claimWatcher interface {
	WatchClaimable(ctx context.Context) <-chan struct{}
}

// gate holds a process's idle workers. A wake-up releases one of them, not
// all: a new shard then costs one look at the runs per process, and a
// worker that found work passes the wake-up on, so a burst of runs still
// gets every worker (docs/adr/0033-scan-coverage.md, issue 22).
type gate struct {
	mu       sync.Mutex
	pending  bool
	waiters  []chan struct{}
	watching bool
}

// signal wakes one waiting worker, or the next one to wait.
func (g *gate) signal() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiters) == 0 {
		g.pending = true
		return
	}
	ch := g.waiters[0]
	g.waiters = g.waiters[1:]
	close(ch)
}

// wait returns after a signal, after d, or when ctx ends.
func (g *gate) wait(ctx context.Context, d time.Duration) {
	g.mu.Lock()
	if g.pending {
		g.pending = false
		g.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	g.waiters = append(g.waiters, ch)
	g.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return
	case <-ctx.Done():
	case <-t.C:
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, c := range g.waiters {
		if c == ch {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			return
		}
	}
	// Signalled as the timer fired: pass the wake-up on.
	g.pending = true
}

// watch makes sure the backend's wake-ups, when it has them, reach the
// gate, and reports whether they do. The watch lives as long as ctx.
func (s *Scanner) watch(ctx context.Context) bool {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	if s.gate.watching {
		return true
	}
	b := s.opts.Coord()
	cw, ok := b.(claimWatcher)
	if b == nil || !ok {
		return false
	}
	ch := cw.WatchClaimable(ctx)
	s.gate.watching = true
	go func() {
		for range ch {
			s.gate.signal()
		}
		s.gate.mu.Lock()
		s.gate.watching = false
		s.gate.mu.Unlock()
	}()
	return true
}
