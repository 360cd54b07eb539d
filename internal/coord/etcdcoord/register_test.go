package etcdcoord_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver"
)

// faultKV is a fault-injection wrapper around the etcd KV API that models
// an etcd whose disk is slow to commit, as in issue 9:
//   - every write transaction is delayed by delay before it is sent;
//   - a write transaction with more than maxOps operations takes longer than
//     the request timeout: it fails with "etcdserver: request timed out" and
//     is not applied;
//   - every ambiguous-th write transaction that is applied still fails with
//     that timeout, as a commit that outlives the client's wait does;
//   - after, if set, runs after each applied write transaction, and
//     before, if set, before each one is sent;
//   - once allow is set, it is how many more write transactions may be
//     applied: the rest time out without being applied.
//
// Reads pass through unchanged.
type faultKV struct {
	clientv3.KV
	delay     time.Duration
	maxOps    int
	ambiguous int64
	after     func()
	before    func()
	allow     atomic.Int64 // 0: no limit; n > 0: n-1 more writes applied

	writes   atomic.Int64
	refused  atomic.Int64
	timeouts atomic.Int64
}

func (f *faultKV) Txn(ctx context.Context) clientv3.Txn {
	return &faultTxn{Txn: f.KV.Txn(ctx), f: f, ctx: ctx}
}

type faultTxn struct {
	clientv3.Txn
	f      *faultKV
	ctx    context.Context
	ops    int
	writes bool
}

func (t *faultTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }

func (t *faultTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.ops = len(ops)
	for _, op := range ops {
		t.writes = t.writes || op.IsPut() || op.IsDelete()
	}
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *faultTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *faultTxn) Commit() (*clientv3.TxnResponse, error) {
	if !t.writes {
		return t.Txn.Commit()
	}
	select {
	case <-time.After(t.f.delay):
	case <-t.ctx.Done():
		return nil, t.ctx.Err()
	}
	if t.f.before != nil {
		t.f.before()
	}
	if t.ops > t.f.maxOps {
		t.f.refused.Add(1)
		return nil, rpctypes.ErrTimeout
	}
	if a := t.f.allow.Load(); a == 1 || a > 1 && !t.f.allow.CompareAndSwap(a, a-1) {
		t.f.refused.Add(1)
		return nil, rpctypes.ErrTimeout
	}
	resp, err := t.Txn.Commit()
	if err != nil || !resp.Succeeded {
		return resp, err
	}
	n := t.f.writes.Add(1)
	if t.f.after != nil {
		t.f.after()
	}
	if t.f.ambiguous > 0 && n%t.f.ambiguous == 0 {
		t.f.timeouts.Add(1)
		return nil, rpctypes.ErrTimeout
	}
	return resp, nil
}

// faultBackend returns a backend on a client whose KV is f, wrapping the
// shared embedded etcd's.
func faultBackend(t *testing.T, f *faultKV, cfg etcdcoord.Config) *etcdcoord.Backend {
	t.Helper()
	f.KV = client.KV
	c := clientv3.NewCtxClient(context.Background())
	c.KV = f
	cfg.Client = c
	b, err := etcdcoord.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// retried calls op until it fails with something other than
// etcdcoord.ErrUnavailable, as a caller retrying with the same op id does,
// at most 200 times.
func retried(t *testing.T, op func() error) error {
	t.Helper()
	for i := 0; i < 200; i++ {
		if err := op(); !errors.Is(err, etcdcoord.ErrUnavailable) {
			return err
		}
	}
	t.Fatal("still unavailable after 200 attempts")
	return nil
}

// TestRegisterSurvivesSlowCommits registers the largest manifest through an
// etcd that cannot commit big transactions in time and sometimes times out
// after committing: chunks keep every transaction small, and retries with
// the same op id resume the registration where it stopped.
func TestRegisterSurvivesSlowCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &faultKV{delay: time.Millisecond, maxOps: 2*etcdcoord.MaxRegisterChunk + 16, ambiguous: 4}
	ns := fmt.Sprintf("/test/slow%d", namespaces.Add(1))
	b := faultBackend(t, f, etcdcoord.Config{Namespace: ns, MaxTxnOps: etcdserver.MaxTxnOps, MaxTxnBytes: etcdserver.MaxRequestBytes})
	tenant := coord.TenantID{9}
	n := coord.DefaultMaxInitialShards
	if testing.Short() {
		n = 2000
	}
	create := coord.CreateRunRequest{Tenant: tenant, Run: 1, Op: 1, Config: cfg}
	if err := retried(t, func() error { _, err := b.CreateRun(ctx, 10, create); return err }); err != nil {
		t.Fatal(err)
	}
	reg := coord.RegisterShardsRequest{Tenant: tenant, Run: 1, Op: 2, Shards: manifest(n)}
	if err := retried(t, func() error { _, err := b.RegisterShards(ctx, 10, reg); return err }); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d write transactions, %d timed out after committing, %d refused as too slow", f.writes.Load(), f.timeouts.Load(), f.refused.Load())
	if f.timeouts.Load() == 0 {
		t.Fatal("no commit timed out: the test proved nothing")
	}
	if p, err := b.Progress(ctx, 10, tenant, 1); err != nil || p.Total != n || p.Active != n || p.State != coord.RunActive {
		t.Fatalf("progress: %+v %v", p, err)
	}
	plain := newBackend(t, etcdcoord.Config{Namespace: ns})
	if c, err := plain.RepairCounters(ctx); err != nil || len(c.Fixed) != 0 || c.Global != int64(n) {
		t.Fatalf("counters: %+v %v", c, err)
	}
	if resp, err := client.Get(ctx, ns+"/registrations/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Fatalf("registration keys left: %v %v", resp, err)
	}
}

