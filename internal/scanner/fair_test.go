package scanner_test

import (
	"context"
	"testing"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/scanner"
)

func status(t *testing.T, s *scanner.Scanner, spec scanner.Spec) scanner.Status {
	t.Helper()
	st, err := s.Status(context.Background(), mustGet(t, s, spec))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestTenantAtCapQueues fills alice's shard cap with a full run: her
// push run then queues (it neither fails nor runs), bob's push run runs,
// and alice's runs finish once her full run has released its shards.
func TestTenantAtCapQueues(t *testing.T) {
	f := newFixture(t, fixtureOpts{limits: coord.Limits{MaxShardsPerTenant: 4}})
	f.tenant("alice")
	f.tenant("bob")
	ra := f.repo("alice", "a")
	rb := f.repo("bob", "b")
	history(t, f.remote("alice", "a"), 0)
	history(t, f.remote("bob", "b"), 0)
	ctx := context.Background()
	s := f.scanner(scanner.Options{InitialShards: 4})
	w := f.worker(s, scanner.WorkerOptions{})

	full, _, err := s.StartFull(ctx, "alice", ra.ID)
	if err != nil {
		t.Fatal(err)
	}
	pa := scanner.Spec{Tenant: "alice", RepoID: ra.ID, Kind: scanner.KindPush, Seq: 7}
	pb := scanner.Spec{Tenant: "bob", RepoID: rb.ID, Kind: scanner.KindPush, Seq: 7}
	for _, sp := range []scanner.Spec{pa, pb} {
		if _, err := s.Start(ctx, sp); err != nil {
			t.Fatalf("start %v: %v", sp, err)
		}
	}
	if st := status(t, s, pa); st.State != "queued" {
		t.Fatalf("alice's push run at her cap is %q, want queued", st.State)
	}
	// One step: push runs go first; alice's cannot register, bob's runs.
	if did, err := w.Step(ctx); !did || err != nil {
		t.Fatalf("step: %v %v", did, err)
	}
	if st := status(t, s, pb); st.State != "done" {
		t.Fatalf("bob's push run is %q, want done", st.State)
	}
	if st := status(t, s, pa); st.State != "queued" {
		t.Fatalf("alice's push run is %q, want still queued", st.State)
	}
	drain(t, s, w)
	for _, sp := range []scanner.Spec{pa, full.Spec()} {
		if st := status(t, s, sp); st.State != "done" {
			t.Fatalf("%v is %q, want done", sp, st.State)
		}
	}
}

// TestPushRunsPreemptFullRun: a worker busy with alice's full run, with
// one shard, yields at the end of its slice once bob's push run is
// waiting (it splits off the rest of its shard), and takes bob's push run
// next, before alice's scan is done.
func TestPushRunsPreemptFullRun(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	f.tenant("bob")
	ra := f.repo("alice", "a")
	rb := f.repo("bob", "b")
	history(t, f.remote("alice", "a"), 6)
	history(t, f.remote("bob", "b"), 0)
	ctx := context.Background()
	s := f.scanner(scanner.Options{InitialShards: 1})
	pb := scanner.Spec{Tenant: "bob", RepoID: rb.ID, Kind: scanner.KindPush, Seq: 7}
	batches := 0
	w := f.worker(s, scanner.WorkerOptions{CheckpointBlobs: 2, MinSplitBlobs: 1000, SliceTime: -1,
		OnBatch: func(sp scanner.Spec, _ coord.Lease, _ []string) {
			if sp.Kind != scanner.KindFull {
				return
			}
			if batches++; batches == 1 {
				if _, err := s.Start(ctx, pb); err != nil {
					t.Error(err)
				}
			}
		}})
	full, _, err := s.StartFull(ctx, "alice", ra.ID)
	if err != nil {
		t.Fatal(err)
	}
	if did, err := w.Step(ctx); !did || err != nil {
		t.Fatalf("step: %v %v", did, err)
	}
	if batches != 2 {
		t.Fatalf("the full run's shard ran %d batches before yielding, want 2", batches)
	}
	if did, err := w.Step(ctx); !did || err != nil {
		t.Fatalf("step: %v %v", did, err)
	}
	if st := status(t, s, pb); st.State != "done" {
		t.Fatalf("bob's push run is %q after the yield, want done", st.State)
	}
	if st := status(t, s, full.Spec()); st.State != "active" {
		t.Fatalf("alice's full run is %q, want still active", st.State)
	}
	drain(t, s, w)
	if st := status(t, s, full.Spec()); st.State != "done" || st.Blobs != int64(countBlobs(t, f, ra.ID)) {
		t.Fatalf("alice's full run: %+v", st)
	}
}
