// Package objstore defines the object-store port that ghost's write-ahead log
// stands on, and the errors every backend reports in the same way.
//
// The operation set is exactly what the log needs from S3-compatible storage:
// whole and ranged reads with an ETag, an unconditional streamed put for
// immutable entries, two conditional puts (If-Match and If-None-Match: *) for
// the one mutable object per repository, delete, paginated listing and copy.
// Backends live in sub-packages (fsstore, memstore, s3store) and all pass the
// conformance suite in storetest.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrNotFound reports that the key does not exist. Backends wrap it, so
// callers test with errors.Is.
var ErrNotFound = errors.New("object not found")

// ErrPreconditionFailed reports a lost compare-and-swap: the object's current
// ETag is not the one the caller presented, or an If-None-Match put found the
// key present. S3 says this three ways (412, 409 ConditionalRequestConflict,
// 404 on If-Match against a missing key); every backend reports all of them
// as this one error so the log's retry loop has a single thing to branch on.
//
// It is a promise, like database/sql/driver.ErrBadConn: a backend returns it
// only when the write certainly did not apply and never will. A backend that
// retries a conditional put on its own cannot keep that promise (the first
// try may have landed and the retry then fails its own precondition), so
// conditional puts are sent exactly once. See docs/adr/0006-write-outcomes.md.
var ErrPreconditionFailed = errors.New("precondition failed")

// ErrOutcomeUnknown reports a write that may or may not have applied: the
// request failed in a way (a transport error, a timeout, a 5xx answer, a
// cancelled context after the request went out) that does not say whether
// the store acted on it. Backends wrap it together with the cause, so
// callers test with errors.Is.
//
// A caller that must know the outcome re-reads the object; one that cannot
// must not act as if the write failed (for example, delete what the write
// would have referenced). Callers should treat every write error other than
// ErrPreconditionFailed, ErrInvalidKey and a size mismatch as possibly
// applied, whether or not it is marked with this error: backends mark what
// they know, and a misconfigured or unusual server may surprise them.
var ErrOutcomeUnknown = errors.New("write outcome unknown: it may have applied")

// ErrUnavailable reports that the store did not answer, or answered with
// a server error (no answer at all, a timeout, a reset connection, a 5xx):
// the request may succeed if it is sent again later. It says nothing
// about the object, so a read that fails with it must never be taken for
// "not found", and a write that fails with it also wraps
// ErrOutcomeUnknown. Callers that retry in the background (scan workers)
// tell a passing outage from a failure that retrying cannot cure with it,
// and request paths answer 503 rather than 500.
var ErrUnavailable = errors.New("object store unavailable")

// ErrInvalidKey reports a key that no backend may store: empty, absolute,
// containing "." or ".." segments, empty segments, or control bytes.
var ErrInvalidKey = errors.New("invalid object key")

// Error records a failed Store operation and the key it was about, as
// fs.PathError does for a file and url.Error for a request. Every backend
// returns the errors of its Store methods as an *Error, so that the
// backends, whose causes differ (a syscall, an S3 answer, a map lookup),
// still report failures one way:
//
//   - callers branch on what happened with errors.Is and the sentinels
//     (ErrNotFound, ErrPreconditionFailed, ErrOutcomeUnknown,
//     ErrUnavailable, ErrInvalidKey), which Err wraps when they apply; their meaning is
//     the contract of docs/adr/0006-write-outcomes.md, whatever the
//     backend;
//   - logs get the operation and the key from errors.As, in the same
//     shape for every backend, and the cause from Err.
//
// The conformance suite in storetest checks this for every backend.
type Error struct {
	// Op is the name of the Store method that failed, spelled as in the
	// interface: "Get", "GetRange", "Put", "PutIfMatch", "PutIfAbsent",
	// "Delete", "List" or "Copy".
	Op string
	// Key is the key the operation was about. For List it is the prefix;
	// for Copy it is the source if the source is missing or invalid, and
	// the destination otherwise.
	Key string
	// Err is the cause. It wraps a sentinel of this package when one
	// applies.
	Err error
}

