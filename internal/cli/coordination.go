package cli

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// coordination is a serving node's link to the coordination store: the
// embedded etcd (the zero-setup default) or a client to --etcd-endpoints.
// It starts in the background and never holds up or fails the git path:
// docs/design.md §6.5 requires pushes and clones to work while etcd is down.
type coordination struct {
	done   chan struct{}
	mu     sync.Mutex
	closer io.Closer
}

// startCoordination opens the coordination store in the background.
func startCoordination(ctx context.Context, logger *slog.Logger, cfg config.Config, ns string) *coordination {
	c := &coordination{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		client, closer, err := openWithRetry(ctx, logger, cfg)
		if err != nil {
			return // ctx ended
		}
		c.mu.Lock()
		c.closer = closer
		c.mu.Unlock()
		if _, err := etcdcoord.New(etcdcoord.Config{Client: client, Namespace: ns, MaxTxnOps: txnOps(cfg), MaxTxnBytes: txnBytes(cfg)}); err != nil {
			logger.Warn("coordination backend refused its configuration", "err", err)
			return
		}
		embedded := len(cfg.EtcdEndpoints) == 0
		logger.Info("coordination store ready", "endpoints", client.Endpoints(), "embedded", embedded, "namespace", ns)
	}()
	return c
}

// openWithRetry opens the store, retrying with backoff (1 s doubling to
// 1 min) until ctx ends: an etcd that is down, or an embedded directory
// held by another process on this data dir, may come free later.
func openWithRetry(ctx context.Context, logger *slog.Logger, cfg config.Config) (*clientv3.Client, io.Closer, error) {
	wait := time.Second
	for attempt := 1; ; attempt++ {
		client, closer, err := etcdserver.Open(ctx, cfg.DataDir, cfg.EtcdEndpoints)
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

// Close waits for the start to finish, then stops the client and, when
// embedded, the etcd server.
func (c *coordination) Close() {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closer != nil {
		c.closer.Close()
	}
}
