package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver"
)

// Coordination is a node's handle on the coordination store
// (docs/design.md §8.10). The node opens the store in the background and
// keeps retrying while etcd is unreachable, because git requests must
// never wait for it (docs/adr/0025-serve-coordination-lifecycle.md); so
// the server's components are given a handle to ask, not a backend. The
// secret scanner takes its coord.Admin and coord.Worker from it.
//
// Options.Etcd makes the server open and own one; tests may hand in their
// own as Options.Coordination.
type Coordination interface {
	// Backend returns the coordination backend once the store is open, and
	// false until then. It never blocks.
	Backend() (coord.Backend, bool)
}

// EtcdOptions say where a node's coordination store is and what the node
// does with it (Options.Etcd).
type EtcdOptions struct {
	// DataDir is the node's data directory: an embedded etcd keeps its
	// data under DataDir/etcd and records its client URL there
	// (EtcdEndpointFile) for the other commands on the same directory.
	DataDir string
	// Endpoints are the client URLs of an etcd cluster; empty runs the
	// embedded etcd (the zero-setup default).
	Endpoints []string
	// Namespace is the key prefix of the coordination records.
	Namespace string
	// GCInterval is how often the node tries to run coordination GC; zero
	// disables it. Only one node of a namespace runs it at a time
	// (etcdcoord.Backend.TryGC).
	GCInterval time.Duration
	// GCRetention is how long the summaries of ended runs are kept.
	GCRetention time.Duration
}

// EtcdEndpointFile is where a node running the embedded etcd records its
// client URL, for "ghost repo scan", "ghost worker" and "ghost coord" on
// the same data directory.
func EtcdEndpointFile(dataDir string) string { return filepath.Join(dataDir, "etcd", "endpoint") }

// NewCoordBackend is the coordination backend on client, with the
// transaction bounds of the etcd it talks to: the embedded server's, or
// etcd's defaults for a cluster ghost does not configure.
func NewCoordBackend(client *clientv3.Client, namespace string, embedded bool) (*etcdcoord.Backend, error) {
	cfg := etcdcoord.Config{Client: client, Namespace: namespace,
		MaxTxnOps: etcdcoord.DefaultMaxTxnOps, MaxTxnBytes: etcdcoord.DefaultMaxTxnBytes}
	if embedded {
		cfg.MaxTxnOps, cfg.MaxTxnBytes = etcdserver.MaxTxnOps, etcdserver.MaxRequestBytes
	}
	return etcdcoord.New(cfg)
}

// etcdLink is a node's link to the coordination store: the embedded etcd
// or a client to EtcdOptions.Endpoints. It opens in the background (start)
// and never holds up or fails the git path: docs/design.md §6.5 requires
// pushes and clones to work while etcd is down. Once open it runs
// coordination GC every GCInterval.
type etcdLink struct {
	logger *slog.Logger
	o      EtcdOptions
	// observe is told of every request sent to etcd (a metric).
	observe func(method string)
	// gcDone is told of every GC pass this node ran.
	gcDone func(removed int, err error)

	cancel context.CancelFunc // set by start
	done   chan struct{}
	mu     sync.Mutex
	closer io.Closer
	b      *etcdcoord.Backend // once ready
	client *clientv3.Client   // once open
	// endpointFile is where the embedded etcd's endpoint was recorded,
	// removed at Close.
	endpointFile string
	// gcs counts the GC passes this node ran, for tests.
	gcs atomic.Int64
}

var (
	_ Coordination = (*etcdLink)(nil)
	_ Readier      = (*etcdLink)(nil)
)

// gcLockTTL is how long a dead node's gc lock outlives it.
const gcLockTTL = time.Minute

// newEtcdLink returns the link, not yet open, with its metrics in reg.
func newEtcdLink(logger *slog.Logger, o EtcdOptions, reg prometheus.Registerer) *etcdLink {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ghost_etcd_requests_total",
		Help: "Requests this node sent to the coordination store, by gRPC method (streams count once, when opened).",
	}, []string{"method"})
	gcRuns := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ghost_coord_gc_runs_total",
		Help: "Passes of coordination GC this node ran (one node at a time does), by result: ok or failed.",
	}, []string{"result"})
	gcRemoved := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ghost_coord_gc_removed_runs_total",
		Help: "Ended scan runs whose records coordination GC removed from etcd on this node.",
	})
	reg.MustRegister(requests, gcRuns, gcRemoved)
	return &etcdLink{
		logger: logger, o: o, done: make(chan struct{}),
		observe: func(method string) { requests.WithLabelValues(method).Inc() },
		gcDone: func(removed int, err error) {
			gcRemoved.Add(float64(removed))
			if err != nil {
				gcRuns.WithLabelValues("failed").Inc()
			} else {
				gcRuns.WithLabelValues("ok").Inc()
			}
		},
	}
}

