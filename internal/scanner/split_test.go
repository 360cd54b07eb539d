package scanner_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// TestSplitsSpreadOverFourWorkers starts a full run with one shard and
// four workers. Splits (split_residual) hand work to the idle ones: all
// four scan, every blob is scanned exactly once, and the completed
// shards' ranges tile the whole id space without overlap.
func TestSplitsSpreadOverFourWorkers(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	repo := f.repo("alice", "big")
	history(t, f.remote("alice", "big"), 10)
	ctx := context.Background()
	s := f.scanner(scanner.Options{InitialShards: 1})

	var (
		mu      sync.Mutex
		scanned = map[string]int{}
		byW     = map[coord.WorkerID]int{}
		ranges  [][2][]byte
	)
	claimed := make([]chan struct{}, 4)
	for i := range claimed {
		claimed[i] = make(chan struct{})
	}
	ws := make([]*scanner.Worker, 4)
	for i := range ws {
		first := true
		var once sync.Once
		ws[i] = f.worker(s, scanner.WorkerOptions{
			CheckpointBlobs: 2, MinSplitBlobs: 2, SliceTime: -1,
			OnClaim: func(scanner.Spec, coord.Lease) { once.Do(func() { close(claimed[i]) }) },
			OnBatch: func(_ scanner.Spec, l coord.Lease, ids []string) {
				mu.Lock()
				for _, id := range ids {
					scanned[id]++
				}
				byW[l.Worker] += len(ids)
				mu.Unlock()
				// Worker i's first batch (after its first split) waits
				// until worker i+1 holds a shard, so all four get one.
				if first && i < 3 {
					first = false
					<-claimed[i+1]
				}
			},
			OnComplete: func(_ scanner.Spec, sh coord.Shard) {
				mu.Lock()
				ranges = append(ranges, [2][]byte{sh.Start, sh.End})
				mu.Unlock()
			},
		})
	}
	if _, _, err := s.StartFull(ctx, "alice", repo.ID); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Worker 0 starts; the others poll until the run is done.
			if i > 0 {
				<-claimed[0]
			}
			for {
				did, err := w.Step(ctx)
				if err != nil {
					errs <- err
					return
				}
				if did {
					continue
				}
				act, err := s.Active(ctx)
				if err != nil {
					errs <- err
					return
				}
				if len(act) == 0 {
					return
				}
				time.Sleep(5 * time.Millisecond) // poll interval, not an assertion
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(byW) != 4 {
		t.Fatalf("work spread over %d workers, want 4: %v", len(byW), byW)
	}
	for id, n := range scanned {
		if n != 1 {
			t.Errorf("blob %s scanned %d times", id, n)
		}
	}
	if all := countBlobs(t, f, repo.ID); len(scanned) != all {
		t.Fatalf("scanned %d blobs of %d", len(scanned), all)
	}
	// The completed ranges tile [empty, +inf).
	sortRanges(ranges)
	var at []byte
	for i, r := range ranges {
		if !bytes.Equal(r[0], at) {
			t.Fatalf("range %d starts at %x, want %x (gap or overlap)", i, r[0], at)
		}
		if len(r[1]) == 0 && i != len(ranges)-1 {
			t.Fatalf("range %d is unbounded but not last", i)
		}
		at = r[1]
	}
	if len(at) != 0 {
		t.Fatalf("ranges end at %x, not +inf", at)
	}
	st, err := s.Runs(ctx, repo.ID, 1)
	if err != nil || st[0].State != "done" || st[0].ShardsDone < 4 || st[0].Blobs != int64(len(scanned)) {
		t.Fatalf("status %+v (%v)", st, err)
	}
}

func sortRanges(rs [][2][]byte) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && bytes.Compare(rs[j][0], rs[j-1][0]) < 0; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}
