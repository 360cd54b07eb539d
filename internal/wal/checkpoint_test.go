package wal_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// commitN lands n pushes that move refs/heads/main forward from its
// current id, and returns the index after them.
func commitN(t *testing.T, l *wal.Log, repo string, n int) *wal.Index {
	t.Helper()
	ctx := context.Background()
	for range n {
		x, err := l.Head(ctx, repo)
		if err != nil {
			t.Fatal(err)
		}
		old := x.Ref("refs/heads/main")
		if old == "" {
			old = wal.ZeroID
		}
		if _, err := l.Commit(ctx, repo, push("refs/heads/main", old, oid(int(x.Seq)+1), fmt.Sprintf("pack %d", x.Seq))); err != nil {
			t.Fatal(err)
		}
	}
	x, err := l.Head(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// ckPack is a checkpoint "pack" for the log's purposes: the log treats it
// as opaque bytes named by their sha256.
func ckPack(at *wal.Index, body string) wal.CheckpointPack {
	return wal.CheckpointPack{
		At: at, Pack: strings.NewReader(body), Size: int64(len(body)), SHA256: sha256.Sum256([]byte(body)),
		PackIndex: strings.NewReader("idx " + body), PackIndexSize: int64(len("idx " + body)),
	}
}

func indexSize(t *testing.T, s objstore.Store, repo string) int64 {
	t.Helper()
	_, info, err := objstore.ReadAll(context.Background(), s, wal.IndexKey(repo), wal.MaxIndexSize)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size
}

// TestCompactFoldsLayers: the checkpoint replaces the layers it covers,
// later pushes keep it (the commit path must carry it forward), and the
// index is as small after many pushes as after a few (issue 12 §3).
func TestCompactFoldsLayers(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := newLog(s)
	sizes := map[int]int64{}
	for _, n := range []int{3, 60} {
		repo := fmt.Sprintf("r%d", n)
		at := commitN(t, l, repo, n)
		res, err := l.Compact(ctx, repo, ckPack(at, "checkpoint"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Folded != n || res.Seq != uint64(n) {
			t.Fatalf("folded %d at seq %d, want %d", res.Folded, res.Seq, n)
		}
		if want := int64(at.Layers[len(at.Layers)-1].ULID.Time()); res.Checkpoint.Newest != want {
			t.Fatalf("checkpoint's newest layer time %d, want %d", res.Checkpoint.Newest, want)
		}
		x := commitN(t, l, repo, 2)
		if x.CompactedThroughSeq != uint64(n) || len(x.Checkpoints) != 1 || x.Checkpoints[0] != res.Checkpoint || len(x.Layers) != 2 || x.Seq != uint64(n+2) {
			t.Fatalf("after compaction and 2 pushes: %+v", x)
		}
		if x.Ref("refs/heads/main") != oid(n+2) {
			t.Fatalf("main = %s", x.Ref("refs/heads/main"))
		}
		for _, k := range x.CheckpointKeys(repo) {
			if _, _, err := s.Get(ctx, k); err != nil {
				t.Fatalf("checkpoint object %s: %v", k, err)
			}
		}
		rc, err := l.OpenCheckpoint(ctx, repo, x.Checkpoints[0])
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if _, err := fmt.Fprint(&b, readAll(t, rc)); err != nil || b.String() != "checkpoint" {
			t.Fatalf("checkpoint reads %q, %v", b.String(), err)
		}
		sizes[n] = indexSize(t, s, repo)
	}
	if sizes[3] != sizes[60] {
		t.Fatalf("index after 3 pushes is %d bytes, after 60 %d: not bounded", sizes[3], sizes[60])
	}
}

func readAll(t *testing.T, rc interface {
	Read([]byte) (int, error)
	Close() error
}) string {
	t.Helper()
	defer rc.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := rc.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("read: %v", err)
			}
			return b.String()
		}
	}
}

// TestCompactKeepsLayersPushedMeanwhile: pushes landing between the
// snapshot and the CAS stay as layers, and the CAS retries over them.
func TestCompactKeepsLayersPushedMeanwhile(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	fs := faultstore.New(inner)
	rival := newLog(inner)
	at := commitN(t, rival, "r", 5)
	pushes := 0
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op.Conditional() && pushes < 3 {
			pushes++
			commitN(t, rival, "r", 1) // lands before this CAS: it loses
		}
		return faultstore.Fault{}
	})
	res, err := newLog(fs).Compact(ctx, "r", ckPack(at, "ck"))
	if err != nil {
		t.Fatal(err)
	}
	x, _ := rival.Head(ctx, "r")
	if res.Attempts < 2 || x.Seq != 8 || x.CompactedThroughSeq != 5 || len(x.Layers) != 3 || x.Ref("refs/heads/main") != oid(8) {
		t.Fatalf("attempts %d, index %+v", res.Attempts, x)
	}
}

