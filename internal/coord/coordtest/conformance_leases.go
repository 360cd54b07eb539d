package coordtest

// Leases and the worker operations that present them: acquiring, claiming,
// expiry, retries, the order of the checks, renewing, checkpointing,
// completing, parking and unparking, and zombie workers.

import (
	"fmt"
	"testing"

	"github.com/ghost-scm/ghost/internal/coord"
)

func testAcquire(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun()
	l := x.acquire(run, 1, 10)
	if l.Fence != 2 || l.Worker != 10 || l.Deadline != x.now+leaseMS || l.Shard != 1 || l.Run != run || l.Tenant != tenantA {
		t.Fatalf("lease %+v", l)
	}
	s := x.shard(run, 1)
	if s.Fence != 2 || s.Owner != 10 || s.Deadline != l.Deadline || s.Attempts != 1 {
		t.Fatalf("shard after acquire: %+v", s)
	}
	// Held by a live lease: refused, even for the same worker.
	for _, w := range []coord.WorkerID{11, 10} {
		_, err := x.b.Acquire(x.ctx, x.now+leaseMS-1, coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: 1, Worker: w, Op: x.nextOp()})
		wantErr(t, "Acquire of a leased shard", err, coord.ErrLeaseHeld)
	}
	if got := x.shard(run, 1); got.Fence != 2 {
		t.Fatalf("refused acquire changed fence to %d", got.Fence)
	}
	cases := []struct {
		name string
		req  coord.AcquireRequest
		now  coord.Time
		want error
	}{
		{"unknown shard", coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: 99, Worker: 1, Op: 1}, x.now, coord.ErrNotFound},
		{"unknown run", coord.AcquireRequest{Tenant: tenantA, Run: 99, Shard: 1, Worker: 1, Op: 1}, x.now, coord.ErrNotFound},
		{"other tenant", coord.AcquireRequest{Tenant: tenantB, Run: run, Shard: 2, Worker: 1, Op: 1}, x.now, coord.ErrTenantMismatch},
		{"zero worker", coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: 2, Worker: 0, Op: 1000}, x.now, coord.ErrInvalidArgument},
		{"zero op", coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: 2, Worker: 1, Op: 0}, x.now, coord.ErrInvalidArgument},
		{"zero now", coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: 2, Worker: 1, Op: 1001}, 0, coord.ErrInvalidArgument},
	}
	for _, tc := range cases {
		_, err := x.b.Acquire(x.ctx, tc.now, tc.req)
		wantErr(t, tc.name, err, tc.want)
	}
	// Done and parked shards cannot be acquired.
	l2 := x.acquire(run, 2, 10)
	x.complete(l2)
	_, err := x.b.Acquire(x.ctx, x.now, coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: 2, Worker: 10, Op: x.nextOp()})
	wantErr(t, "Acquire of a done shard", err, coord.ErrShardTerminal)
	l3 := x.acquire(run, 3, 10)
	x.park(l3)
	_, err = x.b.Acquire(x.ctx, x.now, coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: 3, Worker: 10, Op: x.nextOp()})
	wantErr(t, "Acquire of a parked shard", err, coord.ErrShardParked)
	// Terminal runs refuse acquisitions.
	_, err = x.b.CancelRun(x.ctx, x.now, coord.CancelRunRequest{Tenant: tenantA, Run: run, Op: x.nextOp()})
	noErr(t, "CancelRun", err)
	_, err = x.b.Acquire(x.ctx, x.now+leaseMS, coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: 1, Worker: 10, Op: x.nextOp()})
	wantErr(t, "Acquire in a cancelled run", err, coord.ErrRunTerminal)
}

