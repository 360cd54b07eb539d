package scaletest

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/memcoord"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/wal"
)

// population says what an installation holds before anything is measured.
type population struct {
	// repos is the number of repository records, perTenant of them to a
	// tenant (so repos/perTenant tenants).
	repos, perTenant int
	// alerts are spread over the repositories, demoAlerts of them on the
	// repository whose alert page is measured.
	alerts, demoAlerts int
	// runs are done scan runs: runRepos repositories of runs/runRepos
	// pushes, each push's run done.
	runs, runRepos int
}

func (p population) String() string {
	return fmt.Sprintf("%d repositories, %d tenants, %d alerts, %d runs", p.repos, p.repos/p.perTenant, p.alerts, p.runs)
}

// quiet is a logger for the servers and scanners of the benchmark.
var quiet = slog.New(slog.DiscardHandler)

// clock is the virtual time every scanner of a cluster reads.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// parallel runs fn(i) for i in [0, n) on a few goroutines and returns the
// first error.
func parallel(n int, fn func(i int) error) error {
	const g = 8
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for w := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += g {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func tenantName(i int) string { return fmt.Sprintf("t%07d", i) }

// populate fills base through ghost's own code (meta, alerts, the
// scanner), none of it counted: tenants and repositories, alerts, and done
// scan runs.
func populate(t testing.TB, base objstore.Store, p population) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	log := wal.New(base, wal.Options{})
	m := meta.New(base, log)
	tenants := p.repos / p.perTenant
	// The first tenant marks the listing complete for a new installation.
	if _, err := m.CreateTenant(ctx, tenantName(0), meta.KindUser); err != nil {
		t.Fatal(err)
	}
	err := parallel(tenants, func(i int) error {
		if i > 0 {
			if _, err := m.CreateTenant(ctx, tenantName(i), meta.KindUser); err != nil {
				return err
			}
		}
		for j := range p.perTenant {
			if _, err := m.CreateRepo(ctx, tenantName(i), fmt.Sprintf("r%03d", j), j%2 == 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("populated %d repositories in %v", p.repos, time.Since(start).Round(time.Millisecond))
	as := alerts.New(base)
	// A new installation's first server finds no alerts and marks the
	// state index complete (ADR 0122); every alert recorded after comes
	// with its hints. Without the marker, the first node of the benchmark
	// would rebuild the index from every alert in the background, the
	// one-time migration of an installation that predates it, and be
	// measured while it does.
	if built, _, err := as.EnsureStateIndex(ctx); err != nil || built {
		t.Fatalf("marking the state index of a new installation: built %v, %v", built, err)
	}
	if p.alerts > 0 {
		var done atomic.Int64
		err = parallel(tenants, func(i int) error {
			// This tenant's share of the alerts, on its first repository.
			n := p.alerts/tenants + btoi(i < p.alerts%tenants)
			if n == 0 {
				return nil
			}
			r, err := m.Repo(ctx, tenantName(i), "r000")
			if err != nil {
				return err
			}
			if err := recordAlerts(ctx, as, tenantName(i), r.ID, n); err != nil {
				return err
			}
			// A line a million alerts: ten million take long enough to
			// want to see the rate and the heap on the way.
			if d := done.Add(int64(n)); d/1000000 != (d-int64(n))/1000000 {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				t.Logf("%d alerts recorded after %v; heap in use %.1f GiB", d, time.Since(start).Round(time.Second), float64(ms.HeapInuse)/(1<<30))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if p.runs > 0 {
		populateRuns(t, base, log, as, p)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("populated %v in %v; heap in use %.1f GiB", p, time.Since(start).Round(time.Millisecond), float64(ms.HeapInuse)/(1<<30))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// recordAlerts records n distinct secrets as alerts of one repository, a
// batch of findings at a time, as a scan run does.
func recordAlerts(ctx context.Context, as *alerts.Store, tenant, repoID string, n int) error {
	for lo := 0; lo < n; lo += 256 {
		var fs []alerts.Finding
		for k := lo; k < min(n, lo+256); k++ {
			fs = append(fs, alerts.Finding{
				RuleID: "generic-api-key", Description: "Generic API Key", Commit: strings.Repeat("c", 40),
				Path: fmt.Sprintf("config/%d.env", k), Line: 1, Column: 9, BlobID: strings.Repeat("b", 40),
				Match: "API_KEY=****", Secret: fmt.Sprintf("%s-secret-%08d", repoID, k),
			})
		}
		if err := as.Record(ctx, tenant, repoID, fs, alerts.RunRef{ID: "populate", Seq: 1}); err != nil {
			return err
		}
	}
	return nil
}

// populateRuns gives p.runRepos repositories p.runs/p.runRepos layers
// each (empty pushes committed to the log), starts the push run of every
// layer, completes each run's shard through the coordinator (nothing is
// scanned: the benchmark needs done runs, not findings) and lets a
// worker's claim pass finish them, as it finishes a run whose last
// worker died. The coordinator is an in-memory one: done runs are read
// from their descriptors alone.
func populateRuns(t testing.TB, base objstore.Store, log *wal.Log, as *alerts.Store, p population) {
	t.Helper()
	ctx := context.Background()
	mc := memcoord.New(coord.Limits{})
	var clk clock
	clk.t = time.Now()
	sc, err := scanner.New(scanner.Options{Store: base, Log: log, Alerts: as, Coord: func() coord.Backend { return mc },
		Now: clk.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := repocache.New(t.TempDir(), log, repocache.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	w, err := sc.NewWorker(scanner.WorkerOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	m := meta.New(base, log)
	per := p.runs / p.runRepos
	for i := range p.runRepos {
		tn := tenantName(i % (p.repos / p.perTenant))
		r, err := m.Repo(ctx, tn, fmt.Sprintf("r%03d", 1+i/(p.repos/p.perTenant)))
		if err != nil {
			t.Fatal(err)
		}
		old := strings.Repeat("0", 40)
		for s := range per {
			id := fmt.Sprintf("%040x", s+1)
			if _, err := log.Commit(ctx, r.ID, wal.Push{PushedBy: "populate", Pack: strings.NewReader(""),
				Transitions: []wal.Transition{{Ref: "refs/heads/main", Old: old, New: id}}}); err != nil {
				t.Fatal(err)
			}
			old = id
			spec := scanner.Spec{Tenant: tn, RepoID: r.ID, Kind: scanner.KindPush, Seq: uint64(s + 1)}
			run, err := sc.Start(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			now := coord.TimeOf(clk.Now())
			l, err := mc.Acquire(ctx, now, coord.AcquireRequest{Tenant: scanner.TenantID(tn), Run: coord.RunID(run.ID), Shard: 1, Worker: 1, Op: 1})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := mc.Complete(ctx, now, coord.CompleteRequest{Lease: l, Op: 2}); err != nil {
				t.Fatal(err)
			}
		}
		// One claim pass offers every run of the repository to finish.
		clk.add(time.Minute)
		if _, err := w.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if left, err := sc.Active(ctx); err != nil || len(left) != 0 {
		t.Fatalf("populating runs left %d active: %v", len(left), err)
	}
}
