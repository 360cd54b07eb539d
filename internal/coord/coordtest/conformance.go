package coordtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
)

// RunConformance runs the conformance suite: every operation's success path
// and each of its errors, replays, op-log eviction, lease expiry at the exact
// deadline, zombies, split coverage, cursor rules and shard caps.
func RunConformance(t *testing.T, f Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, f Factory)
	}{
		{"CreateRun", testCreateRun},
		{"RegisterShards", testRegisterShards},
		{"RegisterAllOrNothing", testRegisterAllOrNothing},
		{"Acquire", testAcquire},
		{"LeaseExpiresAtDeadline", testLeaseExpiresAtDeadline},
		{"MaxRetries", testMaxRetries},
		{"ValidationOrder", testValidationOrder},
		{"Renew", testRenew},
		{"Checkpoint", testCheckpoint},
		{"CursorStrict", testCursorStrict},
		{"Replay", testReplay},
		{"OpLogEviction", testOpLogEviction},
		{"CompleteAndPark", testCompleteAndPark},
		{"Unpark", testUnpark},
		{"ZombieWorker", testZombie},
		{"SplitReplace", testSplitReplace},
		{"SplitReplaceCoverage", testSplitReplaceCoverage},
		{"SplitReplaceCursor", testSplitReplaceCursor},
		{"SplitResidual", testSplitResidual},
		{"SplitLimits", testSplitLimits},
		{"ClaimNext", testClaimNext},
		{"ClaimNextConcurrent", testClaimNextConcurrent},
		{"RunLifecycle", testRunLifecycle},
		{"ShardCaps", testShardCaps},
		{"ProgressAndList", testProgressAndList},
		{"Reads", testReads},
		{"ResultsAreCopies", testResultsAreCopies},
		{"ClaimNextSkipsExhausted", testClaimNextSkipsExhausted},
		{"ConcurrentWorkers", testConcurrentWorkers},
		{"ContextCancelled", testContextCancelled},
		{"ClockSkew", testClockSkew},
		{"TerminalRunReleasesShards", testTerminalRunReleases},
		{"CapFreedByCompletedRuns", testCapFreedByCompletedRuns},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, f) })
	}
}

func testCreateRun(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	req := coord.CreateRunRequest{Tenant: tenantA, Run: 7, Op: 1, Config: defaultConfig()}
	r, err := x.b.CreateRun(x.ctx, x.now, req)
	noErr(t, "CreateRun", err)
	if r.State != coord.RunInitializing || r.ID != 7 || r.Tenant != tenantA || r.CreatedAt != x.now || r.Config != req.Config {
		t.Fatalf("CreateRun returned %+v", r)
	}
	_, err = x.b.CreateRun(x.ctx, x.now+5, req)
	noErr(t, "CreateRun replay", err)

	conflict := req
	conflict.Config.MaxRetries = 3
	_, err = x.b.CreateRun(x.ctx, x.now, conflict)
	wantErr(t, "CreateRun same op, different payload", err, coord.ErrOpConflict)

	other := req
	other.Op = 2
	_, err = x.b.CreateRun(x.ctx, x.now, other)
	wantErr(t, "CreateRun existing id, new op", err, coord.ErrRunExists)

	foreign := req
	foreign.Tenant = tenantB
	_, err = x.b.CreateRun(x.ctx, x.now, foreign)
	wantErr(t, "CreateRun of another tenant's id", err, coord.ErrTenantMismatch)

	bad := []struct {
		name string
		mod  func(*coord.CreateRunRequest)
		now  coord.Time
	}{
		{"zero run id", func(r *coord.CreateRunRequest) { r.Run = 0 }, 1},
		{"zero op", func(r *coord.CreateRunRequest) { r.Op = 0 }, 1},
		{"zero now", func(r *coord.CreateRunRequest) {}, 0},
		{"zero lease", func(r *coord.CreateRunRequest) { r.Config.LeaseDuration = 0 }, 1},
		{"sub-millisecond lease", func(r *coord.CreateRunRequest) { r.Config.LeaseDuration = 1500 * time.Microsecond }, 1},
		{"negative lease", func(r *coord.CreateRunRequest) { r.Config.LeaseDuration = -time.Second }, 1},
		{"huge lease", func(r *coord.CreateRunRequest) { r.Config.LeaseDuration = coord.MaxLeaseDuration + time.Millisecond }, 1},
		{"time beyond MaxTime", func(r *coord.CreateRunRequest) {}, coord.MaxTime + 1},
		{"unknown cursor mode", func(r *coord.CreateRunRequest) { r.Config.Cursor = 0 }, 1},
	}
	for i, tc := range bad {
		r := coord.CreateRunRequest{Tenant: tenantA, Run: coord.RunID(100 + i), Op: 1, Config: defaultConfig()}
		tc.mod(&r)
		_, err := x.b.CreateRun(x.ctx, tc.now, r)
		wantErr(t, tc.name, err, coord.ErrInvalidArgument)
		if r.Run != 0 {
			_, err = x.b.GetRun(x.ctx, tenantA, r.Run)
			wantErr(t, tc.name+": run must not exist", err, coord.ErrNotFound)
		}
	}
}

