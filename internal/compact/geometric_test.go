package compact_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/compact"
	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// TestPlan: the newest checkpoints roll up while one is smaller than
// factor times what rolls up after it; a roll-up that would take in the
// oldest is a full repack (0); the list never outgrows wal.MaxCheckpoints
// (docs/adr/0051-geometric-checkpoints.md).
func TestPlan(t *testing.T) {
	type plan struct {
		x      *wal.Index
		layers int64
	}
	ix := func(layers []int64, cks ...int64) plan {
		x := &wal.Index{}
		for i, s := range cks {
			x.Checkpoints = append(x.Checkpoints, wal.Checkpoint{Seq: uint64(i + 1), Size: s})
		}
		var total int64
		for _, s := range layers {
			// The index records what the layers hold; the plan weighs
			// what the compaction packed of them.
			x.Layers = append(x.Layers, wal.Layer{Size: 1 << 40})
			total += s
		}
		return plan{x, total}
	}
	for _, tc := range []struct {
		name   string
		x      plan
		factor int
		want   int
	}{
		{"no checkpoint", ix([]int64{10}), 2, 0},
		{"small layers keep all", ix([]int64{10, 10}, 1000, 100), 2, 2},
		{"equal to factor times keeps", ix([]int64{25, 25}, 1000, 100), 2, 2},
		{"newest rolls", ix([]int64{30, 30}, 1000, 100), 2, 1},
		{"cascade to the oldest: full", ix([]int64{500}, 1000, 100), 2, 0},
		{"cascade short of the oldest", ix([]int64{300}, 1000, 100), 2, 1},
		{"cascade stops", ix([]int64{40, 20}, 10000, 400, 100), 2, 2},
		{"cascade two", ix([]int64{60}, 10000, 300, 100), 2, 1},
		{"empty layers keep all", ix([]int64{0, 0}, 1000, 100), 2, 2},
		{"factor off", ix([]int64{1}, 1000), -1, 0},
		{"factor 4", ix([]int64{30}, 1000, 100), 4, 1},
	} {
		if got := compact.Plan(tc.x.x, tc.factor, tc.x.layers); got != tc.want {
			t.Errorf("%s: Plan = %d, want %d", tc.name, got, tc.want)
		}
	}
	// A full list rolls its newest up to make room, even where the
	// progression (factor 1 here) would keep it.
	var sizes []int64
	for i := range wal.MaxCheckpoints {
		sizes = append(sizes, int64(1)<<(62-min(i, 62)))
	}
	if p := ix([]int64{0}, sizes...); compact.Plan(p.x, 1, p.layers) != wal.MaxCheckpoints-1 {
		t.Errorf("full list: Plan = %d, want %d", compact.Plan(p.x, 1, p.layers), wal.MaxCheckpoints-1)
	}
}

// seedBig lands 4 small pushes and one of 64 KiB that does not
// compress, so that the first checkpoint is far larger than a few small
// pushes after it, and returns the head's seq (5).
func seedBig(t *testing.T, ctx context.Context, main *pusher) uint64 {
	t.Helper()
	main.history(ctx, 4, nil)
	os.WriteFile(filepath.Join(main.dir, "big.bin"), randomish(64<<10, 3), 0o644)
	if err := main.push(ctx); err != nil {
		t.Fatal(err)
	}
	return 5
}

// readRecorder is a store that records the keys read.
type readRecorder struct {
	*faultstore.Store
	mu   sync.Mutex
	keys []string
}

func newReadRecorder(inner *memstore.Store) *readRecorder {
	r := &readRecorder{Store: faultstore.New(inner)}
	r.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpGet || c.Op == faultstore.OpGetRange {
			r.mu.Lock()
			r.keys = append(r.keys, c.Op.String()+" "+c.Key)
			r.mu.Unlock()
		}
		return faultstore.Fault{}
	})
	return r
}

func (r *readRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.keys
	r.keys = nil
	return k
}

// hasObject reports whether the repository in dir has object id.
func hasObject(t *testing.T, dir, id string) bool {
	t.Helper()
	_, err := gittest.Run(gittest.Env(t.TempDir()), dir, nil, "cat-file", "-e", id)
	return err == nil
}

