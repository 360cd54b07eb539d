// Package latencystore is an objstore.Store decorator that delays every
// request by a latency drawn for its kind, so that ghost can be measured
// at the latency of the object storage it is built for (issue 36). The
// stores ghost runs on in tests and benchmarks (fsstore, memstore, an S3
// gateway on loopback) answer in microseconds; S3 Standard answers a GET
// in tens of milliseconds and a conditional PUT in about sixty. What
// those round trips cost a user is how many of them an operation waits
// for one after another, which only a slow store shows (the counting
// decorator, countstore, counts them: Tally.Path).
//
// The delay is paid before the request reaches the wrapped store: a
// request cancelled while it waits never reaches it, and the error says
// the context's reason, as a backend's does for a request it never sent.
// Transfer time is not modelled: a body streams at the wrapped store's
// speed once its first byte is due (docs/adr/0135-latency-store.md).
package latencystore

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// Dist is the latency of one kind of request: log-normal with the given
// median and 99th percentile, the shape measured request latencies of
// object stores have (a narrow body, a long right tail). A P99 at or
// below the median makes every request take exactly Median. Draws are
// capped at 4×P99, so that one unlucky draw cannot stall a benchmark.
type Dist struct {
	Median time.Duration
	P99    time.Duration
}

// z99 is the standard normal's 99th percentile.
const z99 = 2.326347874

// draw returns one latency, using r.
func (d Dist) draw(r *rand.Rand) time.Duration {
	if d.Median <= 0 {
		return 0
	}
	if d.P99 <= d.Median {
		return d.Median
	}
	sigma := math.Log(float64(d.P99)/float64(d.Median)) / z99
	v := time.Duration(float64(d.Median) * math.Exp(sigma*r.NormFloat64()))
	return min(v, 4*d.P99)
}

func (d Dist) String() string {
	if d.P99 <= d.Median {
		return d.Median.String()
	}
	return d.Median.String() + " (p99 " + d.P99.String() + ")"
}

// Profile is the latency of each kind of request of objstore.Store. The
// interface has no HEAD, so a profile has none either; a ranged GET is a
// GET.
type Profile struct {
	// Name says where the figures come from, for tables and logs.
	Name string
	// Get is a GET's or ranged GET's time to first byte.
	Get Dist
	// Put is an unconditional PUT's time to its answer.
	Put Dist
	// CondPut is a conditional PUT's (If-Match or If-None-Match) time to
	// its answer: a compare-and-swap, which S3 serializes per key.
	CondPut Dist
	// List is one page of a LIST.
	List Dist
	// Delete is a DELETE.
	Delete Dist
	// Copy is a server-side copy (PUT with x-amz-copy-source).
	Copy Dist
}

// S3Standard is S3 Standard in the region of the node, the default
// profile: a GET's first byte in tens of milliseconds, a LIST page in
// 50–100 ms, and a conditional PUT at about 60 ms (a published
// measurement of compare-and-swap on one object, January 2026: 14.7–15.3
// operations a second at 58–68 ms). The tails are estimates.
func S3Standard() Profile {
	return Profile{
		Name:    "s3-standard",
		Get:     Dist{Median: 30 * time.Millisecond, P99: 120 * time.Millisecond},
		Put:     Dist{Median: 45 * time.Millisecond, P99: 150 * time.Millisecond},
		CondPut: Dist{Median: 62 * time.Millisecond, P99: 150 * time.Millisecond},
		List:    Dist{Median: 70 * time.Millisecond, P99: 200 * time.Millisecond},
		Delete:  Dist{Median: 30 * time.Millisecond, P99: 100 * time.Millisecond},
		Copy:    Dist{Median: 60 * time.Millisecond, P99: 200 * time.Millisecond},
	}
}

// S3Express is S3 Express One Zone from a node in its zone: single-digit
// milliseconds for reads, and compare-and-swap at 14–26 ms (69–75
// operations a second on one object in the same measurement as
// S3Standard's). The tails are estimates.
func S3Express() Profile {
	return Profile{
		Name:    "s3-express",
		Get:     Dist{Median: 5 * time.Millisecond, P99: 20 * time.Millisecond},
		Put:     Dist{Median: 8 * time.Millisecond, P99: 25 * time.Millisecond},
		CondPut: Dist{Median: 14 * time.Millisecond, P99: 26 * time.Millisecond},
		List:    Dist{Median: 10 * time.Millisecond, P99: 30 * time.Millisecond},
		Delete:  Dist{Median: 6 * time.Millisecond, P99: 20 * time.Millisecond},
		Copy:    Dist{Median: 12 * time.Millisecond, P99: 40 * time.Millisecond},
	}
}

