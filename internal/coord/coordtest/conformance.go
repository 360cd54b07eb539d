package coordtest

import (
	"context"
	"testing"

	"github.com/ghost-scm/ghost/internal/coord"
)

// RunConformance runs the conformance suite: every operation's success path
// and each of its errors, replays, op-log eviction, lease expiry at the exact
// deadline, zombies, split coverage, cursor rules and shard caps.
//
// The subtests live in files by area: conformance_runs.go,
// conformance_leases.go, conformance_splits.go, conformance_idempotency.go,
// conformance_caps.go, conformance_concurrency.go and conformance_skew.go.
// This file keeps the one list of subtest names, which -run filters and CI
// match, and the contract every call keeps whatever its area: results are
// copies, and a cancelled context changes nothing.
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

// testResultsAreCopies: a backend neither keeps the caller's buffers nor
// hands out its own records.
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

// testContextCancelled: a call whose context has ended fails and writes
// nothing.
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