func testLeaseExpiresAtDeadline(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun()
	l := x.acquire(run, 1, 10)
	// One millisecond before the deadline the lease is live.
	_, err := x.b.Checkpoint(x.ctx, l.Deadline-1, coord.CheckpointRequest{Lease: l, Op: x.nextOp(), Cursor: coord.Cursor{HasKey: true, Key: key("b")}})
	noErr(t, "Checkpoint just before deadline", err)
	_, err = x.b.Acquire(x.ctx, l.Deadline-1, coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: 1, Worker: 11, Op: x.nextOp()})
	wantErr(t, "Acquire just before deadline", err, coord.ErrLeaseHeld)
	// At exactly the deadline it has expired.
	_, err = x.b.Checkpoint(x.ctx, l.Deadline, coord.CheckpointRequest{Lease: l, Op: x.nextOp(), Cursor: coord.Cursor{HasKey: true, Key: key("c")}})
	wantErr(t, "Checkpoint at deadline", err, coord.ErrLeaseExpired)
	_, err = x.b.Renew(x.ctx, l.Deadline, coord.RenewRequest{Lease: l, Op: x.nextOp()})
	wantErr(t, "Renew at deadline", err, coord.ErrLeaseExpired)
	l2, err := x.b.Acquire(x.ctx, l.Deadline, coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: 1, Worker: 11, Op: x.nextOp()})
	noErr(t, "Acquire at deadline", err)
	if l2.Fence != l.Fence+1 || l2.Deadline != l.Deadline+leaseMS {
		t.Fatalf("re-acquired lease %+v after %+v", l2, l)
	}
	if s := x.shard(run, 1); string(s.Cursor.Key) != "b" {
		t.Fatalf("cursor %q, want the last checkpoint \"b\"", s.Cursor.Key)
	}
}

func testMaxRetries(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	cfg := defaultConfig()
	cfg.MaxRetries = 2
	run := x.newRunFor(tenantA, cfg, threeShards())
	now := x.now
	for i := 0; i < 3; i++ { // the first acquisition plus two retries
		_, err := x.b.Acquire(x.ctx, now, coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: 1, Worker: 10, Op: x.nextOp()})
		noErr(t, fmt.Sprintf("acquisition %d", i+1), err)
		now += leaseMS
	}
	_, err := x.b.Acquire(x.ctx, now, coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: 1, Worker: 10, Op: x.nextOp()})
	wantErr(t, "fourth acquisition", err, coord.ErrRetriesExhausted)
	s := x.shard(run, 1)
	if s.State != coord.ShardParked || s.ParkReason != coord.ReasonRetriesExhausted || s.Owner != 0 {
		t.Fatalf("shard after exhausting retries: %+v", s)
	}
	_, err = x.b.Unpark(x.ctx, now, coord.UnparkRequest{Tenant: tenantA, Run: run, Shard: 1, Op: x.nextOp()})
	noErr(t, "Unpark", err)
	_, err = x.b.Acquire(x.ctx, now, coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: 1, Worker: 10, Op: x.nextOp()})
	noErr(t, "Acquire after unpark resets attempts", err)
}

