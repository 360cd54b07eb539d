package compact_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
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

// TestCompactFaults fails each step of a compaction with each outcome
// faultstore knows (lost, landed then an error, refused): reading the
// head, reading the layers to build, storing the checkpoint and its
// index, and the index CAS. Whatever the compactor reports, the
// repository stays consistent (a cold node serves the right refs and
// passes fsck), and the next run completes.
func TestCompactFaults(t *testing.T) {
	steps := []struct {
		op     faultstore.Op
		suffix string
		n      int // which matching call fails
	}{
		{faultstore.OpGet, "/index", 1},
		{faultstore.OpGet, ".idx", 1},
		{faultstore.OpGetRange, ".pack", 1},
		{faultstore.OpPut, ".pack", 1},
		{faultstore.OpPut, ".idx", 1},
		{faultstore.OpGet, "/index", 2},
		{faultstore.OpPutIfMatch, "/index", 1},
	}
	for _, step := range steps {
		for _, o := range faultstore.Faults() {
			t.Run(fmt.Sprintf("%s%s#%d/%s", step.op, step.suffix, step.n, o), func(t *testing.T) {
				ctx := context.Background()
				inner := memstore.New()
				fs := faultstore.New(inner)
				log := wal.New(inner, wal.Options{})
				main := newPusher(t, log, "main")
				main.history(ctx, 3, nil)

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
				_, err := comp.Compact(ctx, repo)
				fs.SetPlan(nil)
				if !fired {
					t.Fatalf("the fault never fired (compaction: %v)", err)
				}
				x, err2 := log.Head(ctx, repo)
				if err2 != nil {
					t.Fatal(err2)
				}
				if err == nil && x.CompactedThroughSeq != 3 {
					t.Fatalf("Compact succeeded, the index is %+v", x)
				}
				if x.CompactedThroughSeq == 0 && len(x.Layers) != 3 {
					t.Fatalf("uncompacted index lost layers: %+v", x)
				}
				checkSnapshot(t, log, materialize(t, newCache(t, log, repocache.Options{})))

				// The next run completes.
				if _, err := comp.Compact(ctx, repo); err != nil && !errors.Is(err, compact.ErrNothingToCompact) {
					t.Fatalf("next run: %v", err)
				}
				if x, _ := log.Head(ctx, repo); x.CompactedThroughSeq != 3 || len(x.Layers) != 0 {
					t.Fatalf("after the next run: %+v", x)
				}
				if err := main.push(ctx); err != nil {
					t.Fatal(err)
				}
				checkSnapshot(t, log, materialize(t, newCache(t, log, repocache.Options{})))
			})
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
