package compact_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/compact"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// BenchmarkCompaction measures, for a log of GHOST_BENCH_PUSHES pushes of
// one commit each (default 2,000, issue 12's number), the index size, a
// cold node's materialization and its pack count, before and after one
// compaction, and the compaction itself. It is a measurement, not a
// regression test: run it with
//
//	GHOST_BENCH_PUSHES=2000 go test -run '^$' -bench Compaction -benchtime 1x ./internal/compact/
func BenchmarkCompaction(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("GHOST_BENCH_PUSHES")); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		ctx := context.Background()
		store, err := fsstore.Open(filepath.Join(b.TempDir(), "objects"))
		if err != nil {
			b.Fatal(err)
		}
		log := wal.New(store, wal.Options{})
		newPusher(b, log, "main").history(ctx, n, nil)

		measure := func(when string) {
			_, info, err := objstore.ReadAll(ctx, store, wal.IndexKey(repo), wal.MaxIndexSize)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			snap := materialize(b, newCache(b, log, repocache.Options{MaxPacks: -1}))
			cold := time.Since(start)
			packs, _ := filepath.Glob(filepath.Join(snap.Dir, "objects", "pack", "*.pack"))
			b.ReportMetric(float64(info.Size), "index-bytes-"+when)
			b.ReportMetric(cold.Seconds(), "cold-s-"+when)
			b.ReportMetric(float64(len(packs)), "packs-"+when)
		}
		measure("before")
		start := time.Now()
		if _, err := compact.New(log, newCache(b, log, repocache.Options{}), compact.Options{}).Compact(ctx, repo); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "compact-s")
		measure("after")
	}
}