// TestCompactRacing: an identical checkpoint lands as if it were ours; a
// different one for a seq already covered loses harmlessly.
func TestCompactRacing(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := newLog(s)
	at := commitN(t, l, "r", 4)
	if _, err := l.Compact(ctx, "r", ckPack(at, "same")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Compact(ctx, "r", ckPack(at, "same")); err != nil {
		t.Fatalf("identical checkpoint: %v", err)
	}
	before := indexSize(t, s, "r")
	if _, err := l.Compact(ctx, "r", ckPack(at, "other bytes")); !errors.Is(err, wal.ErrAlreadyCompacted) {
		t.Fatalf("err = %v, want ErrAlreadyCompacted", err)
	}
	x, _ := l.Head(ctx, "r")
	if x.LastCheckpoint().SHA256 != sha256.Sum256([]byte("same")) || indexSize(t, s, "r") != before {
		t.Fatalf("the losing compaction changed the index: %+v", x)
	}
	// An older snapshot never replaces a newer checkpoint.
	at2 := commitN(t, l, "r", 3)
	if _, err := l.Compact(ctx, "r", ckPack(at2, "newer")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Compact(ctx, "r", ckPack(at, "older")); !errors.Is(err, wal.ErrAlreadyCompacted) {
		t.Fatalf("err = %v, want ErrAlreadyCompacted", err)
	}
}

// TestCompactRefusesChangedPack: bytes that do not match the announced
// sha256 never become a checkpoint.
func TestCompactRefusesChangedPack(t *testing.T) {
	ctx := context.Background()
	l := newLog(memstore.New())
	at := commitN(t, l, "r", 2)
	p := ckPack(at, "abc")
	p.SHA256[0] ^= 1
	if _, err := l.Compact(ctx, "r", p); err == nil {
		t.Fatal("a pack whose sha256 differs was accepted")
	}
	if x, _ := l.Head(ctx, "r"); x.CompactedThroughSeq != 0 {
		t.Fatalf("index compacted: %+v", x)
	}
}

// TestCompactFaults injects every outcome into each store call Compact
// makes. Whatever it reports, the index is either untouched or compacted
// with a checkpoint that exists, and a second run completes.
func TestCompactFaults(t *testing.T) {
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
				at := commitN(t, rival, "r", 4)
				fired := false
				fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
					if !fired && c.Op == step.op && strings.HasSuffix(c.Key, step.key) {
						fired = true
						return faultstore.Fault{Outcome: o}
					}
					return faultstore.Fault{}
				})
				l := newLog(fs)
				_, err := l.Compact(ctx, "r", ckPack(at, "ck"))
				x, _ := rival.Head(ctx, "r")
				switch {
				case x.CompactedThroughSeq == 0:
					if err == nil {
						t.Fatal("Compact reported success, the index is not compacted")
					}
					if len(x.Layers) != 4 {
						t.Fatalf("uncompacted index lost layers: %+v", x)
					}
				case x.CompactedThroughSeq == 4:
					if err != nil && !errors.Is(err, wal.ErrOutcomeUnknown) {
						t.Fatalf("compacted, but Compact reported %v", err)
					}
					if _, _, gerr := inner.Get(ctx, wal.CheckpointKey("r", *x.LastCheckpoint())); gerr != nil {
						t.Fatalf("the index names a missing checkpoint: %v", gerr)
					}
				default:
					t.Fatalf("index %+v", x)
				}
				if x.Ref("refs/heads/main") != oid(4) {
					t.Fatalf("refs changed: %+v", x.Refs)
				}
				fs.SetPlan(nil)
				if _, err := l.Compact(ctx, "r", ckPack(at, "ck")); err != nil {
					t.Fatalf("second run: %v", err)
				}
				if x, _ := rival.Head(ctx, "r"); x.CompactedThroughSeq != 4 || len(x.Layers) != 0 {
					t.Fatalf("after the second run: %+v", x)
				}
			})
		}
	}
}

