package wal_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// BenchmarkCommit measures the commit loop on the filesystem store with
// concurrent committers on disjoint refs, all in one repository (so they
// contend on one index) or spread across 32 repositories. It reports
// commits/s, p50 and p99 latency, CAS attempts per commit and the share
// of commits that gave up with ErrContention.
//
//	go test -run='^$' -bench=BenchmarkCommit -benchtime=400x ./internal/wal/
func BenchmarkCommit(b *testing.B) {
	for _, layout := range []struct {
		name  string
		repos int
	}{{"one-repo", 1}, {"32-repos", 32}} {
		for _, c := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%s/committers=%d", layout.name, c), func(b *testing.B) {
				benchCommit(b, layout.repos, c)
			})
		}
	}
}

func benchCommit(b *testing.B, repos, committers int) {
	st, err := fsstore.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	l := wal.New(st, wal.Options{})
	ctx := context.Background()
	var (
		next       atomic.Int64
		attempts   atomic.Int64
		contention atomic.Int64
		mu         sync.Mutex
		lat        []time.Duration
		wg         sync.WaitGroup
	)
	pack := strings.Repeat("p", 1024)
	b.ResetTimer()
	start := time.Now()
	for w := range committers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			repo := fmt.Sprintf("repo-%02d", w%repos)
			ref := fmt.Sprintf("refs/heads/w%02d", w)
			old := wal.ZeroID
			var mine []time.Duration
			for n := 1; next.Add(1) <= int64(b.N); n++ {
				id := fmt.Sprintf("%08x%032x", w, n)
				t0 := time.Now()
				res, err := l.Commit(ctx, repo, wal.Push{
					Transitions: []wal.Transition{{Ref: ref, Old: old, New: id}},
					Pack:        strings.NewReader(pack), PackSize: int64(len(pack)),
				})
				mine = append(mine, time.Since(t0))
				attempts.Add(int64(res.Attempts))
				switch {
				case err == nil:
					old = id
				case errors.Is(err, wal.ErrContention):
					contention.Add(1)
				default:
					b.Error(err)
					return
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "commits/s")
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(attempts.Load())/float64(b.N), "cas/commit")
	b.ReportMetric(float64(contention.Load())/float64(b.N), "contention/commit")
}
