package coordtest

// Shard caps: the tenant and global caps on shard records, and their
// release when a run ends (docs/adr/0023-atomic-shard-caps.md).

import (
	"errors"
	"testing"

	"github.com/ghost-scm/ghost/internal/coord"
)

func testShardCaps(t *testing.T, f Factory) {
	lim := coord.Limits{MaxShardsPerTenant: 5, MaxShardsGlobal: 8}.WithDefaults()
	x := newFixture(t, f, lim)
	x.newRunFor(tenantA, defaultConfig(), []coord.ShardSpec{spec(1, "a", "b"), spec(2, "b", "c"), spec(3, "c", "d"), spec(4, "d", "")})
	run := x.newRunFor(tenantA, defaultConfig(), nil)
	_, err := x.b.RegisterShards(x.ctx, x.now, coord.RegisterShardsRequest{Tenant: tenantA, Run: run, Op: x.nextOp(), Shards: threeShards()[:2]})
	var sle *coord.ShardLimitError
	if !errors.As(err, &sle) || *sle != (coord.ShardLimitError{Scope: coord.ScopeTenant, Current: 4, Delta: 2, Cap: 5}) {
		t.Fatalf("want tenant ShardLimitError{4, 2, 5}, got %v", err)
	}
	wantErr(t, "tenant cap", err, coord.ErrShardLimitExceeded)
	wantErr(t, "tenant cap", err, coord.ErrLimitExceeded)
	if n := x.shardCount(run); n != 0 {
		t.Fatalf("refused registration stored %d shards", n)
	}
	// Exactly reaching the cap is fine.
	_, err = x.b.RegisterShards(x.ctx, x.now, coord.RegisterShardsRequest{Tenant: tenantA, Run: run, Op: x.nextOp(), Shards: []coord.ShardSpec{spec(1, "a", "z")}})
	noErr(t, "registration reaching the cap", err)
	l := x.acquire(run, 1, 10)
	_, _, err = x.b.SplitResidual(x.ctx, x.now, coord.SplitResidualRequest{Lease: l, Op: x.nextOp(), Key: key("m")})
	if !errors.As(err, &sle) || sle.Scope != coord.ScopeTenant || sle.Current != 5 || sle.Delta != 1 {
		t.Fatalf("SplitResidual over the tenant cap: %v", err)
	}
	_, _, err = x.b.SplitReplace(x.ctx, x.now, coord.SplitReplaceRequest{Lease: l, Op: x.nextOp(), Children: children("a", "m", "m", "z")})
	if !errors.As(err, &sle) || sle.Scope != coord.ScopeTenant || sle.Delta != 2 {
		t.Fatalf("SplitReplace over the tenant cap: %v", err)
	}
	if s := x.shard(run, 1); s.State != coord.ShardActive || string(s.End) != "z" || len(s.Children) != 0 {
		t.Fatalf("refused splits changed the shard: %+v", s)
	}
	// Tenant B has its own tenant budget but shares the global one (5 used of 8).
	x.tenant = tenantB
	rb := x.newRunFor(tenantB, defaultConfig(), nil)
	_, err = x.b.RegisterShards(x.ctx, x.now, coord.RegisterShardsRequest{Tenant: tenantB, Run: rb, Op: x.nextOp(), Shards: threeShards()[:2]})
	noErr(t, "tenant B registration", err)
	lb := x.acquire(rb, 1, 10)
	_, _, err = x.b.SplitReplace(x.ctx, x.now, coord.SplitReplaceRequest{Lease: lb, Op: x.nextOp(), Children: children("a", "c", "c", "h")})
	if !errors.As(err, &sle) || *sle != (coord.ShardLimitError{Scope: coord.ScopeGlobal, Current: 7, Delta: 2, Cap: 8}) {
		t.Fatalf("want global ShardLimitError{7, 2, 8}, got %v", err)
	}
	_, _, err = x.b.SplitResidual(x.ctx, x.now, coord.SplitResidualRequest{Lease: lb, Op: x.nextOp(), Key: key("c")})
	noErr(t, "residual reaching the global cap", err)
}

