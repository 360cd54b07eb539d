// Package memstore is an in-memory objstore.Store for unit tests. It holds
// whole objects in memory, so it is no place for large packs.
package memstore

import (
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/ghost-scm/ghost/internal/objstore"
)

type object struct {
	data []byte // deflated when z
	size int64
	// gen is the store's generation at the put; the ETag is made from
	// it on each read, not kept: a string per object was a third of the
	// allocations of a store of tens of millions (issue 22), all of them
	// for the collector to mark.
	gen uint64
	z   bool
}

// etag returns o's ETag, quoted as S3 quotes it.
func (o object) etag() string { return `"` + strconv.FormatUint(o.gen, 16) + `"` }

// Store is a map guarded by one mutex, with its keys also kept in order
// for List; every operation is atomic and so linearizable.
type Store struct {
	mu      sync.Mutex
	objects map[string]object
	keys    keyIndex
	gen     uint64
	// deflate, when set, keeps objects of deflateMin bytes or more
	// deflated (NewDeflated).
	deflate bool
	// writers and readers hold idle compressors and decompressors: a new
	// flate.Writer allocates over a megabyte, which per put of a record
	// of a few hundred bytes made populating the scale benchmark's tens
	// of millions of objects take hours (BenchmarkPutGet).
	writers, readers sync.Pool
}

// New returns an empty store.
func New() *Store {
	return &Store{objects: make(map[string]object)}
}

// NewDeflated returns an empty store that keeps each object of at least
// deflateMin bytes deflated, when that is smaller, and inflates it on
// every read: the scale benchmark holds tens of millions of small JSON
// records (issue 22), about twice as many in the same memory. It behaves
// as New's in every other way.
func NewDeflated() *Store {
	return &Store{objects: make(map[string]object), deflate: true}
}

// deflateMin is the smallest object NewDeflated's store deflates.
const deflateMin = 128

// bytes returns o's content.
func (s *Store) bytes(o object) ([]byte, error) {
	if !o.z {
		return o.data, nil
	}
	out := make([]byte, o.size)
	src := bytes.NewReader(o.data)
	zr, ok := s.readers.Get().(io.ReadCloser)
	if ok {
		if err := zr.(flate.Resetter).Reset(src, nil); err != nil {
			return nil, fmt.Errorf("memstore: inflate: %w", err)
		}
	} else {
		zr = flate.NewReader(src)
	}
	if _, err := io.ReadFull(zr, out); err != nil {
		return nil, fmt.Errorf("memstore: inflate: %w", err)
	}
	s.readers.Put(zr)
	return out, nil
}

// deflated returns data deflated in a slice of its exact length, or
// false when that is not smaller.
func (s *Store) deflated(data []byte) ([]byte, bool) {
	var buf bytes.Buffer
	zw, ok := s.writers.Get().(*flate.Writer)
	if ok {
		zw.Reset(&buf)
	} else {
		var err error
		if zw, err = flate.NewWriter(&buf, flate.BestSpeed); err != nil {
			return nil, false
		}
	}
	if _, err := zw.Write(data); err != nil || zw.Close() != nil {
		return nil, false
	}
	s.writers.Put(zw)
	if buf.Len() >= len(data) {
		return nil, false
	}
	return bytes.Clone(buf.Bytes()), true
}

var _ objstore.Store = (*Store)(nil)

func (s *Store) lookup(key string) (object, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return object{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if !ok {
		return object{}, objstore.ErrNotFound
	}
	return o, nil
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, objstore.Info{}, opError("Get", key, err)
	}
	o, err := s.lookup(key)
	if err != nil {
		return nil, objstore.Info{}, opError("Get", key, err)
	}
	data, err := s.bytes(o)
	if err != nil {
		return nil, objstore.Info{}, opError("Get", key, err)
	}
	return io.NopCloser(bytes.NewReader(data)), objstore.Info{Key: key, Size: o.size, ETag: o.etag()}, nil
}

// GetRange implements objstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, opError("GetRange", key, err)
	}
	if offset < 0 || length < 0 {
		return nil, opError("GetRange", key, fmt.Errorf("negative range %d+%d", offset, length))
	}
	o, err := s.lookup(key)
	if err != nil {
		return nil, opError("GetRange", key, err)
	}
	data, err := s.bytes(o)
	if err != nil {
		return nil, opError("GetRange", key, err)
	}
	n := int64(len(data))
	start, end := min(offset, n), min(offset+length, n)
	if offset+length < offset { // overflow
		end = n
	}
	return io.NopCloser(bytes.NewReader(data[start:end])), nil
}