// testValidationOrder checks each lease failure and, where two checks fail at
// once, that the earlier one in the documented order is reported.
func testValidationOrder(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun()
	live := x.acquire(run, 1, 10)
	done := x.acquire(run, 2, 10)
	x.complete(done)
	parked := x.acquire(run, 3, 10)
	x.park(parked)

	with := func(l coord.Lease, mod func(*coord.Lease)) coord.Lease { mod(&l); return l }
	cases := []struct {
		name  string
		lease coord.Lease
		now   coord.Time
		want  error
	}{
		{"tenant", with(live, func(l *coord.Lease) { l.Tenant = tenantB }), x.now, coord.ErrTenantMismatch},
		{"tenant before terminal", with(done, func(l *coord.Lease) { l.Tenant = tenantB }), x.now, coord.ErrTenantMismatch},
		{"terminal", done, x.now, coord.ErrShardTerminal},
		{"parked", parked, x.now, coord.ErrShardParked},
		{"terminal before fence", with(done, func(l *coord.Lease) { l.Fence = 1 }), x.now, coord.ErrShardTerminal},
		{"fence lower", with(live, func(l *coord.Lease) { l.Fence-- }), x.now, coord.ErrStaleFence},
		{"fence higher", with(live, func(l *coord.Lease) { l.Fence++ }), x.now, coord.ErrStaleFence},
		{"fence before expiry", with(live, func(l *coord.Lease) { l.Fence++ }), live.Deadline + 1, coord.ErrStaleFence},
		{"expired", live, live.Deadline, coord.ErrLeaseExpired},
		{"expired before owner", with(live, func(l *coord.Lease) { l.Worker = 11 }), live.Deadline, coord.ErrLeaseExpired},
		{"owner", with(live, func(l *coord.Lease) { l.Worker = 11 }), x.now, coord.ErrNotOwner},
		{"unknown shard", with(live, func(l *coord.Lease) { l.Shard = 99 }), x.now, coord.ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops := map[string]func() error{
				"Checkpoint": func() error {
					_, err := x.b.Checkpoint(x.ctx, tc.now, coord.CheckpointRequest{Lease: tc.lease, Op: x.nextOp(), Cursor: coord.Cursor{HasKey: true, Key: key("b")}})
					return err
				},
				"Renew": func() error {
					_, err := x.b.Renew(x.ctx, tc.now, coord.RenewRequest{Lease: tc.lease, Op: x.nextOp()})
					return err
				},
				"Complete": func() error {
					_, err := x.b.Complete(x.ctx, tc.now, coord.CompleteRequest{Lease: tc.lease, Op: x.nextOp()})
					return err
				},
				"Park": func() error {
					_, err := x.b.Park(x.ctx, tc.now, coord.ParkRequest{Lease: tc.lease, Op: x.nextOp(), Reason: "r"})
					return err
				},
				"SplitResidual": func() error {
					_, _, err := x.b.SplitResidual(x.ctx, tc.now, coord.SplitResidualRequest{Lease: tc.lease, Op: x.nextOp(), Key: key("c")})
					return err
				},
				"SplitReplace": func() error {
					_, _, err := x.b.SplitReplace(x.ctx, tc.now, coord.SplitReplaceRequest{Lease: tc.lease, Op: x.nextOp(),
						Children: []coord.ChildSpec{{Start: key("a"), End: key("c")}, {Start: key("c"), End: key("h")}}})
					return err
				},
			}
			for name, op := range ops {
				wantErr(t, name, op(), tc.want)
			}
		})
	}
	// Nothing above changed the live shard.
	if s := x.shard(run, 1); s.Fence != live.Fence || s.Owner != 10 || s.Deadline != live.Deadline || s.Cursor.HasKey || s.State != coord.ShardActive {
		t.Fatalf("refused operations changed the shard: %+v", s)
	}
	// A shard that was never acquired has no lease to present.
	fresh := x.newRun()
	_, err := x.b.Checkpoint(x.ctx, x.now, coord.CheckpointRequest{
		Lease: coord.Lease{Tenant: tenantA, Run: fresh, Shard: 1, Worker: 10, Fence: 1}, Op: x.nextOp(),
		Cursor: coord.Cursor{HasKey: true, Key: key("b")}})
	wantErr(t, "Checkpoint without lease", err, coord.ErrLeaseExpired)
}

func testRenew(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun()
	l := x.acquire(run, 1, 10)
	req := coord.RenewRequest{Lease: l, Op: x.nextOp()}
	nl, err := x.b.Renew(x.ctx, x.now+5000, req)
	noErr(t, "Renew", err)
	if nl.Deadline != x.now+5000+leaseMS || nl.Fence != l.Fence || nl.Worker != 10 {
		t.Fatalf("renewed lease %+v", nl)
	}
	// The old deadline has passed but the renewed lease is live.
	_, err = x.b.Checkpoint(x.ctx, l.Deadline+1, coord.CheckpointRequest{Lease: nl, Op: x.nextOp(), Cursor: coord.Cursor{HasKey: true, Key: key("b")}})
	noErr(t, "Checkpoint after the original deadline", err)
	// Replay after expiry succeeds and changes nothing.
	rl, err := x.b.Renew(x.ctx, nl.Deadline+1, req)
	noErr(t, "Renew replay after expiry", err)
	if s := x.shard(run, 1); s.Deadline != nl.Deadline {
		t.Fatalf("replayed renew moved the deadline to %d", s.Deadline)
	}
	if rl.Fence != l.Fence {
		t.Fatalf("replayed renew returned %+v", rl)
	}
	_, err = x.b.Renew(x.ctx, nl.Deadline, coord.RenewRequest{Lease: nl, Op: x.nextOp()})
	wantErr(t, "Renew of an expired lease", err, coord.ErrLeaseExpired)
}

