package scaletest

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver"
	"github.com/ghost-scm/ghost/internal/etcdserver/etcdtest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/wal"
)

// cluster is an installation: one in-memory object store, one embedded
// etcd, and nodes that each see both through their own counters.
type cluster struct {
	t     testing.TB
	base  objstore.Store
	etcd  *etcdserver.Server
	clock clock
	ns    string
}

func newCluster(t testing.TB, p population) *cluster {
	// Deflated: ten million alerts need it to fit in 23 GiB; what is
	// counted is requests, which it does not change.
	c := &cluster{t: t, base: memstore.NewDeflated(), ns: "/ghost/coord"}
	c.clock.t = time.Now().UTC()
	populate(t, c.base, p)
	c.etcd = etcdtest.StartServer(t, etcdserver.Options{Dir: t.TempDir(), UnsafeNoFsync: true, Logger: zap.NewNop()})
	return c
}

// node is one ghost serve process: its server (git, web, API, the push
// hook), its scanner and workers, and its own counters.
type node struct {
	closers []func()
	m       *meter
	srv     *server.Server
	coord   *etcdcoord.Backend
	client  *clientv3.Client
	workers []*scanner.Worker
	http    *httptest.Server
}

// newNode starts a node with workers scan workers; serving makes it
// answer HTTP on loopback.
func (c *cluster) newNode(workers int, serving bool) *node {
	t := c.t
	n := &node{m: &meter{}}
	cl, err := n.m.etcdClient(c.etcd.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	n.closers = append(n.closers, func() { cl.Close() })
	n.client = cl
	if n.coord, err = etcdcoord.New(etcdcoord.Config{Client: cl, Namespace: c.ns,
		MaxTxnOps: etcdserver.MaxTxnOps, MaxTxnBytes: etcdserver.MaxRequestBytes}); err != nil {
		t.Fatal(err)
	}
	n.srv, err = server.New(context.Background(), server.Options{
		Store: n.m.wrap(c.base), CacheDir: t.TempDir(), Logger: quiet,
		WAL:  wal.Options{},
		Scan: scanner.Options{Coord: func() coord.Backend { return n.coord }, Now: c.clock.Now, Logger: quiet},
	})
	if err != nil {
		t.Fatal(err)
	}
	n.closers = append(n.closers, func() { n.srv.Close() })
	for range workers {
		w, err := n.srv.Scanner().NewWorker(scanner.WorkerOptions{Cache: n.srv.Cache()})
		if err != nil {
			t.Fatal(err)
		}
		n.workers = append(n.workers, w)
	}
	if serving {
		n.http = httptest.NewServer(n.srv.Handler()) // 127.0.0.1
		n.closers = append(n.closers, n.http.Close)
	}
	t.Cleanup(n.close)
	quiesce(n.m)
	return n
}

// close stops the node (the test's cleanup does it too).
func (n *node) close() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		n.closers[i]()
	}
	n.closers = nil
}

// quiesce waits until nothing has been counted on m for a moment: the
// background steps of what was measured (a push's hook starting its run)
// are done.
func quiesce(ms ...*meter) {
	sum := func() counts {
		var c counts
		for _, m := range ms {
			c = c.add(m.read())
		}
		return c
	}
	last := sum()
	for still := 0; still < 3; {
		time.Sleep(100 * time.Millisecond)
		now := sum()
		if now == last {
			still++
		} else {
			still = 0
		}
		last = now
	}
}

// metaOf is an uncounted view of the installation's metadata.
func (c *cluster) metaOf() *meta.Store { return meta.New(c.base, wal.New(c.base, wal.Options{})) }
