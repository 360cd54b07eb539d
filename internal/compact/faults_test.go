package compact_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/ghost-scm/ghost/internal/compact"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/objstore/s3store"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// seedRollUp lands a log whose next compaction is a geometric roll-up
// that keeps its first checkpoint (51 objects) and rolls up its second
// (8) with 3 layers (12) (docs/adr/0051-geometric-checkpoints.md,
// docs/adr/0121-checkpoints-weighed-by-objects.md), and returns the log's
// seq.
func seedRollUp(t testing.TB, ctx context.Context, log *wal.Log, main *pusher) uint64 {
	t.Helper()
	main.history(ctx, 12, nil)
	os.WriteFile(filepath.Join(main.dir, "big.bin"), randomish(64<<10, 7), 0o644)
	if err := main.push(ctx); err != nil {
		t.Fatal(err)
	}
	comp := compact.New(log, newCache(t, log, repocache.Options{}), compact.Options{})
	if res, err := comp.Compact(ctx, repo); err != nil || !res.Full {
		t.Fatalf("%+v, %v", res, err)
	}
	for range 2 {
		if err := main.push(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := comp.Compact(ctx, repo); err != nil || res.Full {
		t.Fatalf("%+v, %v; want a roll-up", res, err)
	}
	for range 3 {
		if err := main.push(ctx); err != nil {
			t.Fatal(err)
		}
	}
	x, err := log.Head(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Checkpoints) != 2 {
		t.Fatalf("checkpoints %+v after a full repack and a roll-up", x.Checkpoints)
	}
	return x.Seq
}

// storeCopy returns a new memstore holding every object of s.
func storeCopy(t testing.TB, s objstore.Store) *memstore.Store {
	t.Helper()
	ctx := context.Background()
	out := memstore.New()
	err := objstore.Walk(ctx, s, "", func(o objstore.Info) error {
		b, _, err := objstore.ReadAll(ctx, s, o.Key, 1<<30)
		if err == nil {
			_, err = out.Put(ctx, o.Key, bytes.NewReader(b), int64(len(b)))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCompactFaults fails each step of a compaction with each outcome
// faultstore knows (lost, landed then an error, refused): reading the
// head, reading the layers and the checkpoints to build, storing the
// checkpoint and its index, and the index CAS; for a log's first
// compaction (a full repack) and for a geometric roll-up that replaces a
// checkpoint. Whatever the compactor reports, the repository stays
// consistent (a cold node serves the right refs and passes fsck), and
// the next run completes.
func TestCompactFaults(t *testing.T) {
	type step struct {
		op     faultstore.Op
		suffix string
		n      int // which matching call fails
	}
	kinds := []struct {
		name  string
		steps []step
		seed  func(ctx context.Context, log *wal.Log) uint64
	}{
		{"first", []step{
			{faultstore.OpGet, "/index", 1},
			{faultstore.OpGet, ".idx", 1},
			{faultstore.OpGetRange, ".pack", 1},
			{faultstore.OpPut, ".pack", 1},
			{faultstore.OpPut, ".idx", 1},
			{faultstore.OpGet, "/index", 2},
			{faultstore.OpPutIfMatch, "/index", 1},
		}, func(ctx context.Context, log *wal.Log) uint64 {
			newPusher(t, log, "main").history(ctx, 3, nil)
			return 3
		}},
		// A roll-up reads the checkpoint it rolls up whole, and its index
		// write replaces a checkpoint: the paths a first compaction lacks.
		{"rollup", []step{
			{faultstore.OpGet, ".pack", 1},
			{faultstore.OpPutIfMatch, "/index", 1},
		}, func(ctx context.Context, log *wal.Log) uint64 {
			return seedRollUp(t, ctx, log, newPusher(t, log, "main"))
		}},
	}
	for _, kind := range kinds {
		seeded := memstore.New()
		head := kind.seed(context.Background(), wal.New(seeded, wal.Options{}))
		for _, step := range kind.steps {
			for _, o := range faultstore.Faults() {
				t.Run(fmt.Sprintf("%s/%s%s#%d/%s", kind.name, step.op, step.suffix, step.n, o), func(t *testing.T) {
					ctx := context.Background()
					inner := storeCopy(t, seeded)
					fs := faultstore.New(inner)
					log := wal.New(inner, wal.Options{})
					before, err := log.Head(ctx, repo)
					if err != nil {
						t.Fatal(err)
					}

					faulty := wal.New(fs, wal.Options{})
					comp := compact.New(faulty, newCache(t, faulty, repocache.Options{}), compact.Options{})
					seen, fired := 0, false
					fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
						if fired || c.Op != step.op || !strings.HasSuffix(c.Key, step.suffix) {
							return faultstore.Fault{}
						}
						if seen++; seen == step.n {
							fired = true
							return faultstore.Fault{Outcome: o}
						}
						return faultstore.Fault{}
					})
					_, err = comp.Compact(ctx, repo)
					fs.SetPlan(nil)
					if !fired {
						t.Fatalf("the fault never fired (compaction: %v)", err)
					}
					x, err2 := log.Head(ctx, repo)
					if err2 != nil {
						t.Fatal(err2)
					}
					if err == nil && x.CompactedThroughSeq != head {
						t.Fatalf("Compact succeeded, the index is %+v", x)
					}
					if x.CompactedThroughSeq != head && (!slices.Equal(x.Checkpoints, before.Checkpoints) || len(x.Layers) != len(before.Layers)) {
						t.Fatalf("uncompacted index changed: %+v", x)
					}
					checkSnapshot(t, log, materialize(t, newCache(t, log, repocache.Options{})))

					// The next run completes, keeping what a roll-up keeps.
					if _, err := comp.Compact(ctx, repo); err != nil && !errors.Is(err, compact.ErrNothingToCompact) {
						t.Fatalf("next run: %v", err)
					}
					x, _ = log.Head(ctx, repo)
					if x.CompactedThroughSeq != head || len(x.Layers) != 0 || len(x.Checkpoints) != max(1, len(before.Checkpoints)) {
						t.Fatalf("after the next run: %+v", x)
					}
					if len(before.Checkpoints) > 1 && x.Checkpoints[0] != before.Checkpoints[0] {
						t.Fatalf("the roll-up replaced the checkpoint it keeps: %+v", x.Checkpoints)
					}
					if err := newPusher(t, log, "after").push(ctx); err != nil {
						t.Fatal(err)
					}
					checkSnapshot(t, log, materialize(t, newCache(t, log, repocache.Options{})))
				})
			}
		}
	}
}

// TestCompactS3 runs compaction against the S3 backend (gofakes3 on
// loopback): pushes, a compaction, more pushes, a second compaction, and a
// cold node after each.
func TestCompactS3(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(srv.Close)
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(srv.URL); o.UsePathStyle = true })
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("ghost")}); err != nil {
		t.Fatal(err)
	}
	store, err := s3store.New(ctx, s3store.Config{Endpoint: srv.URL, Bucket: "ghost", UsePathStyle: true, AWSConfig: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	log := wal.New(store, wal.Options{})
	comp := compact.New(log, newCache(t, log, repocache.Options{}), compact.Options{})
	main := newPusher(t, log, "main")
	main.history(ctx, 20, nil)
	for round := range 2 {
		res, err := comp.Compact(ctx, repo)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for _, k := range []string{wal.CheckpointKey(repo, res.Checkpoint), wal.CheckpointIndexKey(repo, res.Checkpoint)} {
			if _, _, err := objstore.ReadAll(ctx, store, k, 1<<30); err != nil {
				t.Fatalf("checkpoint object %s: %v", k, err)
			}
		}
		checkSnapshot(t, log, materialize(t, newCache(t, log, repocache.Options{})))
		for range 3 {
			if err := main.push(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkSnapshot(t, log, materialize(t, newCache(t, log, repocache.Options{})))
}