// TestRegisterChunkRefusedRollsBack lets another registration take the
// tenant's capacity between two chunks of a large one: the refused chunk
// rolls back everything its registration wrote. While the registration is
// in progress its shards cannot be acquired or claimed.
func TestRegisterChunkRefusedRollsBack(t *testing.T) {
	ctx := context.Background()
	ns := fmt.Sprintf("/test/rollback%d", namespaces.Add(1))
	lim := coord.Limits{MaxShardsPerTenant: 150}
	f := &faultKV{maxOps: 1 << 20}
	b := faultBackend(t, f, etcdcoord.Config{Namespace: ns, Limits: lim})
	other := newBackend(t, etcdcoord.Config{Namespace: ns, Limits: lim})
	tenant := coord.TenantID{4}
	if _, err := b.CreateRun(ctx, 10, coord.CreateRunRequest{Tenant: tenant, Run: 1, Op: 1, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	var hookErr error
	f.after = func() {
		if !armed.CompareAndSwap(true, false) {
			return
		}
		// The first chunk is in: the run is not claimable yet.
		_, err := other.ClaimNext(ctx, 10, coord.ClaimRequest{Tenant: tenant, Run: 1, Worker: 1, Op: 50})
		_, err2 := other.Acquire(ctx, 10, coord.AcquireRequest{Tenant: tenant, Run: 1, Shard: 1, Worker: 1, Op: 51})
		_, err3 := other.RegisterShards(ctx, 10, coord.RegisterShardsRequest{Tenant: tenant, Run: 1, Op: 52, Shards: manifest(3)})
		_, err4 := other.RegisterShards(ctx, 10, coord.RegisterShardsRequest{Tenant: tenant, Run: 1, Op: 2, Shards: manifest(121)})
		switch {
		case !errors.Is(err4, coord.ErrOpConflict):
			hookErr = fmt.Errorf("RegisterShards by the same op with another manifest: %v", err4)
		case !errors.Is(err, coord.ErrRunNotActive):
			hookErr = fmt.Errorf("ClaimNext during registration: %v", err)
		case !errors.Is(err2, coord.ErrRunNotActive):
			hookErr = fmt.Errorf("Acquire during registration: %v", err2)
		case !errors.Is(err3, coord.ErrRunNotInitializing):
			hookErr = fmt.Errorf("RegisterShards by another op during registration: %v", err3)
		}
		// Another run takes 40 of the 150 - 61 slots left.
		if _, err := other.CreateRun(ctx, 10, coord.CreateRunRequest{Tenant: tenant, Run: 2, Op: 1, Config: cfg}); err != nil {
			hookErr = err
		}
		if _, err := other.RegisterShards(ctx, 10, coord.RegisterShardsRequest{Tenant: tenant, Run: 2, Op: 2, Shards: manifest(40)}); err != nil {
			hookErr = err
		}
	}
	armed.Store(true)
	_, err := b.RegisterShards(ctx, 10, coord.RegisterShardsRequest{Tenant: tenant, Run: 1, Op: 2, Shards: manifest(120)})
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	var sle *coord.ShardLimitError
	if !errors.As(err, &sle) || *sle != (coord.ShardLimitError{Scope: coord.ScopeTenant, Current: 40, Delta: 120, Cap: 150}) {
		t.Fatalf("registration overtaken between chunks: %v", err)
	}
	if r, err := b.GetRun(ctx, tenant, 1); err != nil || r.State != coord.RunInitializing {
		t.Fatalf("run after the rollback: %+v %v", r, err)
	}
	for _, p := range []string{"/shards/0000000000000001/", "/open/0000000000000001/", "/registrations/"} {
		if resp, err := client.Get(ctx, ns+p, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
			t.Fatalf("keys under %s left after the rollback: %v %v", p, resp, err)
		}
	}
	if c, err := other.RepairCounters(ctx); err != nil || len(c.Fixed) != 0 || c.Tenants[tenant] != 40 {
		t.Fatalf("counters after the rollback: %+v %v", c, err)
	}
	// What fits registers, in two chunks.
	if _, err := b.RegisterShards(ctx, 10, coord.RegisterShardsRequest{Tenant: tenant, Run: 1, Op: 3, Shards: manifest(110)}); err != nil {
		t.Fatal(err)
	}
	if c, err := other.RepairCounters(ctx); err != nil || len(c.Fixed) != 0 || c.Tenants[tenant] != 150 {
		t.Fatalf("counters: %+v %v", c, err)
	}
}

// TestCancelDuringRegistration cancels a run between two chunks of its
// registration: the cancellation releases the chunk written, and the
// registration stops.
func TestCancelDuringRegistration(t *testing.T) {
	ctx := context.Background()
	ns := fmt.Sprintf("/test/cancelreg%d", namespaces.Add(1))
	f := &faultKV{maxOps: 1 << 20}
	b := faultBackend(t, f, etcdcoord.Config{Namespace: ns})
	other := newBackend(t, etcdcoord.Config{Namespace: ns})
	tenant := coord.TenantID{5}
	if _, err := b.CreateRun(ctx, 10, coord.CreateRunRequest{Tenant: tenant, Run: 1, Op: 1, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	var cancelled coord.Run
	var hookErr error
	f.after = func() {
		if armed.CompareAndSwap(true, false) {
			cancelled, hookErr = other.CancelRun(ctx, 20, coord.CancelRunRequest{Tenant: tenant, Run: 1, Op: 9})
		}
	}
	armed.Store(true)
	_, err := b.RegisterShards(ctx, 10, coord.RegisterShardsRequest{Tenant: tenant, Run: 1, Op: 2, Shards: manifest(100)})
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	if !errors.Is(err, coord.ErrRunTerminal) {
		t.Fatalf("registration of a cancelled run: %v", err)
	}
	if cancelled.Summary.Total == 0 || cancelled.Summary.Total != cancelled.Summary.Active {
		t.Fatalf("summary of the run cancelled during registration: %+v", cancelled.Summary)
	}
	if c, err := other.RepairCounters(ctx); err != nil || len(c.Fixed) != 0 || c.Global != 0 {
		t.Fatalf("counters: %+v %v", c, err)
	}
	if resp, err := client.Get(ctx, ns+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly()); err != nil {
		t.Fatal(err)
	} else {
		for _, kv := range resp.Kvs {
			if k := string(kv.Key); len(k) > len(ns)+8 && (k[len(ns):len(ns)+8] == "/shards/" || k[len(ns):len(ns)+6] == "/open/") {
				t.Fatalf("key left: %s", k)
			}
		}
	}
}

// TestCancelRacingARegistrationChunk lets a registration chunk commit
// between CancelRun's count of the run's shards and its commit: the
// cancellation must count again, or it would delete more shards than it
// takes off the counters.
func TestCancelRacingARegistrationChunk(t *testing.T) {
	ctx := context.Background()
	ns := fmt.Sprintf("/test/cancelrace%d", namespaces.Add(1))
	fr, fc := &faultKV{maxOps: 1 << 20}, &faultKV{maxOps: 1 << 20}
	reg := faultBackend(t, fr, etcdcoord.Config{Namespace: ns})
	canceller := faultBackend(t, fc, etcdcoord.Config{Namespace: ns})
	tenant := coord.TenantID{6}
	if _, err := reg.CreateRun(ctx, 10, coord.CreateRunRequest{Tenant: tenant, Run: 1, Op: 1, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	// The run has no shards when CancelRun counts them; the first chunk of
	// its registration commits before CancelRun does.
	req := coord.RegisterShardsRequest{Tenant: tenant, Run: 1, Op: 2, Shards: manifest(150)}
	var once atomic.Bool
	var hookErr error
	fc.before = func() {
		if once.CompareAndSwap(false, true) {
			fr.allow.Store(2) // one chunk, then etcd "times out"
			if _, err := reg.RegisterShards(ctx, 10, req); !errors.Is(err, etcdcoord.ErrUnavailable) {
				hookErr = fmt.Errorf("first chunk: %v", err)
			}
		}
	}
	r, err := canceller.CancelRun(ctx, 20, coord.CancelRunRequest{Tenant: tenant, Run: 1, Op: 3})
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary.Total != 61 {
		t.Fatalf("summary %+v, want the chunk written", r.Summary)
	}
	plain := newBackend(t, etcdcoord.Config{Namespace: ns})
	if c, err := plain.RepairCounters(ctx); err != nil || len(c.Fixed) != 0 || c.Global != 0 {
		t.Fatalf("counters after the cancellation: %+v %v", c, err)
	}
}
