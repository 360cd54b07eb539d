package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver"
	"github.com/ghost-scm/ghost/internal/server"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// coordination is a serving node's link to the coordination store: the
// embedded etcd (the zero-setup default) or a client to --etcd-endpoints.
// It starts in the background and never holds up or fails the git path:
// docs/design.md §6.5 requires pushes and clones to work while etcd is down.
//
// serve hands it to the server as its server.Coordination, so that what
// serve builds stays reachable from the node's composition root; it keeps
// the etcd backend itself for the GC loop, which needs etcd's own TryGC.
type coordination struct {
	logger *slog.Logger
	cfg    config.Config
	o      coordOptions

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
	_ server.Coordination = (*coordination)(nil)
	_ server.Readier      = (*coordination)(nil)
)

// coordOptions are serve's coordination settings.
type coordOptions struct {
	Namespace string
	// GCInterval is how often the node tries to run coordination GC; zero
	// disables it. Only one node of a namespace runs it at a time
	// (etcdcoord.Backend.TryGC).
	GCInterval time.Duration
	// GCRetention is how long the summaries of ended runs are kept.
	GCRetention time.Duration
	// Observe, when set, is told of every request sent to etcd.
	Observe func(method string)
	// GCDone, when set, is told of every GC pass this node ran: the runs
	// it removed, and its error.
	GCDone func(removed int, err error)
}

// gcLockTTL is how long a dead node's gc lock outlives it.
const gcLockTTL = time.Minute

// newCoordination returns the link to the coordination store, not yet
// open: serve gives it to the server before listening, and starts it once
// the listener is up (docs/adr/0025-serve-coordination-lifecycle.md).
func newCoordination(logger *slog.Logger, cfg config.Config, o coordOptions) *coordination {
	return &coordination{logger: logger, cfg: cfg, o: o, done: make(chan struct{})}
}

// start opens the coordination store in the background and then runs GC
// every o.GCInterval until Close. It is called at most once.
func (c *coordination) start(ctx context.Context) {
	logger, cfg, o := c.logger, c.cfg, c.o
	ctx, c.cancel = context.WithCancel(ctx)
	go func() {
		defer close(c.done)
		client, closer, err := openWithRetry(ctx, logger, cfg, o.Observe)
		if err != nil {
			return // ctx ended
		}
		c.mu.Lock()
		c.closer, c.client = closer, client
		c.mu.Unlock()
		b, err := newCoordBackend(client, o.Namespace, cfg)
		if err != nil {
			logger.Warn("coordination backend refused its configuration", "err", err)
			return
		}
		c.mu.Lock()
		c.b = b
		c.mu.Unlock()
		embedded := len(cfg.EtcdEndpoints) == 0
		if embedded && len(client.Endpoints()) == 1 {
			// The other commands on this data directory reach the
			// embedded etcd here while serve holds it (repo scan, repo
			// scans, worker, coord).
			if err := writeEndpoint(cfg.DataDir, client.Endpoints()[0]); err != nil {
				logger.Warn("cannot record the embedded etcd's endpoint; other commands on this data directory need --etcd-endpoints", "err", err)
			} else {
				c.mu.Lock()
				c.endpointFile = coordEndpointFile(cfg.DataDir)
				c.mu.Unlock()
			}
		}
		logger.Info("coordination store ready", "endpoints", client.Endpoints(), "embedded", embedded, "namespace", o.Namespace)
		if o.GCInterval > 0 {
			c.gcLoop(ctx, logger, b, o)
		}
	}()
}

// gcLoop removes the summaries of runs ended more than o.GCRetention ago,
// every o.GCInterval until ctx ends. Ended runs released their shards
// already (docs/adr/0023-atomic-shard-caps.md); GC only bounds what their
// summaries take in etcd.
func (c *coordination) gcLoop(ctx context.Context, logger *slog.Logger, b *etcdcoord.Backend, o coordOptions) {
	tick := time.NewTicker(o.GCInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ran, n, err := b.TryGC(ctx, coord.TimeOf(time.Now()), o.GCRetention, gcLockTTL)
		if o.GCDone != nil && ctx.Err() == nil && (ran || err != nil) {
			o.GCDone(n, err)
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			logger.Warn("coordination gc failed; it runs again next interval", "err", err, "removed", n)
		case ran:
			c.gcs.Add(1)
			logger.Debug("coordination gc", "removed", n)
		}
	}
}

// openWithRetry opens the store, retrying with backoff (1 s doubling to
// 1 min) until ctx ends: an etcd that is down, or an embedded directory
// held by another process on this data dir, may come free later.
func openWithRetry(ctx context.Context, logger *slog.Logger, cfg config.Config, observe func(string)) (*clientv3.Client, io.Closer, error) {
	var opts []etcdserver.ClientOption
	if observe != nil {
		opts = append(opts, etcdserver.WithRequestObserver(observe))
	}
	wait := time.Second
	for attempt := 1; ; attempt++ {
		client, closer, err := etcdserver.Open(ctx, cfg.DataDir, cfg.EtcdEndpoints, opts...)
		if err == nil {
			return client, closer, nil
		}
		level := slog.LevelDebug
		if attempt == 1 {
			level = slog.LevelWarn
		}
		logger.Log(ctx, level, "coordination store unavailable, retrying; git serving is unaffected", "err", err, "retry_in", wait)
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

// Ready implements server.Readier: the store is open and answers a read
// now.
func (c *coordination) Ready(ctx context.Context) error {
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

// Backend implements server.Coordination: the backend once the store is
// ready.
func (c *coordination) Backend() (coord.Backend, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.b == nil {
		return nil, false // not a typed nil in a non-nil interface
	}
	return c.b, true
}

// Close stops the start or the GC loop and waits for it, then stops the
// client and, when embedded, the etcd server. Without start it does
// nothing.
func (c *coordination) Close() {
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
// directory (coordEndpointFile), replacing it atomically.
func writeEndpoint(dataDir, endpoint string) error {
	p := coordEndpointFile(dataDir)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(endpoint+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
