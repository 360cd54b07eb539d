package etcdcoord_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
)

func received(ch <-chan struct{}, within time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(within):
		return false
	}
}

// TestWatchClaimableSignals: the watch signals once established; registering a run's shards wakes a watcher;
// acquiring and renewing a lease, which rewrite the same index entries,
// do not; a split that makes a residual claimable does.
func TestWatchClaimableSignals(t *testing.T) {
	b := newBackend(t, etcdcoord.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := b.WatchClaimable(ctx)
	if !received(ch, 5*time.Second) {
		t.Fatal("no signal when the watch was established")
	}
	tenant := coord.TenantID{4}
	mustRun(t, b, tenant, 1, 1)
	if !received(ch, 5*time.Second) {
		t.Fatal("no signal for a registered shard")
	}
	lease, err := b.Acquire(ctx, 20, coord.AcquireRequest{Tenant: tenant, Run: 1, Shard: 1, Worker: 9, Op: 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Renew(ctx, 21, coord.RenewRequest{Lease: lease, Op: 6}); err != nil {
		t.Fatal(err)
	}
	if received(ch, 500*time.Millisecond) {
		t.Fatal("a lease acquisition or renewal signalled")
	}
	if _, _, err := b.SplitResidual(ctx, 22, coord.SplitResidualRequest{Lease: lease, Op: 7, Key: []byte{0, 0, 0, 0, 9}}); err != nil {
		t.Fatal(err)
	}
	if !received(ch, 5*time.Second) {
		t.Fatal("no signal for a residual shard")
	}
	cancel()
	for range ch {
	}
}

// TestLeadFailsOver: of two processes leading the same name, one runs at
// a time; when the leader stops (its context ends, as when it dies and its
// session expires), the other takes over.
func TestLeadFailsOver(t *testing.T) {
	b := newBackend(t, etcdcoord.Config{})
	var running, maxRunning atomic.Int32
	started := make(chan int, 4)
	lead := func(ctx context.Context, id int, wg *sync.WaitGroup) {
		defer wg.Done()
		b.Lead(ctx, "reconciler", 2*time.Second, func(ctx context.Context) {
			n := running.Add(1)
			for m := maxRunning.Load(); n > m && !maxRunning.CompareAndSwap(m, n); m = maxRunning.Load() {
			}
			started <- id
			<-ctx.Done()
			running.Add(-1)
		})
	}
	var wg sync.WaitGroup
	ctx1, stop1 := context.WithCancel(context.Background())
	ctx2, stop2 := context.WithCancel(context.Background())
	defer stop2()
	wg.Add(2)
	go lead(ctx1, 1, &wg)
	go lead(ctx2, 2, &wg)
	var first int
	select {
	case first = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("nobody leads")
	}
	select {
	case id := <-started:
		t.Fatalf("%d leads while %d does", id, first)
	case <-time.After(time.Second):
	}
	if first == 1 {
		stop1()
	} else {
		stop2()
	}
	select {
	case id := <-started:
		if id == first {
			t.Fatalf("%d led again after it stopped", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nobody took over")
	}
	stop1()
	stop2()
	wg.Wait()
	if maxRunning.Load() != 1 {
		t.Fatalf("%d leaders at once", maxRunning.Load())
	}
}
