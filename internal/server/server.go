// Package server is ghost's composition root: it wires the object store,
// the repository log, the metadata store, the repository cache, the git
// smart HTTP handler, the REST API, health and metrics into one
// http.Handler, and serves it with a graceful shutdown.
//
// It is a library first so that tests and benchmarks can run a real server
// in-process (New, then Handler) exactly as "ghost serve" runs it (New,
// then Serve).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/api"
	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/githttp"
	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/gitsvc/cacheadapter"
	"github.com/ghost-scm/ghost/internal/httpx"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/pushprotect"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// Options configure a Server. Store and CacheDir are required.
type Options struct {
	// Store is the object store: the only truth.
	Store objstore.Store
	// CacheDir holds materialized repositories; it may be wiped at any
	// time, and each node should have its own (nodes may share one: a
	// file lock serializes materializations).
	CacheDir string
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Registry receives the metrics served on /metrics; nil creates one.
	// The global registry is never used.
	Registry *prometheus.Registry
	// Coordination is the node's handle on the coordination store, which
	// the caller opens in the background; nil when the node has none. The
	// server does not use it yet: it is where the secret scanner will
	// attach (see Coordination).
	Coordination Coordination
	// Auth overrides the metadata-backed authorizer (tests only).
	Auth githttp.Authorizer
	// Git is the git binary; empty means "git" from PATH.
	Git string
	// Limits are the git transport's resource limits; zero values take
	// githttp's defaults, negative ones switch a limit off (see
	// githttp.Options and docs/adr/0015-git-resource-limits.md).
	MaxPushBytes         int64
	MaxFetchRequestBytes int64
	FetchRequestTimeout  time.Duration
	IOTimeout            time.Duration
	MaxGitProcesses      int
	GitQueue             int
	GitQueueTimeout      time.Duration
	// StoreTempMaxAge is the age past which a store's write temporaries
	// (a crashed writer's leftovers) are removed at start, for stores
	// that keep them (fsstore); default 1 hour, negative: never.
	StoreTempMaxAge time.Duration
	// ShutdownTimeout bounds how long Serve waits for in-flight requests
	// after its context ends (default 10 minutes: a large push must be
	// able to finish).
	ShutdownTimeout time.Duration
	// WAL tunes the log's commit loop (tests shorten the backoff).
	WAL wal.Options
}

// tempSweeper is a store that leaves write temporaries behind when its
// process is killed mid-write (fsstore.Store.RemoveStaleTemp).
type tempSweeper interface {
	RemoveStaleTemp(olderThan time.Duration) (int, error)
}

// Server is a ghost node.
type Server struct {
	opts     Options
	logger   *slog.Logger
	log      *wal.Log
	meta     *meta.Store
	cache    *repocache.Cache
	git      *gitsvc.Service // shared by the transports, and so their git slots
	registry *prometheus.Registry
	handler  http.Handler
}

// New builds a server. ctx is only for setup; the server lives until
// Close.
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.Store == nil {
		return nil, errors.New("server: no object store")
	}
	if opts.CacheDir == "" {
		return nil, errors.New("server: no cache directory")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
		opts.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 10 * time.Minute
	}
	if opts.StoreTempMaxAge == 0 {
		opts.StoreTempMaxAge = time.Hour
	}
	if ts, ok := opts.Store.(tempSweeper); ok && opts.StoreTempMaxAge > 0 {
		n, err := ts.RemoveStaleTemp(opts.StoreTempMaxAge)
		if err != nil {
			opts.Logger.Warn("removing stale object-store temporaries failed", "err", err)
		} else if n > 0 {
			opts.Logger.Info("removed stale object-store temporaries", "count", n)
		}
	}
	s := &Server{opts: opts, logger: opts.Logger, registry: opts.Registry}
	s.log = wal.New(opts.Store, opts.WAL)
	s.meta = meta.New(opts.Store, s.log)
	metrics := gitsvc.NewMetrics(opts.Registry)
	cache, err := repocache.New(opts.CacheDir, s.log, repocache.Options{
		Git:     &gitexec.Runner{Path: opts.Git},
		Logger:  opts.Logger,
		Observe: cacheadapter.Observe(metrics),
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.cache = cache
	auth := opts.Auth
	if auth == nil {
		auth = metaAuth{s.meta}
	}
	svc := cacheadapter.Options(cache, s.log)
	svc.Logger, svc.Metrics = opts.Logger, metrics
	svc.MaxPushBytes = opts.MaxPushBytes
	svc.MaxFetchRequestBytes = opts.MaxFetchRequestBytes
	svc.MaxGitProcesses = opts.MaxGitProcesses
	svc.GitQueue = opts.GitQueue
	svc.GitQueueTimeout = opts.GitQueueTimeout
	alertStore := alerts.New(opts.Store)
	protect, err := pushprotect.New(nil, alertStore, pushprotect.Options{})
	if err != nil {
		cache.Close()
		return nil, fmt.Errorf("server: %w", err)
	}
	svc.PushProtect = protect
	git, err := githttp.NewHandler(githttp.Options{
		ServiceOptions:      svc,
		Auth:                auth,
		FetchRequestTimeout: opts.FetchRequestTimeout,
		IOTimeout:           opts.IOTimeout,
	})
	if err != nil {
		cache.Close()
		return nil, fmt.Errorf("server: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", api.NewHandler(s.meta, opts.Logger, api.WithAlerts(alertStore)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelError)}))
	s.git = git.Service()
	mux.Handle("/", git)
	s.handler = s.accessLog(mux)
	return s, nil
}