func testRegisterShards(t *testing.T, f Factory) {
	x := newFixture(t, f, smallLimits())
	run := x.newRun(threeShards()...)
	r := x.getRun(run)
	if r.State != coord.RunActive || r.RootShards != 3 {
		t.Fatalf("after register: %+v", r)
	}
	for _, sp := range threeShards() {
		s := x.shard(run, sp.ID)
		if s.State != coord.ShardActive || s.Fence != 1 || s.Owner != 0 || !bytes.Equal(s.Start, sp.Start) || !bytes.Equal(s.End, sp.End) || s.Parent != 0 {
			t.Fatalf("registered shard %+v", s)
		}
	}

	// Replay and conflict.
	rid := x.nextRun()
	_, err := x.b.CreateRun(x.ctx, x.now, coord.CreateRunRequest{Tenant: tenantA, Run: rid, Op: 1, Config: defaultConfig()})
	noErr(t, "CreateRun", err)
	req := coord.RegisterShardsRequest{Tenant: tenantA, Run: rid, Op: 2, Shards: threeShards()}
	_, err = x.b.RegisterShards(x.ctx, x.now, req)
	noErr(t, "RegisterShards", err)
	_, err = x.b.RegisterShards(x.ctx, x.now+1, req)
	noErr(t, "RegisterShards replay", err)
	if n := x.shardCount(rid); n != 3 {
		t.Fatalf("replay changed shard count to %d", n)
	}
	req2 := req
	req2.Shards = req.Shards[:2]
	_, err = x.b.RegisterShards(x.ctx, x.now, req2)
	wantErr(t, "RegisterShards conflicting replay", err, coord.ErrOpConflict)
	req2.Op = 3
	_, err = x.b.RegisterShards(x.ctx, x.now, req2)
	wantErr(t, "RegisterShards twice", err, coord.ErrRunNotInitializing)

	_, err = x.b.RegisterShards(x.ctx, x.now, coord.RegisterShardsRequest{Tenant: tenantA, Run: 999, Op: 1, Shards: threeShards()})
	wantErr(t, "RegisterShards unknown run", err, coord.ErrNotFound)
	_, err = x.b.RegisterShards(x.ctx, x.now, coord.RegisterShardsRequest{Tenant: tenantB, Run: rid, Op: 9, Shards: threeShards()})
	wantErr(t, "RegisterShards other tenant", err, coord.ErrTenantMismatch)

	// Cancelled runs accept nothing.
	cr := x.newRunFor(tenantA, defaultConfig(), nil)
	_, err = x.b.CancelRun(x.ctx, x.now, coord.CancelRunRequest{Tenant: tenantA, Run: cr, Op: x.nextOp()})
	noErr(t, "CancelRun", err)
	_, err = x.b.RegisterShards(x.ctx, x.now, coord.RegisterShardsRequest{Tenant: tenantA, Run: cr, Op: x.nextOp(), Shards: threeShards()})
	wantErr(t, "RegisterShards on cancelled run", err, coord.ErrRunTerminal)
}