// cond selects the precondition of a put.
type cond int

const (
	none cond = iota
	ifMatch
	ifAbsent
)

// put does the three puts; its errors are causes, which the exported
// methods wrap in an *objstore.Error.
func (s *Store) put(ctx context.Context, key string, r io.Reader, size int64, c cond, etag string) (objstore.Info, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return objstore.Info{}, err
	}
	data, err := readExactly(r, size)
	if err != nil {
		return objstore.Info{}, err
	}
	o := object{data: data, size: size}
	if s.deflate && len(data) >= deflateMin {
		if z, ok := s.deflated(data); ok {
			o.data, o.z = z, true
		}
	}
	if err := ctx.Err(); err != nil {
		return objstore.Info{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, exists := s.objects[key]
	switch {
	case c == ifMatch && (!exists || cur.etag() != etag):
		return objstore.Info{}, objstore.ErrPreconditionFailed
	case c == ifAbsent && exists:
		return objstore.Info{}, objstore.ErrPreconditionFailed
	}
	s.gen++
	o.gen = s.gen
	if !exists {
		s.keys.insert(key)
	}
	s.objects[key] = o
	return objstore.Info{Key: key, Size: size, ETag: o.etag()}, nil
}

func readExactly(r io.Reader, size int64) ([]byte, error) {
	if size < 0 {
		return nil, fmt.Errorf("negative size %d", size)
	}
	// Exactly size bytes, held as they are: a store of millions of small
	// objects must not keep a growing buffer's spare capacity for each.
	data := make([]byte, size)
	if n, err := io.ReadFull(r, data); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("body is %d bytes, declared %d", n, size)
		}
		return nil, err
	}
	var one [1]byte
	if n, _ := io.ReadFull(r, one[:]); n > 0 {
		return nil, fmt.Errorf("body is more than the %d bytes declared", size)
	}
	return data, nil
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	info, err := s.put(ctx, key, r, size, none, "")
	return info, opError("Put", key, err)
}

// PutIfMatch implements objstore.Store.
func (s *Store) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (objstore.Info, error) {
	info, err := s.put(ctx, key, r, size, ifMatch, etag)
	return info, opError("PutIfMatch", key, err)
}

// PutIfAbsent implements objstore.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	info, err := s.put(ctx, key, r, size, ifAbsent, "")
	return info, opError("PutIfAbsent", key, err)
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := objstore.ValidateKey(key); err != nil {
		return opError("Delete", key, err)
	}
	if err := ctx.Err(); err != nil {
		return opError("Delete", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objects[key]; ok {
		delete(s.objects, key)
		s.keys.remove(key)
	}
	return nil
}

// List implements objstore.Store.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, opError("List", prefix, err)
	}
	if limit <= 0 {
		return nil, opError("List", prefix, fmt.Errorf("limit %d must be positive", limit))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []objstore.Info
	// Keys under prefix sort from prefix on; start there, or after
	// startAfter when that is later.
	from, inclusive := prefix, true
	if startAfter >= prefix {
		from, inclusive = startAfter, false
	}
	s.keys.ascend(from, inclusive, func(k string) bool {
		if !strings.HasPrefix(k, prefix) {
			return false // past the prefix's range
		}
		o := s.objects[k]
		out = append(out, objstore.Info{Key: k, Size: o.size, ETag: o.etag()})
		return len(out) < limit
	})
	return out, nil
}

// Copy implements objstore.Store.
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	o, err := s.lookup(src)
	if err != nil {
		return opError("Copy", src, err)
	}
	data, err := s.bytes(o)
	if err != nil {
		return opError("Copy", src, err)
	}
	_, err = s.put(ctx, dst, bytes.NewReader(data), o.size, none, "")
	return opError("Copy", dst, err)
}

// opError wraps err, if any, in the *objstore.Error that every backend
// returns.
func opError(op, key string, err error) error {
	if err == nil {
		return nil
	}
	return &objstore.Error{Op: op, Key: key, Err: err}
}
