// Package fsstore is the filesystem objstore.Store: ghost's zero-setup
// default, and a store that several ghost processes may share.
//
// Layout under the root directory:
//
//	objects/<key>   one file per object: a 24-byte header, then the bytes
//	tmp/            writes in progress (same filesystem, so rename is atomic)
//	locks/00..ff    flock(2) stripes that serialize writes to a key
//
// Writes go to a temp file that is fsynced and renamed into place, so a
// reader sees the old object or the new one, never a torn one. Every write
// takes the key's lock stripe with flock, which holds across goroutines and
// across processes sharing the directory, so conditional writes are
// linearizable: the ETag compare and the rename happen under one lock.
//
// The ETag is 16 random bytes stored in the object's header rather than
// derived from inode and mtime: a stat-derived tag can repeat when an inode
// is reused within the filesystem's timestamp granularity, and a repeated
// ETag would let a stale compare-and-swap win. See docs/adr/0002.
package fsstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
)

const (
	magic            = "GHOSTOB1"
	headerSize int64 = int64(len(magic)) + 16
	stripes          = 256
)

// Store keeps objects under a root directory.
type Store struct {
	root string
}

var _ objstore.Store = (*Store)(nil)

// Open prepares root (creating it if needed) and returns a store on it.
func Open(root string) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("fsstore: %w", err)
	}
	for _, d := range []string{"objects", "tmp", "locks"} {
		if err := os.MkdirAll(filepath.Join(abs, d), 0o755); err != nil {
			return nil, fmt.Errorf("fsstore: %w", err)
		}
	}
	return &Store{root: abs}, nil
}

// RemoveStaleTemp removes the temporaries of writes (tmp/put-*) that have
// not been touched for olderThan: what a process killed mid-write leaves
// behind. Several processes may share the store, so a temporary cannot be
// told dead by who made it, only by age; a live write touches its file
// continuously, and one stalled that long has failed anyway (its rename
// into place would still be harmless: the temporary is only ever renamed,
// never reopened). It returns how many it removed.
func (s *Store) RemoveStaleTemp(olderThan time.Duration) (int, error) {
	dir := filepath.Join(s.root, "tmp")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("fsstore: %w", err)
	}
	n := 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "put-") {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < olderThan {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err == nil {
			n++
		} else if !errors.Is(err, fs.ErrNotExist) {
			return n, fmt.Errorf("fsstore: %w", err)
		}
	}
	return n, nil
}

// Root returns the directory the store lives in.
func (s *Store) Root() string { return s.root }

func (s *Store) path(key string) (string, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return "", err
	}
	return filepath.Join(s.root, "objects", filepath.FromSlash(key)), nil
}

// lock takes the flock stripe for key and returns its release.
func (s *Store) lock(key string) (func(), error) {
	h := fnv.New32a()
	h.Write([]byte(key))
	name := filepath.Join(s.root, "locks", fmt.Sprintf("%02x", h.Sum32()%stripes))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", name, err)
	}
	return func() { f.Close() }, nil // closing the descriptor drops the lock
}

// open opens an object file and reads its header. Its errors, like those of
// the other helpers, are causes: the exported methods wrap them in an
// *objstore.Error.
func (s *Store) open(key string) (*os.File, objstore.Info, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, objstore.Info{}, err
	}
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, objstore.Info{}, objstore.ErrNotFound
		}
		return nil, objstore.Info{}, err
	}
	info, err := readHeader(f, key)
	if err != nil {
		f.Close()
		return nil, objstore.Info{}, err
	}
	return f, info, nil
}

func readHeader(f *os.File, key string) (objstore.Info, error) {
	st, err := f.Stat()
	if err != nil {
		return objstore.Info{}, err
	}
	if st.IsDir() {
		return objstore.Info{}, objstore.ErrNotFound
	}
	var h [headerSize]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:len(magic)]) != magic {
		return objstore.Info{}, errors.New("damaged object header")
	}
	return objstore.Info{
		Key:  key,
		Size: st.Size() - headerSize,
		ETag: `"` + hex.EncodeToString(h[len(magic):]) + `"`,
	}, nil
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, objstore.Info{}, opError("Get", key, err)
	}
	f, info, err := s.open(key)
	if err != nil {
		return nil, objstore.Info{}, opError("Get", key, err)
	}
	return f, info, nil
}

