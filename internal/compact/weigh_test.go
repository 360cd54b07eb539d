package compact_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ghost-scm/ghost/internal/compact"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// TestPlanBy: PlanBy weighs only the checkpoints the decision needs,
// newest first, returns the weigher's error, and with sizes as weights
// is Plan.
func TestPlanBy(t *testing.T) {
	x := &wal.Index{}
	for i, s := range []int64{1000, 300, 100} {
		x.Checkpoints = append(x.Checkpoints, wal.Checkpoint{Seq: uint64(i + 1), Size: s})
	}
	var asked []int
	bySize := func(i int) (int64, error) {
		asked = append(asked, i)
		return x.Checkpoints[i].Size, nil
	}
	for _, layers := range []int64{10, 60, 400, 600} {
		asked = nil
		got, err := compact.PlanBy(x, 2, layers, bySize)
		if err != nil || got != compact.Plan(x, 2, layers) {
			t.Errorf("layers %d: PlanBy = %d, %v; Plan = %d", layers, got, err, compact.Plan(x, 2, layers))
		}
		// It asks for the newest, then each older one while they roll
		// up, and for the first that stays.
		want := []int{}
		for i := len(x.Checkpoints) - 1; i >= max(got-1, 0); i-- {
			want = append(want, i)
		}
		if !slices.Equal(asked, want) {
			t.Errorf("layers %d (keep %d): weighed %v, want %v", layers, got, asked, want)
		}
	}
	boom := errors.New("boom")
	if _, err := compact.PlanBy(x, 2, 10, func(int) (int64, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Errorf("PlanBy with a failing weigher: %v", err)
	}
}

// seedObjects lands 16 small pushes (64 objects), compacts them into one
// checkpoint, and pushes one file of n bytes that does not compress: a
// layer of 3 objects that outweighs the checkpoint many times in bytes.
func seedObjects(t *testing.T, ctx context.Context, comp *compact.Compactor, main *pusher, n, seed int) {
	t.Helper()
	main.history(ctx, 16, nil)
	if res, err := comp.Compact(ctx, repo); err != nil || !res.Full {
		t.Fatalf("first compaction: %+v, %v; want a full repack", res, err)
	}
	bigPush(t, ctx, main, n, seed)
}

func bigPush(t *testing.T, ctx context.Context, main *pusher, n, seed int) {
	t.Helper()
	os.WriteFile(filepath.Join(main.dir, "big.bin"), randomish(n, seed), 0o644)
	if err := main.push(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCompactionWeighsObjects: a checkpoint of many small objects stays
// when a few large ones are pushed after it, though they outweigh it in
// bytes (docs/adr/0121-checkpoints-weighed-by-objects.md): weighed by
// bytes, this compaction was a full repack.
func TestCompactionWeighsObjects(t *testing.T) {
	ctx := context.Background()
	log := wal.New(memstore.New(), wal.Options{})
	comp := compact.New(log, newCache(t, log, repocache.Options{}), compact.Options{})
	main := newPusher(t, log, "main")
	seedObjects(t, ctx, comp, main, 256<<10, 1)
	x, _ := log.Head(ctx, repo)
	if Plan := compact.Plan(x, compact.DefaultFactor, x.Layers[0].Size); Plan != 0 {
		t.Fatalf("by bytes the plan keeps %d; the test needs a full repack there", Plan)
	}
	res, err := comp.Compact(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if res.Full || res.Replaced != 0 {
		t.Fatalf("%+v: want a roll-up that keeps the checkpoint of 64 objects", res)
	}
	checkSnapshot(t, log, materialize(t, newCache(t, log, repocache.Options{})))
}

// TestCompactionWeighsBytesWithoutIndex: a checkpoint stored without its
// .idx has no object count; the plan then weighs everything by bytes (a
// full repack here), and the compaction still lands.
func TestCompactionWeighsBytesWithoutIndex(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	log := wal.New(store, wal.Options{})
	comp := compact.New(log, newCache(t, log, repocache.Options{}), compact.Options{})
	main := newPusher(t, log, "main")
	seedObjects(t, ctx, comp, main, 256<<10, 2)
	x, _ := log.Head(ctx, repo)
	if err := store.Delete(ctx, wal.CheckpointIndexKey(repo, x.Checkpoints[0])); err != nil {
		t.Fatal(err)
	}
	res, err := comp.Compact(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Full {
		t.Fatalf("%+v: want the bytes' plan, a full repack", res)
	}
	checkSnapshot(t, log, materialize(t, newCache(t, log, repocache.Options{})))
}
