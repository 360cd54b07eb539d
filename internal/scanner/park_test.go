package scanner_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// TestFailingShardIsParkedThenUnparked: a push run for a seq the log has
// not reached fails on every attempt, at the same position and for the
// same reason; after MaxFailures attempts the shard is parked with a
// reason naming the input and the failure, which the run's status shows.
// Once the log has the seq, an unpark lets the run finish.
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
		if st := status(t, s, spec); attempt == 1 && len(st.Parked) != 0 {
			t.Fatalf("parked after one failure: %+v", st)
		}
		f.clock.Advance(scanner.DefaultLeaseDuration + time.Minute)
	}
	st := status(t, s, spec)
	if len(st.Parked) != 1 || !strings.Contains(st.Parked[0].Reason, "before the run's 3") ||
		!strings.Contains(st.Parked[0].Reason, "failed 2 times on the repository "+repo.ID) {
		t.Fatalf("status %+v, want one parked shard whose reason names the input and the failure", st)
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

// TestTransientFailuresNeverPark is a fault injection (faultstore): the
// object store stops answering reads of the push's stored pack index.
// A short outage is retried by the worker itself and the run finishes in
// the same step; a long one makes attempt after attempt fail, far more
// often than MaxFailures, without ever parking the shard; once the store
// answers again the run finishes.
func TestTransientFailuresNeverPark(t *testing.T) {
	var failing atomic.Int64 // reads still to fail; <0: every read
	f := newFixture(t, fixtureOpts{store: func(st objstore.Store) objstore.Store {
		fs := faultstore.New(st)
		fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
			if c.Op != faultstore.OpGet || !strings.Contains(c.Key, "/entries/") || !strings.HasSuffix(c.Key, ".idx") {
				return faultstore.Fault{}
			}
			if n := failing.Load(); n < 0 || n > 0 && failing.CompareAndSwap(n, n-1) {
				return faultstore.Fault{Outcome: faultstore.Lost}
			}
			return faultstore.Fault{}
		})
		return fs
	}})
	f.tenant("alice")
	repo := f.repo("alice", "demo")
	history(t, f.remote("alice", "demo"), 0)
	ctx := context.Background()
	s := f.scanner(scanner.Options{})
	w := f.worker(s, scanner.WorkerOptions{MaxFailures: 2, RetryDelay: time.Millisecond})

	short := scanner.Spec{Tenant: "alice", RepoID: repo.ID, Kind: scanner.KindPush, Seq: 2}
	if _, err := s.Start(ctx, short); err != nil {
		t.Fatal(err)
	}
	failing.Store(2)
	if did, err := w.Step(ctx); !did || err != nil {
		t.Fatalf("a short outage: did=%v err=%v, want the run done in one step", did, err)
	}
	if st := status(t, s, short); st.State != "done" {
		t.Fatalf("after a short outage the run is %+v, want done", st)
	}

	long := scanner.Spec{Tenant: "alice", RepoID: repo.ID, Kind: scanner.KindPush, Seq: 3}
	if _, err := s.Start(ctx, long); err != nil {
		t.Fatal(err)
	}
	failing.Store(-1)
	for attempt := 1; attempt <= 5; attempt++ {
		did, err := w.Step(ctx)
		if !did || err == nil || !errors.Is(err, objstore.ErrUnavailable) {
			t.Fatalf("attempt %d during a long outage: did=%v err=%v, want an unavailable store", attempt, did, err)
		}
		if st := status(t, s, long); len(st.Parked) != 0 {
			t.Fatalf("a transient failure parked the shard after %d attempts: %+v", attempt, st)
		}
		f.clock.Advance(scanner.DefaultLeaseDuration + 3*time.Minute) // past the lease and any backoff
	}
	failing.Store(0)
	if did, err := w.Step(ctx); !did || err != nil {
		t.Fatalf("after the outage: did=%v err=%v", did, err)
	}
	if st := status(t, s, long); st.State != "done" {
		t.Fatalf("after the outage the run is %+v, want done", st)
	}
}

// TestFailingRunDoesNotDelayOthers: alice's older push run fails on every
// attempt and comes first in the claim order (same tenant, older repo);
// the worker's next step goes to her other run, which finishes, and the
// failing run is tried again once its lease has run out.
func TestFailingRunDoesNotDelayOthers(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	ra := f.repo("alice", "a")
	rb := f.repo("alice", "b")
	history(t, f.remote("alice", "b"), 0)
	ctx := context.Background()
	s := f.scanner(scanner.Options{})
	bad := scanner.Spec{Tenant: "alice", RepoID: ra.ID, Kind: scanner.KindPush, Seq: 5} // repository a has no seq 5
	good := scanner.Spec{Tenant: "alice", RepoID: rb.ID, Kind: scanner.KindPush, Seq: 7}
	for _, sp := range []scanner.Spec{bad, good} {
		if _, err := s.Start(ctx, sp); err != nil {
			t.Fatal(err)
		}
	}
	var claimed []scanner.Spec
	w := f.worker(s, scanner.WorkerOptions{MaxFailures: 100, OnClaim: func(sp scanner.Spec, _ coord.Lease) { claimed = append(claimed, sp) }})
	if did, err := w.Step(ctx); !did || err == nil {
		t.Fatalf("first step: did=%v err=%v, want the failing run tried first", did, err)
	}
	f.clock.Advance(time.Second)
	if did, err := w.Step(ctx); !did || err != nil {
		t.Fatalf("second step: did=%v err=%v, want the other run", did, err)
	}
	if st := status(t, s, good); st.State != "done" || len(claimed) != 2 || claimed[1] != good {
		t.Fatalf("claims %v; the other run is %+v, want it done on the step after the failure", claimed, st)
	}
	f.clock.Advance(scanner.DefaultLeaseDuration)
	if did, err := w.Step(ctx); !did || err == nil || claimed[2] != bad {
		t.Fatalf("after its lease: did=%v err=%v claims %v, want the failing run tried again", did, err, claimed)
	}
}