func testCheckpoint(t *testing.T, f Factory) {
	x := newFixture(t, f, smallLimits())
	run := x.newRun(spec(1, "b", "m"), spec(2, "m", ""))
	l := x.acquire(run, 1, 10)
	cp := func(c coord.Cursor) error {
		_, err := x.b.Checkpoint(x.ctx, x.now, coord.CheckpointRequest{Lease: l, Op: x.nextOp(), Cursor: c})
		return err
	}
	k := func(s string) coord.Cursor { return coord.Cursor{HasKey: true, Key: key(s)} }
	noErr(t, "token-only checkpoint before any key", cp(coord.Cursor{Token: []byte("t0")}))
	noErr(t, "checkpoint at start", cp(coord.Cursor{HasKey: true, Key: key("b"), Token: []byte("t1")}))
	noErr(t, "checkpoint forward", cp(k("d")))
	noErr(t, "checkpoint same key (non-decreasing)", cp(coord.Cursor{HasKey: true, Key: key("d"), Token: []byte("t2")}))
	s := x.shard(run, 1)
	if string(s.Cursor.Key) != "d" || string(s.Cursor.Token) != "t2" {
		t.Fatalf("cursor %+v", s.Cursor)
	}
	cases := []struct {
		name string
		c    coord.Cursor
		want error
	}{
		{"backwards", k("c"), coord.ErrCursorRegression},
		{"drop key", coord.Cursor{Token: []byte("x")}, coord.ErrCursorRegression},
		{"below start", k("a"), coord.ErrCursorOutOfRange},
		{"at end", k("m"), coord.ErrCursorOutOfRange},
		{"beyond end", k("z"), coord.ErrCursorOutOfRange},
		{"key too long", k("e12345678"), coord.ErrLimitExceeded},
		{"token too long", coord.Cursor{HasKey: true, Key: key("e"), Token: make([]byte, 17)}, coord.ErrLimitExceeded},
		{"key without HasKey", coord.Cursor{Key: key("e")}, coord.ErrInvalidArgument},
	}
	for _, tc := range cases {
		wantErr(t, tc.name, cp(tc.c), tc.want)
	}
	if got := x.shard(run, 1); !got.Cursor.Equal(s.Cursor) {
		t.Fatalf("refused checkpoints moved the cursor to %+v", got.Cursor)
	}
	noErr(t, "last key in range", cp(k("lzzz")))
	// Unbounded shards accept any key at or above their start.
	l2 := x.acquire(run, 2, 10)
	_, err := x.b.Checkpoint(x.ctx, x.now, coord.CheckpointRequest{Lease: l2, Op: x.nextOp(), Cursor: k("zzzzzzzz")})
	noErr(t, "checkpoint in unbounded shard", err)
}

func testCursorStrict(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	cfg := defaultConfig()
	cfg.Cursor = coord.CursorStrictlyIncreasing
	run := x.newRunFor(tenantA, cfg, threeShards())
	l := x.acquire(run, 1, 10)
	x.checkpoint(l, "b")
	_, err := x.b.Checkpoint(x.ctx, x.now, coord.CheckpointRequest{Lease: l, Op: x.nextOp(), Cursor: coord.Cursor{HasKey: true, Key: key("b"), Token: []byte("t")}})
	wantErr(t, "same key in strict mode", err, coord.ErrCursorRegression)
	x.checkpoint(l, "ba")
}

