package server

import (
	"context"
	"fmt"
	"net"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/sshd"
)

// Listeners are what Run serves on.
type Listeners struct {
	// HTTP serves git over HTTP, the API, the web UI and the health and
	// metrics endpoints.
	HTTP net.Listener
	// SSH, with SSHServer (Server.SSHServer), serves git over SSH; nil
	// turns SSH off.
	SSH       net.Listener
	SSHServer *sshd.Server
}

// Run is a node's life once its listeners are up: it serves l and,
// beside them, opens the coordination store the server owns
// (Options.Etcd), runs the in-process scan workers and the reconciler
// (Options.ScanWorkers, Options.Reconciler) and delivers webhook events
// (RunWebhooks). It returns when ctx ends or
// a listener fails; either way everything stops: the transports let the
// requests and commands in flight finish, then the scan farm stops, then
// the coordination store closes. Close is still the caller's, after Run.
//
// The server is the node's one composition root (docs/design.md §0):
// "ghost serve" parses flags, calls New and Run, and nothing else.
func (s *Server) Run(ctx context.Context, l Listeners) error {
	if l.HTTP == nil {
		return fmt.Errorf("server: run: no HTTP listener")
	}
	if (l.SSH == nil) != (l.SSHServer == nil) {
		return fmt.Errorf("server: run: an SSH listener goes with an SSH server")
	}
	if s.etcd != nil {
		// After the listeners are up, and in the background: git never
		// waits for the coordination store
		// (docs/adr/0025-serve-coordination-lifecycle.md).
		s.etcd.start(ctx)
		defer s.etcd.close()
	}
	stopScans := s.runScanning(ctx)
	defer stopScans()
	stopHooks := s.runWebhooks(ctx)
	defer stopHooks()

	// If either transport stops, both do.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var g errgroup.Group
	g.Go(func() error {
		defer cancel()
		return s.Serve(sctx, l.HTTP)
	})
	if l.SSH != nil {
		g.Go(func() error {
			defer cancel()
			if err := l.SSHServer.Serve(sctx, l.SSH); err != nil {
				return fmt.Errorf("ssh: %w", err)
			}
			return nil
		})
	}
	return g.Wait()
}

// runWebhooks delivers webhook events while the node runs (RunWebhooks)
// and returns what stops it and waits.
func (s *Server) runWebhooks(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.RunWebhooks(ctx)
	}()
	return func() { cancel(); <-done }
}

// runScanning starts the node's in-process scan workers and the
// reconciler, when scanning is on and they are asked for, and returns
// what stops them and waits.
func (s *Server) runScanning(ctx context.Context) (stop func()) {
	n, rec := s.opts.ScanWorkers, s.opts.Reconciler
	if s.scanner == nil || (n <= 0 && rec.Every <= 0) {
		return func() {}
	}
	rec.Pages = RepoPages(s.meta)
	if rec.Logger == nil {
		rec.Logger = s.logger
	}
	// In-process workers yield to serving (docs/adr/0051-geometric-checkpoints.md).
	wo := scanner.WorkerOptions{Cache: s.cache, Background: s.bgWork, LFS: s.lfs}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.scanner.RunWorkers(ctx, max(n, 0), wo, rec); err != nil && ctx.Err() == nil {
			s.logger.Warn("scan workers stopped", "err", err)
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// RepoPages lists every repository of m a page at a time, for the scan
// reconciler's sweep.
func RepoPages(m *meta.Store) scanner.RepoPager {
	return func(ctx context.Context, after string, limit int) ([]scanner.RepoRef, string, error) {
		rs, next, err := m.ReposPage(ctx, after, limit)
		out := make([]scanner.RepoRef, 0, len(rs))
		for _, r := range rs {
			out = append(out, scanner.RepoRef{Tenant: r.Owner, RepoID: r.ID})
		}
		return out, next, err
	}
}
