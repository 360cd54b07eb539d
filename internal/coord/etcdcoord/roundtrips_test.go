package etcdcoord_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver"
)

// countingClient is a client to the shared test etcd that counts the
// requests it sends.
func countingClient(t *testing.T) (*clientv3.Client, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	c, err := etcdserver.NewClient(client.Endpoints(), etcdserver.WithRequestObserver(func(string) { n.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, &n
}

// TestWorkerCycleRoundTrips: with the record cache, a worker's mutations
// of the shard it holds are one request each (its transaction), the first
// included when the backend registered the shard; without it, each is a
// read and a transaction (docs/adr/0026-coordination-round-trips.md).
func TestWorkerCycleRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cache int
		want  int64 // requests for acquire, 10 checkpoints, renew, complete
	}{
		{"cached", 0, 13},
		{"uncached", -1, 26},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c, n := countingClient(t)
			be, err := etcdcoord.New(etcdcoord.Config{Client: c, Namespace: "/test/roundtrips/" + tc.name, RecordCache: tc.cache})
			if err != nil {
				t.Fatal(err)
			}
			tenant := coord.TenantID{7}
			if _, err := be.CreateRun(ctx, 1, coord.CreateRunRequest{Tenant: tenant, Run: 1, Op: 1,
				Config: coord.RunConfig{LeaseDuration: time.Minute, Cursor: coord.CursorStrictlyIncreasing}}); err != nil {
				t.Fatal(err)
			}
			if _, err := be.RegisterShards(ctx, 1, coord.RegisterShardsRequest{Tenant: tenant, Run: 1, Op: 2, Shards: []coord.ShardSpec{{ID: 1}}}); err != nil {
				t.Fatal(err)
			}
			before := n.Load()
			l, err := be.Acquire(ctx, 2, coord.AcquireRequest{Tenant: tenant, Run: 1, Shard: 1, Worker: 9, Op: 10})
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k < 10; k++ {
				if _, err := be.Checkpoint(ctx, 3, coord.CheckpointRequest{Lease: l, Op: coord.OpID(11 + k), Cursor: coord.Cursor{HasKey: true, Key: []byte{byte(k)}}}); err != nil {
					t.Fatal(err)
				}
			}
			if l, err = be.Renew(ctx, 4, coord.RenewRequest{Lease: l, Op: 30}); err != nil {
				t.Fatal(err)
			}
			if _, err := be.Complete(ctx, 5, coord.CompleteRequest{Lease: l, Op: 31}); err != nil {
				t.Fatal(err)
			}
			if got := n.Load() - before; got != tc.want {
				t.Fatalf("a cycle of 13 mutations took %d requests, want %d", got, tc.want)
			}
		})
	}
}

// TestClaimRoundTrips: a claim is one read (the run, the claim key and the
// open index together) and one transaction, plus a read of the candidate
// when the record cache does not hold it (another process registered the
// run).
func TestClaimRoundTrips(t *testing.T) {
	ctx := context.Background()
	c, n := countingClient(t)
	ns := "/test/claimroundtrips"
	admin := newBackend(t, etcdcoord.Config{Namespace: ns})
	tenant := coord.TenantID{8}
	mustRun(t, admin, tenant, 1, 3)
	for _, tc := range []struct {
		name string
		be   *etcdcoord.Backend
		want int64
	}{
		{"other process", mustNew(t, etcdcoord.Config{Client: c, Namespace: ns}), 3},
		{"same process", nil, 2},
	} {
		be := tc.be
		if be == nil {
			// A process that registered a run holds its shards' records.
			be = mustNew(t, etcdcoord.Config{Client: c, Namespace: ns})
			if _, err := be.CreateRun(ctx, 10, coord.CreateRunRequest{Tenant: tenant, Run: 2, Op: 1, Config: cfg}); err != nil {
				t.Fatal(err)
			}
			if _, err := be.RegisterShards(ctx, 10, coord.RegisterShardsRequest{Tenant: tenant, Run: 2, Op: 2, Shards: manifest(3)}); err != nil {
				t.Fatal(err)
			}
		}
		run := coord.RunID(1)
		if tc.be == nil {
			run = 2
		}
		before := n.Load()
		if _, err := be.ClaimNext(ctx, 20, coord.ClaimRequest{Tenant: tenant, Run: run, Worker: 5, Op: 40}); err != nil {
			t.Fatal(err)
		}
		if got := n.Load() - before; got != tc.want {
			t.Errorf("%s: a claim took %d requests, want %d", tc.name, got, tc.want)
		}
	}
}

func mustNew(t *testing.T, cfg etcdcoord.Config) *etcdcoord.Backend {
	t.Helper()
	b, err := etcdcoord.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