// Handler returns the server's HTTP handler (git, /api/, /healthz,
// /metrics).
func (s *Server) Handler() http.Handler { return s.handler }

// Meta returns the metadata store, for tests that create tenants, tokens
// and repositories in-process.
func (s *Server) Meta() *meta.Store { return s.meta }

// Log returns the repository log.
func (s *Server) Log() *wal.Log { return s.log }

// Cache returns the repository cache.
func (s *Server) Cache() *repocache.Cache { return s.cache }

// Registry returns the metrics registry.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Close stops background work. Call it after Serve has returned.
func (s *Server) Close() error {
	s.cache.Close()
	return nil
}

// Serve serves on ln until ctx ends, then stops accepting connections and
// waits (up to ShutdownTimeout) for requests in flight, so that a push
// being committed finishes.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.logger.Info("shutting down: no new requests; waiting for requests in flight", "timeout", s.opts.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	<-errc
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	s.logger.Info("shut down")
	return nil
}

// accessLog logs one line per request (health and metrics scrapes at
// debug level).
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		lw := &httpx.StatusWriter{ResponseWriter: w}
		next.ServeHTTP(lw, r)
		level := slog.LevelInfo
		if r.URL.Path == "/healthz" || r.URL.Path == "/metrics" {
			level = slog.LevelDebug
		}
		s.logger.Log(r.Context(), level, "request", "method", r.Method, "path", r.URL.Path,
			"query", r.URL.RawQuery, "status", lw.Status, "bytes", lw.Bytes,
			"duration", time.Since(start), "remote", r.RemoteAddr)
	})
}

// gitAuthError translates a metadata failure for githttp: a storage
// outage becomes githttp.ErrUnavailable (503), anything else stays a
// server error.
func gitAuthError(what string, err error) error {
	if errors.Is(err, meta.ErrUnavailable) {
		return fmt.Errorf("%s: %w: %w", what, githttp.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// metaAuth adapts the metadata store to what the git transport needs.
type metaAuth struct{ m *meta.Store }

func (a metaAuth) Authorize(ctx context.Context, token, owner, name string) (githttp.Access, error) {
	var p *meta.Principal
	if token != "" {
		pr, err := a.m.Authenticate(ctx, token)
		if errors.Is(err, meta.ErrUnauthenticated) {
			return githttp.Access{}, githttp.ErrUnauthenticated
		}
		if err != nil {
			return githttp.Access{}, gitAuthError("authenticate", err)
		}
		p = &pr
	}
	return a.access(ctx, p, owner, name)
}

// access resolves owner/name and p's rights on it (p nil: anonymous).
func (a metaAuth) access(ctx context.Context, p *meta.Principal, owner, name string) (githttp.Access, error) {
	r, err := a.m.Repo(ctx, owner, name)
	if errors.Is(err, meta.ErrNotFound) || errors.Is(err, meta.ErrInvalidName) {
		return githttp.Access{}, githttp.ErrNotFound
	}
	if err != nil {
		return githttp.Access{}, fmt.Errorf("resolve %s/%s: %w", owner, name, err)
	}
	read, err := a.m.CanRead(ctx, p, r)
	if err != nil {
		return githttp.Access{}, gitAuthError("authorize read", err)
	}
	write, err := a.m.CanWrite(ctx, p, r)
	if err != nil {
		return githttp.Access{}, gitAuthError("authorize write", err)
	}
	acc := githttp.Access{RepoID: r.ID, Read: read, Write: write, Tenant: r.Owner, PushProtection: r.PushProtection}
	if p != nil {
		acc.Principal = p.Tenant + " (token " + p.TokenID + ")"
	}
	return acc, nil
}