// Fixed delays every request by exactly d, whatever its kind: the
// profile of tables at 0, 10 and 60 ms a request, whose figures then
// divide by d into round trips.
func Fixed(d time.Duration) Profile {
	f := Dist{Median: d, P99: d}
	return Profile{Name: "fixed " + d.String(), Get: f, Put: f, CondPut: f, List: f, Delete: f, Copy: f}
}

// Parse reads a profile's name as benchmarks take it from the
// environment: "s3-standard", "s3-express", or a duration ("60ms",
// optionally "fixed:60ms") for Fixed.
func Parse(s string) (Profile, error) {
	switch s {
	case "s3-standard":
		return S3Standard(), nil
	case "s3-express":
		return S3Express(), nil
	}
	d, err := time.ParseDuration(strings.TrimPrefix(s, "fixed:"))
	if err != nil || d < 0 {
		return Profile{}, fmt.Errorf("latency profile %q: want s3-standard, s3-express or a duration such as 60ms", s)
	}
	return Fixed(d), nil
}

// Store delays each request of the wrapped store by a latency drawn from
// its profile. Draws come from one generator seeded at New, taken in the
// order requests arrive: the same seed and the same sequence of requests
// give the same delays.
type Store struct {
	inner   objstore.Store
	profile Profile

	mu  sync.Mutex
	rng *rand.Rand
}

var _ objstore.Store = (*Store)(nil)

// New wraps inner with profile p, drawing from a generator seeded with
// seed.
func New(inner objstore.Store, p Profile, seed uint64) *Store {
	return &Store{inner: inner, profile: p, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() objstore.Store { return s.inner }

// Profile returns the store's profile.
func (s *Store) Profile() Profile { return s.profile }

// wait draws a latency from d and sleeps it, or until ctx is done. Its
// error is an *objstore.Error wrapping the context's, as a backend
// reports a request it did not send because its context ended.
func (s *Store) wait(ctx context.Context, d Dist, op, key string) error {
	if d.Median <= 0 {
		return nil
	}
	s.mu.Lock()
	delay := d.draw(s.rng)
	s.mu.Unlock()
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return &objstore.Error{Op: op, Key: key, Err: ctx.Err()}
	}
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	if err := s.wait(ctx, s.profile.Get, "Get", key); err != nil {
		return nil, objstore.Info{}, err
	}
	return s.inner.Get(ctx, key)
}

// GetRange implements objstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := s.wait(ctx, s.profile.Get, "GetRange", key); err != nil {
		return nil, err
	}
	return s.inner.GetRange(ctx, key, offset, length)
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	if err := s.wait(ctx, s.profile.Put, "Put", key); err != nil {
		return objstore.Info{}, err
	}
	return s.inner.Put(ctx, key, r, size)
}

// PutIfMatch implements objstore.Store.
func (s *Store) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (objstore.Info, error) {
	if err := s.wait(ctx, s.profile.CondPut, "PutIfMatch", key); err != nil {
		return objstore.Info{}, err
	}
	return s.inner.PutIfMatch(ctx, key, r, size, etag)
}

// PutIfAbsent implements objstore.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	if err := s.wait(ctx, s.profile.CondPut, "PutIfAbsent", key); err != nil {
		return objstore.Info{}, err
	}
	return s.inner.PutIfAbsent(ctx, key, r, size)
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.wait(ctx, s.profile.Delete, "Delete", key); err != nil {
		return err
	}
	return s.inner.Delete(ctx, key)
}

// List implements objstore.Store.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.Info, error) {
	if err := s.wait(ctx, s.profile.List, "List", prefix); err != nil {
		return nil, err
	}
	return s.inner.List(ctx, prefix, startAfter, limit)
}

// Copy implements objstore.Store.
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	if err := s.wait(ctx, s.profile.Copy, "Copy", dst); err != nil {
		return err
	}
	return s.inner.Copy(ctx, src, dst)
}
