package etcdcoord_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/coordtest"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
)

// processes is one coord.Backend made of several etcdcoord Backends on
// one namespace, as the processes of a cluster are: each call goes to the
// next one, so every Backend's record cache keeps falling behind what the
// others wrote. The conformance suite and the simulation run on it to
// show that the cache never decides anything
// (docs/adr/0026-coordination-round-trips.md).
type processes struct {
	bs []*etcdcoord.Backend
	n  atomic.Uint64
}

func newProcesses(t *testing.T, n int, lim coord.Limits) *processes {
	ns := fmt.Sprintf("/test/ns%d", namespaces.Add(1))
	p := &processes{}
	for range n {
		p.bs = append(p.bs, newBackend(t, etcdcoord.Config{Namespace: ns, Limits: lim}))
	}
	return p
}

func (p *processes) next() *etcdcoord.Backend { return p.bs[p.n.Add(1)%uint64(len(p.bs))] }

func (p *processes) GetRun(ctx context.Context, tenant coord.TenantID, run coord.RunID) (coord.Run, error) {
	return p.next().GetRun(ctx, tenant, run)
}
func (p *processes) GetShard(ctx context.Context, tenant coord.TenantID, run coord.RunID, shard coord.ShardID) (coord.Shard, error) {
	return p.next().GetShard(ctx, tenant, run, shard)
}
func (p *processes) Progress(ctx context.Context, now coord.Time, tenant coord.TenantID, run coord.RunID) (coord.Progress, error) {
	return p.next().Progress(ctx, now, tenant, run)
}
func (p *processes) ListShards(ctx context.Context, now coord.Time, tenant coord.TenantID, run coord.RunID, f coord.ShardFilter) ([]coord.Shard, error) {
	return p.next().ListShards(ctx, now, tenant, run, f)
}
func (p *processes) Acquire(ctx context.Context, now coord.Time, req coord.AcquireRequest) (coord.Lease, error) {
	return p.next().Acquire(ctx, now, req)
}
func (p *processes) ClaimNext(ctx context.Context, now coord.Time, req coord.ClaimRequest) (coord.Lease, error) {
	return p.next().ClaimNext(ctx, now, req)
}
func (p *processes) Renew(ctx context.Context, now coord.Time, req coord.RenewRequest) (coord.Lease, error) {
	return p.next().Renew(ctx, now, req)
}
func (p *processes) Checkpoint(ctx context.Context, now coord.Time, req coord.CheckpointRequest) (coord.Shard, error) {
	return p.next().Checkpoint(ctx, now, req)
}
func (p *processes) Complete(ctx context.Context, now coord.Time, req coord.CompleteRequest) (coord.Shard, error) {
	return p.next().Complete(ctx, now, req)
}
func (p *processes) Park(ctx context.Context, now coord.Time, req coord.ParkRequest) (coord.Shard, error) {
	return p.next().Park(ctx, now, req)
}
func (p *processes) SplitReplace(ctx context.Context, now coord.Time, req coord.SplitReplaceRequest) (coord.Shard, []coord.Shard, error) {
	return p.next().SplitReplace(ctx, now, req)
}
func (p *processes) SplitResidual(ctx context.Context, now coord.Time, req coord.SplitResidualRequest) (coord.Shard, coord.Shard, error) {
	return p.next().SplitResidual(ctx, now, req)
}
func (p *processes) CreateRun(ctx context.Context, now coord.Time, req coord.CreateRunRequest) (coord.Run, error) {
	return p.next().CreateRun(ctx, now, req)
}
func (p *processes) RegisterShards(ctx context.Context, now coord.Time, req coord.RegisterShardsRequest) (coord.Run, error) {
	return p.next().RegisterShards(ctx, now, req)
}
func (p *processes) Unpark(ctx context.Context, now coord.Time, req coord.UnparkRequest) (coord.Shard, error) {
	return p.next().Unpark(ctx, now, req)
}
func (p *processes) CompleteRun(ctx context.Context, now coord.Time, req coord.CompleteRunRequest) (coord.Run, error) {
	return p.next().CompleteRun(ctx, now, req)
}
func (p *processes) FailRun(ctx context.Context, now coord.Time, req coord.FailRunRequest) (coord.Run, error) {
	return p.next().FailRun(ctx, now, req)
}
func (p *processes) CancelRun(ctx context.Context, now coord.Time, req coord.CancelRunRequest) (coord.Run, error) {
	return p.next().CancelRun(ctx, now, req)
}

// TestConformanceProcesses runs the conformance suite on three Backends
// taking turns on one namespace, each with its own record cache.
func TestConformanceProcesses(t *testing.T) {
	coordtest.Run(t, func(t *testing.T, lim coord.Limits) coord.Backend {
		return newProcesses(t, 3, lim)
	}, coordtest.SkipSimulation())
}

