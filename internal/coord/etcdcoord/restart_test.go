package etcdcoord_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver"
	"github.com/ghost-scm/ghost/internal/etcdserver/etcdtest"
)

// transient reports the errors a worker rides out by retrying the same
// request: etcd unreachable, or the per-call deadline hit while it was.
func transient(err error) bool {
	return errors.Is(err, etcdcoord.ErrUnavailable) || errors.Is(err, etcdcoord.ErrContention) ||
		errors.Is(err, context.DeadlineExceeded)
}

// retrier calls f with a short deadline until it returns something other
// than a transient error, or the test's patience runs out, counting the
// transient errors it rode out.
type retrier struct{ transients atomic.Int64 }

func (r *retrier) do(ctx context.Context, f func(ctx context.Context) error) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := f(cctx)
		cancel()
		if !transient(err) || ctx.Err() != nil {
			return err
		}
		r.transients.Add(1)
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRestartLosesNothing stops the embedded etcd while workers are
// claiming, checkpointing and completing shards, starts it again on the
// same data directory and address, and checks that the workers finish the
// run and that every acknowledged write survived.
func TestRestartLosesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	srv := etcdtest.StartServer(t, etcdserver.Options{Dir: dir, Logger: zap.NewNop()})
	addr := srv.ClientAddr()
	c, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := etcdcoord.New(etcdcoord.Config{Client: c, Namespace: "/restart"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tenant := coord.TenantID{0x5E}
	const shards, workers, checkpoints = 24, 4, 8
	var specs []coord.ShardSpec
	for i := 0; i < shards; i++ {
		sp := coord.ShardSpec{ID: coord.ShardID(i + 1), Start: []byte{byte(i), 0}}
		if i < shards-1 {
			sp.End = []byte{byte(i + 1), 0}
		}
		specs = append(specs, sp)
	}
	now := func() coord.Time { return coord.TimeOf(time.Now()) }
	if _, err := b.CreateRun(ctx, now(), coord.CreateRunRequest{Tenant: tenant, Run: 1, Op: 1,
		Config: coord.RunConfig{LeaseDuration: time.Minute, Cursor: coord.CursorStrictlyIncreasing}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RegisterShards(ctx, now(), coord.RegisterShardsRequest{Tenant: tenant, Run: 1, Op: 2, Shards: specs}); err != nil {
		t.Fatal(err)
	}

	var rt retrier
	var mu sync.Mutex
	acked := map[coord.ShardID][]byte{} // last acknowledged cursor key
	completed := 0
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 1; w <= workers; w++ {
		wg.Add(1)
		go func(w coord.WorkerID) {
			defer wg.Done()
			op := coord.OpID(uint64(w) << 32)
			next := func() coord.OpID { op++; return op }
			for {
				req := coord.ClaimRequest{Tenant: tenant, Run: 1, Worker: w, Op: next()}
				var l coord.Lease
				err := rt.do(ctx, func(ctx context.Context) (err error) { l, err = b.ClaimNext(ctx, now(), req); return err })
				if errors.Is(err, coord.ErrNoShardAvailable) {
					var p coord.Progress
					if err := rt.do(ctx, func(ctx context.Context) (err error) { p, err = b.Progress(ctx, now(), tenant, 1); return err }); err != nil {
						errs <- err
						return
					}
					if p.Active == 0 {
						return
					}
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d: claim: %w", w, err)
					return
				}
				for i := 1; i <= checkpoints; i++ {
					key := []byte{byte(l.Shard - 1), byte(i)}
					creq := coord.CheckpointRequest{Lease: l, Op: next(), Cursor: coord.Cursor{HasKey: true, Key: key}}
					if err := rt.do(ctx, func(ctx context.Context) error { _, err := b.Checkpoint(ctx, now(), creq); return err }); err != nil {
						errs <- fmt.Errorf("worker %d: checkpoint: %w", w, err)
						return
					}
					mu.Lock()
					acked[l.Shard] = key
					mu.Unlock()
				}
				done := coord.CompleteRequest{Lease: l, Op: next()}
				if err := rt.do(ctx, func(ctx context.Context) error { _, err := b.Complete(ctx, now(), done); return err }); err != nil {
					errs <- fmt.Errorf("worker %d: complete: %w", w, err)
					return
				}
				mu.Lock()
				completed++
				mu.Unlock()
			}
		}(coord.WorkerID(w))
	}

	// Let the workers get going, then take etcd away from under them.
	for {
		mu.Lock()
		n := completed
		mu.Unlock()
		if n >= shards/4 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	srv.Close()
	mu.Lock()
	before := completed
	mu.Unlock()
	time.Sleep(300 * time.Millisecond)
	etcdtest.StartServer(t, etcdserver.Options{Dir: dir, ClientAddr: addr, Logger: zap.NewNop()})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d of %d shards completed before the restart; %d transient errors ridden out", before, shards, rt.transients.Load())
	if rt.transients.Load() == 0 {
		t.Fatal("no worker noticed the restart: the test proved nothing")
	}
	if before >= shards {
		t.Fatal("every shard finished before the restart: the test proved nothing")
	}

	all, err := b.ListShards(ctx, now(), tenant, 1, coord.ShardFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != shards {
		t.Fatalf("%d shards after the restart, want %d", len(all), shards)
	}
	for _, s := range all {
		if s.State != coord.ShardDone {
			t.Errorf("shard %v is %v", s.ID, s.State)
		}
		if k := acked[s.ID]; !bytes.Equal(s.Cursor.Key, k) {
			t.Errorf("shard %v cursor %x, last acknowledged %x", s.ID, s.Cursor.Key, k)
		}
	}
	counts, err := b.RepairCounters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts.Fixed) != 0 || counts.Global != shards {
		t.Fatalf("counters after the restart: %+v", counts)
	}
	r, err := b.CompleteRun(ctx, now(), coord.CompleteRunRequest{Tenant: tenant, Run: 1, Op: 3})
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary != (coord.RunSummary{Total: shards, Done: shards}) {
		t.Fatalf("completed run summary %+v", r.Summary)
	}
	if counts, err := b.RepairCounters(ctx); err != nil || len(counts.Fixed) != 0 || counts.Global != 0 {
		t.Fatalf("counters after the run completed: %+v, %v", counts, err)
	}
}
