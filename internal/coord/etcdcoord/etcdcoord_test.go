package etcdcoord_test

import (
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