func testRegisterAllOrNothing(t *testing.T, f Factory) {
	x := newFixture(t, f, smallLimits())
	tooLong := "123456789" // MaxKeySize is 8 in smallLimits
	cases := []struct {
		name   string
		shards []coord.ShardSpec
		want   error
	}{
		{"empty", nil, coord.ErrInvalidArgument},
		{"too many", []coord.ShardSpec{spec(1, "a", "b"), spec(2, "b", "c"), spec(3, "c", "d"), spec(4, "d", "e"), spec(5, "e", "f"), spec(6, "f", "g")}, coord.ErrLimitExceeded},
		{"duplicate id", []coord.ShardSpec{spec(1, "a", "b"), spec(1, "c", "d")}, coord.ErrDuplicateShard},
		{"zero id", []coord.ShardSpec{spec(0, "a", "b")}, coord.ErrInvalidArgument},
		{"derived id", []coord.ShardSpec{spec(coord.DerivedBit|1, "a", "b")}, coord.ErrInvalidArgument},
		{"empty range", []coord.ShardSpec{spec(1, "b", "b")}, coord.ErrInvalidRange},
		{"inverted range", []coord.ShardSpec{spec(1, "c", "b")}, coord.ErrInvalidRange},
		{"overlap", []coord.ShardSpec{spec(1, "a", "d"), spec(2, "c", "f")}, coord.ErrOverlap},
		{"overlap unordered", []coord.ShardSpec{spec(2, "c", "f"), spec(1, "a", "d")}, coord.ErrOverlap},
		{"unbounded overlaps", []coord.ShardSpec{spec(1, "a", ""), spec(2, "c", "f")}, coord.ErrOverlap},
		{"identical", []coord.ShardSpec{spec(1, "a", "c"), spec(2, "a", "c")}, coord.ErrOverlap},
		{"key too long", []coord.ShardSpec{spec(1, "a", tooLong)}, coord.ErrLimitExceeded},
		{"metadata too long", []coord.ShardSpec{{ID: 1, Start: key("a"), End: key("b"), Metadata: []byte(tooLong)}}, coord.ErrLimitExceeded},
		{"token too long", []coord.ShardSpec{{ID: 1, Start: key("a"), End: key("b"), Cursor: coord.Cursor{Token: make([]byte, 17)}}}, coord.ErrLimitExceeded},
		{"cursor key too long", []coord.ShardSpec{{ID: 1, Start: key("a"), End: key(""), Cursor: coord.Cursor{HasKey: true, Key: []byte(tooLong)}}}, coord.ErrLimitExceeded},
		{"cursor below start", []coord.ShardSpec{{ID: 1, Start: key("b"), End: key("d"), Cursor: coord.Cursor{HasKey: true, Key: key("a")}}}, coord.ErrCursorOutOfRange},
		{"cursor at end", []coord.ShardSpec{{ID: 1, Start: key("b"), End: key("d"), Cursor: coord.Cursor{HasKey: true, Key: key("d")}}}, coord.ErrCursorOutOfRange},
	}
	for _, tc := range cases {
		run := x.newRunFor(tenantA, defaultConfig(), nil)
		// A valid shard first, so a partial write would be visible.
		shards := tc.shards
		_, err := x.b.RegisterShards(x.ctx, x.now, coord.RegisterShardsRequest{Tenant: tenantA, Run: run, Op: x.nextOp(), Shards: shards})
		wantErr(t, tc.name, err, tc.want)
		if tc.want == coord.ErrLimitExceeded {
			var le *coord.LimitError
			if !errors.As(err, &le) || le.Max <= 0 || le.Value <= le.Max {
				t.Fatalf("%s: want *LimitError naming value and max, got %#v", tc.name, err)
			}
		}
		if n := x.shardCount(run); n != 0 {
			t.Fatalf("%s: %d shards stored after a refused registration", tc.name, n)
		}
		if r := x.getRun(run); r.State != coord.RunInitializing {
			t.Fatalf("%s: run is %v after a refused registration", tc.name, r.State)
		}
	}
	// Gaps between shards and an initial cursor inside the range are fine.
	run := x.newRunFor(tenantA, defaultConfig(), []coord.ShardSpec{
		spec(1, "a", "b"),
		{ID: 2, Start: key("x"), End: key(""), Cursor: coord.Cursor{HasKey: true, Key: key("y"), Token: []byte("t")}},
	})
	if s := x.shard(run, 2); !s.Cursor.HasKey || string(s.Cursor.Key) != "y" || string(s.Cursor.Token) != "t" {
		t.Fatalf("initial cursor not stored: %+v", s.Cursor)
	}
}

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

func testReplay(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun()
	l := x.acquire(run, 1, 10)

	// Acquire replay returns the same lease and does not bump the fence.
	areq := coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: 2, Worker: 10, Op: x.nextOp()}
	al, err := x.b.Acquire(x.ctx, x.now, areq)
	noErr(t, "Acquire", err)
	al2, err := x.b.Acquire(x.ctx, x.now+1, areq)
	noErr(t, "Acquire replay", err)
	if al2 != al {
		t.Fatalf("Acquire replay returned %+v, first call %+v", al2, al)
	}
	if s := x.shard(run, 2); s.Fence != al.Fence {
		t.Fatalf("Acquire replay bumped the fence to %d", s.Fence)
	}
	areq.Worker = 11
	_, err = x.b.Acquire(x.ctx, x.now, areq)
	wantErr(t, "Acquire replay with another worker", err, coord.ErrOpConflict)

	// Checkpoint replay: success, no effect, also after expiry and completion.
	creq := coord.CheckpointRequest{Lease: l, Op: x.nextOp(), Cursor: coord.Cursor{HasKey: true, Key: key("c")}}
	_, err = x.b.Checkpoint(x.ctx, x.now, creq)
	noErr(t, "Checkpoint", err)
	x.checkpoint(l, "d")
	_, err = x.b.Checkpoint(x.ctx, x.now, creq)
	noErr(t, "Checkpoint replay (would regress if applied)", err)
	if s := x.shard(run, 1); string(s.Cursor.Key) != "d" {
		t.Fatalf("replay moved the cursor to %q", s.Cursor.Key)
	}
	conflict := creq
	conflict.Cursor.Key = key("e")
	_, err = x.b.Checkpoint(x.ctx, x.now, conflict)
	wantErr(t, "Checkpoint same op, different cursor", err, coord.ErrOpConflict)
	_, err = x.b.Checkpoint(x.ctx, l.Deadline+5, creq)
	noErr(t, "Checkpoint replay after lease expiry", err)

	compReq := coord.CompleteRequest{Lease: l, Op: x.nextOp()}
	_, err = x.b.Complete(x.ctx, x.now, compReq)
	noErr(t, "Complete", err)
	_, err = x.b.Complete(x.ctx, x.now+1, compReq)
	noErr(t, "Complete replay", err)
	_, err = x.b.Checkpoint(x.ctx, x.now, creq)
	noErr(t, "Checkpoint replay after completion", err)
	// A different op kind with a logged op id is a conflict.
	_, err = x.b.Renew(x.ctx, x.now, coord.RenewRequest{Lease: l, Op: creq.Op})
	wantErr(t, "Renew reusing a checkpoint's op id", err, coord.ErrOpConflict)

	// Park replay.
	l3 := x.acquire(run, 3, 10)
	preq := coord.ParkRequest{Lease: l3, Op: x.nextOp(), Reason: "poison"}
	_, err = x.b.Park(x.ctx, x.now, preq)
	noErr(t, "Park", err)
	_, err = x.b.Park(x.ctx, x.now, preq)
	noErr(t, "Park replay", err)
	preq.Reason = "other"
	_, err = x.b.Park(x.ctx, x.now, preq)
	wantErr(t, "Park same op, different reason", err, coord.ErrOpConflict)
}