func (e *Error) Error() string { return e.Op + " " + strconv.Quote(e.Key) + ": " + e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Info describes a stored object.
type Info struct {
	Key  string
	Size int64
	// ETag is opaque: callers echo it byte for byte and never parse it.
	ETag string
}

// Store is an S3-shaped object store. Implementations must be safe for
// concurrent use, and their conditional puts must be linearizable: of any
// set of racing PutIfMatch/PutIfAbsent calls presenting the same ETag (or
// absence), at most one succeeds.
//
// Write outcomes (docs/adr/0006-write-outcomes.md): a nil error means the
// write applied. ErrPreconditionFailed from a conditional put means it
// certainly did not apply, and no copy of the request will apply later;
// so a conditional put is never retried below this interface, because a
// retry of a put that landed fails its own precondition. Any other write
// error may hide an applied write; backends mark the cases they cannot
// rule out with ErrOutcomeUnknown.
type Store interface {
	// Get opens the whole object. The caller closes the reader.
	Get(ctx context.Context, key string) (io.ReadCloser, Info, error)
	// GetRange opens length bytes starting at offset. A range running past
	// the end is truncated to the object's end; an offset at or past the
	// end yields an empty reader.
	GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// Put stores size bytes from r unconditionally, replacing any object.
	// r is streamed, never buffered whole.
	Put(ctx context.Context, key string, r io.Reader, size int64) (Info, error)
	// PutIfMatch replaces the object only if its current ETag is etag.
	// ErrPreconditionFailed means it certainly did not; see Store.
	PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (Info, error)
	// PutIfAbsent creates the object only if the key does not exist.
	// ErrPreconditionFailed means it certainly did not; see Store.
	PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (Info, error)
	// Delete removes the object. Deleting a missing key is not an error,
	// matching S3.
	Delete(ctx context.Context, key string) error
	// List returns up to limit objects whose keys start with prefix and sort
	// strictly after startAfter, in byte-wise key order. Fewer than limit
	// results means the listing is complete.
	List(ctx context.Context, prefix, startAfter string, limit int) ([]Info, error)
	// Copy copies src to dst server-side, replacing dst.
	Copy(ctx context.Context, src, dst string) error
}

// ValidateKey reports whether key is acceptable to every backend. Keys are
// '/'-separated paths of non-empty segments without "." or "..", so that a
// filesystem backend can map them to paths without escaping its root.
//
// The error wraps ErrInvalidKey and says what is wrong with the key, but
// does not repeat it: a backend returns it inside an *Error, which names
// the key.
func ValidateKey(key string) error {
	if key == "" || len(key) > 1024 {
		return fmt.Errorf("%w: length must be 1..1024", ErrInvalidKey)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: empty, '.' or '..' segment", ErrInvalidKey)
		}
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return fmt.Errorf("%w: control byte or backslash", ErrInvalidKey)
		}
	}
	return nil
}

// ListPageSize is the page size Walk asks for.
const ListPageSize = 1000

// Walk calls fn for every object under prefix, in key order, paging through
// List. It stops at the first error fn returns.
func Walk(ctx context.Context, s Store, prefix string, fn func(Info) error) error {
	after := ""
	for {
		page, err := s.List(ctx, prefix, after, ListPageSize)
		if err != nil {
			return err
		}
		for _, o := range page {
			if err := fn(o); err != nil {
				return err
			}
		}
		if len(page) < ListPageSize {
			return nil
		}
		after = page[len(page)-1].Key
	}
}

// ReadAll reads a whole (small) object into memory. It is meant for the
// index and metadata records, never for packs. Objects larger than max are
// refused rather than read.
func ReadAll(ctx context.Context, s Store, key string, max int64) ([]byte, Info, error) {
	rc, info, err := s.Get(ctx, key)
	if err != nil {
		return nil, Info{}, err
	}
	defer rc.Close()
	if info.Size > max {
		return nil, Info{}, fmt.Errorf("object %q is %d bytes, more than the %d allowed", key, info.Size, max)
	}
	b, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return nil, Info{}, fmt.Errorf("read %q: %w", key, err)
	}
	if int64(len(b)) > max {
		return nil, Info{}, fmt.Errorf("object %q is more than the %d bytes allowed", key, max)
	}
	return b, info, nil
}
