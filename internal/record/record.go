// Package record reads and writes small records in the object store by
// compare-and-swap, with the write-outcome contract of
// docs/adr/0006-write-outcomes.md in one place: every call ends in one of
// three outcomes, and says which.
//
//   - applied: the call returns nil (for Update, also when the record
//     already held the change);
//   - not applied: the error matches ErrNotApplied, and nothing the call
//     sent will ever apply (a lost race on every attempt, a definite
//     refusal, a read that failed before anything was written), or it is
//     the caller's own error (from Mutate, or a record that does not
//     decode), which also applies nothing;
//   - unknown: the error matches objstore.ErrOutcomeUnknown: a write was
//     sent whose outcome could not be learned, not even by reading the
//     record back.
//
// Metadata, alerts, scan runs, the SSH host key and the web session key
// all go through it, so the retry, backoff and settle rules cannot drift
// apart between them (issue 20).
package record

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// ErrNotApplied is matched by every error that certainly applied nothing
// and never will. Retrying the call is safe.
var ErrNotApplied = errors.New("record: not applied")

// ErrContention reports an Update whose record changed under every
// attempt. It matches ErrNotApplied: retrying later is safe.
var ErrContention = fmt.Errorf("%w: the record changed concurrently on every attempt", ErrNotApplied)

// ErrExists is returned by Create when the key holds a record that is not
// the caller's. It matches ErrNotApplied.
var ErrExists = fmt.Errorf("%w: the record exists", ErrNotApplied)

// Codec turns a record into bytes and back. Decode validates what it
// reads: a record that does not decode is an error no retry mends.
type Codec[T any] struct {
	Encode func(*T) ([]byte, error)
	Decode func([]byte, *T) error
	// Max bounds a record's size in bytes: a larger one is refused
	// unread. Zero means 1 MiB.
	Max int64
}

func (c Codec[T]) max() int64 {
	if c.Max <= 0 {
		return 1 << 20
	}
	return c.Max
}

// Defaults of Options.
const (
	DefaultAttempts = 8
	// settleTimeout bounds the reads that settle an unknown outcome once
	// the caller's context has ended: the caller must still learn the
	// answer.
	settleTimeout = 10 * time.Second
	settleReads   = 4
)

// Options tune the loops. The zero value is DefaultAttempts with a
// jittered backoff of 5 ms doubling to 500 ms.
type Options struct {
	Attempts int
	// Backoff is the pause before attempt n (from 1); nil is the default.
	Backoff func(n int) time.Duration
}

func (o Options) attempts() int {
	if o.Attempts <= 0 {
		return DefaultAttempts
	}
	return o.Attempts
}