// TestSimulationProcesses runs the seeded simulation the same way, on
// half the seeds of TestSimulation (their first seeds, so every seed run
// here also runs on one Backend).
func TestSimulationProcesses(t *testing.T) {
	t.Parallel()
	coordtest.Run(t, func(t *testing.T, lim coord.Limits) coord.Backend {
		return newProcesses(t, 3, lim)
	}, coordtest.SkipConformance(), coordtest.Seeds(max(simSeeds()/2, 1)), coordtest.Parallel())
}

// TestStaleCacheNeverAnswers: a refusal decided on what the cache says is
// checked against etcd before it is given. Process A holds a live lease in
// its cache; process B, after that lease ran out, took the shard and
// completed it. A's Acquire at a time its cache says the lease is still
// live must be told the shard is done, not that a lease holds it.
func TestStaleCacheNeverAnswers(t *testing.T) {
	ctx := context.Background()
	ns := fmt.Sprintf("/test/stalecache%d", namespaces.Add(1))
	a := newBackend(t, etcdcoord.Config{Namespace: ns})
	b := newBackend(t, etcdcoord.Config{Namespace: ns})
	tenant := coord.TenantID{3}
	mustRun(t, a, tenant, 1, 1)
	if _, err := a.Acquire(ctx, 20, coord.AcquireRequest{Tenant: tenant, Run: 1, Shard: 1, Worker: 1, Op: 10}); err != nil {
		t.Fatal(err)
	}
	late := coord.Time(20 + cfg.LeaseDuration.Milliseconds() + 1)
	l, err := b.Acquire(ctx, late, coord.AcquireRequest{Tenant: tenant, Run: 1, Shard: 1, Worker: 2, Op: 11})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Complete(ctx, late, coord.CompleteRequest{Lease: l, Op: 12}); err != nil {
		t.Fatal(err)
	}
	_, err = a.Acquire(ctx, 21, coord.AcquireRequest{Tenant: tenant, Run: 1, Shard: 1, Worker: 1, Op: 13})
	if !errors.Is(err, coord.ErrShardTerminal) {
		t.Fatalf("acquire of a shard another process completed = %v, want ErrShardTerminal", err)
	}
}

// TestStaleCacheWrites: a mutation built on a stale cached record loses
// its compare and is decided again on the records the failed transaction
// brought back: a worker whose lease another process took over is refused
// with ErrStaleFence, and the records stay as the other process left them.
func TestStaleCacheWrites(t *testing.T) {
	ctx := context.Background()
	c, n := countingClient(t)
	ns := fmt.Sprintf("/test/stalewrite%d", namespaces.Add(1))
	a, err := etcdcoord.New(etcdcoord.Config{Client: c, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	b := newBackend(t, etcdcoord.Config{Namespace: ns})
	tenant := coord.TenantID{4}
	mustRun(t, a, tenant, 1, 1)
	la, err := a.Acquire(ctx, 20, coord.AcquireRequest{Tenant: tenant, Run: 1, Shard: 1, Worker: 1, Op: 10})
	if err != nil {
		t.Fatal(err)
	}
	late := coord.Time(20 + cfg.LeaseDuration.Milliseconds() + 1)
	lb, err := b.Acquire(ctx, late, coord.AcquireRequest{Tenant: tenant, Run: 1, Shard: 1, Worker: 2, Op: 11})
	if err != nil {
		t.Fatal(err)
	}
	before := n.Load()
	_, err = a.Checkpoint(ctx, 21, coord.CheckpointRequest{Lease: la, Op: 12, Cursor: coord.Cursor{HasKey: true, Key: []byte{1}}})
	if !errors.Is(err, coord.ErrStaleFence) {
		t.Fatalf("checkpoint under a lease another process took over = %v, want ErrStaleFence", err)
	}
	// The failed transaction brought the records back: no read of its own.
	if got := n.Load() - before; got != 1 {
		t.Fatalf("the refused checkpoint took %d requests, want 1 (the transaction whose Else read the records)", got)
	}
	s, err := b.GetShard(ctx, tenant, 1, 1)
	if err != nil || s.Fence != lb.Fence || s.Cursor.HasKey {
		t.Fatalf("shard after the refused checkpoint: %+v, %v", s, err)
	}
	// And A, now up to date, can checkpoint for nobody: the refusal stands
	// on fresh records too.
	if _, err := a.Checkpoint(ctx, 22, coord.CheckpointRequest{Lease: la, Op: 13, Cursor: coord.Cursor{HasKey: true, Key: []byte{2}}}); !errors.Is(err, coord.ErrStaleFence) {
		t.Fatalf("second checkpoint = %v, want ErrStaleFence", err)
	}
}