func testCompleteAndPark(t *testing.T, f Factory) {
	x := newFixture(t, f, smallLimits())
	run := x.newRun()
	l := x.acquire(run, 1, 10)
	x.checkpoint(l, "b")
	x.complete(l)
	s := x.shard(run, 1)
	if s.State != coord.ShardDone || s.Owner != 0 || s.Deadline != 0 || string(s.Cursor.Key) != "b" {
		t.Fatalf("completed shard %+v", s)
	}
	_, err := x.b.Checkpoint(x.ctx, x.now, coord.CheckpointRequest{Lease: l, Op: x.nextOp(), Cursor: coord.Cursor{HasKey: true, Key: key("c")}})
	wantErr(t, "Checkpoint after complete", err, coord.ErrShardTerminal)

	l2 := x.acquire(run, 2, 10)
	_, err = x.b.Park(x.ctx, x.now, coord.ParkRequest{Lease: l2, Op: x.nextOp()})
	wantErr(t, "Park without reason", err, coord.ErrInvalidArgument)
	_, err = x.b.Park(x.ctx, x.now, coord.ParkRequest{Lease: l2, Op: x.nextOp(), Reason: "0123456789abcdefg"})
	wantErr(t, "Park with a long reason", err, coord.ErrLimitExceeded)
	ps, err := x.b.Park(x.ctx, x.now, coord.ParkRequest{Lease: l2, Op: x.nextOp(), Reason: "poison"})
	noErr(t, "Park", err)
	if ps.State != coord.ShardParked || ps.ParkReason != "poison" || ps.Owner != 0 || ps.Deadline != 0 {
		t.Fatalf("parked shard %+v", ps)
	}
	_, err = x.b.Complete(x.ctx, x.now, coord.CompleteRequest{Lease: l2, Op: x.nextOp()})
	wantErr(t, "Complete of a parked shard", err, coord.ErrShardParked)
}

func testUnpark(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun()
	l := x.acquire(run, 1, 10)
	x.checkpoint(l, "c")
	x.park(l)
	req := coord.UnparkRequest{Tenant: tenantA, Run: run, Shard: 1, Op: x.nextOp()}
	s, err := x.b.Unpark(x.ctx, x.now, req)
	noErr(t, "Unpark", err)
	if s.State != coord.ShardActive || s.ParkReason != "" || s.Fence != l.Fence+1 || string(s.Cursor.Key) != "c" || s.Attempts != 0 {
		t.Fatalf("unparked shard %+v", s)
	}
	_, err = x.b.Unpark(x.ctx, x.now, req)
	noErr(t, "Unpark replay", err)
	if got := x.shard(run, 1); got.Fence != s.Fence {
		t.Fatalf("Unpark replay bumped the fence to %d", got.Fence)
	}
	_, err = x.b.Unpark(x.ctx, x.now, coord.UnparkRequest{Tenant: tenantA, Run: run, Shard: 1, Op: x.nextOp()})
	wantErr(t, "Unpark of an active shard", err, coord.ErrShardNotParked)
	_, err = x.b.Unpark(x.ctx, x.now, coord.UnparkRequest{Tenant: tenantB, Run: run, Shard: 1, Op: x.nextOp()})
	wantErr(t, "Unpark by another tenant", err, coord.ErrTenantMismatch)
	_, err = x.b.Unpark(x.ctx, x.now, coord.UnparkRequest{Tenant: tenantA, Run: run, Shard: 42, Op: x.nextOp()})
	wantErr(t, "Unpark of an unknown shard", err, coord.ErrNotFound)
	_, err = x.b.Unpark(x.ctx, 0, coord.UnparkRequest{Tenant: tenantA, Run: run, Shard: 1, Op: x.nextOp()})
	wantErr(t, "Unpark at time zero", err, coord.ErrInvalidArgument)

	l2 := x.acquire(run, 2, 10)
	x.park(l2)
	_, err = x.b.FailRun(x.ctx, x.now, coord.FailRunRequest{Tenant: tenantA, Run: run, Op: x.nextOp(), Reason: "boom"})
	noErr(t, "FailRun", err)
	_, err = x.b.Unpark(x.ctx, x.now, coord.UnparkRequest{Tenant: tenantA, Run: run, Shard: 2, Op: x.nextOp()})
	wantErr(t, "Unpark in a terminal run", err, coord.ErrRunTerminal)
	if p, err := x.b.Progress(x.ctx, x.now, tenantA, run); err != nil || p.Parked != 1 || p.Total != 3 {
		t.Fatalf("failed run's summary: %+v, %v", p, err)
	}
}

