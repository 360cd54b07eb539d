// Package faultstore is a fault-injection fake: an objstore.Store decorator
// that lets tests decide, call by call, whether an operation on the wrapped
// store runs normally or fails, and if it fails whether it applied first.
// It exists to test callers against the write-outcome contract of
// docs/adr/0006-write-outcomes.md; production code never uses it.
//
// Every operation passes through one Plan, which sees the call (operation,
// key, counters) before it runs and returns what should happen. A Plan may
// also block, or act on the wrapped store itself (a racing writer slipping
// in first), before it answers.
package faultstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// ErrInjected is in the chain of every error this package makes up, so a
// test can tell an injected failure from a real one.
var ErrInjected = errors.New("faultstore: injected fault")

// Op names a Store operation.
type Op int

// The operations of objstore.Store.
const (
	OpGet Op = iota
	OpGetRange
	OpPut
	OpPutIfMatch
	OpPutIfAbsent
	OpDelete
	OpList
	OpCopy
	numOps
)

var opNames = [numOps]string{"get", "get-range", "put", "put-if-match", "put-if-absent", "delete", "list", "copy"}

// methods are the Store methods the operations are, as objstore.Error.Op
// spells them.
var methods = [numOps]string{"Get", "GetRange", "Put", "PutIfMatch", "PutIfAbsent", "Delete", "List", "Copy"}

func (o Op) String() string {
	if o < 0 || o >= numOps {
		return fmt.Sprintf("Op(%d)", int(o))
	}
	return opNames[o]
}

// Conditional reports whether o is a compare-and-swap.
func (o Op) Conditional() bool { return o == OpPutIfMatch || o == OpPutIfAbsent }

// Outcome is the fate of one call.
//
// The three failures differ in two things only: whether the wrapped store
// applied the operation, and whether the error the caller gets says so.
//
//	outcome          applied   caller's error (writes)
//	Lost             no        ambiguous (wraps objstore.ErrOutcomeUnknown)
//	LandedThenError  yes       ambiguous (wraps objstore.ErrOutcomeUnknown)
//	Refused          no        definite  (ErrInjected only)
//
// Lost and LandedThenError look the same to the caller, as a request lost
// on its way and an answer lost on its way back do on a real network; a
// correct caller handles both without knowing which it got. Refused is a
// store that answered "no" (a 4xx, say): nothing changed and the caller is
// told so. Reads (Get, GetRange, List) change nothing, so for them Lost
// and LandedThenError are an unavailable store (objstore.ErrUnavailable:
// "applied" means only that the wrapped store served the read, whose
// answer is discarded) and Refused a plain injected error; ambiguity is a
// property of writes, which also wrap objstore.ErrUnavailable when Lost
// or LandedThenError.
type Outcome int

const (
	// Pass runs the call normally.
	Pass Outcome = iota
	// Lost does not run the call and reports an ambiguous error.
	Lost
	// LandedThenError runs the call, discards its result and reports an
	// ambiguous error.
	LandedThenError
	// Refused does not run the call and reports a definite error.
	Refused
)

var outcomeNames = [...]string{"pass", "lost", "landed-then-error", "refused"}

func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
	return outcomeNames[o]
}

// Faults returns the three failing outcomes, for tests that run the
// matrix.
func Faults() []Outcome { return []Outcome{Lost, LandedThenError, Refused} }

// Call describes one operation about to run.
type Call struct {
	Op   Op
	Key  string // the key (Copy: the destination; List: the prefix)
	ETag string // the presented ETag of PutIfMatch
	// N is the 1-based count of calls of this Op seen by the store,
	// this one included.
	N int
	// CAS is the 1-based count of conditional puts (both kinds) seen by
	// the store, this one included; 0 for other operations.
	CAS int
}

// Fault is a Plan's answer for one call.
type Fault struct {
	Outcome Outcome
	// Err, if set, replaces the cause of the error the caller gets for a
	// failing outcome (which, as from every backend, is an
	// *objstore.Error). It lets a test model a backend that breaks the
	// contract, such as one that lands a conditional put and then reports
	// objstore.ErrPreconditionFailed (a retrying SDK).
	Err error
}

// Plan decides the fate of each call. It runs before the call, on the
// caller's goroutine, without the store's lock held.
type Plan func(c Call) Fault

// Store is an objstore.Store whose every operation passes through a Plan.
type Store struct {
	inner objstore.Store

	mu     sync.Mutex
	counts [numOps]int
	cas    int
	plan   Plan
}

var _ objstore.Store = (*Store)(nil)

// New wraps inner with no plan: every call passes.
func New(inner objstore.Store) *Store { return &Store{inner: inner} }