func (o Options) pause(ctx context.Context, n int) error {
	d := time.Duration(0)
	if o.Backoff != nil {
		d = o.Backoff(n)
	} else {
		base := min(5*time.Millisecond<<min(n-1, 10), 500*time.Millisecond)
		d = base/2 + time.Duration(rand.Int64N(int64(base)))
	}
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Get reads the record at key and its ETag. An absent record is an error
// matching objstore.ErrNotFound.
func Get[T any](ctx context.Context, store objstore.Store, c Codec[T], key string) (*T, string, error) {
	b, info, err := objstore.ReadAll(ctx, store, key, c.max())
	if err != nil {
		return nil, "", err
	}
	v := new(T)
	if err := c.Decode(b, v); err != nil {
		return nil, "", &DecodeError{Key: key, Err: err}
	}
	return v, info.ETag, nil
}

// DecodeError reports a stored record that does not decode. It matches
// ErrNotApplied: nothing was written.
type DecodeError struct {
	Key string
	Err error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("record %s does not decode: %v", e.Key, e.Err)
}

// Unwrap returns the decoder's error and ErrNotApplied.
func (e *DecodeError) Unwrap() []error { return []error{e.Err, ErrNotApplied} }

// Create writes v at key if the key is absent, and returns the record's
// ETag. v should carry something only this call writes (a random nonce):
// after a write whose outcome is unknown, or a lost race that may be its
// own write reported lost, Create reads the key back, and equal bytes mean
// the write was its own. While the key stays absent the same bytes are
// sent again (a write conditional on absence applies once at most). It
// returns nil (created), ErrExists (another record is there), an error
// matching ErrNotApplied, or one matching objstore.ErrOutcomeUnknown.
func Create[T any](ctx context.Context, store objstore.Store, c Codec[T], key string, v *T) (string, error) {
	b, err := c.Encode(v)
	if err != nil {
		return "", err
	}
	var lastErr error
	for attempt := 0; attempt < DefaultAttempts; attempt++ {
		if attempt > 0 {
			if perr := (Options{}).pause(ctx, attempt); perr != nil {
				lastErr = errors.Join(lastErr, perr)
				break
			}
		}
		info, err := store.PutIfAbsent(ctx, key, bytes.NewReader(b), int64(len(b)))
		if err == nil {
			return info.ETag, nil
		}
		if !errors.Is(err, objstore.ErrPreconditionFailed) && isDefinite(err) {
			return "", fmt.Errorf("create %s: %w: %w", key, ErrNotApplied, err)
		}
		// Taken (maybe by a write of ours an SDK's retry reported as
		// lost), or unknown: the record there says whose it is.
		got, etag, found, rerr := settleReadTag(ctx, store, c, key)
		switch {
		case rerr == nil && found && bytes.Equal(got, b):
			return etag, nil
		case rerr == nil && found:
			return "", fmt.Errorf("create %s: %w", key, ErrExists)
		}
		// Still absent: ours has not applied; the same bytes, again
		// conditional on absence, can apply once at most.
		lastErr = errors.Join(err, rerr)
	}
	return "", unknown("create "+key, lastErr)
}

// CreateOnce makes sure key holds a record: it writes v if the key is
// absent and returns what the key holds afterwards, v or the record of
// whoever created it first. Every caller therefore agrees on one record
// (a key every node must share, such as the SSH host key). A write whose
// outcome is unknown is settled by reading the key back; while it is
// still absent the same bytes are sent again, which is safe because a
// write conditional on absence can apply once at most.
func CreateOnce[T any](ctx context.Context, store objstore.Store, c Codec[T], key string, v *T) (*T, error) {
	b, err := c.Encode(v)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < DefaultAttempts; attempt++ {
		if attempt > 0 {
			if perr := (Options{}).pause(ctx, attempt); perr != nil {
				lastErr = errors.Join(lastErr, perr)
				break
			}
		}
		_, err = store.PutIfAbsent(ctx, key, bytes.NewReader(b), int64(len(b)))
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, objstore.ErrPreconditionFailed) && isDefinite(err) {
			return nil, fmt.Errorf("create %s: %w: %w", key, ErrNotApplied, err)
		}
		// Taken, or unknown: whoever holds the key wins, us included.
		got, found, rerr := settleRead(ctx, store, c, key)
		if rerr == nil && found {
			out := new(T)
			if err := c.Decode(got, out); err != nil {
				return nil, &DecodeError{Key: key, Err: err}
			}
			return out, nil
		}
		lastErr = errors.Join(err, rerr)
	}
	// Still absent, or unreadable: a copy of ours may yet land.
	return nil, unknown("create "+key, lastErr)
}

// Mutate computes the record to write from the current one (nil when the
// key is absent). It returns nil when cur already holds the change, which
// is how Update learns that a write of unknown outcome applied: Mutate
// must be idempotent, so that applying it to its own result returns nil.
// An error from Mutate ends Update with nothing written by this attempt.
type Mutate[T any] func(cur *T) (*T, error)

