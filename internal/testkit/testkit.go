// Package testkit holds the small fakes that tests across the tree need
// alike: a settable clock, a log buffer safe for concurrent writers, and
// a store whose reads fail on demand. Only tests import it.
package testkit

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// Clock is a settable clock: tests expire leases and age records by
// moving it, never by sleeping. It is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Buffer collects output written by other goroutines (a server's log, a
// process's stderr) while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// ErrInjected is the error of an injected outage.
var ErrInjected = errors.New("injected outage: connection refused")

// FailGet is a fake store (it injects a fault): while armed, every Get
// of a key under the armed prefix fails with ErrInjected, a partial
// object-store outage. Everything else goes to Store.
type FailGet struct {
	objstore.Store
	prefix atomic.Pointer[string]
}

// Get fails for keys under the armed prefix.
func (f *FailGet) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	if p := f.prefix.Load(); p != nil && strings.HasPrefix(key, *p) {
		return nil, objstore.Info{}, ErrInjected
	}
	return f.Store.Get(ctx, key)
}

// Fail arms the outage for keys under prefix.
func (f *FailGet) Fail(prefix string) { f.prefix.Store(&prefix) }

// Heal ends the outage.
func (f *FailGet) Heal() { f.prefix.Store(nil) }
