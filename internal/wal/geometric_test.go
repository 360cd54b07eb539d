package wal_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// rollUp is ckPack for a checkpoint that keeps at's first keep
// checkpoints.
func rollUp(at *wal.Index, keep int, body string) wal.CheckpointPack {
	p := ckPack(at, body)
	p.Keep = keep
	return p
}

// seqs lists the seqs of x's checkpoints.
func seqs(x *wal.Index) []uint64 {
	var out []uint64
	for _, c := range x.Checkpoints {
		out = append(out, c.Seq)
	}
	return out
}

// TestCompactRollsUp: a compaction that keeps the first checkpoints
// appends one after them and replaces the rest; the list reads back, the
// seq arithmetic holds, pushes carry it forward, and every checkpoint of
// the list is referenced (docs/adr/0051-geometric-checkpoints.md).
func TestCompactRollsUp(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := newLog(s)
	step := func(n, keep int, body string, want []uint64, replaced int) *wal.Index {
		t.Helper()
		at := commitN(t, l, "r", n)
		res, err := l.Compact(ctx, "r", rollUp(at, keep, body))
		if err != nil {
			t.Fatal(err)
		}
		x, err := l.Head(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(seqs(x), want) || res.Replaced != replaced || res.Folded != len(at.Layers) || len(x.Layers) != 0 || x.CompactedThroughSeq != x.Seq {
			t.Fatalf("after rolling up %d layers keeping %d: checkpoints at %v (replaced %d, folded %d), want %v (replaced %d)", n, keep, seqs(x), res.Replaced, res.Folded, want, replaced)
		}
		// Newest covers what it rolled up: at least the newest layer's time.
		if want := int64(at.Layers[len(at.Layers)-1].ULID.Time()); res.Checkpoint.Newest < want {
			t.Fatalf("newest %d, before the newest folded layer's %d", res.Checkpoint.Newest, want)
		}
		return x
	}
	step(4, 0, "a", []uint64{4}, 0)
	step(2, 1, "b", []uint64{4, 6}, 0)
	x := step(3, 2, "c", []uint64{4, 6, 9}, 0)
	keys := x.CheckpointKeys("r")
	if len(keys) != 6 {
		t.Fatalf("CheckpointKeys = %v", keys)
	}
	for _, k := range keys {
		if _, _, err := s.Get(ctx, k); err != nil {
			t.Fatalf("checkpoint object %s: %v", k, err)
		}
	}
	// Pushes keep the list.
	after := commitN(t, l, "r", 2)
	if !slices.Equal(after.Checkpoints, x.Checkpoints) || after.CheckpointStart(1) != 5 || after.CheckpointStart(2) != 7 {
		t.Fatalf("after 2 pushes: %+v", after)
	}
	// Rolling up the two newest, and then everything.
	step(1, 1, "d", []uint64{4, 12}, 2)
	step(1, 0, "e", []uint64{13}, 2)
}

// TestCompactRollUpRaces: a roll-up whose kept checkpoints were replaced
// meanwhile (a full repack landed) writes nothing and reports
// ErrAlreadyCompacted; one that raced a smaller roll-up over part of its
// range lands and replaces it.
func TestCompactRollUpRaces(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := newLog(s)
	at0 := commitN(t, l, "r", 3)
	if _, err := l.Compact(ctx, "r", ckPack(at0, "a")); err != nil {
		t.Fatal(err)
	}
	mid := commitN(t, l, "r", 2) // seq 5
	at := commitN(t, l, "r", 2)  // seq 7: this compaction's snapshot

	// A smaller roll-up (through seq 5) lands first.
	if _, err := l.Compact(ctx, "r", rollUp(mid, 1, "small")); err != nil {
		t.Fatal(err)
	}
	res, err := l.Compact(ctx, "r", rollUp(at, 1, "big"))
	if err != nil {
		t.Fatalf("roll-up over a smaller one: %v", err)
	}
	x, _ := l.Head(ctx, "r")
	if !slices.Equal(seqs(x), []uint64{3, 7}) || res.Replaced != 1 || x.Checkpoints[0] != at0Checkpoint(t, l, at0) {
		t.Fatalf("checkpoints %v (replaced %d)", seqs(x), res.Replaced)
	}

	// A full repack lands while a roll-up that keeps checkpoint 3 is
	// built: the roll-up must not land on top of it.
	at2 := commitN(t, l, "r", 2) // seq 9, checkpoints [3 7]
	full := commitN(t, l, "r", 1)
	if _, err := l.Compact(ctx, "r", ckPack(full, "full")); err != nil {
		t.Fatal(err)
	}
	before := indexSize(t, s, "r")
	if _, err := l.Compact(ctx, "r", rollUp(at2, 2, "late")); !errors.Is(err, wal.ErrAlreadyCompacted) || indexSize(t, s, "r") != before {
		t.Fatalf("err = %v, want ErrAlreadyCompacted", err)
	}
	late := commitN(t, l, "r", 1)
	if _, err := l.Compact(ctx, "r", rollUp(withCheckpoints(late, at2.Checkpoints), 1, "stale keep")); !errors.Is(err, wal.ErrAlreadyCompacted) {
		t.Fatalf("keeping a replaced checkpoint: err = %v, want ErrAlreadyCompacted", err)
	}
	if x, _ := l.Head(ctx, "r"); !slices.Equal(seqs(x), []uint64{10}) || len(x.Layers) != 1 {
		t.Fatalf("after the refused roll-ups: checkpoints %v, %d layers", seqs(x), len(x.Layers))
	}
}

// at0Checkpoint is the checkpoint a full compaction of at0 wrote ("a").
func at0Checkpoint(t *testing.T, l *wal.Log, at0 *wal.Index) wal.Checkpoint {
	t.Helper()
	p := ckPack(at0, "a")
	return wal.Checkpoint{Seq: at0.Seq, SHA256: p.SHA256, Size: p.Size, Newest: int64(at0.Layers[len(at0.Layers)-1].ULID.Time())}
}

// withCheckpoints is x with another checkpoint list (a snapshot as a
// compactor that read an older index would hold it).
func withCheckpoints(x *wal.Index, cks []wal.Checkpoint) *wal.Index {
	y := *x
	y.Checkpoints = cks
	return &y
}

// TestCompactRefusesBadKeep: a keep beyond the snapshot's checkpoints, or
// one that would make the list too long, is refused before anything is
// stored.
func TestCompactRefusesBadKeep(t *testing.T) {
	ctx := context.Background()
	l := newLog(memstore.New())
	at := commitN(t, l, "r", 2)
	for _, keep := range []int{-1, 1} {
		if _, err := l.Compact(ctx, "r", rollUp(at, keep, "x")); !errors.Is(err, wal.ErrInvalid) {
			t.Fatalf("keep %d: err = %v, want ErrInvalid", keep, err)
		}
	}
	long := *at
	for i := range wal.MaxCheckpoints {
		long.Checkpoints = append(long.Checkpoints, wal.Checkpoint{Seq: uint64(i + 1)})
	}
	if _, err := l.Compact(ctx, "r", rollUp(&long, wal.MaxCheckpoints, "x")); !errors.Is(err, wal.ErrInvalid) {
		t.Fatalf("a list past MaxCheckpoints: err = %v, want ErrInvalid", err)
	}
	if x, _ := l.Head(ctx, "r"); x.CompactedThroughSeq != 0 {
		t.Fatalf("index compacted: %+v", x)
	}
}

// TestCompactRollUpFaults injects every outcome into each store call of
// a roll-up (its pack, its .idx, the index read and the index write):
// whatever Compact reports, the index either keeps its old checkpoints
// and layers or holds the new list, every checkpoint it names exists, and
// a second run completes. "Landed, then an error" on the index write is
// the case the settle logic must recognise by the list.
func TestCompactRollUpFaults(t *testing.T) {
	ctx := context.Background()
	steps := []struct {
		op  faultstore.Op
		key string
	}{
		{faultstore.OpPut, ".pack"},
		{faultstore.OpPut, ".idx"},
		{faultstore.OpGet, "/index"},
		{faultstore.OpPutIfMatch, "/index"},
	}
	for _, step := range steps {
		for _, o := range faultstore.Faults() {
			t.Run(fmt.Sprintf("%s%s/%s", step.op, step.key, o), func(t *testing.T) {
				inner := memstore.New()
				fs := faultstore.New(inner)
				rival := newLog(inner)
				at0 := commitN(t, rival, "r", 3)
				if _, err := rival.Compact(ctx, "r", ckPack(at0, "a")); err != nil {
					t.Fatal(err)
				}
				at := commitN(t, rival, "r", 2)
				fired := false
				fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
					if !fired && c.Op == step.op && strings.HasSuffix(c.Key, step.key) {
						fired = true
						return faultstore.Fault{Outcome: o}
					}
					return faultstore.Fault{}
				})
				l := newLog(fs)
				_, err := l.Compact(ctx, "r", rollUp(at, 1, "b"))
				x, _ := rival.Head(ctx, "r")
				switch {
				case slices.Equal(seqs(x), []uint64{3}):
					if err == nil {
						t.Fatal("Compact reported success, the index is not compacted")
					}
					if len(x.Layers) != 2 {
						t.Fatalf("uncompacted index lost layers: %+v", x)
					}
				case slices.Equal(seqs(x), []uint64{3, 5}):
					if err != nil && !errors.Is(err, wal.ErrOutcomeUnknown) {
						t.Fatalf("compacted, but Compact reported %v", err)
					}
				default:
					t.Fatalf("index %+v", x)
				}
				for _, c := range x.Checkpoints {
					if _, _, gerr := inner.Get(ctx, wal.CheckpointKey("r", c)); gerr != nil {
						t.Fatalf("the index names a missing checkpoint: %v", gerr)
					}
				}
				fs.SetPlan(nil)
				if _, err := l.Compact(ctx, "r", rollUp(at, 1, "b")); err != nil {
					t.Fatalf("second run: %v", err)
				}
				if x, _ := rival.Head(ctx, "r"); !slices.Equal(seqs(x), []uint64{3, 5}) || len(x.Layers) != 0 {
					t.Fatalf("after the second run: %+v", x)
				}
			})
		}
	}
}

// TestForkCopiesEveryCheckpoint: a fork of a log with a list of
// checkpoints names only objects it has.
func TestForkCopiesEveryCheckpoint(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := newLog(s)
	at := commitN(t, l, "src", 3)
	if _, err := l.Compact(ctx, "src", ckPack(at, "a")); err != nil {
		t.Fatal(err)
	}
	at = commitN(t, l, "src", 2)
	if _, err := l.Compact(ctx, "src", rollUp(at, 1, "b")); err != nil {
		t.Fatal(err)
	}
	commitN(t, l, "src", 1)
	if err := l.Fork(ctx, "src", "dst"); err != nil {
		t.Fatal(err)
	}
	x, err := l.Head(ctx, "dst")
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Checkpoints) != 2 {
		t.Fatalf("fork has checkpoints %v", seqs(x))
	}
	for _, k := range x.ReferencedKeys("dst") {
		if strings.HasSuffix(k, ".idx") && strings.Contains(k, "/entries/") {
			continue // entries pushed without a stored index
		}
		if _, _, err := s.Get(ctx, k); err != nil {
			t.Fatalf("fork lacks %s: %v", k, err)
		}
	}
}