func testOpLogEviction(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun()
	l := x.acquire(run, 1, 10) // op 1 of the shard log
	var reqs []coord.CheckpointRequest
	for i := 0; i < coord.MaxShardOps; i++ { // ops 2..17: the 16th checkpoint evicts the acquire, ...
		r := coord.CheckpointRequest{Lease: l, Op: x.nextOp(), Cursor: coord.Cursor{HasKey: true, Key: []byte(fmt.Sprintf("b%02d", i))}}
		_, err := x.b.Checkpoint(x.ctx, x.now, r)
		noErr(t, "Checkpoint", err)
		reqs = append(reqs, r)
	}
	s := x.shard(run, 1)
	if len(s.Ops) != coord.MaxShardOps {
		t.Fatalf("op log has %d entries, want %d", len(s.Ops), coord.MaxShardOps)
	}
	// The first checkpoint is still logged: replay succeeds.
	_, err := x.b.Checkpoint(x.ctx, x.now, reqs[0])
	noErr(t, "replay of the oldest logged op", err)
	// One more op (the 17th since the acquire, counting the acquire) evicts reqs[0].
	x.checkpoint(l, "c")
	_, err = x.b.Checkpoint(x.ctx, x.now, reqs[0])
	wantErr(t, "replay of an evicted op is treated as new", err, coord.ErrCursorRegression)
	_, err = x.b.Checkpoint(x.ctx, x.now, reqs[1])
	noErr(t, "replay of a still-logged op", err)

	// Runs keep MaxRunOps entries.
	rid := x.newRunFor(tenantA, defaultConfig(), nil)
	r := x.getRun(rid)
	if len(r.Ops) != 1 {
		t.Fatalf("new run has %d logged ops, want 1", len(r.Ops))
	}
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

func children(kv ...string) []coord.ChildSpec {
	var out []coord.ChildSpec
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, coord.ChildSpec{Start: key(kv[i]), End: key(kv[i+1])})
	}
	return out
}

func testSplitReplace(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun()
	l := x.acquire(run, 3, 10) // [p, +inf)
	req := coord.SplitReplaceRequest{Lease: l, Op: x.nextOp(), Children: []coord.ChildSpec{
		{Start: key("p"), End: key("s"), Metadata: []byte("m1")}, {Start: key("s"), End: key("v")}, {Start: key("v")},
	}}
	parent, kids, err := x.b.SplitReplace(x.ctx, x.now, req)
	noErr(t, "SplitReplace", err)
	ids := coord.ReplaceChildIDs(req)
	if parent.State != coord.ShardSplit || parent.Owner != 0 || len(parent.Children) != 3 || len(kids) != 3 {
		t.Fatalf("parent %+v, %d children", parent, len(kids))
	}
	for i, k := range kids {
		if k.ID != ids[i] || !k.ID.IsDerived() || k.Parent != 3 || k.State != coord.ShardActive || k.Fence != 1 || k.Owner != 0 ||
			!bytes.Equal(k.Start, req.Children[i].Start) || !bytes.Equal(k.End, req.Children[i].End) || parent.Children[i] != k.ID {
			t.Fatalf("child %d: %+v", i, k)
		}
		if got := x.shard(run, k.ID); got.Parent != 3 {
			t.Fatalf("stored child %d: %+v", i, got)
		}
	}
	if string(kids[0].Metadata) != "m1" {
		t.Fatalf("child metadata %q, want m1", kids[0].Metadata)
	}
	before := x.shardCount(run)
	_, kids2, err := x.b.SplitReplace(x.ctx, x.now+1, req)
	noErr(t, "SplitReplace replay", err)
	if len(kids2) != 3 || kids2[0].ID != kids[0].ID || x.shardCount(run) != before {
		t.Fatalf("replay returned %d children / created shards", len(kids2))
	}
	req2 := req
	req2.Children = children("p", "t", "t", "")
	_, _, err = x.b.SplitReplace(x.ctx, x.now, req2)
	wantErr(t, "SplitReplace same op, other children", err, coord.ErrOpConflict)
	req2.Op = x.nextOp()
	_, _, err = x.b.SplitReplace(x.ctx, x.now, req2)
	wantErr(t, "SplitReplace of a split shard", err, coord.ErrShardTerminal)
	// Children are ordinary shards.
	cl := x.acquire(run, kids[1].ID, 12)
	x.checkpoint(cl, "t")
	x.complete(cl)
}

