package hooks

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-github/v68/github"

	"github.com/ghost-scm/ghost/internal/wal"
)

// TestConcurrentDispatchersOneHook: three nodes' dispatchers follow one
// hook while pushes land and each node is told of some of them. One
// holds the hook at a time: the receiver never has two of its deliveries
// in flight, gets every push once, in the log's order.
func TestConcurrentDispatchersOneHook(t *testing.T) {
	e := newEnv(t, nil)
	rc := newReceiver(t, "k")
	var inflight, most atomic.Int32
	inner := rc.srv.Config.Handler
	rc.srv.Config.Handler = httpFunc(func(w responseWriter, r *request) {
		n := inflight.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		inner.ServeHTTP(w, r)
		inflight.Add(-1)
	})
	var ds []*Dispatcher
	for i := 0; i < 3; i++ {
		o := e.dispatchOptions(e.board(newClient(t), 5*time.Second))
		o.TakeJitter = 5 * time.Millisecond
		d := NewDispatcher(e.hooks, o)
		run(t, d)
		ds = append(ds, d)
	}
	e.hooks.SetWake(ds[0].Notify)
	e.addHook(t, e.scope(), rc.srv.URL, "k", "push")
	const pushes = 30
	var wg sync.WaitGroup
	old := wal.ZeroID
	for i := 1; i <= pushes; i++ {
		e.push(wal.Transition{Ref: "refs/heads/main", Old: old, New: oid(i)})
		old = oid(i)
		wg.Add(1)
		go func(d *Dispatcher) {
			defer wg.Done()
			d.AfterPush(context.Background(), "alice", e.repo.ID, "web")
		}(ds[i%len(ds)])
	}
	wg.Wait()
	rc.waitFor(t, pushes+1, 20*time.Second)
	time.Sleep(100 * time.Millisecond)
	g := rc.accepted()
	if len(g) != pushes+1 {
		t.Errorf("%d deliveries, want %d: each event once", len(g), pushes+1)
	}
	for i := 1; i < len(g) && i <= pushes; i++ {
		if p, ok := g[i].parsed.(*github.PushEvent); !ok || p.GetAfter() != oid(i) {
			t.Fatalf("delivery %d is not push %d: out of order", i, i)
		}
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d deliveries of the hook in flight at once, want 1", m)
	}
}