// start opens the coordination store in the background and then runs GC
// every GCInterval until close. It is called at most once.
func (c *etcdLink) start(ctx context.Context) {
	ctx, c.cancel = context.WithCancel(ctx)
	go func() {
		defer close(c.done)
		client, closer, err := c.openWithRetry(ctx)
		if err != nil {
			return // ctx ended
		}
		c.mu.Lock()
		c.closer, c.client = closer, client
		c.mu.Unlock()
		embedded := len(c.o.Endpoints) == 0
		b, err := NewCoordBackend(client, c.o.Namespace, embedded)
		if err != nil {
			c.logger.Warn("coordination backend refused its configuration", "err", err)
			return
		}
		c.mu.Lock()
		c.b = b
		c.mu.Unlock()
		if embedded && len(client.Endpoints()) == 1 {
			// The other commands on this data directory reach the
			// embedded etcd here while serve holds it (repo scan, repo
			// scans, worker, coord).
			if err := writeEndpoint(c.o.DataDir, client.Endpoints()[0]); err != nil {
				c.logger.Warn("cannot record the embedded etcd's endpoint; other commands on this data directory need --etcd-endpoints", "err", err)
			} else {
				c.mu.Lock()
				c.endpointFile = EtcdEndpointFile(c.o.DataDir)
				c.mu.Unlock()
			}
		}
		c.logger.Info("coordination store ready", "endpoints", client.Endpoints(), "embedded", embedded, "namespace", c.o.Namespace)
		if c.o.GCInterval > 0 {
			c.gcLoop(ctx, b)
		}
	}()
}

// gcLoop removes the summaries of runs ended more than GCRetention ago,
// every GCInterval until ctx ends. Ended runs released their shards
// already (docs/adr/0023-atomic-shard-caps.md); GC only bounds what their
// summaries take in etcd.
func (c *etcdLink) gcLoop(ctx context.Context, b *etcdcoord.Backend) {
	tick := time.NewTicker(c.o.GCInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ran, n, err := b.TryGC(ctx, coord.TimeOf(time.Now()), c.o.GCRetention, gcLockTTL)
		if ctx.Err() == nil && (ran || err != nil) {
			c.gcDone(n, err)
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			c.logger.Warn("coordination gc failed; it runs again next interval", "err", err, "removed", n)
		case ran:
			c.gcs.Add(1)
			c.logger.Debug("coordination gc", "removed", n)
		}
	}
}

// openWithRetry opens the store, retrying with backoff (1 s doubling to
// 1 min) until ctx ends: an etcd that is down, or an embedded directory
// held by another process on this data dir, may come free later.
func (c *etcdLink) openWithRetry(ctx context.Context) (*clientv3.Client, io.Closer, error) {
	wait := time.Second
	for attempt := 1; ; attempt++ {
		client, closer, err := etcdserver.Open(ctx, c.o.DataDir, c.o.Endpoints, etcdserver.WithRequestObserver(c.observe))
		if err == nil {
			return client, closer, nil
		}
		level := slog.LevelDebug
		if attempt == 1 {
			level = slog.LevelWarn
		}
		c.logger.Log(ctx, level, "coordination store unavailable, retrying; git serving is unaffected", "err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, time.Minute)
	}
}

// Ready implements Readier: the store is open and answers a read now.
func (c *etcdLink) Ready(ctx context.Context) error {
	c.mu.Lock()
	client, b := c.client, c.b
	c.mu.Unlock()
	if client == nil || b == nil {
		return errors.New("the coordination store is not open yet")
	}
	if _, err := client.Get(ctx, c.o.Namespace+"/readyz", clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("etcd does not answer: %w", err)
	}
	return nil
}

// Backend implements Coordination: the backend once the store is ready.
func (c *etcdLink) Backend() (coord.Backend, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.b == nil {
		return nil, false // not a typed nil in a non-nil interface
	}
	return c.b, true
}

// close stops the start or the GC loop and waits for it, then stops the
// client and, when embedded, the etcd server. Without start it does
// nothing.
func (c *etcdLink) close() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.endpointFile != "" {
		os.Remove(c.endpointFile)
	}
	if c.closer != nil {
		c.closer.Close()
	}
}

// writeEndpoint records the embedded etcd's client URL under the data
// directory (EtcdEndpointFile), replacing it atomically.
func writeEndpoint(dataDir, endpoint string) error {
	p := EtcdEndpointFile(dataDir)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(endpoint+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
