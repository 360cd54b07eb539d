package coordtest

// Idempotency: replays of every operation and the eviction of old op ids
// from the logs.

import (
	"fmt"
	"testing"

	"github.com/ghost-scm/ghost/internal/coord"
)

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