func testSplitReplaceCoverage(t *testing.T, f Factory) {
	x := newFixture(t, f, smallLimits())
	run := x.newRun(spec(1, "b", "m"), spec(2, "m", ""))
	l := x.acquire(run, 1, 10)
	l2 := x.acquire(run, 2, 10)
	cases := []struct {
		name  string
		lease coord.Lease
		kids  []coord.ChildSpec
		want  error
	}{
		{"no children", l, nil, coord.ErrSplitSingleChild},
		{"single child", l, children("b", "m"), coord.ErrSplitSingleChild},
		{"gap", l, children("b", "d", "e", "m"), coord.ErrSplitGap},
		{"overlap", l, children("b", "e", "d", "m"), coord.ErrSplitOverlap},
		{"wrong start (inside)", l, children("c", "e", "e", "m"), coord.ErrSplitWrongStart},
		{"wrong start (outside)", l, children("a", "e", "e", "m"), coord.ErrSplitWrongStart},
		{"wrong end (short)", l, children("b", "e", "e", "l"), coord.ErrSplitWrongEnd},
		{"wrong end (long)", l, children("b", "e", "e", "n"), coord.ErrSplitWrongEnd},
		{"wrong end (unbounded)", l, children("b", "e", "e", ""), coord.ErrSplitWrongEnd},
		{"unbounded in the middle", l, children("b", "", "e", "m"), coord.ErrSplitOverlap},
		{"empty child", l, children("b", "e", "e", "e", "e", "m"), coord.ErrSplitEmptyChild},
		{"inverted child", l, children("b", "e", "e", "d", "d", "m"), coord.ErrSplitEmptyChild},
		{"bounded end of unbounded parent", l2, children("m", "p", "p", "z"), coord.ErrSplitWrongEnd},
	}
	for _, tc := range cases {
		_, _, err := x.b.SplitReplace(x.ctx, x.now, coord.SplitReplaceRequest{Lease: tc.lease, Op: x.nextOp(), Children: tc.kids})
		wantErr(t, tc.name, err, tc.want)
		wantErr(t, tc.name+" (class)", err, coord.ErrInvalidSplit)
		var se *coord.SplitError
		if !errors.As(err, &se) {
			t.Fatalf("%s: want *SplitError, got %T", tc.name, err)
		}
	}
	if n := x.shardCount(run); n != 2 {
		t.Fatalf("refused splits created shards: %d", n)
	}
	if s := x.shard(run, 1); s.State != coord.ShardActive || len(s.Children) != 0 {
		t.Fatalf("refused splits changed the parent: %+v", s)
	}
}

func testSplitReplaceCursor(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun(spec(1, "b", "z"))
	l := x.acquire(run, 1, 10)
	x.checkpoint(l, "h")
	_, kids, err := x.b.SplitReplace(x.ctx, x.now, coord.SplitReplaceRequest{Lease: l, Op: x.nextOp(), Children: children("b", "e", "e", "h", "h", "m", "m", "z")})
	noErr(t, "SplitReplace", err)
	want := []struct {
		state  coord.ShardState
		cursor string
	}{{coord.ShardDone, ""}, {coord.ShardDone, ""}, {coord.ShardActive, "h"}, {coord.ShardActive, ""}}
	for i, w := range want {
		if kids[i].State != w.state || string(kids[i].Cursor.Key) != w.cursor || kids[i].Cursor.HasKey != (w.cursor != "") {
			t.Fatalf("child %d [%s,%s): state %v cursor %+v, want %v %q", i, kids[i].Start, kids[i].End, kids[i].State, kids[i].Cursor, w.state, w.cursor)
		}
	}
}

func testSplitResidual(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun(spec(1, "b", "z"), spec(2, "z", ""))
	l := x.acquire(run, 1, 10)
	x.checkpoint(l, "d")
	req := coord.SplitResidualRequest{Lease: l, Op: x.nextOp(), Key: key("m")}
	p, res, err := x.b.SplitResidual(x.ctx, x.now, req)
	noErr(t, "SplitResidual", err)
	if string(p.End) != "m" || p.State != coord.ShardActive || p.Owner != 10 || p.Fence != l.Fence || string(p.Cursor.Key) != "d" || len(p.Children) != 1 {
		t.Fatalf("shrunk shard %+v", p)
	}
	if res.ID != coord.ResidualID(req) || res.Parent != 1 || string(res.Start) != "m" || string(res.End) != "z" || res.State != coord.ShardActive || res.Owner != 0 || res.Cursor.HasKey {
		t.Fatalf("residual %+v", res)
	}
	before := x.shardCount(run)
	_, res2, err := x.b.SplitResidual(x.ctx, x.now, req)
	noErr(t, "SplitResidual replay", err)
	if res2.ID != res.ID || x.shardCount(run) != before {
		t.Fatalf("replay returned %v / created shards", res2.ID)
	}
	cases := []struct {
		name string
		k    string
		want error
	}{
		{"key at start", "b", coord.ErrSplitKey},
		{"key below start", "a", coord.ErrSplitKey},
		{"key at end", "m", coord.ErrSplitKey},
		{"key beyond end", "n", coord.ErrSplitKey},
		{"cursor at key", "d", coord.ErrSplitCursor},
		{"cursor above key", "c", coord.ErrSplitCursor},
	}
	for _, tc := range cases {
		_, _, err := x.b.SplitResidual(x.ctx, x.now, coord.SplitResidualRequest{Lease: l, Op: x.nextOp(), Key: key(tc.k)})
		wantErr(t, tc.name, err, tc.want)
		wantErr(t, tc.name, err, coord.ErrInvalidSplit)
	}
	// The cursor can no longer move past the new end.
	_, err = x.b.Checkpoint(x.ctx, x.now, coord.CheckpointRequest{Lease: l, Op: x.nextOp(), Cursor: coord.Cursor{HasKey: true, Key: key("n")}})
	wantErr(t, "Checkpoint past the new end", err, coord.ErrCursorOutOfRange)
	// Unbounded shards split too; the residual stays unbounded.
	l2 := x.acquire(run, 2, 10)
	_, res3, err := x.b.SplitResidual(x.ctx, x.now, coord.SplitResidualRequest{Lease: l2, Op: x.nextOp(), Key: key("zz"), Metadata: []byte("md")})
	noErr(t, "SplitResidual of an unbounded shard", err)
	if len(res3.End) != 0 || string(res3.Metadata) != "md" {
		t.Fatalf("residual of unbounded shard: %+v", res3)
	}
	// The residual is an ordinary shard.
	rl := x.acquire(run, res.ID, 11)
	x.checkpoint(rl, "y")
	x.complete(rl)
}

