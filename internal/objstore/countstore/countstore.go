// Package countstore is an objstore.Store decorator that reports every
// request it passes on, so that what each operation of ghost costs in
// object-store requests is measured, not argued (issue 22): serve
// exports the counts as Prometheus metrics, and benchmarks read them.
package countstore

import (
	"context"
	"io"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// Operation names, as the observer receives them: S3's request kinds.
const (
	OpGet         = "get"
	OpGetRange    = "get_range"
	OpPut         = "put"
	OpPutIfMatch  = "put_if_match"
	OpPutIfAbsent = "put_if_absent"
	OpDelete      = "delete"
	OpList        = "list"
	OpCopy        = "copy"
)

// Observer is told of each request after it returned.
type Observer func(op string, err error)

// Store reports each request of the wrapped store to an Observer.
type Store struct {
	inner   objstore.Store
	observe Observer
}

var _ objstore.Store = (*Store)(nil)

// New wraps inner.
func New(inner objstore.Store, observe Observer) *Store {
	return &Store{inner: inner, observe: observe}
}

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() objstore.Store { return s.inner }

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	rc, info, err := s.inner.Get(ctx, key)
	s.observe(OpGet, err)
	return rc, info, err
}

// GetRange implements objstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	rc, err := s.inner.GetRange(ctx, key, offset, length)
	s.observe(OpGetRange, err)
	return rc, err
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	info, err := s.inner.Put(ctx, key, r, size)
	s.observe(OpPut, err)
	return info, err
}

// PutIfMatch implements objstore.Store.
func (s *Store) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (objstore.Info, error) {
	info, err := s.inner.PutIfMatch(ctx, key, r, size, etag)
	s.observe(OpPutIfMatch, err)
	return info, err
}

// PutIfAbsent implements objstore.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	info, err := s.inner.PutIfAbsent(ctx, key, r, size)
	s.observe(OpPutIfAbsent, err)
	return info, err
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	err := s.inner.Delete(ctx, key)
	s.observe(OpDelete, err)
	return err
}

// List implements objstore.Store.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.Info, error) {
	page, err := s.inner.List(ctx, prefix, startAfter, limit)
	s.observe(OpList, err)
	return page, err
}

// Copy implements objstore.Store.
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	err := s.inner.Copy(ctx, src, dst)
	s.observe(OpCopy, err)
	return err
}
