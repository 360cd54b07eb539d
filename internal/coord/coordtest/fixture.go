package coordtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
)

// Fixed identities used by the suite.
var (
	tenantA = coord.TenantID{1}
	tenantB = coord.TenantID{2}
)

const (
	leaseDur = 10 * time.Second
	leaseMS  = coord.Time(10_000)
)

// fixture wraps a backend with helpers that fail the test on unexpected errors.
type fixture struct {
	t      *testing.T
	b      coord.Backend
	ctx    context.Context
	tenant coord.TenantID
	now    coord.Time
	op     coord.OpID
	run    coord.RunID
}

func newFixture(t *testing.T, f Factory, lim coord.Limits) *fixture {
	t.Helper()
	return &fixture{t: t, b: f(t, lim), ctx: context.Background(), tenant: tenantA, now: 1000}
}

func (x *fixture) nextOp() coord.OpID { x.op++; return x.op }

func (x *fixture) nextRun() coord.RunID { x.run++; return x.run }

func key(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

func spec(id coord.ShardID, start, end string) coord.ShardSpec {
	return coord.ShardSpec{ID: id, Start: key(start), End: key(end)}
}

// threeShards is the default manifest: [a,h) [h,p) [p,+inf).
func threeShards() []coord.ShardSpec {
	return []coord.ShardSpec{spec(1, "a", "h"), spec(2, "h", "p"), spec(3, "p", "")}
}

func defaultConfig() coord.RunConfig {
	return coord.RunConfig{LeaseDuration: leaseDur, Cursor: coord.CursorNonDecreasing}
}

// newRun creates a run with cfg for tenant and registers specs (if any).
func (x *fixture) newRunFor(tenant coord.TenantID, cfg coord.RunConfig, specs []coord.ShardSpec) coord.RunID {
	x.t.Helper()
	id := x.nextRun()
	if _, err := x.b.CreateRun(x.ctx, x.now, coord.CreateRunRequest{Tenant: tenant, Run: id, Op: x.nextOp(), Config: cfg}); err != nil {
		x.t.Fatalf("CreateRun: %v", err)
	}
	if len(specs) > 0 {
		if _, err := x.b.RegisterShards(x.ctx, x.now, coord.RegisterShardsRequest{Tenant: tenant, Run: id, Op: x.nextOp(), Shards: specs}); err != nil {
			x.t.Fatalf("RegisterShards: %v", err)
		}
	}
	return id
}

func (x *fixture) newRun(specs ...coord.ShardSpec) coord.RunID {
	x.t.Helper()
	if len(specs) == 0 {
		specs = threeShards()
	}
	return x.newRunFor(x.tenant, defaultConfig(), specs)
}

func (x *fixture) acquire(run coord.RunID, shard coord.ShardID, w coord.WorkerID) coord.Lease {
	x.t.Helper()
	l, err := x.b.Acquire(x.ctx, x.now, coord.AcquireRequest{Tenant: x.tenant, Run: run, Shard: shard, Worker: w, Op: x.nextOp()})
	if err != nil {
		x.t.Fatalf("Acquire(run %d, shard %v, worker %d): %v", run, shard, w, err)
	}
	return l
}

func (x *fixture) shard(run coord.RunID, id coord.ShardID) coord.Shard {
	x.t.Helper()
	s, err := x.b.GetShard(x.ctx, x.tenant, run, id)
	if err != nil {
		x.t.Fatalf("GetShard(%d, %v): %v", run, id, err)
	}
	if err := s.Validate(); err != nil {
		x.t.Fatalf("GetShard returned an invalid record: %v", err)
	}
	return s
}

func (x *fixture) getRun(run coord.RunID) coord.Run {
	x.t.Helper()
	r, err := x.b.GetRun(x.ctx, x.tenant, run)
	if err != nil {
		x.t.Fatalf("GetRun(%d): %v", run, err)
	}
	if err := r.Validate(); err != nil {
		x.t.Fatalf("GetRun returned an invalid record: %v", err)
	}
	return r
}

func (x *fixture) checkpoint(l coord.Lease, k string) coord.Shard {
	x.t.Helper()
	s, err := x.b.Checkpoint(x.ctx, x.now, coord.CheckpointRequest{Lease: l, Op: x.nextOp(), Cursor: coord.Cursor{HasKey: true, Key: []byte(k)}})
	if err != nil {
		x.t.Fatalf("Checkpoint(%q): %v", k, err)
	}
	return s
}

func (x *fixture) complete(l coord.Lease) {
	x.t.Helper()
	if _, err := x.b.Complete(x.ctx, x.now, coord.CompleteRequest{Lease: l, Op: x.nextOp()}); err != nil {
		x.t.Fatalf("Complete: %v", err)
	}
}

func (x *fixture) park(l coord.Lease) {
	x.t.Helper()
	if _, err := x.b.Park(x.ctx, x.now, coord.ParkRequest{Lease: l, Op: x.nextOp(), Reason: "stuck"}); err != nil {
		x.t.Fatalf("Park: %v", err)
	}
}

func (x *fixture) shardCount(run coord.RunID) int {
	x.t.Helper()
	all, err := x.b.ListShards(x.ctx, x.now, x.tenant, run, coord.ShardFilter{})
	if err != nil {
		x.t.Fatalf("ListShards: %v", err)
	}
	return len(all)
}

// wantErr fails unless errors.Is(err, target).
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func noErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func smallLimits() coord.Limits {
	return coord.Limits{
		MaxChildrenPerSplit: 4, MaxSpawnedPerShard: 5, MaxKeySize: 8, MaxTokenSize: 16,
		MaxMetadataSize: 8, MaxReasonSize: 16, MaxInitialShards: 5,
	}.WithDefaults()
}