type sectionCloser struct {
	*io.SectionReader
	io.Closer
}

// GetRange implements objstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, opError("GetRange", key, err)
	}
	if offset < 0 || length < 0 {
		return nil, opError("GetRange", key, fmt.Errorf("negative range %d+%d", offset, length))
	}
	f, info, err := s.open(key)
	if err != nil {
		return nil, opError("GetRange", key, err)
	}
	start := min(offset, info.Size)
	n := min(length, info.Size-start)
	return sectionCloser{io.NewSectionReader(f, headerSize+start, n), f}, nil
}

type cond int

const (
	none cond = iota
	ifMatch
	ifAbsent
)

// put streams r into a temp file, then, under the key's lock, checks the
// precondition and renames the file into place.
func (s *Store) put(ctx context.Context, key string, r io.Reader, size int64, c cond, etag string) (objstore.Info, error) {
	p, err := s.path(key)
	if err != nil {
		return objstore.Info{}, err
	}
	if size < 0 {
		return objstore.Info{}, fmt.Errorf("negative size %d", size)
	}
	tmp, tag, err := s.writeTemp(ctx, key, r, size)
	if err != nil {
		return objstore.Info{}, err
	}
	defer os.Remove(tmp) // no-op once renamed

	unlock, err := s.lock(key)
	if err != nil {
		return objstore.Info{}, err
	}
	defer unlock()
	if err := ctx.Err(); err != nil {
		return objstore.Info{}, err
	}
	if c != none {
		cur, err := s.currentETag(key)
		switch {
		case err != nil && !errors.Is(err, objstore.ErrNotFound):
			return objstore.Info{}, err
		case c == ifMatch && (err != nil || cur != etag):
			return objstore.Info{}, objstore.ErrPreconditionFailed
		case c == ifAbsent && err == nil:
			return objstore.Info{}, objstore.ErrPreconditionFailed
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return objstore.Info{}, err
	}
	if err := os.Rename(tmp, p); err != nil {
		return objstore.Info{}, err
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		// The rename happened: readers see the new object, but a crash
		// may still undo it (docs/adr/0006-write-outcomes.md).
		return objstore.Info{}, fmt.Errorf("%w: %w", objstore.ErrOutcomeUnknown, err)
	}
	return objstore.Info{Key: key, Size: size, ETag: tag}, nil
}

func (s *Store) currentETag(key string) (string, error) {
	f, info, err := s.open(key)
	if err != nil {
		return "", err
	}
	f.Close()
	return info.ETag, nil
}

// writeTemp writes header and body to a synced temp file and returns its
// name and the new object's ETag.
func (s *Store) writeTemp(ctx context.Context, key string, r io.Reader, size int64) (string, string, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", "", err
	}
	f, err := os.CreateTemp(filepath.Join(s.root, "tmp"), "put-*")
	if err != nil {
		return "", "", err
	}
	name := f.Name()
	fail := func(err error) (string, string, error) {
		f.Close()
		os.Remove(name)
		return "", "", err
	}
	if _, err := f.Write(append([]byte(magic), id[:]...)); err != nil {
		return fail(err)
	}
	n, err := io.Copy(f, io.LimitReader(ctxReader{ctx, r}, size+1))
	if err != nil {
		return fail(err)
	}
	if n != size {
		return fail(fmt.Errorf("body is %d bytes, declared %d", n, size))
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(name)
		return "", "", err
	}
	return name, `"` + hex.EncodeToString(id[:]) + `"`, nil
}

// ctxReader stops a long copy when the context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
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

