package scanner_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// TestFailingShardIsParkedThenUnparked: a push run for a seq the log has
// not reached fails on every attempt; after MaxFailures attempts the
// shard is parked with its reason, which the run's status shows. Once the
// log has the seq, an unpark lets the run finish.
func TestFailingShardIsParkedThenUnparked(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	repo := f.repo("alice", "demo")
	ctx := context.Background()
	s := f.scanner(scanner.Options{})
	w := f.worker(s, scanner.WorkerOptions{MaxFailures: 2})
	spec := scanner.Spec{Tenant: "alice", RepoID: repo.ID, Kind: scanner.KindPush, Seq: 3}
	if _, err := s.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		did, err := w.Step(ctx)
		if !did || err == nil {
			t.Fatalf("attempt %d: did=%v err=%v, want a failure", attempt, did, err)
		}
		f.clock.Advance(scanner.DefaultLeaseDuration + time.Second)
	}
	st := status(t, s, spec)
	if len(st.Parked) != 1 || !strings.Contains(st.Parked[0].Reason, "before the run's 3") {
		t.Fatalf("status %+v, want one parked shard with the failure", st)
	}
	if did, err := w.Step(ctx); did || err != nil {
		t.Fatalf("a parked shard was claimed: did=%v err=%v", did, err)
	}

	history(t, f.remote("alice", "demo"), 0) // the log reaches seq 3
	if _, err := f.b.Unpark(ctx, coord.TimeOf(f.clock.Now()), coord.UnparkRequest{Tenant: scanner.TenantID("alice"), Run: spec.RunID(), Shard: 1, Op: 77}); err != nil {
		t.Fatal(err)
	}
	if did, err := w.Step(ctx); !did || err != nil {
		t.Fatalf("after unpark: did=%v err=%v", did, err)
	}
	if st := status(t, s, spec); st.State != "done" {
		t.Fatalf("run %+v, want done", st)
	}
}
