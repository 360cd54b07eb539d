// Package faultstore wraps an objstore.Store so tests can inject faults
// into conditional writes: a CAS that lands but reports a timeout, a CAS
// that is lost, or another writer slipping in first. It is a test double
// by design; production code never uses it.
package faultstore

import (
	"context"
	"io"
	"sync"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// Call describes one conditional put about to run.
type Call struct {
	N    int    // 1-based count of conditional puts seen by this store
	Key  string // the key being written
	ETag string // the presented ETag; "" for PutIfAbsent
	// Do performs the real put on the wrapped store.
	Do func() (objstore.Info, error)
}

// Hook decides what a conditional put does: call c.Do (or not) and return
// what the caller should see.
type Hook func(c Call) (objstore.Info, error)

// Store is an objstore.Store whose conditional puts pass through a Hook.
type Store struct {
	objstore.Store

	mu   sync.Mutex
	n    int
	hook Hook
}

// New wraps inner with no hook installed.
func New(inner objstore.Store) *Store { return &Store{Store: inner} }

// SetHook installs h for subsequent conditional puts (nil removes it).
func (s *Store) SetHook(h Hook) {
	s.mu.Lock()
	s.hook = h
	s.mu.Unlock()
}

// CASCount reports how many conditional puts have been attempted.
func (s *Store) CASCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *Store) conditional(key, etag string, do func() (objstore.Info, error)) (objstore.Info, error) {
	s.mu.Lock()
	s.n++
	c := Call{N: s.n, Key: key, ETag: etag, Do: do}
	h := s.hook
	s.mu.Unlock()
	if h == nil {
		return do()
	}
	return h(c)
}

// PutIfMatch passes through the hook.
func (s *Store) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (objstore.Info, error) {
	return s.conditional(key, etag, func() (objstore.Info, error) { return s.Store.PutIfMatch(ctx, key, r, size, etag) })
}

// PutIfAbsent passes through the hook.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	return s.conditional(key, "", func() (objstore.Info, error) { return s.Store.PutIfAbsent(ctx, key, r, size) })
}
