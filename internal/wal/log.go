// Package wal is ghost's repository write-ahead log on object storage.
//
// Per repository there is one mutable object, repos/<id>/index, and one
// immutable object per push, repos/<id>/entries/<ULID>.pack (a header
// naming the ref transitions, then a self-contained packfile). A push
// becomes real at exactly one point: the compare-and-swap of the index that
// appends its entry as a layer. There is no lock service; concurrent
// pushers race the CAS and the losers re-validate and retry. See
// docs/design.md §3 (the log) and §4 (the commit point) for what this package implements.
package wal

import (
	"context"
	"crypto/rand"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// Log commits to and reads repository logs in one object store. It is safe
// for concurrent use; it holds no per-repository state.
type Log struct {
	store objstore.Store
	opts  Options

	mu      sync.Mutex // guards entropy and jitter
	entropy *ulid.MonotonicEntropy
	jitter  *mrand.Rand
}

// Options tune the commit loop. The zero value means the defaults of
// docs/design.md §4.2.
type Options struct {
	// MaxAttempts bounds index CAS attempts per commit (default 8).
	MaxAttempts int
	// BackoffBase and BackoffMax shape the jittered exponential backoff
	// after a lost CAS (defaults 50 ms and 1 s).
	BackoffBase, BackoffMax time.Duration
	// Sleep waits between attempts; tests replace it to run instantly.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock for ULIDs and created-at stamps.
	Now func() time.Time
}

// New returns a Log on store.
func New(store objstore.Store, opts Options) *Log {
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = 50 * time.Millisecond
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = time.Second
	}
	if opts.Sleep == nil {
		opts.Sleep = sleepCtx
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var seed [32]byte
	rand.Read(seed[:])
	return &Log{
		store:   store,
		opts:    opts,
		entropy: ulid.Monotonic(rand.Reader, 0),
		jitter:  mrand.New(mrand.NewChaCha8(seed)),
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