// Delete implements objstore.Store. Emptied parent directories are removed
// so that listing stays cheap.
func (s *Store) Delete(ctx context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return opError("Delete", key, err)
	}
	if err := ctx.Err(); err != nil {
		return opError("Delete", key, err)
	}
	unlock, err := s.lock(key)
	if err != nil {
		return opError("Delete", key, err)
	}
	defer unlock()
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return opError("Delete", key, err)
	}
	objects := filepath.Join(s.root, "objects")
	for d := filepath.Dir(p); d != objects && strings.HasPrefix(d, objects); d = filepath.Dir(d) {
		if os.Remove(d) != nil { // not empty, or raced with a writer: stop
			break
		}
	}
	return nil
}

// List implements objstore.Store. It walks the deepest directory the prefix
// names, then sorts, because a directory walk's order ("a/b" before "a.b")
// is not byte-wise key order.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.Info, error) {
	if limit <= 0 {
		return nil, opError("List", prefix, fmt.Errorf("limit %d must be positive", limit))
	}
	objects := filepath.Join(s.root, "objects")
	dir := objects
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		if err := objstore.ValidateKey(prefix[:i]); err != nil {
			return nil, opError("List", prefix, err)
		}
		dir = filepath.Join(objects, filepath.FromSlash(prefix[:i]))
	}
	var keys []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // vanished under a concurrent delete
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(objects, p)
		if err != nil {
			return err
		}
		if k := filepath.ToSlash(rel); strings.HasPrefix(k, prefix) && k > startAfter {
			keys = append(keys, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, opError("List", prefix, err)
	}
	sort.Strings(keys)
	out := make([]objstore.Info, 0, min(len(keys), limit))
	for _, k := range keys {
		if len(out) == limit {
			break
		}
		f, info, err := s.open(k)
		if errors.Is(err, objstore.ErrNotFound) {
			continue // deleted since the walk
		}
		if err != nil {
			return nil, opError("List", prefix, fmt.Errorf("%s: %w", k, err))
		}
		f.Close()
		out = append(out, info)
	}
	return out, nil
}

// Copy implements objstore.Store.
//
// The copy is a hard link to src's file when the filesystem allows it,
// so that copying a large object (an LFS upload moving from its
// temporary key, a fork's checkpoints) costs no bytes: the store never
// changes a file in place (a Put renames a new file over the key, a
// Delete unlinks it), so the two keys stay independent. The copy keeps
// src's ETag, as S3's does for a single-part object. Where links fail
// (another device, a filesystem without them) it copies the bytes.
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	f, info, err := s.open(src)
	if err != nil {
		return opError("Copy", src, err)
	}
	defer f.Close()
	if err := s.link(ctx, f, dst); err == nil || !errors.Is(err, errNoLink) {
		return opError("Copy", dst, err)
	}
	_, err = s.put(ctx, dst, f, info.Size, none, "")
	return opError("Copy", dst, err)
}

// errNoLink reports that the filesystem would not link a file: Copy
// falls back to copying its bytes.
var errNoLink = errors.New("fsstore: hard link refused")

// link makes dst a hard link to the open file f: a new name for it in
// the temporary directory (linked through /proc/self/fd, so that it is
// the very file f opened even if its key was replaced meanwhile), then
// renamed over dst under dst's lock.
func (s *Store) link(ctx context.Context, f *os.File, dst string) error {
	p, err := s.path(dst)
	if err != nil {
		return err
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	tmp := filepath.Join(s.root, "tmp", "put-link-"+hex.EncodeToString(id[:]))
	if err := linkOpen(f, tmp); err != nil {
		return fmt.Errorf("%w: %w", errNoLink, err)
	}
	defer os.Remove(tmp) // no-op once renamed
	unlock, err := s.lock(dst)
	if err != nil {
		return err
	}
	defer unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("%w: %w", objstore.ErrOutcomeUnknown, err)
	}
	return nil
}

// opError wraps err, if any, in the *objstore.Error that every backend
// returns.
func opError(op, key string, err error) error {
	if err == nil {
		return nil
	}
	return &objstore.Error{Op: op, Key: key, Err: err}
}
