package coordtest

// Clock skew: callers whose clocks are behind the records' timestamps.

import (
	"testing"

	"github.com/ghost-scm/ghost/internal/coord"
)

// testClockSkew checks the clock rule of docs/adr/0005-coord-pure-transitions.md:
// a caller whose now is older than a record's timestamps (another node's
// clock is ahead) is served at the record's time, never refused as corrupt.
func testClockSkew(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun(spec(1, "a", ""))
	l := x.acquire(run, 1, 1) // at 1000
	_, kids, err := x.b.SplitReplace(x.ctx, 2000, coord.SplitReplaceRequest{Lease: l, Op: x.nextOp(), Children: children("a", "m", "m", "t", "t", "")})
	noErr(t, "SplitReplace at 2000", err)

	// The reproduction: ClaimNext and Acquire at 1999 of children
	// created at 2000.
	cl, err := x.b.ClaimNext(x.ctx, 1999, coord.ClaimRequest{Tenant: tenantA, Run: run, Worker: 2, Op: x.nextOp()})
	noErr(t, "ClaimNext at 1999", err)
	other := kids[0].ID
	if other == cl.Shard {
		other = kids[1].ID
	}
	al, err := x.b.Acquire(x.ctx, 1999, coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: other, Worker: 3, Op: x.nextOp()})
	noErr(t, "Acquire at 1999", err)
	// The lease runs from the record's time, not from the caller's older one.
	if al.Deadline != 2000+leaseMS || cl.Deadline != 2000+leaseMS {
		t.Fatalf("deadlines %d and %d, want %d", cl.Deadline, al.Deadline, 2000+leaseMS)
	}

	// Every worker mutation accepts an old now.
	old := coord.Time(1500)
	rl, err := x.b.Renew(x.ctx, old, coord.RenewRequest{Lease: al, Op: x.nextOp()})
	noErr(t, "Renew at an old now", err)
	_, err = x.b.Checkpoint(x.ctx, old, coord.CheckpointRequest{Lease: rl, Op: x.nextOp(), Cursor: coord.Cursor{HasKey: true, Key: []byte("b")}})
	noErr(t, "Checkpoint at an old now", err)
	var sl coord.Lease
	for _, k := range kids {
		if k.ID == rl.Shard {
			continue
		}
		if k.ID == cl.Shard {
			sl = cl
		}
	}
	sh, res, err := x.b.SplitResidual(x.ctx, old, coord.SplitResidualRequest{Lease: sl, Op: x.nextOp(), Key: key(midKey(kidSpec(kids, sl.Shard)))})
	noErr(t, "SplitResidual at an old now", err)
	if err := sh.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := res.Validate(); err != nil {
		t.Fatal(err)
	}
	_, err = x.b.Park(x.ctx, old, coord.ParkRequest{Lease: sl, Op: x.nextOp(), Reason: "skew"})
	noErr(t, "Park at an old now", err)
	_, err = x.b.Unpark(x.ctx, 1, coord.UnparkRequest{Tenant: tenantA, Run: run, Shard: sl.Shard, Op: x.nextOp()})
	noErr(t, "Unpark at now=1", err)
	_, err = x.b.Complete(x.ctx, 1, coord.CompleteRequest{Lease: rl, Op: x.nextOp()})
	noErr(t, "Complete at now=1", err)
	for _, s := range mustList(x, run) {
		if err := s.Validate(); err != nil {
			t.Fatalf("stored record: %v", err)
		}
	}

	// A lease live at the record's time stays live for a caller behind it.
	_, err = x.b.Acquire(x.ctx, 1, coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: res.ID, Worker: 5, Op: x.nextOp()})
	noErr(t, "Acquire of the residual at now=1", err)
	_, err = x.b.Acquire(x.ctx, 1, coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: res.ID, Worker: 6, Op: x.nextOp()})
	wantErr(t, "Acquire of a leased shard at now=1", err, coord.ErrLeaseHeld)

	// Run transitions accept an old now too; CompletedAt never precedes
	// the run's own timestamps.
	r, err := x.b.CancelRun(x.ctx, 1, coord.CancelRunRequest{Tenant: tenantA, Run: run, Op: x.nextOp()})
	noErr(t, "CancelRun at now=1", err)
	if r.CompletedAt < r.CreatedAt || r.UpdatedAt < r.CreatedAt {
		t.Fatalf("cancelled run has timestamps %+v", r)
	}
	fr := x.newRun()
	x.now = 5000
	fr2 := x.newRun()
	_, err = x.b.FailRun(x.ctx, 2, coord.FailRunRequest{Tenant: tenantA, Run: fr2, Op: x.nextOp(), Reason: "skew"})
	noErr(t, "FailRun at now=2", err)
	_, err = x.b.FailRun(x.ctx, 2, coord.FailRunRequest{Tenant: tenantA, Run: fr, Op: x.nextOp(), Reason: "skew"})
	noErr(t, "FailRun at now=2", err)
}

func mustList(x *fixture, run coord.RunID) []coord.Shard {
	x.t.Helper()
	all, err := x.b.ListShards(x.ctx, x.now, x.tenant, run, coord.ShardFilter{})
	if err != nil {
		x.t.Fatalf("ListShards: %v", err)
	}
	return all
}

func kidSpec(kids []coord.Shard, id coord.ShardID) coord.Shard {
	for _, k := range kids {
		if k.ID == id {
			return k
		}
	}
	return coord.Shard{}
}

// midKey returns a key strictly inside [s.Start, s.End) for the suite's
// one-letter keys.
func midKey(s coord.Shard) string {
	return string(s.Start) + "m"
}