// TestCommitPendingFoldedIsUnknown: a push whose index write landed
// unseen, then folded into a checkpoint before the pusher read the index
// again, cannot be told apart from someone else's layer. Commit must say
// the outcome is unknown (and keep its entry), never report a
// non-fast-forward for a push that in fact landed.
func TestCommitPendingFoldedIsUnknown(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	fs := faultstore.New(inner)
	rival := newLog(inner)
	commitN(t, rival, "r", 2)
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		switch {
		case c.Op == faultstore.OpPutIfMatch && c.N == 1:
			return faultstore.Fault{Outcome: faultstore.LandedThenError}
		case c.Op == faultstore.OpGet && c.N == 2:
			at, err := rival.Head(ctx, "r")
			if err == nil {
				_, err = rival.Compact(ctx, "r", ckPack(at, "ck"))
			}
			if err != nil {
				t.Errorf("compact: %v", err)
			}
		}
		return faultstore.Fault{}
	})
	res, err := newLog(fs).Commit(ctx, "r", push("refs/heads/main", oid(2), oid(99), "mine"))
	if !errors.Is(err, wal.ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
	}
	if x, _ := rival.Head(ctx, "r"); x.Ref("refs/heads/main") != oid(99) || x.CompactedThroughSeq != 3 {
		t.Fatalf("index %+v", x)
	}
	if _, _, err := inner.Get(ctx, wal.EntryKey("r", res.ULID)); err != nil {
		t.Fatalf("the entry of a push with an unknown outcome was deleted: %v", err)
	}
}

// TestForkAndDeleteCompacted: a fork copies the checkpoint; a delete
// purges checkpoints with the entries.
func TestForkAndDeleteCompacted(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := newLog(s)
	at := commitN(t, l, "src", 3)
	if _, err := l.Compact(ctx, "src", ckPack(at, "ck")); err != nil {
		t.Fatal(err)
	}
	commitN(t, l, "src", 1)
	if err := l.Fork(ctx, "src", "dst"); err != nil {
		t.Fatal(err)
	}
	x, _ := l.Head(ctx, "dst")
	for _, k := range x.CheckpointKeys("dst") {
		if _, _, err := s.Get(ctx, k); err != nil {
			t.Fatalf("fork lacks %s: %v", k, err)
		}
	}
	if err := l.Delete(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	left := 0
	if err := objstore.Walk(ctx, s, "repos/src/", func(o objstore.Info) error {
		if o.Key != wal.IndexKey("src") {
			left++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d objects left after delete", left)
	}
}

// TestCompactRefusesAnotherLog: a checkpoint built from an index whose
// layers are not the log's is refused as corrupt, and a snapshot with no
// layer to fold is already compacted; the index is untouched either way.
func TestCompactRefusesAnotherLog(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := newLog(s)
	other := commitN(t, l, "other", 3)
	commitN(t, l, "r", 3)
	before := indexSize(t, s, "r")
	if _, err := l.Compact(ctx, "r", ckPack(other, "ck")); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
	x, _ := l.Head(ctx, "r")
	if x.CompactedThroughSeq != 0 || indexSize(t, s, "r") != before {
		t.Fatalf("index changed: %+v", x)
	}
	if _, err := l.Compact(ctx, "r", ckPack(&wal.Index{}, "ck")); !errors.Is(err, wal.ErrAlreadyCompacted) {
		t.Fatalf("empty snapshot: err = %v, want ErrAlreadyCompacted", err)
	}
}

// slowStore makes every PUT of a checkpoint's .idx take d on the log's
// clock.
type slowStore struct {
	objstore.Store
	now *time.Time
	d   time.Duration
}

func (s *slowStore) Put(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	info, err := s.Store.Put(ctx, key, r, size)
	if strings.Contains(key, "/checkpoints/") && strings.HasSuffix(key, ".idx") {
		*s.now = s.now.Add(s.d)
	}
	return info, err
}

// TestCompactGivesUpOnStaleCheckpoint: a compaction that would send its
// index write more than MaxCheckpointWait after its pack was stored
// writes nothing, since GC may have taken the unreferenced checkpoint by
// then (docs/adr/0040-garbage-collection.md).
func TestCompactGivesUpOnStaleCheckpoint(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		d    time.Duration
		fail bool
	}{{wal.MaxCheckpointWait - time.Second, false}, {wal.MaxCheckpointWait + time.Second, true}} {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		s := &slowStore{Store: memstore.New(), now: &now, d: tc.d}
		l := wal.New(s, wal.Options{Now: func() time.Time { return now }})
		at := commitN(t, l, "r1", 2)
		_, err := l.Compact(ctx, "r1", ckPack(at, "checkpoint"))
		x, herr := l.Head(ctx, "r1")
		if herr != nil {
			t.Fatal(herr)
		}
		switch {
		case tc.fail && (!errors.Is(err, wal.ErrCheckpointStale) || len(x.Checkpoints) != 0):
			t.Fatalf("after %v: %v, checkpoints %v", tc.d, err, x.Checkpoints)
		case !tc.fail && (err != nil || len(x.Checkpoints) != 1):
			t.Fatalf("after %v: %v, checkpoints %v", tc.d, err, x.Checkpoints)
		}
	}
}