func testSplitLimits(t *testing.T, f Factory) {
	x := newFixture(t, f, smallLimits()) // 4 children per split, 5 spawned per shard, keys <= 8
	run := x.newRun(spec(1, "a", "z"))
	l := x.acquire(run, 1, 10)
	_, _, err := x.b.SplitReplace(x.ctx, x.now, coord.SplitReplaceRequest{Lease: l, Op: x.nextOp(), Children: children("a", "b", "b", "c", "c", "d", "d", "e", "e", "z")})
	wantErr(t, "too many children", err, coord.ErrLimitExceeded)
	var le *coord.LimitError
	if !errors.As(err, &le) || le.Limit != coord.LimitChildrenPerSplit || le.Value != 5 || le.Max != 4 {
		t.Fatalf("want LimitError children_per_split 5 > 4, got %v", err)
	}
	_, _, err = x.b.SplitResidual(x.ctx, x.now, coord.SplitResidualRequest{Lease: l, Op: x.nextOp(), Key: key("k12345678")})
	wantErr(t, "residual key too long", err, coord.ErrLimitExceeded)
	for i, k := range []string{"y", "x", "w", "v", "u"} {
		_, _, err := x.b.SplitResidual(x.ctx, x.now, coord.SplitResidualRequest{Lease: l, Op: x.nextOp(), Key: key(k)})
		noErr(t, fmt.Sprintf("residual %d", i), err)
	}
	_, _, err = x.b.SplitResidual(x.ctx, x.now, coord.SplitResidualRequest{Lease: l, Op: x.nextOp(), Key: key("t")})
	if !errors.As(err, &le) || le.Limit != coord.LimitSpawnedPerShard || le.Value != 6 || le.Max != 5 {
		t.Fatalf("want LimitError spawned_per_shard 6 > 5, got %v", err)
	}
	_, _, err = x.b.SplitReplace(x.ctx, x.now, coord.SplitReplaceRequest{Lease: l, Op: x.nextOp(), Children: children("a", "m", "m", "u")})
	if !errors.As(err, &le) || le.Limit != coord.LimitSpawnedPerShard {
		t.Fatalf("want LimitError spawned_per_shard for replace, got %v", err)
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

func testRunLifecycle(t *testing.T, f Factory) {
	x := newFixture(t, f, smallLimits())
	run := x.newRun(spec(1, "a", "m"), spec(2, "m", ""))
	creq := coord.CompleteRunRequest{Tenant: tenantA, Run: run, Op: x.nextOp()}
	_, err := x.b.CompleteRun(x.ctx, x.now, creq)
	wantErr(t, "CompleteRun with active shards", err, coord.ErrRunIncomplete)
	l1 := x.acquire(run, 1, 10)
	x.complete(l1)
	l2 := x.acquire(run, 2, 10)
	x.park(l2)
	_, err = x.b.CompleteRun(x.ctx, x.now, coord.CompleteRunRequest{Tenant: tenantA, Run: run, Op: x.nextOp()})
	wantErr(t, "CompleteRun with a parked shard", err, coord.ErrRunIncomplete)
	_, err = x.b.Unpark(x.ctx, x.now, coord.UnparkRequest{Tenant: tenantA, Run: run, Shard: 2, Op: x.nextOp()})
	noErr(t, "Unpark", err)
	l2 = x.acquire(run, 2, 10)
	_, _, err = x.b.SplitReplace(x.ctx, x.now, coord.SplitReplaceRequest{Lease: l2, Op: x.nextOp(), Children: children("m", "t", "t", "")})
	noErr(t, "SplitReplace", err)
	kids, err := x.b.ListShards(x.ctx, x.now, tenantA, run, coord.ShardFilter{States: []coord.ShardState{coord.ShardActive}})
	noErr(t, "ListShards", err)
	for _, k := range kids {
		x.complete(x.acquire(run, k.ID, 10))
	}
	creq.Op = x.nextOp()
	r, err := x.b.CompleteRun(x.ctx, x.now+7, creq)
	noErr(t, "CompleteRun", err)
	if r.State != coord.RunDone || r.CompletedAt != x.now+7 {
		t.Fatalf("completed run %+v", r)
	}
	_, err = x.b.CompleteRun(x.ctx, x.now+9, creq)
	noErr(t, "CompleteRun replay", err)
	for name, err := range map[string]error{
		"CancelRun": func() error {
			_, err := x.b.CancelRun(x.ctx, x.now, coord.CancelRunRequest{Tenant: tenantA, Run: run, Op: x.nextOp()})
			return err
		}(),
		"FailRun": func() error {
			_, err := x.b.FailRun(x.ctx, x.now, coord.FailRunRequest{Tenant: tenantA, Run: run, Op: x.nextOp(), Reason: "x"})
			return err
		}(),
		"CompleteRun": func() error {
			_, err := x.b.CompleteRun(x.ctx, x.now, coord.CompleteRunRequest{Tenant: tenantA, Run: run, Op: x.nextOp()})
			return err
		}(),
	} {
		wantErr(t, name+" of a done run", err, coord.ErrRunTerminal)
	}
	if got := x.getRun(run); got.State != coord.RunDone || got.CompletedAt != x.now+7 {
		t.Fatalf("terminal run changed: %+v", got)
	}

	// FailRun.
	fr := x.newRun()
	_, err = x.b.FailRun(x.ctx, x.now, coord.FailRunRequest{Tenant: tenantA, Run: fr, Op: x.nextOp()})
	wantErr(t, "FailRun without reason", err, coord.ErrInvalidArgument)
	_, err = x.b.FailRun(x.ctx, x.now, coord.FailRunRequest{Tenant: tenantB, Run: fr, Op: x.nextOp(), Reason: "x"})
	wantErr(t, "FailRun by another tenant", err, coord.ErrTenantMismatch)
	l := x.acquire(fr, 1, 10)
	r, err = x.b.FailRun(x.ctx, x.now, coord.FailRunRequest{Tenant: tenantA, Run: fr, Op: x.nextOp(), Reason: "scanner crashed"})
	noErr(t, "FailRun", err)
	if r.State != coord.RunFailed || r.FailReason != "scanner crashed" || r.CompletedAt == 0 {
		t.Fatalf("failed run %+v", r)
	}
	_, err = x.b.Checkpoint(x.ctx, x.now, coord.CheckpointRequest{Lease: l, Op: x.nextOp(), Cursor: coord.Cursor{HasKey: true, Key: key("b")}})
	wantErr(t, "Checkpoint in a failed run", err, coord.ErrRunTerminal)

	// Initializing runs can only be cancelled.
	ir := x.newRunFor(tenantA, defaultConfig(), nil)
	_, err = x.b.FailRun(x.ctx, x.now, coord.FailRunRequest{Tenant: tenantA, Run: ir, Op: x.nextOp(), Reason: "x"})
	wantErr(t, "FailRun of an initializing run", err, coord.ErrRunNotActive)
	_, err = x.b.CompleteRun(x.ctx, x.now, coord.CompleteRunRequest{Tenant: tenantA, Run: ir, Op: x.nextOp()})
	wantErr(t, "CompleteRun of an initializing run", err, coord.ErrRunNotActive)
	cancel := coord.CancelRunRequest{Tenant: tenantA, Run: ir, Op: x.nextOp()}
	r, err = x.b.CancelRun(x.ctx, x.now, cancel)
	noErr(t, "CancelRun of an initializing run", err)
	if r.State != coord.RunCancelled || r.CompletedAt != x.now {
		t.Fatalf("cancelled run %+v", r)
	}
	_, err = x.b.CancelRun(x.ctx, x.now+1, cancel)
	noErr(t, "CancelRun replay", err)
	_, err = x.b.CancelRun(x.ctx, x.now, coord.CancelRunRequest{Tenant: tenantA, Run: 12345, Op: x.nextOp()})
	wantErr(t, "CancelRun of an unknown run", err, coord.ErrNotFound)
}

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

func testProgressAndList(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	var specs []coord.ShardSpec
	for i := 0; i < 6; i++ {
		specs = append(specs, spec(coord.ShardID(10*(i+1)), fmt.Sprintf("k%d", i), fmt.Sprintf("k%d", i+1)))
	}
	run := x.newRun(specs...)
	x.complete(x.acquire(run, 10, 1))
	x.park(x.acquire(run, 20, 1))
	l := x.acquire(run, 30, 1)
	x.acquire(run, 40, 1)
	_, _, err := x.b.SplitReplace(x.ctx, x.now, coord.SplitReplaceRequest{Lease: l, Op: x.nextOp(), Children: children("k2", "k2m", "k2m", "k3")})
	noErr(t, "SplitReplace", err)
	p, err := x.b.Progress(x.ctx, x.now, tenantA, run)
	noErr(t, "Progress", err)
	want := coord.Progress{State: coord.RunActive, Total: 8, Active: 5, Done: 1, Split: 1, Parked: 1, Leased: 1}
	if p != want {
		t.Fatalf("Progress = %+v, want %+v", p, want)
	}
	p, err = x.b.Progress(x.ctx, x.now+leaseMS, tenantA, run)
	noErr(t, "Progress later", err)
	if p.Leased != 0 {
		t.Fatalf("Progress after expiry counts %d leased", p.Leased)
	}
	_, err = x.b.Progress(x.ctx, x.now, tenantB, run)
	wantErr(t, "Progress by another tenant", err, coord.ErrTenantMismatch)

	count := func(fl coord.ShardFilter, now coord.Time) []coord.Shard {
		t.Helper()
		out, err := x.b.ListShards(x.ctx, now, tenantA, run, fl)
		noErr(t, "ListShards", err)
		for i := 1; i < len(out); i++ {
			if out[i-1].ID >= out[i].ID {
				t.Fatalf("ListShards not in ascending id order")
			}
		}
		return out
	}
	cases := []struct {
		name string
		fl   coord.ShardFilter
		now  coord.Time
		want int
	}{
		{"all", coord.ShardFilter{}, x.now, 8},
		{"active", coord.ShardFilter{States: []coord.ShardState{coord.ShardActive}}, x.now, 5},
		{"done or parked", coord.ShardFilter{States: []coord.ShardState{coord.ShardDone, coord.ShardParked}}, x.now, 2},
		{"leased", coord.ShardFilter{Lease: coord.Leased}, x.now, 1},
		{"leased later", coord.ShardFilter{Lease: coord.Leased}, x.now + leaseMS, 0},
		{"active unleased", coord.ShardFilter{States: []coord.ShardState{coord.ShardActive}, Lease: coord.Unleased}, x.now, 4},
		{"limit", coord.ShardFilter{Limit: 3}, x.now, 3},
		{"after", coord.ShardFilter{After: 30}, x.now, 5},
		{"after between ids", coord.ShardFilter{After: 35}, x.now, 5},
		{"after all", coord.ShardFilter{After: ^coord.ShardID(0)}, x.now, 0},
	}
	for _, tc := range cases {
		if got := count(tc.fl, tc.now); len(got) != tc.want {
			t.Errorf("%s: %d shards, want %d", tc.name, len(got), tc.want)
		}
	}
	// Paging visits every shard exactly once.
	var after coord.ShardID
	seen := 0
	for {
		page := count(coord.ShardFilter{After: after, Limit: 3}, x.now)
		if len(page) == 0 {
			break
		}
		seen += len(page)
		after = page[len(page)-1].ID
	}
	if seen != 8 {
		t.Fatalf("paging saw %d shards, want 8", seen)
	}
}

func testReads(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun()
	_, err := x.b.GetRun(x.ctx, tenantA, 999)
	wantErr(t, "GetRun unknown", err, coord.ErrNotFound)
	_, err = x.b.GetRun(x.ctx, tenantB, run)
	wantErr(t, "GetRun other tenant", err, coord.ErrTenantMismatch)
	_, err = x.b.GetShard(x.ctx, tenantA, run, 999)
	wantErr(t, "GetShard unknown", err, coord.ErrNotFound)
	_, err = x.b.GetShard(x.ctx, tenantB, run, 1)
	wantErr(t, "GetShard other tenant", err, coord.ErrTenantMismatch)
	_, err = x.b.ListShards(x.ctx, x.now, tenantA, 999, coord.ShardFilter{})
	wantErr(t, "ListShards unknown run", err, coord.ErrNotFound)
	_, err = x.b.Progress(x.ctx, x.now, tenantA, 999)
	wantErr(t, "Progress unknown run", err, coord.ErrNotFound)
}

func testResultsAreCopies(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	specs := []coord.ShardSpec{{ID: 1, Start: []byte("a"), End: []byte("m"), Metadata: []byte("meta")}}
	run := x.newRun(specs...)
	specs[0].Start[0], specs[0].Metadata[0] = 'X', 'X' // the caller reuses its buffers
	l := x.acquire(run, 1, 10)
	s := x.shard(run, 1)
	if string(s.Start) != "a" || string(s.Metadata) != "meta" {
		t.Fatalf("backend retained the caller's manifest buffers: %+v", s)
	}
	s.Start[0] = 'Y'
	s.Ops[0].ID = 0
	if again := x.shard(run, 1); string(again.Start) != "a" || again.Ops[0].ID == 0 {
		t.Fatalf("backend returned its internal record")
	}
	k := []byte("c")
	_, err := x.b.Checkpoint(x.ctx, x.now, coord.CheckpointRequest{Lease: l, Op: x.nextOp(), Cursor: coord.Cursor{HasKey: true, Key: k}})
	noErr(t, "Checkpoint", err)
	k[0] = 'z'
	if got := x.shard(run, 1); string(got.Cursor.Key) != "c" {
		t.Fatalf("backend retained the caller's cursor buffer")
	}
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

func testContextCancelled(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun()
	ctx, cancel := context.WithCancel(x.ctx)
	cancel()
	_, err := x.b.Acquire(ctx, x.now, coord.AcquireRequest{Tenant: tenantA, Run: run, Shard: 1, Worker: 1, Op: x.nextOp()})
	wantErr(t, "Acquire with a cancelled context", err, context.Canceled)
	_, err = x.b.CreateRun(ctx, x.now, coord.CreateRunRequest{Tenant: tenantA, Run: 555, Op: 1, Config: defaultConfig()})
	wantErr(t, "CreateRun with a cancelled context", err, context.Canceled)
	if s := x.shard(run, 1); s.Owner != 0 {
		t.Fatalf("cancelled Acquire leased the shard")
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