// SetPlan installs p for subsequent calls (nil: every call passes).
func (s *Store) SetPlan(p Plan) {
	s.mu.Lock()
	s.plan = p
	s.mu.Unlock()
}

// Count reports how many calls of op the store has seen.
func (s *Store) Count(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[op]
}

// CASCount reports how many conditional puts the store has seen.
func (s *Store) CASCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cas
}

// decide counts the call and asks the plan. The error is the one a failing
// outcome reports: an *objstore.Error, as a backend's would be.
func (s *Store) decide(op Op, key, etag string) (Fault, error) {
	s.mu.Lock()
	s.counts[op]++
	c := Call{Op: op, Key: key, ETag: etag, N: s.counts[op]}
	if op.Conditional() {
		s.cas++
		c.CAS = s.cas
	}
	p := s.plan
	s.mu.Unlock()
	if p == nil {
		return Fault{}, nil
	}
	f := p(c)
	if f.Outcome == Pass {
		return f, nil
	}
	err := f.Err
	switch {
	case err != nil:
	case f.Outcome == Refused:
		err = fmt.Errorf("%w: call %d: %s", ErrInjected, c.N, f.Outcome)
	case op == OpGet || op == OpGetRange || op == OpList:
		// A read whose request or answer was lost: the store was
		// unavailable, as a backend reports a timeout or a 5xx.
		err = fmt.Errorf("%w: call %d: %s: %w", ErrInjected, c.N, f.Outcome, objstore.ErrUnavailable)
	default:
		err = fmt.Errorf("%w: call %d: %s: %w: %w", ErrInjected, c.N, f.Outcome, objstore.ErrOutcomeUnknown, objstore.ErrUnavailable)
	}
	return f, &objstore.Error{Op: methods[op], Key: key, Err: err}
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	f, ferr := s.decide(OpGet, key, "")
	switch f.Outcome {
	case Lost, Refused:
		return nil, objstore.Info{}, ferr
	case LandedThenError:
		if rc, _, err := s.inner.Get(ctx, key); err == nil {
			rc.Close()
		}
		return nil, objstore.Info{}, ferr
	}
	return s.inner.Get(ctx, key)
}

// GetRange implements objstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	f, ferr := s.decide(OpGetRange, key, "")
	switch f.Outcome {
	case Lost, Refused:
		return nil, ferr
	case LandedThenError:
		if rc, err := s.inner.GetRange(ctx, key, offset, length); err == nil {
			rc.Close()
		}
		return nil, ferr
	}
	return s.inner.GetRange(ctx, key, offset, length)
}

// put runs one of the three puts through the plan. A failed call that did
// not land still drains r, as a request that went out would have.
func (s *Store) put(op Op, key, etag string, r io.Reader, do func() (objstore.Info, error)) (objstore.Info, error) {
	f, ferr := s.decide(op, key, etag)
	switch f.Outcome {
	case Lost, Refused:
		io.Copy(io.Discard, r)
		return objstore.Info{}, ferr
	case LandedThenError:
		do()
		return objstore.Info{}, ferr
	}
	return do()
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	return s.put(OpPut, key, "", r, func() (objstore.Info, error) { return s.inner.Put(ctx, key, r, size) })
}

// PutIfMatch implements objstore.Store.
func (s *Store) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (objstore.Info, error) {
	return s.put(OpPutIfMatch, key, etag, r, func() (objstore.Info, error) { return s.inner.PutIfMatch(ctx, key, r, size, etag) })
}

// PutIfAbsent implements objstore.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	return s.put(OpPutIfAbsent, key, "", r, func() (objstore.Info, error) { return s.inner.PutIfAbsent(ctx, key, r, size) })
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	f, ferr := s.decide(OpDelete, key, "")
	switch f.Outcome {
	case Lost, Refused:
		return ferr
	case LandedThenError:
		s.inner.Delete(ctx, key)
		return ferr
	}
	return s.inner.Delete(ctx, key)
}

// List implements objstore.Store.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.Info, error) {
	f, ferr := s.decide(OpList, prefix, "")
	switch f.Outcome {
	case Lost, Refused:
		return nil, ferr
	case LandedThenError:
		s.inner.List(ctx, prefix, startAfter, limit)
		return nil, ferr
	}
	return s.inner.List(ctx, prefix, startAfter, limit)
}

// Copy implements objstore.Store.
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	f, ferr := s.decide(OpCopy, dst, "")
	switch f.Outcome {
	case Lost, Refused:
		return ferr
	case LandedThenError:
		s.inner.Copy(ctx, src, dst)
		return ferr
	}
	return s.inner.Copy(ctx, src, dst)
}