func testZombie(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun()
	zombie := x.acquire(run, 1, 10)
	x.checkpoint(zombie, "c")
	x.now = zombie.Deadline + 1
	fresh := x.acquire(run, 1, 11)
	x.checkpoint(fresh, "e")
	// The zombie wakes up with its old fence while the new lease is live.
	ops := []struct {
		name string
		err  func() error
	}{
		{"Checkpoint", func() error {
			_, err := x.b.Checkpoint(x.ctx, x.now, coord.CheckpointRequest{Lease: zombie, Op: x.nextOp(), Cursor: coord.Cursor{HasKey: true, Key: key("g")}})
			return err
		}},
		{"Renew", func() error {
			_, err := x.b.Renew(x.ctx, x.now, coord.RenewRequest{Lease: zombie, Op: x.nextOp()})
			return err
		}},
		{"Complete", func() error {
			_, err := x.b.Complete(x.ctx, x.now, coord.CompleteRequest{Lease: zombie, Op: x.nextOp()})
			return err
		}},
		{"Park", func() error {
			_, err := x.b.Park(x.ctx, x.now, coord.ParkRequest{Lease: zombie, Op: x.nextOp(), Reason: "z"})
			return err
		}},
		{"SplitResidual", func() error {
			_, _, err := x.b.SplitResidual(x.ctx, x.now, coord.SplitResidualRequest{Lease: zombie, Op: x.nextOp(), Key: key("f")})
			return err
		}},
		{"Zombie with the new worker id", func() error {
			z := zombie
			z.Worker = fresh.Worker
			_, err := x.b.Complete(x.ctx, x.now, coord.CompleteRequest{Lease: z, Op: x.nextOp()})
			return err
		}},
	}
	for _, op := range ops {
		wantErr(t, op.name, op.err(), coord.ErrStaleFence)
	}
	s := x.shard(run, 1)
	if s.Fence != fresh.Fence || s.Owner != 11 || string(s.Cursor.Key) != "e" || s.State != coord.ShardActive || len(s.Children) != 0 {
		t.Fatalf("zombie changed the shard: %+v", s)
	}
}