// Update applies mutate to the record at key by compare-and-swap,
// retrying lost races with backoff, and returns the record as it left it.
// After a write whose outcome is unknown it reads the record again and
// applies mutate to what is there: nil means the change is in (its own
// write landed, or another writer made the same change). Outcomes: nil,
// an error matching ErrNotApplied (every attempt lost its race or failed
// before writing), mutate's or the decoder's error, or one matching
// objstore.ErrOutcomeUnknown.
func Update[T any](ctx context.Context, store objstore.Store, c Codec[T], key string, o Options, mutate Mutate[T]) (*T, error) {
	var lastErr error
	pending := false // a write of ours may still be out there
	for attempt := 0; attempt < o.attempts(); attempt++ {
		if attempt > 0 {
			if err := o.pause(ctx, attempt); err != nil {
				lastErr = errors.Join(lastErr, err)
				break
			}
		}
		cur, etag, err := Get(ctx, store, c, key)
		absent := errors.Is(err, objstore.ErrNotFound)
		if err != nil && !absent {
			var de *DecodeError
			if errors.As(err, &de) {
				return nil, err
			}
			lastErr = err
			continue
		}
		next, err := mutate(cur)
		if err != nil {
			return nil, err
		}
		if next == nil {
			return cur, nil
		}
		b, err := c.Encode(next)
		if err != nil {
			return nil, err
		}
		if absent {
			_, err = store.PutIfAbsent(ctx, key, bytes.NewReader(b), int64(len(b)))
		} else {
			_, err = store.PutIfMatch(ctx, key, bytes.NewReader(b), int64(len(b)), etag)
		}
		switch {
		case err == nil:
			return next, nil
		case errors.Is(err, objstore.ErrPreconditionFailed), isDefinite(err):
			lastErr = err
		default:
			lastErr, pending = err, true
		}
	}
	if !pending {
		if errors.Is(lastErr, objstore.ErrPreconditionFailed) {
			return nil, fmt.Errorf("update %s: %w", key, ErrContention)
		}
		return nil, fmt.Errorf("update %s: %w: %w", key, ErrNotApplied, lastErr)
	}
	// A write may have landed: one more look, on a context of its own so
	// that a caller who gave up still learns the answer.
	got, found, rerr := settleRead(ctx, store, c, key)
	if rerr == nil {
		var cur *T
		if found {
			cur = new(T)
			if err := c.Decode(got, cur); err != nil {
				return nil, &DecodeError{Key: key, Err: err}
			}
		}
		if next, merr := mutate(cur); merr == nil && next == nil {
			return cur, nil
		}
	}
	return nil, unknown("update "+key, lastErr)
}

// isDefinite reports a write error that certainly did not apply: the
// store answered with a refusal (an invalid key, a 4xx), as opposed to
// not answering. Errors marked unknown or unavailable are not definite,
// and neither is anything the store did not classify.
func isDefinite(err error) bool {
	return errors.Is(err, objstore.ErrInvalidKey)
}

// settleReadTag is settleRead that also returns the ETag.
func settleReadTag[T any](ctx context.Context, store objstore.Store, c Codec[T], key string) ([]byte, string, bool, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	var err error
	for i := 0; i < settleReads; i++ {
		if i > 0 {
			if perr := (Options{}).pause(sctx, i); perr != nil {
				break
			}
		}
		var b []byte
		var info objstore.Info
		b, info, err = objstore.ReadAll(sctx, store, key, c.max())
		switch {
		case err == nil:
			return b, info.ETag, true, nil
		case errors.Is(err, objstore.ErrNotFound):
			return nil, "", false, nil
		}
	}
	return nil, "", false, err
}

// settleRead reads key to settle an outcome, a few times if the store
// fails, on a context bounded by settleTimeout that outlives the caller's.
// found is false when the key is absent.
func settleRead[T any](ctx context.Context, store objstore.Store, c Codec[T], key string) ([]byte, bool, error) {
	b, _, found, err := settleReadTag(ctx, store, c, key)
	return b, found, err
}

func unknown(what string, err error) error {
	if errors.Is(err, objstore.ErrOutcomeUnknown) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w: %w", what, objstore.ErrOutcomeUnknown, err)
}

// JSON is the Codec of records stored as JSON.
func JSON[T any]() Codec[T] {
	return Codec[T]{
		Encode: func(v *T) ([]byte, error) { return json.Marshal(v) },
		Decode: func(b []byte, v *T) error { return json.Unmarshal(b, v) },
	}
}

// Raw is the Codec of records stored as their bytes, such as keys: up to
// max bytes (0: 1 MiB), checked by whoever reads them.
func Raw(max int64) Codec[[]byte] {
	return Codec[[]byte]{
		Encode: func(v *[]byte) ([]byte, error) { return *v, nil },
		Decode: func(b []byte, v *[]byte) error { *v = b; return nil },
		Max:    max,
	}
}
