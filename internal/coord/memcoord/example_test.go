package memcoord_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/memcoord"
)

// Example shows a run's life: register two shards, let a worker claim,
// checkpoint and complete each, then complete the run. Worker 7 starts at
// its claim offset, which here is the second shard. Each side holds the
// role it plays, not the whole backend.
func Example() {
	ctx := context.Background()
	b := memcoord.New(coord.Limits{})
	var admin coord.Admin = b
	var worker coord.Worker = b
	tenant := coord.TenantID{1}
	now := coord.Time(1)
	op := coord.OpID(0)
	next := func() coord.OpID { op++; return op }

	cfg := coord.RunConfig{LeaseDuration: 30 * time.Second, Cursor: coord.CursorNonDecreasing}
	if _, err := admin.CreateRun(ctx, now, coord.CreateRunRequest{Tenant: tenant, Run: 1, Op: next(), Config: cfg}); err != nil {
		panic(err)
	}
	_, err := admin.RegisterShards(ctx, now, coord.RegisterShardsRequest{Tenant: tenant, Run: 1, Op: next(), Shards: []coord.ShardSpec{
		{ID: 1, Start: []byte("a"), End: []byte("m")},
		{ID: 2, Start: []byte("m")}, // empty End: unbounded
	}})
	if err != nil {
		panic(err)
	}
	for {
		lease, err := worker.ClaimNext(ctx, now, coord.ClaimRequest{Tenant: tenant, Run: 1, Worker: 7, Op: next()})
		if err != nil {
			fmt.Println("claim:", err)
			break
		}
		cursor := coord.Cursor{HasKey: true, Key: []byte("x"), Token: []byte("resume-here")}
		if lease.Shard == 1 {
			cursor.Key = []byte("c")
		}
		if _, err := worker.Checkpoint(ctx, now, coord.CheckpointRequest{Lease: lease, Op: next(), Cursor: cursor}); err != nil {
			panic(err)
		}
		if _, err := worker.Complete(ctx, now, coord.CompleteRequest{Lease: lease, Op: next()}); err != nil {
			panic(err)
		}
		fmt.Printf("completed shard %d at fence %d\n", lease.Shard, lease.Fence)
		now++
	}
	run, err := admin.CompleteRun(ctx, now, coord.CompleteRunRequest{Tenant: tenant, Run: 1, Op: next()})
	if err != nil {
		panic(err)
	}
	fmt.Println("run:", run.State)
	// Output:
	// completed shard 2 at fence 2
	// completed shard 1 at fence 2
	// claim: coord: no shard available: run 1
	// run: done
}
