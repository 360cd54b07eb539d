package scanner_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// TestDoneRunIsNotStartedAgain: once a run is done its descriptor says
// so, and starting it again does not create a new coord run, even after
// coordination GC removed the old one (here: a namespace that never had
// it).
func TestDoneRunIsNotStartedAgain(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	repo := f.repo("alice", "demo")
	history(t, f.remote("alice", "demo"), 0)
	ctx := context.Background()
	s := f.scanner(scanner.Options{InitialShards: 2})
	run, _, err := s.StartFull(ctx, "alice", repo.ID)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, s, f.worker(s, scanner.WorkerOptions{}))

	gced, err := etcdcoord.New(etcdcoord.Config{Client: etcdClient, Namespace: f.ns + "-gced"})
	if err != nil {
		t.Fatal(err)
	}
	s2 := f.scanner(scanner.Options{InitialShards: 2, Coord: func() coord.Backend { return gced }})
	again, err := s2.Start(ctx, run.Spec())
	if err != nil || !again.Done {
		t.Fatalf("restart of a done run: %+v, %v", again, err)
	}
	if _, err := gced.GetRun(ctx, scanner.TenantID("alice"), coord.RunID(run.ID)); !errors.Is(err, coord.ErrNotFound) {
		t.Fatalf("a done run was created again: %v", err)
	}
	if act, err := s2.Active(ctx); err != nil || len(act) != 0 {
		t.Fatalf("active after restart of a done run: %v %v", act, err)
	}
}

// TestStolenLeaseStopsTheWorker: a worker whose lease expired and was
// taken over is refused at its next checkpoint, stops, and the new owner
// scans the rest from the last checkpoint; every blob is checkpointed
// once.
func TestStolenLeaseStopsTheWorker(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	repo := f.repo("alice", "demo")
	history(t, f.remote("alice", "demo"), 3)
	ctx := context.Background()
	s := f.scanner(scanner.Options{InitialShards: 1})
	done := map[string]int{}
	var thief *scanner.Worker
	stolen := false
	slow := f.worker(s, scanner.WorkerOptions{CheckpointBlobs: 2, OnBatch: func(_ scanner.Spec, _ coord.Lease, ids []string) {
		for _, id := range ids {
			done[id]++
		}
		if !stolen {
			stolen = true
			// The slow worker stalls past its lease; the thief takes the
			// shard and finishes it.
			f.clock.Advance(scanner.DefaultLeaseDuration + 1)
			if did, err := thief.Step(ctx); !did || err != nil {
				t.Errorf("thief: did=%v err=%v", did, err)
			}
		}
	}})
	thief = f.worker(s, scanner.WorkerOptions{CheckpointBlobs: 2, OnBatch: func(_ scanner.Spec, _ coord.Lease, ids []string) {
		for _, id := range ids {
			done[id]++
		}
	}})
	if _, _, err := s.StartFull(ctx, "alice", repo.ID); err != nil {
		t.Fatal(err)
	}
	did, err := slow.Step(ctx)
	// Refused: by the fence, or, as here where the thief finished the
	// whole run, because the run ended.
	if !did || !errors.Is(err, coord.ErrStaleFence) && !errors.Is(err, coord.ErrRunTerminal) {
		t.Fatalf("slow worker after the theft: did=%v err=%v, want it refused", did, err)
	}
	drain(t, s, slow, thief)
	for id, n := range done {
		if n != 1 {
			t.Errorf("blob %s checkpointed %d times", id, n)
		}
	}
	if all := countBlobs(t, f, repo.ID); len(done) != all {
		t.Fatalf("checkpointed %d of %d blobs", len(done), all)
	}
}
