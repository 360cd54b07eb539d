package scaletest

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// Defaults of serve the idle simulation follows (docs/adr/0034).
const (
	workersPerNode = 2                // --scan-workers
	reconcileEvery = time.Minute      // --scan-reconcile-interval
	sweepRate      = 2                // --scan-sweep-rate, repositories a second
	sweepEvery     = 10 * time.Minute // ReconcilerOptions.SweepEvery
	gcEvery        = 10 * time.Minute // --coord-gc-interval
	leaderTTL      = 30 * time.Second // ReconcilerOptions.LeaderTTL
)

// idleResult is what an idle cluster asked for, per second of virtual time.
type idleResult struct {
	nodes   int
	seconds float64
	total   counts  // the whole cluster
	leader  counts  // the node leading the reconciler
	follow  counts  // every other node, summed
	keep    float64 // of the etcd figures: session keep-alives, a second
}

func (r idleResult) rate(c counts) rates {
	s := r.seconds
	return rates{Get: float64(c.Get) / s, Put: float64(c.Put) / s, List: float64(c.List) / s, Delete: float64(c.Delete) / s, Etcd: float64(c.Etcd) / s}
}

// rates are counts a second.
type rates struct{ Get, Put, List, Delete, Etcd float64 }

func (r rates) store() float64 { return r.Get + r.Put + r.List + r.Delete }

// idle runs nodes idle nodes for the given virtual time, each doing what
// serve does when nothing happens, by running ghost's own code at the
// times serve would:
//
//   - every node's safety poll, once a minute: one of its idle workers
//     looks for work (Worker.Step);
//   - on the leader, a pass over the pending marks every minute
//     (ReconcilePending), and the sweep (Scanner.Sweep) at sweepRate
//     repositories a second, a sweep starting at most every sweepEvery;
//   - on every node, the coordination GC's attempt every gcEvery
//     (TryGC).
//
// The one request serve makes by the wall clock rather than by its own
// schedule, the etcd client's keep-alive of each node's election session,
// is not simulated: keepAlive (measured by measureKeepAlive) is added per
// node and second to the etcd figures.
func (c *cluster) idle(t testing.TB, nodes int, d time.Duration, keepAlive float64) idleResult {
	ctx := context.Background()
	ns := make([]*node, nodes)
	for i := range ns {
		ns[i] = c.newNode(workersPerNode, false)
	}
	defer func() {
		for _, n := range ns {
			n.close()
		}
	}()
	leader := ns[0]
	before := make([]counts, nodes)
	for i, n := range ns {
		before[i] = n.m.read()
	}
	m := meta.New(leader.srv.Store(), leader.srv.Log())
	var (
		sweeping   bool
		sweepStart time.Time
		cursor     string
	)
	start := c.clock.Now()
	for elapsed := time.Duration(0); elapsed < d; elapsed += time.Minute {
		c.clock.add(time.Minute)
		now := c.clock.Now()
		for _, n := range ns {
			if did, err := n.workers[0].Step(ctx); err != nil || did {
				t.Fatalf("an idle worker's poll: did %v, %v", did, err)
			}
		}
		if _, err := leader.srv.Scanner().ReconcilePending(ctx); err != nil {
			t.Fatal(err)
		}
		if !sweeping && (sweepStart.IsZero() || now.Sub(sweepStart) >= sweepEvery) {
			sweeping, sweepStart, cursor = true, now, ""
		}
		if sweeping {
			// A minute of the sweep: sweepRate a second, continuing where
			// the last minute stopped.
			budget := sweepRate * 60
			pages := func(ctx context.Context, _ string, limit int) ([]scanner.RepoRef, string, error) {
				if budget == 0 {
					return nil, "", nil
				}
				rs, next, err := m.ReposPage(ctx, cursor, min(limit, budget))
				out := make([]scanner.RepoRef, 0, len(rs))
				for _, r := range rs {
					out = append(out, scanner.RepoRef{Tenant: r.Owner, RepoID: r.ID})
				}
				budget -= len(rs)
				cursor = next
				if next == "" {
					sweeping = false
				}
				if budget == 0 {
					next = ""
				}
				return out, next, err
			}
			if _, err := leader.srv.Scanner().Sweep(ctx, pages, 1e6); err != nil {
				t.Fatal(err)
			}
		}
		if int(elapsed/time.Minute)%int(gcEvery/time.Minute) == 0 {
			for _, n := range ns {
				if _, _, err := n.coord.TryGC(ctx, coord.TimeOf(now), 7*24*time.Hour, leaderTTL); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	r := idleResult{nodes: nodes, seconds: c.clock.Now().Sub(start).Seconds(), keep: keepAlive * float64(nodes)}
	for i, n := range ns {
		got := n.m.read().sub(before[i])
		if i == 0 {
			r.leader = got
		} else {
			r.follow = r.follow.add(got)
		}
		r.total = r.total.add(got)
	}
	return r
}

// measureKeepAlive measures, by the wall clock, how many requests a second
// the etcd client sends to keep one election session with time-to-live
// ttl alive, over d: what every node pays for the reconciler's election.
func (c *cluster) measureKeepAlive(t testing.TB, ttl, d time.Duration) float64 {
	m := &meter{}
	cl, err := m.etcdClient(c.etcd.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s, err := concurrency.NewSession(cl, concurrency.WithTTL(int(ttl/time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	time.Sleep(200 * time.Millisecond) // the grant and the stream's opening
	from := m.read().Etcd
	time.Sleep(d)
	return float64(m.read().Etcd-from) / d.Seconds()
}
