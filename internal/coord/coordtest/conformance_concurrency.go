package coordtest

// Concurrency: goroutines racing for the same shards through one backend.
// The concurrent simulation (concurrent.go) goes further, for backends
// shared by processes.

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ghost-scm/ghost/internal/coord"
)

func testClaimNextConcurrent(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	const shards, workers = 20, 8
	var specs []coord.ShardSpec
	for i := 0; i < shards; i++ {
		specs = append(specs, spec(coord.ShardID(i+1), fmt.Sprintf("k%03d", i), fmt.Sprintf("k%03d", i+1)))
	}
	run := x.newRun(specs...)
	var mu sync.Mutex
	claimed := map[coord.ShardID]coord.WorkerID{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 1; w <= workers; w++ {
		wg.Add(1)
		go func(w coord.WorkerID) {
			defer wg.Done()
			for i := 0; ; i++ {
				l, err := x.b.ClaimNext(x.ctx, x.now, coord.ClaimRequest{Tenant: tenantA, Run: run, Worker: w, Op: coord.OpID(uint64(w)<<32 | uint64(i+1))})
				if errors.Is(err, coord.ErrNoShardAvailable) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if prev, dup := claimed[l.Shard]; dup {
					errs <- fmt.Errorf("shard %v claimed by %d and %d", l.Shard, prev, w)
				}
				claimed[l.Shard] = w
				mu.Unlock()
			}
		}(coord.WorkerID(w))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(claimed) != shards {
		t.Fatalf("%d shards claimed, want %d", len(claimed), shards)
	}
}

// testConcurrentWorkers lets goroutines claim, checkpoint, split and complete
// shards of one run at the same logical time until nothing is left, then
// checks that the leaves tile the key space and are all Done.
func testConcurrentWorkers(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	var specs []coord.ShardSpec
	for i := 0; i < 16; i++ {
		sp := spec(coord.ShardID(i+1), fmt.Sprintf("k%02d", i), fmt.Sprintf("k%02d", i+1))
		if i == 15 {
			sp.End = nil
		}
		specs = append(specs, sp)
	}
	run := x.newRun(specs...)
	const workers = 6
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 1; w <= workers; w++ {
		wg.Add(1)
		go func(w coord.WorkerID) {
			defer wg.Done()
			op := coord.OpID(uint64(w) << 40)
			next := func() coord.OpID { op++; return op }
			for {
				l, err := x.b.ClaimNext(x.ctx, x.now, coord.ClaimRequest{Tenant: tenantA, Run: run, Worker: w, Op: next()})
				if errors.Is(err, coord.ErrNoShardAvailable) {
					return
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d: ClaimNext: %w", w, err)
					return
				}
				sh, err := x.b.GetShard(x.ctx, tenantA, run, l.Shard)
				if err == nil {
					// Split root shards once, residual style, to exercise creation under contention.
					if !sh.ID.IsDerived() {
						_, _, err = x.b.SplitResidual(x.ctx, x.now, coord.SplitResidualRequest{Lease: l, Op: next(), Key: append(append([]byte{}, sh.Start...), 'm')})
					}
				}
				if err == nil {
					_, err = x.b.Checkpoint(x.ctx, x.now, coord.CheckpointRequest{Lease: l, Op: next(), Cursor: coord.Cursor{HasKey: true, Key: sh.Start}})
				}
				if err == nil {
					_, err = x.b.Complete(x.ctx, x.now, coord.CompleteRequest{Lease: l, Op: next()})
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d on %v: %w", w, l.Shard, err)
					return
				}
			}
		}(coord.WorkerID(w))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	p, err := x.b.Progress(x.ctx, x.now, tenantA, run)
	noErr(t, "Progress", err)
	if p.Total != 32 || p.Done != 32 || p.Active != 0 {
		t.Fatalf("after the workers: %+v, want 32 shards all done", p)
	}
	_, err = x.b.CompleteRun(x.ctx, x.now, coord.CompleteRunRequest{Tenant: tenantA, Run: run, Op: x.nextOp()})
	noErr(t, "CompleteRun", err)
}
