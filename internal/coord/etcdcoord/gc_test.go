package etcdcoord_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver"
)

var cfg = coord.RunConfig{LeaseDuration: time.Second, Cursor: coord.CursorNonDecreasing}

func manifest(n int) []coord.ShardSpec {
	specs := make([]coord.ShardSpec, n)
	for i := range specs {
		specs[i] = coord.ShardSpec{ID: coord.ShardID(i + 1), Start: binary.BigEndian.AppendUint32(nil, uint32(i))}
		if i < n-1 {
			specs[i].End = binary.BigEndian.AppendUint32(nil, uint32(i+1))
		}
	}
	return specs
}

func mustRun(t *testing.T, b *etcdcoord.Backend, tenant coord.TenantID, run coord.RunID, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := b.CreateRun(ctx, 10, coord.CreateRunRequest{Tenant: tenant, Run: run, Op: 1, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RegisterShards(ctx, 10, coord.RegisterShardsRequest{Tenant: tenant, Run: run, Op: 2, Shards: manifest(n)}); err != nil {
		t.Fatal(err)
	}
}

func TestGCRemovesOnlyExpiredTerminalRuns(t *testing.T) {
	b := newBackend(t, etcdcoord.Config{})
	ctx := context.Background()
	ta, tb := coord.TenantID{1}, coord.TenantID{2}
	mustRun(t, b, ta, 1, 3)
	mustRun(t, b, ta, 2, 4)
	mustRun(t, b, tb, 3, 5)
	if _, err := b.CancelRun(ctx, 100, coord.CancelRunRequest{Tenant: ta, Run: 1, Op: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.FailRun(ctx, 200, coord.FailRunRequest{Tenant: tb, Run: 3, Op: 3, Reason: "x"}); err != nil {
		t.Fatal(err)
	}
	// Run 1 ended at 100, run 3 at 200; run 2 is still active.
	if n, err := b.GC(ctx, 200, 100*time.Millisecond); err != nil || n != 0 {
		t.Fatalf("GC at 200 keeping 100ms: %d, %v", n, err)
	}
	if n, err := b.GC(ctx, 201, 100*time.Millisecond); err != nil || n != 1 {
		t.Fatalf("GC at 201 keeping 100ms: %d, %v", n, err)
	}
	if _, err := b.GetRun(ctx, ta, 1); !errors.Is(err, coord.ErrNotFound) {
		t.Fatalf("collected run: %v", err)
	}
	if _, err := b.GetShard(ctx, ta, 1, 1); !errors.Is(err, coord.ErrNotFound) {
		t.Fatalf("collected shard: %v", err)
	}
	if n, err := b.GC(ctx, 1000, 0); err != nil || n != 1 {
		t.Fatalf("GC of run 3: %d, %v", n, err)
	}
	if _, err := b.GetRun(ctx, ta, 2); err != nil {
		t.Fatalf("active run collected: %v", err)
	}
	counts, err := b.RepairCounters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts.Fixed) != 0 || counts.Global != 4 || counts.Tenants[ta] != 4 || counts.Tenants[tb] != 0 {
		t.Fatalf("counters after GC: %+v", counts)
	}
	if runs, err := b.ActiveRuns(ctx, ta); err != nil || len(runs) != 1 || runs[0] != 2 {
		t.Fatalf("active runs of tenant A: %v, %v", runs, err)
	}
	// The freed capacity is usable again, and a collected run id can be reused.
	mustRun(t, b, tb, 3, 2)
	if _, err := b.GC(ctx, 5, -1); !errors.Is(err, coord.ErrInvalidArgument) {
		t.Fatalf("negative retention: %v", err)
	}
}

func TestRepairCountersAndUnderflow(t *testing.T) {
	ns := fmt.Sprintf("/test/repair%d", namespaces.Add(1))
	b := newBackend(t, etcdcoord.Config{Namespace: ns})
	ctx := context.Background()
	tenant := coord.TenantID{7}
	mustRun(t, b, tenant, 1, 5)
	// Someone damaged the tenant counter: ending the run, which releases
	// its shards, must refuse rather than wrap.
	tkey := fmt.Sprintf("%s/tenants/07%062d/shard_count", ns, 0)
	if _, err := client.Put(ctx, tkey, string(binary.LittleEndian.AppendUint64(nil, 2))); err != nil {
		t.Fatal(err)
	}
	cancel := coord.CancelRunRequest{Tenant: tenant, Run: 1, Op: 3}
	if _, err := b.CancelRun(ctx, 20, cancel); !errors.Is(err, etcdcoord.ErrCounterUnderflow) || !errors.Is(err, coord.ErrCorrupt) ||
		!strings.Contains(err.Error(), "repair-counters") {
		t.Fatalf("CancelRun with a low counter: %v", err)
	}
	if r, err := b.GetRun(ctx, tenant, 1); err != nil || r.State != coord.RunActive {
		t.Fatalf("refused CancelRun changed the run: %+v, %v", r, err)
	}
	if _, err := b.GetShard(ctx, tenant, 1, 1); err != nil {
		t.Fatalf("refused CancelRun removed records: %v", err)
	}
	counts, err := b.RepairCounters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts.Fixed[tkey] != 2 || counts.Tenants[tenant] != 5 || counts.Global != 5 || len(counts.Fixed) != 1 {
		t.Fatalf("repair: %+v", counts)
	}
	if _, err := b.CancelRun(ctx, 20, cancel); err != nil {
		t.Fatalf("CancelRun after repair: %v", err)
	}
	// GC of a run whose shards were released leaves the counters alone.
	before, err := client.Get(ctx, ns+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.GC(ctx, 100, 0); err != nil || n != 1 {
		t.Fatalf("GC: %d, %v", n, err)
	}
	for _, kv := range before.Kvs {
		if !strings.HasSuffix(string(kv.Key), "shard_count") {
			continue
		}
		after, err := client.Get(ctx, string(kv.Key))
		if err != nil || len(after.Kvs) != 1 || after.Kvs[0].ModRevision != kv.ModRevision {
			t.Fatalf("GC of a run without shards rewrote %s: %v %v", kv.Key, after, err)
		}
	}
	if counts, err := b.RepairCounters(ctx); err != nil || len(counts.Fixed) != 0 || counts.Global != 0 {
		t.Fatalf("after GC: %+v, %v", counts, err)
	}
}

func TestTxnSizeLimits(t *testing.T) {
	ctx := context.Background()
	// With etcd's default --max-txn-ops, one transaction carries at most 61
	// root shards: 63 are registered in two chunks.
	b := newBackend(t, etcdcoord.Config{})
	tenant := coord.TenantID{1}
	mustRun(t, b, tenant, 1, 63)
	if p, err := b.Progress(ctx, 10, tenant, 1); err != nil || p.Total != 63 || p.State != coord.RunActive {
		t.Fatalf("63 shards with 128 ops: %+v %v", p, err)
	}
	// A split is one transaction: more children than it can carry is a
	// typed resource error that writes nothing.
	l, err := b.Acquire(ctx, 10, coord.AcquireRequest{Tenant: tenant, Run: 1, Shard: 1, Worker: 1, Op: 3})
	if err != nil {
		t.Fatal(err)
	}
	kids := make([]coord.ChildSpec, 70)
	for i := range kids {
		kids[i] = coord.ChildSpec{Start: []byte{0, 0, 0, 0, byte(i)}, End: []byte{0, 0, 0, 0, byte(i + 1)}}
	}
	kids[0].Start, kids[69].End = []byte{0, 0, 0, 0}, []byte{0, 0, 0, 1}
	_, _, err = b.SplitReplace(ctx, 10, coord.SplitReplaceRequest{Lease: l, Op: 4, Children: kids})
	var le *coord.LimitError
	if !errors.As(err, &le) || le.Limit != etcdcoord.LimitTxnOps || le.Max != etcdcoord.DefaultMaxTxnOps || !errors.Is(err, coord.ErrLimitExceeded) {
		t.Fatalf("70 children with 128 ops: %v", err)
	}
	if s, err := b.GetShard(ctx, tenant, 1, 1); err != nil || s.State != coord.ShardActive {
		t.Fatalf("refused split changed the shard: %+v %v", s, err)
	}

	// The largest manifest coord allows, with the embedded server's limits:
	// chunks of MaxRegisterChunk, never one huge transaction.
	if testing.Short() {
		return
	}
	big := newBackend(t, etcdcoord.Config{MaxTxnOps: etcdserver.MaxTxnOps, MaxTxnBytes: etcdserver.MaxRequestBytes})
	n := coord.DefaultMaxInitialShards
	mustRun(t, big, tenant, 1, n)
	if p, err := big.Progress(ctx, 10, tenant, 1); err != nil || p.Total != n || p.Active != n {
		t.Fatalf("progress: %+v %v", p, err)
	}
	if c, err := big.RepairCounters(ctx); err != nil || len(c.Fixed) != 0 || c.Global != int64(n) {
		t.Fatalf("counters: %+v %v", c, err)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	for _, c := range []etcdcoord.Config{
		{Client: client, Namespace: "ghost"},
		{Client: client, Namespace: "/ghost", MaxRetries: 65},
		{Client: client, Namespace: "/ghost", MaxRetries: -1},
		{Client: client, Namespace: "/ghost", GlobalCap: 7},
		{Client: client, Namespace: "/ghost", MaxTxnOps: 8},
		{Namespace: "/ghost"},
	} {
		if _, err := etcdcoord.New(c); !errors.Is(err, etcdcoord.ErrInvalidConfig) {
			t.Errorf("%+v accepted: %v", c, err)
		}
	}
	if _, err := etcdcoord.New(etcdcoord.Config{Client: client, Namespace: "/ghost", MaxRetries: 64}); err != nil {
		t.Errorf("MaxRetries 64: %v", err)
	}
}

// TestTryGCOneNodeAtATime: while one node holds the gc lock, another's
// TryGC does nothing; once it is released, it runs.
func TestTryGCOneNodeAtATime(t *testing.T) {
	ctx := context.Background()
	ns := fmt.Sprintf("/test/gclock%d", namespaces.Add(1))
	b := newBackend(t, etcdcoord.Config{Namespace: ns})
	tenant := coord.TenantID{3}
	mustRun(t, b, tenant, 1, 2)
	if _, err := b.CancelRun(ctx, 20, coord.CancelRunRequest{Tenant: tenant, Run: 1, Op: 3}); err != nil {
		t.Fatal(err)
	}
	// Another node holds the lock.
	lease, err := client.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Put(ctx, ns+"/locks/gc", "other", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	ran, n, err := b.TryGC(ctx, 100, 0, time.Minute)
	if err != nil || ran || n != 0 {
		t.Fatalf("TryGC while another node holds the lock: %v %d %v", ran, n, err)
	}
	if _, err := b.GetRun(ctx, tenant, 1); err != nil {
		t.Fatalf("run removed while the lock was held elsewhere: %v", err)
	}
	if _, err := client.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	ran, n, err = b.TryGC(ctx, 100, 0, time.Minute)
	if err != nil || !ran || n != 1 {
		t.Fatalf("TryGC with the lock free: %v %d %v", ran, n, err)
	}
	// The lock is released after the run.
	if resp, err := client.Get(ctx, ns+"/locks/gc"); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("gc lock left behind: %v %v", resp, err)
	}
	if _, _, err := b.TryGC(ctx, 100, 0, time.Millisecond); !errors.Is(err, coord.ErrInvalidArgument) {
		t.Fatalf("sub-second ttl: %v", err)
	}
}

// TestGCReleasesRunsEndedBeforeRelease: a run that ended before runs
// released their shards at the end (its record terminal, its shards still
// stored and counted) is removed by GC with its shards, off the counters.
func TestGCReleasesRunsEndedBeforeRelease(t *testing.T) {
	ctx := context.Background()
	ns := fmt.Sprintf("/test/legacy%d", namespaces.Add(1))
	b := newBackend(t, etcdcoord.Config{Namespace: ns})
	tenant := coord.TenantID{2}
	mustRun(t, b, tenant, 1, 3)
	mustRun(t, b, tenant, 2, 2)
	// Rewrite run 1 as the old CancelRun left it: terminal, shards kept.
	r, err := b.GetRun(ctx, tenant, 1)
	if err != nil {
		t.Fatal(err)
	}
	r.State, r.CompletedAt, r.UpdatedAt = coord.RunCancelled, 50, 50
	v, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	runKey := ns + "/runs/0000000000000001"
	if _, err := client.Txn(ctx).Then(clientv3.OpPut(runKey, string(v)),
		clientv3.OpDelete(fmt.Sprintf("%s/tenant-runs/02%062d/0000000000000001", ns, 0)),
		clientv3.OpPut(ns+"/gc/0000000000000032/0000000000000001", "")).Commit(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.GC(ctx, 100, 0); err != nil || n != 1 {
		t.Fatalf("GC: %d %v", n, err)
	}
	if c, err := b.RepairCounters(ctx); err != nil || len(c.Fixed) != 0 || c.Tenants[tenant] != 2 || c.Global != 2 {
		t.Fatalf("counters after GC: %+v %v", c, err)
	}
}

// TestRepairRestoresACounterDeletedAtZero: a tenant whose runs have all
// ended holds 0 shards; its counter key is deleted (by hand, or by a
// tool). A creation is then refused as a lost counter, and the repair it
// points to must bring the counter back at 0, after which the tenant can
// create runs again.
func TestRepairRestoresACounterDeletedAtZero(t *testing.T) {
	ns := fmt.Sprintf("/test/repair%d", namespaces.Add(1))
	b := newBackend(t, etcdcoord.Config{Namespace: ns})
	ctx := context.Background()
	tenant := coord.TenantID{9}
	mustRun(t, b, tenant, 1, 3)
	if _, err := b.CancelRun(ctx, 20, coord.CancelRunRequest{Tenant: tenant, Run: 1, Op: 3}); err != nil {
		t.Fatal(err)
	}
	tkey := fmt.Sprintf("%s/tenants/09%062d/shard_count", ns, 0)
	if got, err := client.Get(ctx, tkey); err != nil || len(got.Kvs) != 1 || binary.LittleEndian.Uint64(got.Kvs[0].Value) != 0 {
		t.Fatalf("counter after the run ended: %v %v", got, err)
	}
	if _, err := client.Delete(ctx, tkey); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateRun(ctx, 30, coord.CreateRunRequest{Tenant: tenant, Run: 2, Op: 4, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	reg := coord.RegisterShardsRequest{Tenant: tenant, Run: 2, Op: 5, Shards: manifest(2)}
	if _, err := b.RegisterShards(ctx, 30, reg); !errors.Is(err, etcdcoord.ErrCounterLost) {
		t.Fatalf("registration with the counter gone: %v, want ErrCounterLost", err)
	}
	counts, err := b.RepairCounters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := counts.Fixed[tkey]; !ok || v != -1 || counts.Tenants[tenant] != 0 {
		t.Fatalf("repair: %+v, want the tenant's counter restored at 0", counts)
	}
	if _, err := b.RegisterShards(ctx, 31, reg); err != nil {
		t.Fatalf("registration after the repair: %v", err)
	}
	if got, err := client.Get(ctx, tkey); err != nil || len(got.Kvs) != 1 || binary.LittleEndian.Uint64(got.Kvs[0].Value) != 2 {
		t.Fatalf("counter after the registration: %v %v", got, err)
	}
}
