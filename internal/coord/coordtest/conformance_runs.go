package coordtest

// Runs: creation, registration of the root shards, the lifecycle to a
// terminal state, and the reads.

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
)

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