func testClaimNext(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	var specs []coord.ShardSpec
	for i := 0; i < 8; i++ {
		specs = append(specs, spec(coord.ShardID(i+1), fmt.Sprintf("k%d", i), fmt.Sprintf("k%d", i+1)))
	}
	run := x.newRun(specs...)
	// The first claim starts at the worker's offset.
	w := coord.WorkerID(77)
	first, err := x.b.ClaimNext(x.ctx, x.now, coord.ClaimRequest{Tenant: tenantA, Run: run, Worker: w, Op: x.nextOp()})
	noErr(t, "ClaimNext", err)
	if want := coord.ShardID(coord.ClaimOffset(w, 8) + 1); first.Shard != want {
		t.Fatalf("first claim of worker %d got shard %v, want %v (ClaimOffset)", w, first.Shard, want)
	}
	seen := map[coord.ShardID]bool{first.Shard: true}
	for i := 1; i < 8; i++ {
		l, err := x.b.ClaimNext(x.ctx, x.now, coord.ClaimRequest{Tenant: tenantA, Run: run, Worker: coord.WorkerID(i), Op: x.nextOp()})
		noErr(t, "ClaimNext", err)
		if seen[l.Shard] || l.Fence != 2 || l.Deadline != x.now+leaseMS {
			t.Fatalf("claim %d: %+v (seen: %v)", i, l, seen[l.Shard])
		}
		seen[l.Shard] = true
	}
	req := coord.ClaimRequest{Tenant: tenantA, Run: run, Worker: 9, Op: x.nextOp()}
	_, err = x.b.ClaimNext(x.ctx, x.now, req)
	wantErr(t, "ClaimNext with everything leased", err, coord.ErrNoShardAvailable)
	// After expiry the shards are claimable again; a replay returns the same claim.
	later := x.now + leaseMS
	l, err := x.b.ClaimNext(x.ctx, later, req)
	noErr(t, "ClaimNext after expiry", err)
	l2, err := x.b.ClaimNext(x.ctx, later+1, req)
	noErr(t, "ClaimNext replay", err)
	if l2 != l {
		t.Fatalf("replay returned %+v, first %+v", l2, l)
	}
	req.Worker = 10
	_, err = x.b.ClaimNext(x.ctx, later, req)
	wantErr(t, "ClaimNext replay by another worker", err, coord.ErrOpConflict)
	// Done and parked shards are never claimed.
	x.complete(l)
	for i := 0; i < 7; i++ {
		l, err := x.b.ClaimNext(x.ctx, later, coord.ClaimRequest{Tenant: tenantA, Run: run, Worker: 20, Op: x.nextOp()})
		noErr(t, "ClaimNext", err)
		x.now = later
		x.park(l)
	}
	_, err = x.b.ClaimNext(x.ctx, later+5*leaseMS, coord.ClaimRequest{Tenant: tenantA, Run: run, Worker: 20, Op: x.nextOp()})
	wantErr(t, "ClaimNext with only done and parked shards", err, coord.ErrNoShardAvailable)

	init := x.newRunFor(tenantA, defaultConfig(), nil)
	_, err = x.b.ClaimNext(x.ctx, x.now, coord.ClaimRequest{Tenant: tenantA, Run: init, Worker: 1, Op: x.nextOp()})
	wantErr(t, "ClaimNext in an initializing run", err, coord.ErrRunNotActive)
	_, err = x.b.ClaimNext(x.ctx, x.now, coord.ClaimRequest{Tenant: tenantB, Run: run, Worker: 1, Op: x.nextOp()})
	wantErr(t, "ClaimNext by another tenant", err, coord.ErrTenantMismatch)
	_, err = x.b.CancelRun(x.ctx, x.now, coord.CancelRunRequest{Tenant: tenantA, Run: run, Op: x.nextOp()})
	noErr(t, "CancelRun", err)
	_, err = x.b.ClaimNext(x.ctx, x.now, coord.ClaimRequest{Tenant: tenantA, Run: run, Worker: 1, Op: x.nextOp()})
	wantErr(t, "ClaimNext in a cancelled run", err, coord.ErrRunTerminal)
}

func testClaimNextSkipsExhausted(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	cfg := defaultConfig()
	cfg.MaxRetries = 1
	run := x.newRunFor(tenantA, cfg, []coord.ShardSpec{spec(1, "a", "m"), spec(2, "m", "")})
	x.acquire(run, 1, 10)
	x.now += leaseMS
	x.acquire(run, 1, 10) // the one retry allowed
	x.now += leaseMS
	// Whatever the scan order, the claim ends on shard 2, parking shard 1 if
	// it is met first.
	l, err := x.b.ClaimNext(x.ctx, x.now, coord.ClaimRequest{Tenant: tenantA, Run: run, Worker: 11, Op: x.nextOp()})
	noErr(t, "ClaimNext", err)
	if l.Shard != 2 {
		t.Fatalf("ClaimNext leased shard %v, want 2", l.Shard)
	}
	_, err = x.b.ClaimNext(x.ctx, x.now, coord.ClaimRequest{Tenant: tenantA, Run: run, Worker: 12, Op: x.nextOp()})
	wantErr(t, "ClaimNext with only an exhausted shard left", err, coord.ErrNoShardAvailable)
	if s := x.shard(run, 1); s.State != coord.ShardParked || s.ParkReason != coord.ReasonRetriesExhausted {
		t.Fatalf("exhausted shard %+v, want parked", s)
	}
}
