package etcdcoord_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/coordtest"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver/etcdtest"
)

// client is the package's shared embedded etcd; every backend gets a
// namespace of its own on it.
var client *clientv3.Client

func TestMain(m *testing.M) { etcdtest.Main(m, &client) }

var namespaces atomic.Int64

func newBackend(t testing.TB, cfg etcdcoord.Config) *etcdcoord.Backend {
	t.Helper()
	cfg.Client = client
	if cfg.Namespace == "" {
		cfg.Namespace = fmt.Sprintf("/test/ns%d", namespaces.Add(1))
	}
	b, err := etcdcoord.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// seeds is how many simulation seeds run against etcd: every step of the
// simulation is several etcd round trips, so 200 seeds take minutes. CI
// runs with -race, which slows the in-process etcd too. All 200:
//
//	go test -run TestSimulation ./internal/coord/etcdcoord/ -args -seeds=200
var seeds = flag.Int("seeds", 0, "simulation seeds against etcd (default 40, 8 with -race or -short)")

func simSeeds() int {
	switch {
	case *seeds > 0:
		return *seeds
	case raceEnabled || testing.Short():
		return 8
	}
	return 40
}

func TestConformance(t *testing.T) {
	coordtest.Run(t, func(t *testing.T, lim coord.Limits) coord.Backend {
		return newBackend(t, etcdcoord.Config{Limits: lim})
	}, coordtest.SkipSimulation())
}

func TestConformanceAdvisory(t *testing.T) {
	coordtest.Run(t, func(t *testing.T, lim coord.Limits) coord.Backend {
		return newBackend(t, etcdcoord.Config{Limits: lim, GlobalCap: etcdcoord.GlobalCapAdvisory})
	}, coordtest.SkipSimulation())
}

func TestSimulation(t *testing.T) {
	t.Parallel()
	coordtest.Run(t, func(t *testing.T, lim coord.Limits) coord.Backend {
		return newBackend(t, etcdcoord.Config{Limits: lim})
	}, coordtest.SkipConformance(), coordtest.Seeds(simSeeds()), coordtest.Parallel())
}

// TestClaimNextSkipsACorruptShard: one shard record that cannot be decoded
// does not stop ClaimNext from claiming the run's other shards; once only
// it is left, ClaimNext reports it rather than "nothing available".
func TestClaimNextSkipsACorruptShard(t *testing.T) {
	ctx := context.Background()
	ns := fmt.Sprintf("/test/corruptclaim%d", namespaces.Add(1))
	b := newBackend(t, etcdcoord.Config{Namespace: ns})
	tenant := coord.TenantID{1}
	mustRun(t, b, tenant, 1, 3)
	if _, err := client.Put(ctx, ns+"/shards/0000000000000001/0000000000000002", "garbage"); err != nil {
		t.Fatal(err)
	}
	// A worker whose scan starts at shard 2, then any other.
	first := coord.WorkerID(1)
	for coord.ClaimOffset(first, 3) != 1 {
		first++
	}
	for i, w := range []coord.WorkerID{first, first + 100} {
		l, err := b.ClaimNext(ctx, 10, coord.ClaimRequest{Tenant: tenant, Run: 1, Worker: w, Op: coord.OpID(10 + i)})
		if err != nil || l.Shard == 2 {
			t.Fatalf("claim by worker %d with a corrupt shard: %+v %v", w, l, err)
		}
	}
	_, err := b.ClaimNext(ctx, 10, coord.ClaimRequest{Tenant: tenant, Run: 1, Worker: 3, Op: 13})
	if !errors.Is(err, coord.ErrCorrupt) {
		t.Fatalf("claim with only the corrupt shard left: %v", err)
	}
}