// TestGeometricCompaction follows one log through roll-ups and a full
// repack (docs/adr/0051-geometric-checkpoints.md):
//
//   - a roll-up keeps the checkpoints the progression keeps, reads of
//     them only the header of their .idx (their object counts, ADR
//     0121), and holds every object of what it rolls up, the
//     unreachable ones included (KeepRecent is off, so only a full
//     repack may drop them);
//   - a roll-up that takes in a newer checkpoint replaces it;
//   - a full repack replaces every checkpoint and drops the unreachable
//     objects;
//   - after each step a cold node serves the log's refs and passes fsck.
func TestGeometricCompaction(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	rec := newReadRecorder(inner)
	log := wal.New(inner, wal.Options{})
	recLog := wal.New(rec, wal.Options{})
	comp := compact.New(recLog, newCache(t, recLog, repocache.Options{}), compact.Options{KeepRecent: -1})
	main := newPusher(t, log, "main")
	main.history(ctx, 16, nil) // 64 objects
	first, err := comp.Compact(ctx, repo)
	if err != nil || !first.Full {
		t.Fatalf("first compaction: %+v, %v; want a full repack", first, err)
	}
	rec.take()

	// A branch pushed and deleted, then a push: all small next to A.
	junk := newPusher(t, log, "junk")
	if err := junk.push(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := log.Commit(ctx, repo, wal.Push{Transitions: []wal.Transition{{Ref: "refs/heads/junk", Old: junk.tip, New: wal.ZeroID}}, Pack: bytes.NewReader(nil)}); err != nil {
		t.Fatal(err)
	}
	if err := main.push(ctx); err != nil {
		t.Fatal(err)
	}
	x, _ := log.Head(ctx, repo)
	layerObjects := 0
	for _, l := range x.Layers {
		layerObjects += objectsOfLayer(t, log, l)
	}
	res, err := comp.Compact(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	x, _ = log.Head(ctx, repo)
	if res.Full || res.Replaced != 0 || len(x.Checkpoints) != 2 || x.Checkpoints[0] != first.Checkpoint {
		t.Fatalf("second compaction: %+v, checkpoints %+v; want a roll-up after the first", res, x.Checkpoints)
	}
	if res.Objects > layerObjects || res.Objects == 0 {
		t.Fatalf("the roll-up holds %d objects; its layers hold %d", res.Objects, layerObjects)
	}
	noReadOf := func(ck wal.Checkpoint) {
		t.Helper()
		for _, k := range rec.take() {
			op, key, _ := strings.Cut(k, " ")
			if key == wal.CheckpointKey(repo, ck) || key == wal.CheckpointIndexKey(repo, ck) && op != faultstore.OpGetRange.String() {
				t.Fatalf("the roll-up read the checkpoint it keeps: %s", k)
			}
		}
	}
	noReadOf(first.Checkpoint)
	snap := materialize(t, newCache(t, log, repocache.Options{}))
	checkSnapshot(t, log, snap)
	if !hasObject(t, snap.Dir, junk.tip) {
		t.Fatal("the roll-up dropped an unreachable object: only a full repack may")
	}

	// A push of enough objects that the second checkpoint rolls up with
	// it (more than half its count) but the first stays (at least twice
	// both).
	second := res.Checkpoint
	objects := func(ck wal.Checkpoint) int64 {
		t.Helper()
		n, err := log.CheckpointObjects(ctx, repo, ck)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	f, s := objects(first.Checkpoint), objects(second)
	if int64(res.Objects) != s {
		t.Fatalf("the second checkpoint's index counts %d objects, the compaction %d", s, res.Objects)
	}
	// The push holds a commit, a tree and a new file, maybe shared.txt,
	// and the extra files: more than s/2, at most s/2+5.
	extra := s/2 + 1
	if extra+4 > f/2-s {
		t.Fatalf("checkpoints of %d and %d objects leave no room for a roll-up of the second alone", f, s)
	}
	for i := range extra {
		os.WriteFile(filepath.Join(main.dir, fmt.Sprintf("extra%d.txt", i)), []byte(fmt.Sprintf("extra %d\n", i)), 0o644)
	}
	if err := main.push(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = comp.Compact(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	x, _ = log.Head(ctx, repo)
	if res.Full || res.Replaced != 1 || len(x.Checkpoints) != 2 || x.Checkpoints[0] != first.Checkpoint {
		t.Fatalf("third compaction: %+v, checkpoints %+v; want a roll-up of the second", res, x.Checkpoints)
	}
	noReadOf(first.Checkpoint)
	snap = materialize(t, newCache(t, log, repocache.Options{}))
	checkSnapshot(t, log, snap)
	if !hasObject(t, snap.Dir, junk.tip) {
		t.Fatal("a roll-up of a roll-up dropped an unreachable object")
	}

	// A full repack replaces them all and drops what no ref reaches.
	if err := main.push(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = comp.CompactFull(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	x, _ = log.Head(ctx, repo)
	if !res.Full || res.Replaced != 2 || len(x.Checkpoints) != 1 {
		t.Fatalf("full repack: %+v, checkpoints %+v", res, x.Checkpoints)
	}
	snap = materialize(t, newCache(t, log, repocache.Options{}))
	checkSnapshot(t, log, snap)
	if hasObject(t, snap.Dir, junk.tip) {
		t.Fatal("the full repack kept an unreachable object past KeepRecent")
	}
}

// randomish returns n bytes that do not compress or delta well.
func randomish(n, seed int) []byte {
	b := make([]byte, n)
	x := uint32(seed*2654435761 + 1)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// objectsOfLayer counts the objects of a layer's pack (its stored .idx).
func objectsOfLayer(t *testing.T, log *wal.Log, l wal.Layer) int {
	t.Helper()
	if l.Size == 0 {
		return 0
	}
	rc, _, err := log.OpenPackIndex(context.Background(), repo, l)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := gittest.Input(t, gittest.Env(t.TempDir()), "", rc, "show-index")
	return strings.Count(out, "\n")
}

// TestWarmCacheCatchesUpByCheckpoints: a warm node behind the last
// checkpoint but past the oldest installs only the checkpoints that end
// after it, without a rebuild, and then serves what a cold node serves;
// one behind the oldest checkpoint (a full repack landed) is rebuilt.
func TestWarmCacheCatchesUpByCheckpoints(t *testing.T) {
	ctx := context.Background()
	log := wal.New(memstore.New(), wal.Options{})
	comp := compact.New(log, newCache(t, log, repocache.Options{}), compact.Options{})
	var ev repocache.Event
	warm := newCache(t, log, repocache.Options{Observe: func(e repocache.Event) { ev = e }})
	main := newPusher(t, log, "main")
	seedBig(t, ctx, main)
	if _, err := comp.Compact(ctx, repo); err != nil {
		t.Fatal(err)
	}
	if err := main.push(ctx); err != nil {
		t.Fatal(err)
	}
	materialize(t, warm) // at seq 6, past the checkpoint at 5
	for range 2 {
		if err := main.push(ctx); err != nil {
			t.Fatal(err)
		}
	}
	res, err := comp.Compact(ctx, repo) // a roll-up through 8
	if err != nil || res.Full {
		t.Fatalf("%+v, %v; want a roll-up", res, err)
	}
	if err := main.push(ctx); err != nil {
		t.Fatal(err)
	}
	ws := materialize(t, warm)
	if ev.Rebuilt || !ev.Checkpoint || ev.Layers != 1 {
		t.Fatalf("the warm node did %+v; want the roll-up installed and one layer, no rebuild", ev)
	}
	checkSnapshot(t, log, ws)
	cs := materialize(t, newCache(t, log, repocache.Options{}))
	if a, b := reachable(t, cs.Dir), reachable(t, ws.Dir); a != b {
		t.Fatal("a clone from the cold node differs from one from the warm node")
	}
	// The warm node comes forward again from there.
	if err := main.push(ctx); err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, log, materialize(t, warm))

	// A full repack leaves the warm node behind the oldest checkpoint.
	if err := main.push(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := comp.CompactFull(ctx, repo); err != nil {
		t.Fatal(err)
	}
	// The warm node is at seq 10, the full repack through 11.
	checkSnapshot(t, log, materialize(t, warm))
	if !ev.Rebuilt {
		t.Fatalf("the warm node did %+v; want a rebuild behind the oldest checkpoint", ev)
	}
}

// coverageRec is a compact.Coverage whose watermark is fixed and which
// records the layers preserved; fail makes PreserveLayer fail.
type coverageRec struct {
	scanned   uint64
	fail      bool
	preserved []uint64
}

func (c *coverageRec) ScannedThrough(context.Context, string) (uint64, error) { return c.scanned, nil }

func (c *coverageRec) PreserveLayer(_ context.Context, _ string, seq uint64, _ wal.Layer, idx io.Reader, _ int64) error {
	if c.fail {
		return errors.New("injected: cannot preserve")
	}
	if idx != nil {
		if _, err := io.Copy(io.Discard, idx); err != nil {
			return err
		}
	}
	c.preserved = append(c.preserved, seq)
	return nil
}

// TestRollUpPreservesUnscanned: a roll-up preserves the object list of
// every layer above the scan watermark before its index write, as a full
// repack does, and folds nothing when it cannot
// (docs/adr/0033-scan-coverage.md).
func TestRollUpPreservesUnscanned(t *testing.T) {
	ctx := context.Background()
	log := wal.New(memstore.New(), wal.Options{})
	main := newPusher(t, log, "main")
	seedBig(t, ctx, main)
	cache := newCache(t, log, repocache.Options{})
	if _, err := compact.New(log, cache, compact.Options{}).Compact(ctx, repo); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := main.push(ctx); err != nil {
			t.Fatal(err)
		}
	}
	failing := &coverageRec{scanned: 6, fail: true}
	if _, err := compact.New(log, cache, compact.Options{Coverage: failing}).Compact(ctx, repo); err == nil {
		t.Fatal("a roll-up that could not preserve an object list landed")
	}
	if x, _ := log.Head(ctx, repo); x.CompactedThroughSeq != 5 {
		t.Fatalf("folded without the lists: %+v", x)
	}
	cov := &coverageRec{scanned: 6}
	res, err := compact.New(log, cache, compact.Options{Coverage: cov}).Compact(ctx, repo)
	if err != nil || res.Full {
		t.Fatalf("%+v, %v; want a roll-up", res, err)
	}
	if !slices.Equal(cov.preserved, []uint64{7, 8}) {
		t.Fatalf("preserved %v, want [7 8]", cov.preserved)
	}
}

// TestCompactionYieldsToServing: with a background runner, a compaction
// starts no git process while a git request is served, and completes
// once it is done (docs/adr/0051-geometric-checkpoints.md).
func TestCompactionYieldsToServing(t *testing.T) {
	ctx := context.Background()
	log := wal.New(memstore.New(), wal.Options{})
	main := newPusher(t, log, "main")
	main.history(ctx, 3, nil)
	cache := newCache(t, log, repocache.Options{})
	bg := gitexec.NewBackground(gitexec.BackgroundOptions{MaxPause: time.Hour})
	comp := compact.New(log, cache, compact.Options{Git: bg.Runner(cache.Git())})
	served := bg.Serving()
	done := make(chan error, 1)
	go func() {
		_, err := comp.Compact(ctx, repo)
		done <- err
	}()
	for bg.Stats().Pausing == 0 {
		select {
		case err := <-done:
			t.Fatalf("the compaction ended while a request was served (%v)", err)
		case <-time.After(time.Millisecond): // polling for the pause, not a timed assertion
		}
	}
	served()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if x, _ := log.Head(ctx, repo); x.CompactedThroughSeq != 3 {
		t.Fatalf("not compacted: %+v", x)
	}
}

// TestRollUpOfNothing: a roll-up of layers without objects (pushes that
// only delete refs) writes an empty checkpoint, which nodes install.
func TestRollUpOfNothing(t *testing.T) {
	ctx := context.Background()
	log := wal.New(memstore.New(), wal.Options{})
	main := newPusher(t, log, "main")
	seedBig(t, ctx, main)
	side := newPusher(t, log, "side")
	if err := side.push(ctx); err != nil {
		t.Fatal(err)
	}
	comp := compact.New(log, newCache(t, log, repocache.Options{}), compact.Options{})
	if _, err := comp.Compact(ctx, repo); err != nil {
		t.Fatal(err)
	}
	if _, err := log.Commit(ctx, repo, wal.Push{Transitions: []wal.Transition{{Ref: "refs/heads/side", Old: side.tip, New: wal.ZeroID}}, Pack: bytes.NewReader(nil)}); err != nil {
		t.Fatal(err)
	}
	res, err := comp.Compact(ctx, repo)
	if err != nil || res.Full || res.Objects != 0 {
		t.Fatalf("%+v, %v; want a roll-up of no objects", res, err)
	}
	checkSnapshot(t, log, materialize(t, newCache(t, log, repocache.Options{})))
}
