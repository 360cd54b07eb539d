// Package countstore is an objstore.Store decorator that reports every
// request it passes on, so that what each operation of ghost costs in
// object-store requests is measured, not argued (issue 22): serve
// exports the counts as Prometheus metrics, and benchmarks read them.
//
// It also measures what an operation waits for (issue 36): a Tally,
// attached to a context (WithTally) or to the store for a while
// (Store.Track), counts the requests an operation sent and the longest
// chain of them it waited for one after another, its critical path. On
// S3 every request of that chain costs a round trip of tens of
// milliseconds, so the path, not the total, is what a user feels.
package countstore

import (
	"context"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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

// Store reports each request of the wrapped store to an Observer, and
// to the Tallies the request belongs to.
type Store struct {
	inner   objstore.Store
	observe Observer

	mu      sync.Mutex               // serializes Track's changes of tracked
	tracked atomic.Pointer[[]*Tally] // the tallies every request counts in
}

var _ objstore.Store = (*Store)(nil)

// New wraps inner. observe may be nil, for a store that only feeds
// tallies.
func New(inner objstore.Store, observe Observer) *Store {
	return &Store{inner: inner, observe: observe}
}

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() objstore.Store { return s.inner }

// Tally counts the requests of one operation (a push, a fetch, a page
// view): how many it sent, and how many it waited for in sequence.
//
// The critical path is the longest chain of the operation's requests in
// which each was sent after the one before it had returned: a request's
// depth is one more than the deepest request that had returned when it
// was sent, and Path is the greatest depth. Requests sent while others
// are in flight therefore add to Sent but not to Path, and two chains
// that run side by side count as the longer of them, not as one (which
// a rule of "a request sent while another is in flight adds nothing"
// would make of them). The store cannot see which request needed which
// answer, so the chain is one of time: a request that only happened to
// follow another counts as waiting for it. Measured over a store whose
// every request takes d (latencystore), the operation took at least
// Path·d, and Path is how many round trips it waited for. Over a store
// that answers in microseconds requests that could overlap rarely do, so
// Path is meaningful only over a slow store.
//
// A Get or GetRange has returned when its first byte is due (the method
// returned), not when its body was read: the round trip is what the
// path counts. A Tally is safe for concurrent use.
type Tally struct {
	mu        sync.Mutex
	sent      int
	ops       map[string]int
	path      int // the greatest depth of the requests that returned
	inFlight  int
	busySince time.Time
	busy      time.Duration
	recording bool
	reqs      []Request
}

// Request is one request a recording tally kept.
type Request struct {
	Op  string // OpGet, OpPut, ...
	Key string // the key; a List's prefix, a Copy's destination
	// Depth is the request's place on the longest chain that ends with
	// it: one more than the deepest request that had returned when it
	// was sent.
	Depth          int
	Sent, Returned time.Time // Returned is zero while it is in flight
}

// NewTally returns an empty tally, which counts.
func NewTally() *Tally { return &Tally{ops: map[string]int{}} }

// NewRecordingTally returns an empty tally that also keeps every request
// (Requests, CriticalPath), for a caller that wants to see which
// requests an operation waited for, not only how many. Its memory grows
// with the requests it sees.
func NewRecordingTally() *Tally { return &Tally{ops: map[string]int{}, recording: true} }

// start counts a request of op being sent and returns its depth and,
// when recording, its index in reqs.
func (t *Tally) start(op, key string) (depth, idx int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	t.sent++
	t.ops[op]++
	if t.inFlight == 0 {
		t.busySince = now
	}
	t.inFlight++
	depth, idx = t.path+1, -1
	if t.recording {
		idx = len(t.reqs)
		t.reqs = append(t.reqs, Request{Op: op, Key: key, Depth: depth, Sent: now})
	}
	return depth, idx
}

// end counts the return of a request of the given depth.
func (t *Tally) end(depth, idx int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	t.path = max(t.path, depth)
	t.inFlight--
	if t.inFlight == 0 {
		t.busy += now.Sub(t.busySince)
	}
	if idx >= 0 {
		t.reqs[idx].Returned = now
	}
}

// Requests returns the requests a recording tally kept, in the order
// they were sent (none for a tally made by NewTally).
func (t *Tally) Requests() []Request {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.reqs)
}

// CriticalPath returns one longest chain of a recording tally's returned
// requests, first to last, each sent after the one before it returned:
// the round trips the operation waited for one after another. Of the
// requests that could precede one on the chain it picks the one that
// returned last, the answer the next request most likely waited for.
func (t *Tally) CriticalPath() []Request {
	reqs := t.Requests()
	var chain []Request
	for _, r := range reqs {
		if !r.Returned.IsZero() && (len(chain) == 0 || r.Depth > chain[0].Depth) {
			chain = []Request{r}
		}
	}
	for len(chain) > 0 && chain[0].Depth > 1 {
		next := chain[0]
		var prev *Request
		for i := range reqs {
			r := &reqs[i]
			if r.Depth == next.Depth-1 && !r.Returned.IsZero() && !r.Returned.After(next.Sent) &&
				(prev == nil || r.Returned.After(prev.Returned)) {
				prev = r
			}
		}
		if prev == nil {
			break // cannot happen: a request of depth d had one of d-1 before it
		}
		chain = append([]Request{*prev}, chain...)
	}
	return chain
}

