package scanner

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// transient reports whether err is a failure that says nothing about the
// shard's input: the object store or the coordination store did not
// answer, a write's outcome is unknown, the lease was lost, or the worker
// is stopping. Such a failure is retried with backoff and never counts
// toward parking the shard (docs/adr/0033-scan-coverage.md). Every other
// failure counts, and parks the shard only when it repeats on the same
// input.
func transient(err error) bool {
	if err == nil {
		return false
	}
	for _, target := range []error{
		context.Canceled, context.DeadlineExceeded, errLeaseLost, ErrNoCoordinator, ErrContention,
		objstore.ErrUnavailable, objstore.ErrOutcomeUnknown,
		coord.ErrUnavailable, coord.ErrContention,
		coord.ErrLeaseExpired, coord.ErrStaleFence, coord.ErrNotOwner,
		wal.ErrContention, wal.ErrOutcomeUnknown, meta.ErrUnavailable,
		io.ErrUnexpectedEOF, syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// inputError is a failure of one attempt at a shard, with the input it
// was working on when it failed: what a parked shard's reason names.
type inputError struct {
	input string
	err   error
}

func (e *inputError) Error() string { return e.input + ": " + e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

// inputOf returns the input an error names, or what.
func inputOf(err error, what string) string {
	var ie *inputError
	if errors.As(err, &ie) {
		return ie.input
	}
	return what
}

// Backoff bounds: a run whose attempt failed is not tried again by this
// process's workers for minBackoff, doubling with each consecutive
// failure up to maxBackoff.
const (
	minBackoff = 2 * time.Second
	maxBackoff = 2 * time.Minute
	// finishEvery bounds how often this process's claim passes try to
	// finish a run that had no shard to claim (a crash after its last
	// shard completed): once per run per interval.
	finishEvery = 10 * time.Second
)

// backoff is the process-wide memory of runs to leave alone for a while:
// runs whose attempt failed here (so a failing run is skipped, and no
// other run loses its turn to it), and runs whose finish was tried
// recently. Each process learns on its own; across processes a failing
// shard is also held back by its expiring lease.
type backoff struct {
	now func() time.Time

	mu      sync.Mutex
	failing map[coord.RunID]failingRun
	checked map[coord.RunID]time.Time
}

type failingRun struct {
	n     int
	until time.Time
}

// fail records a failed attempt at run and returns how long it waits.
func (b *backoff) fail(run coord.RunID) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failing == nil {
		b.failing = map[coord.RunID]failingRun{}
	}
	if len(b.failing) > 4096 {
		now := b.now()
		for id, f := range b.failing {
			if !now.Before(f.until) {
				delete(b.failing, id)
			}
		}
	}
	f := b.failing[run]
	d := min(minBackoff<<min(f.n, 16), maxBackoff)
	f.n++
	f.until = b.now().Add(d)
	b.failing[run] = f
	return d
}

// ok forgets run's failures: an attempt succeeded.
func (b *backoff) ok(run coord.RunID) {
	b.mu.Lock()
	delete(b.failing, run)
	b.mu.Unlock()
}

// waiting reports whether run is in backoff now.
func (b *backoff) waiting(run coord.RunID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ok := b.failing[run]
	if !ok {
		return false
	}
	if !b.now().Before(f.until) {
		return false
	}
	return true
}

// finishDue reports whether a claim pass should try to finish run now,
// and if so records that it does.
func (b *backoff) finishDue(run coord.RunID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.checked == nil {
		b.checked = map[coord.RunID]time.Time{}
	}
	now := b.now()
	if t, ok := b.checked[run]; ok && now.Sub(t) < finishEvery && !now.Before(t) {
		return false
	}
	if len(b.checked) > 4096 {
		clear(b.checked) // a bound, not a cache: losing it costs a finish
	}
	b.checked[run] = now
	return true
}