// testTerminalRunReleases checks docs/adr/0023-atomic-shard-caps.md: the
// transition that ends a run deletes its shards, frees their place under
// both caps at once, and keeps a summary.
func testTerminalRunReleases(t *testing.T, f Factory) {
	lim := coord.Limits{MaxShardsPerTenant: 6, MaxShardsGlobal: 6}.WithDefaults()
	x := newFixture(t, f, lim)
	run := x.newRun() // 3 shards
	l := x.acquire(run, 1, 10)
	x.complete(l)
	l2 := x.acquire(run, 2, 10)
	_, _, err := x.b.SplitReplace(x.ctx, x.now, coord.SplitReplaceRequest{Lease: l2, Op: x.nextOp(), Children: children("h", "k", "k", "p")})
	noErr(t, "SplitReplace", err) // 5 records: the split parent counts until the run ends
	l3 := x.acquire(run, 3, 10)
	x.park(l3)
	x.now += 5
	fail := coord.FailRunRequest{Tenant: tenantA, Run: run, Op: x.nextOp(), Reason: "boom"}
	r, err := x.b.FailRun(x.ctx, x.now, fail)
	noErr(t, "FailRun", err)
	want := coord.RunSummary{Total: 5, Active: 2, Done: 1, Split: 1, Parked: 1}
	if r.Summary != want || r.CompletedAt != x.now || r.CreatedAt != 1000 {
		t.Fatalf("failed run %+v, want summary %+v", r, want)
	}
	if got := x.getRun(run); got.Summary != want {
		t.Fatalf("stored summary %+v, want %+v", got.Summary, want)
	}
	p, err := x.b.Progress(x.ctx, x.now, tenantA, run)
	noErr(t, "Progress", err)
	if p != (coord.Progress{State: coord.RunFailed, Total: 5, Active: 2, Done: 1, Split: 1, Parked: 1}) {
		t.Fatalf("Progress of the failed run: %+v", p)
	}
	if n := x.shardCount(run); n != 0 {
		t.Fatalf("failed run still lists %d shards", n)
	}
	_, err = x.b.GetShard(x.ctx, tenantA, run, 1)
	wantErr(t, "GetShard of a released shard", err, coord.ErrRunTerminal)
	wantErr(t, "GetShard of a released shard", err, coord.ErrNotFound)
	_, err = x.b.Complete(x.ctx, x.now, coord.CompleteRequest{Lease: l3, Op: x.nextOp()})
	wantErr(t, "Complete in a failed run", err, coord.ErrRunTerminal)
	_, err = x.b.GetShard(x.ctx, tenantB, run, 1)
	wantErr(t, "GetShard by another tenant", err, coord.ErrTenantMismatch)
	// A replay of the ending op answers with the same run and frees nothing twice.
	r2, err := x.b.FailRun(x.ctx, x.now+10, fail)
	noErr(t, "FailRun replay", err)
	if r2.Summary != want || r2.CompletedAt != r.CompletedAt {
		t.Fatalf("FailRun replay: %+v", r2)
	}

	// All six slots are free again, for tenant A and globally.
	full := []coord.ShardSpec{spec(1, "a", "b"), spec(2, "b", "c"), spec(3, "c", "d"), spec(4, "d", "e"), spec(5, "e", "f"), spec(6, "f", "")}
	r6 := x.newRunFor(tenantA, defaultConfig(), full)
	_, err = x.b.CancelRun(x.ctx, x.now, coord.CancelRunRequest{Tenant: tenantA, Run: r6, Op: x.nextOp()})
	noErr(t, "CancelRun", err)
	x.tenant = tenantB
	rb := x.newRunFor(tenantB, defaultConfig(), full)
	cr, err := x.b.CancelRun(x.ctx, x.now, coord.CancelRunRequest{Tenant: tenantB, Run: rb, Op: x.nextOp()})
	noErr(t, "CancelRun", err)
	if cr.Summary != (coord.RunSummary{Total: 6, Active: 6}) {
		t.Fatalf("cancelled run summary %+v", cr.Summary)
	}
	// A run cancelled before registering has an empty summary.
	ir := x.newRunFor(tenantB, defaultConfig(), nil)
	ic, err := x.b.CancelRun(x.ctx, x.now, coord.CancelRunRequest{Tenant: tenantB, Run: ir, Op: x.nextOp()})
	noErr(t, "CancelRun of an initializing run", err)
	if ic.Summary != (coord.RunSummary{}) {
		t.Fatalf("initializing run summary %+v", ic.Summary)
	}
}

// testCapFreedByCompletedRuns is issue 9's scenario: a tenant at its cap
// whose runs all complete can register a new run at once, without GC.
func testCapFreedByCompletedRuns(t *testing.T, f Factory) {
	lim := coord.Limits{MaxShardsPerTenant: 4, MaxShardsGlobal: 100}.WithDefaults()
	x := newFixture(t, f, lim)
	var runs []coord.RunID
	for i := 0; i < 2; i++ {
		runs = append(runs, x.newRun(spec(1, "a", "m"), spec(2, "m", "")))
	}
	blocked := x.newRunFor(tenantA, defaultConfig(), nil)
	reg := coord.RegisterShardsRequest{Tenant: tenantA, Run: blocked, Op: x.nextOp(), Shards: []coord.ShardSpec{spec(1, "a", "")}}
	_, err := x.b.RegisterShards(x.ctx, x.now, reg)
	var sle *coord.ShardLimitError
	if !errors.As(err, &sle) || sle.Scope != coord.ScopeTenant || sle.Current != 4 {
		t.Fatalf("registration at the cap: %v", err)
	}
	for _, run := range runs {
		for _, id := range []coord.ShardID{1, 2} {
			x.complete(x.acquire(run, id, 7))
		}
		r, err := x.b.CompleteRun(x.ctx, x.now, coord.CompleteRunRequest{Tenant: tenantA, Run: run, Op: x.nextOp()})
		noErr(t, "CompleteRun", err)
		if r.Summary != (coord.RunSummary{Total: 2, Done: 2}) {
			t.Fatalf("completed run summary %+v", r.Summary)
		}
	}
	_, err = x.b.RegisterShards(x.ctx, x.now, coord.RegisterShardsRequest{Tenant: tenantA, Run: blocked, Op: x.nextOp(),
		Shards: []coord.ShardSpec{spec(1, "a", "b"), spec(2, "b", "c"), spec(3, "c", "d"), spec(4, "d", "")}})
	noErr(t, "registration after every run completed", err)
}
