package scanner_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// TestSeededCrashSimulation runs push runs and a full run with three
// workers that crash at random (their context ends at a claim or after a
// checkpoint, leaving the lease to expire), over a few seeds. Every blob
// is checkpointed exactly once per run: the full run covers every blob of
// the repository, the push runs cover each blob at most once, the
// watermark reaches the head, and each planted secret is one alert with
// no duplicate location.
func TestSeededCrashSimulation(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	ctx := context.Background()
	s := f.scanner(scanner.Options{InitialShards: 4})
	for seed := range uint64(3) {
		name := fmt.Sprint("sim", seed)
		repo := f.repo("alice", name)
		want := history(t, f.remote("alice", name), 3)
		rng := rand.New(rand.NewPCG(seed, 42))
		type key struct {
			run coord.RunID
			id  string
		}
		done := map[key]int{}
		pushBlobs, fullBlobs := map[string]int{}, map[string]int{}
		var cancels [3]context.CancelFunc
		var ctxs [3]context.Context
		ws := make([]*scanner.Worker, 3)
		crashes := 0
		for i := range ws {
			ctxs[i], cancels[i] = context.WithCancel(ctx)
			ws[i] = f.worker(s, scanner.WorkerOptions{CheckpointBlobs: 2, MinSplitBlobs: 2, SliceTime: -1,
				OnClaim: func(scanner.Spec, coord.Lease) {
					if rng.IntN(8) == 0 {
						cancels[i]()
					}
				},
				OnBatch: func(sp scanner.Spec, l coord.Lease, ids []string) {
					for _, id := range ids {
						done[key{l.Run, id}]++
						if sp.Kind == scanner.KindPush {
							pushBlobs[id]++
						} else {
							fullBlobs[id]++
						}
					}
					if rng.IntN(6) == 0 {
						cancels[i]()
					}
				}})
		}
		if _, err := s.Reconcile(ctx, "alice", repo.ID); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.StartFull(ctx, "alice", repo.ID); err != nil {
			t.Fatal(err)
		}
		for step := 0; ; step++ {
			if step > 2000 {
				t.Fatal("simulation did not converge")
			}
			i := rng.IntN(3)
			did, err := ws[i].Step(ctxs[i])
			if ctxs[i].Err() != nil { // crashed: restart the worker
				crashes++
				ctxs[i], cancels[i] = context.WithCancel(ctx)
				continue
			}
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if did {
				continue
			}
			act, err := s.Active(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(act) == 0 {
				break
			}
			f.clock.Advance(scanner.DefaultLeaseDuration / 2) // crashed leases expire
		}
		for k, n := range done {
			if n != 1 {
				t.Errorf("seed %d: run %d checkpointed blob %s %d times", seed, k.run, k.id, n)
			}
		}
		// The full run covers every object. A push run that comes after
		// the full run is done finds the watermark past its seq (the full
		// run covered it, docs/adr/0033-scan-coverage.md) and scans
		// nothing, so the push runs cover at most every object, each once.
		all := countBlobs(t, f, repo.ID)
		if len(fullBlobs) != all || len(pushBlobs) > all {
			t.Errorf("seed %d: full run covered %d, push runs %d, of %d blobs", seed, len(fullBlobs), len(pushBlobs), all)
		}
		x, err := f.srv.Log().Head(ctx, repo.ID)
		if err != nil {
			t.Fatal(err)
		}
		if wm, err := s.Watermark(ctx, repo.ID); err != nil || wm != x.Seq {
			t.Errorf("seed %d: watermark %d (%v), want the head %d", seed, wm, err, x.Seq)
		}
		got := view(t, f.srv.Alerts(), "alice", repo.ID)
		if len(got) != len(want) {
			t.Errorf("seed %d: %d alerts, want %d", seed, len(got), len(want))
		}
		for _, a := range got {
			for j := 1; j < len(a.Places); j++ {
				if a.Places[j] == a.Places[j-1] {
					t.Errorf("seed %d: duplicate location %s", seed, a.Places[j])
				}
			}
		}
		t.Logf("seed %d: %d crashes, %d blobs", seed, crashes, all)
	}
}