// Sent is how many requests the operation sent.
func (t *Tally) Sent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sent
}

// Path is the operation's critical path: the longest chain of its
// requests each sent after the one before it returned (see Tally).
func (t *Tally) Path() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.path
}

// Ops is how many requests the operation sent, by operation name (OpGet,
// OpPut, ...).
func (t *Tally) Ops() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.ops)
}

// Busy is how long at least one of the operation's requests was in
// flight: the part of its time the store accounts for.
func (t *Tally) Busy() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inFlight > 0 {
		return t.busy + time.Since(t.busySince)
	}
	return t.busy
}

type tallyKey struct{}

// WithTally returns a context that counts in t every request made with
// it, or with a context derived from it, through any Store of this
// package. Tallies nest: a request counts in t and in every tally of
// ctx, so a step's tally and its operation's tally both see it.
func WithTally(ctx context.Context, t *Tally) context.Context {
	outer, _ := ctx.Value(tallyKey{}).([]*Tally)
	if slices.Contains(outer, t) {
		return ctx
	}
	return context.WithValue(ctx, tallyKey{}, append(slices.Clip(outer), t))
}

// Track counts in t every request s passes on, whatever its context,
// until stop is called. It is for an operation whose requests the
// caller cannot give a context to, such as one a server runs for a git
// client: the caller tracks the store around it, and the requests of
// anything else the store serves meanwhile count too.
func (s *Store) Track(t *Tally) (stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cur []*Tally
	if p := s.tracked.Load(); p != nil {
		cur = *p
	}
	next := append(slices.Clip(cur), t)
	s.tracked.Store(&next)
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			cur := *s.tracked.Load()
			i := slices.Index(cur, t)
			next := slices.Delete(slices.Clone(cur), i, i+1)
			s.tracked.Store(&next)
		})
	}
}

// pending is a request in flight in one tally.
type pending struct {
	t          *Tally
	depth, idx int
}

// begin starts op's request in the tallies of ctx and of the store, each
// once.
func (s *Store) begin(ctx context.Context, op, key string) []pending {
	var ps []pending
	add := func(ts []*Tally) {
		for _, t := range ts {
			if !slices.ContainsFunc(ps, func(p pending) bool { return p.t == t }) {
				depth, idx := t.start(op, key)
				ps = append(ps, pending{t, depth, idx})
			}
		}
	}
	if ts, ok := ctx.Value(tallyKey{}).([]*Tally); ok {
		add(ts)
	}
	if p := s.tracked.Load(); p != nil {
		add(*p)
	}
	return ps
}

// done ends the request begin started and reports it to the observer.
func (s *Store) done(ps []pending, op string, err error) {
	for _, p := range ps {
		p.t.end(p.depth, p.idx)
	}
	if s.observe != nil {
		s.observe(op, err)
	}
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	ps := s.begin(ctx, OpGet, key)
	rc, info, err := s.inner.Get(ctx, key)
	s.done(ps, OpGet, err)
	return rc, info, err
}

// GetRange implements objstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	ps := s.begin(ctx, OpGetRange, key)
	rc, err := s.inner.GetRange(ctx, key, offset, length)
	s.done(ps, OpGetRange, err)
	return rc, err
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	ps := s.begin(ctx, OpPut, key)
	info, err := s.inner.Put(ctx, key, r, size)
	s.done(ps, OpPut, err)
	return info, err
}

// PutIfMatch implements objstore.Store.
func (s *Store) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (objstore.Info, error) {
	ps := s.begin(ctx, OpPutIfMatch, key)
	info, err := s.inner.PutIfMatch(ctx, key, r, size, etag)
	s.done(ps, OpPutIfMatch, err)
	return info, err
}

// PutIfAbsent implements objstore.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	ps := s.begin(ctx, OpPutIfAbsent, key)
	info, err := s.inner.PutIfAbsent(ctx, key, r, size)
	s.done(ps, OpPutIfAbsent, err)
	return info, err
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	ps := s.begin(ctx, OpDelete, key)
	err := s.inner.Delete(ctx, key)
	s.done(ps, OpDelete, err)
	return err
}

// List implements objstore.Store.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.Info, error) {
	ps := s.begin(ctx, OpList, prefix)
	page, err := s.inner.List(ctx, prefix, startAfter, limit)
	s.done(ps, OpList, err)
	return page, err
}

// Copy implements objstore.Store.
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	ps := s.begin(ctx, OpCopy, dst)
	err := s.inner.Copy(ctx, src, dst)
	s.done(ps, OpCopy, err)
	return err
}
