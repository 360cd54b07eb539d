package countstore_test

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore/countstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// gate is a store whose reads of a key wait until the test releases
// that key, so that a test decides which requests overlap.
type gate struct {
	*countstore.Store
	arrived chan string
	mu      sync.Mutex
	release map[string]chan struct{}
}

func newGate(t *testing.T) *gate {
	g := &gate{arrived: make(chan string, 16), release: map[string]chan struct{}{}}
	inner := memstore.New()
	for _, k := range []string{"a1", "a2", "b1", "b2", "c", "s1", "s2", "s3"} {
		if _, err := inner.Put(context.Background(), k, strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
	}
	fs := faultstore.New(inner)
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		g.arrived <- c.Key
		<-g.ch(c.Key)
		return faultstore.Fault{}
	})
	g.Store = countstore.New(fs, nil)
	return g
}

func (g *gate) ch(key string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.release[key]
	if !ok {
		c = make(chan struct{})
		g.release[key] = c
	}
	return c
}

// open releases key's reads.
func (g *gate) open(key string) { close(g.ch(key)) }

// get reads key in the background; the returned channel closes when the
// read returned.
func (g *gate) get(t *testing.T, ctx context.Context, key string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		rc, _, err := g.Get(ctx, key)
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, rc)
		rc.Close()
	}()
	return done
}

// wait waits until the reads of keys are in flight.
func (g *gate) wait(t *testing.T, keys ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	for len(want) > 0 {
		select {
		case k := <-g.arrived:
			if !want[k] {
				t.Fatalf("read of %s arrived, want one of %v", k, want)
			}
			delete(want, k)
		case <-time.After(10 * time.Second):
			t.Fatalf("reads of %v never arrived", want)
		}
	}
}

func check(t *testing.T, what string, tl *countstore.Tally, sent, path int) {
	t.Helper()
	if tl.Sent() != sent || tl.Path() != path {
		t.Errorf("%s: sent %d, path %d; want %d and %d", what, tl.Sent(), tl.Path(), sent, path)
	}
}

// TestPathConcurrentAndSequential: requests in flight together count
// once on the path; requests one after another each count.
func TestPathConcurrentAndSequential(t *testing.T) {
	g := newGate(t)
	tl := countstore.NewRecordingTally()
	ctx := countstore.WithTally(context.Background(), tl)
	// Four reads at once.
	var dones []<-chan struct{}
	for _, k := range []string{"a1", "a2", "b1", "b2"} {
		dones = append(dones, g.get(t, ctx, k))
	}
	g.wait(t, "a1", "a2", "b1", "b2")
	for _, k := range []string{"a1", "a2", "b1", "b2"} {
		g.open(k)
	}
	for _, d := range dones {
		<-d
	}
	check(t, "four concurrent reads", tl, 4, 1)
	// Then three, each after the one before.
	for _, k := range []string{"s1", "s2", "s3"} {
		g.open(k)
		<-g.get(t, ctx, k)
		g.wait(t, k)
	}
	check(t, "then three sequential reads", tl, 7, 4)
	if ops := tl.Ops(); ops[countstore.OpGet] != 7 || len(ops) != 1 {
		t.Errorf("ops %v, want 7 gets", ops)
	}
	if got := keys(tl.Requests()); len(got) != 7 || !slices.Equal(got[4:], []string{"s1", "s2", "s3"}) {
		t.Errorf("requests %v, want the four concurrent ones, then s1, s2, s3", got)
	}
	if got := keys(tl.CriticalPath()); len(got) != 4 || !slices.Equal(got[1:], []string{"s1", "s2", "s3"}) {
		t.Errorf("critical path %v, want one of the concurrent reads, then s1, s2, s3", got)
	}
}

// keys are the keys of rs.
func keys(rs []countstore.Request) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Key)
	}
	return out
}

// TestPathTwoChains: two chains of two requests that run side by side,
// each request sent while one of the other chain is in flight, wait for
// two round trips, not one: the store was never idle, yet each chain
// waited for its first answer before sending its second.
func TestPathTwoChains(t *testing.T) {
	g := newGate(t)
	tl := countstore.NewRecordingTally()
	ctx := countstore.WithTally(context.Background(), tl)
	a1, b1 := g.get(t, ctx, "a1"), g.get(t, ctx, "b1")
	g.wait(t, "a1", "b1")
	g.open("a1")
	<-a1
	a2 := g.get(t, ctx, "a2") // b1 in flight
	g.wait(t, "a2")
	g.open("b1")
	<-b1
	b2 := g.get(t, ctx, "b2") // a2 in flight
	g.wait(t, "b2")
	g.open("a2")
	g.open("b2")
	<-a2
	<-b2
	check(t, "two chains side by side", tl, 4, 2)
	// a2 is the first request of depth 2, and only a1 had returned when
	// it was sent.
	if got := keys(tl.CriticalPath()); !slices.Equal(got, []string{"a1", "a2"}) {
		t.Errorf("critical path %v, want a1, a2", got)
	}
}

// TestAttribution: a tally counts the requests of its context and of
// contexts derived from it, nested tallies both count, and a tracked
// tally counts every request while it is tracked, once even when its
// context carries it too.
func TestAttribution(t *testing.T) {
	s := countstore.New(memstore.New(), nil)
	put := func(ctx context.Context, key string) {
		t.Helper()
		if _, err := s.Put(ctx, key, strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
	}
	bg := context.Background()
	op, step := countstore.NewTally(), countstore.NewTally()
	octx := countstore.WithTally(bg, op)
	put(bg, "other")
	put(octx, "k1")
	dctx, cancel := context.WithTimeout(octx, time.Minute)
	defer cancel()
	put(dctx, "k2")
	put(countstore.WithTally(dctx, step), "k3")
	check(t, "operation", op, 3, 3)
	check(t, "step", step, 1, 1)

	tr := countstore.NewTally()
	stop := s.Track(tr)
	put(bg, "t1")
	put(countstore.WithTally(bg, tr), "t2")
	stop()
	stop() // twice is harmless
	put(bg, "t3")
	check(t, "tracked", tr, 2, 2)
	check(t, "operation, after", op, 3, 3)
	if rs := op.Requests(); len(rs) != 0 {
		t.Errorf("a tally that does not record kept %d requests", len(rs))
	}
}

// TestBusy: Busy adds up the time requests were in flight, once for
// requests that overlap.
func TestBusy(t *testing.T) {
	g := newGate(t)
	tl := countstore.NewTally()
	ctx := countstore.WithTally(context.Background(), tl)
	t0 := time.Now()
	d1, d2 := g.get(t, ctx, "a1"), g.get(t, ctx, "a2")
	g.wait(t, "a1", "a2")
	time.Sleep(20 * time.Millisecond)
	g.open("a1")
	g.open("a2")
	<-d1
	<-d2
	if b, all := tl.Busy(), time.Since(t0); b < 20*time.Millisecond || b > all {
		t.Errorf("busy %v over %v with requests in flight for 20ms of it", b, all)
	}
}

// TestObserverOptional: a store with no observer only feeds tallies.
func TestObserverOptional(t *testing.T) {
	s := countstore.New(memstore.New(), nil)
	tl := countstore.NewTally()
	if err := s.Delete(countstore.WithTally(context.Background(), tl), "k"); err != nil {
		t.Fatal(err)
	}
	check(t, "delete", tl, 1, 1)
}
