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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/api"
	"github.com/ghost-scm/ghost/internal/compact"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/githttp"
	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/gitsvc/cacheadapter"
	"github.com/ghost-scm/ghost/internal/hooks"
	"github.com/ghost-scm/ghost/internal/httpx"
	"github.com/ghost-scm/ghost/internal/lfs"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/countstore"
	"github.com/ghost-scm/ghost/internal/pulls"
	"github.com/ghost-scm/ghost/internal/pushprotect"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/sshd"
	"github.com/ghost-scm/ghost/internal/wal"
	"github.com/ghost-scm/ghost/internal/web"
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
	// Etcd, when set, makes the server open and own the node's link to
	// the coordination store (the embedded etcd or a cluster): Run opens
	// it in the background once the listeners are up, and never lets git
	// wait for it (docs/adr/0025-serve-coordination-lifecycle.md). With it
	// the server scans pushes for secrets over the coordinator.
	Etcd *EtcdOptions
	// Coordination is a handle on a coordination store the caller opens
	// itself (tests); Etcd makes one when it is nil. With it the server
	// scans pushes for secrets over the coordinator (Scan, and Scanner).
	Coordination Coordination
	// ScanWorkers is how many in-process scan workers Run runs while the
	// node serves (0: scanning is left to "ghost worker" processes).
	ScanWorkers int
	// Reconciler configures the scan reconciler Run runs beside them, one
	// process at a time (scanner.RunReconciler); Every 0 turns it off.
	// Pages is filled in by the server.
	Reconciler scanner.ReconcilerOptions
	// Auth overrides the metadata-backed authorizer (tests only).
	Auth githttp.Authorizer
	// Git is the git binary; empty means "git" from PATH.
	Git string
	// Limits are the git path's resource limits, for both transports:
	// zero fields take their defaults, negative ones switch a limit off
	// (gitsvc.Limits, docs/adr/0015-git-resource-limits.md).
	Limits gitsvc.Limits
	// The SSH transport's limits (sshd.Options): zero values take sshd's
	// defaults, negative ones switch a limit off
	// (docs/adr/0090-bounded-serving.md).
	SSHHandshakeTimeout            time.Duration
	SSHMaxUnauthenticated          int
	SSHMaxUnauthenticatedPerSource int
	SSHMaxConnsPerPrincipal        int
	SSHMaxSessions                 int
	SSHExecTimeout                 time.Duration
	// StoreTempMaxAge is the age past which a store's write temporaries
	// (a crashed writer's leftovers) are removed at start, for stores
	// that keep them (fsstore); default 1 hour, negative: never.
	StoreTempMaxAge time.Duration
	// LFSMaxObjectBytes bounds one Git LFS object (lfs.Options
	// MaxObjectSize: 0 the default, negative none).
	LFSMaxObjectBytes int64
	// PushProtectLFSBytes bounds the Git LFS bytes push protection reads
	// before a push lands (pushprotect.Options.MaxLFSBytes: 0 the
	// default, negative no bound).
	PushProtectLFSBytes int64
	// LFSQuotaBytes bounds one tenant's stored Git LFS bytes (lfs.Options
	// QuotaBytes; 0 or negative: none).
	LFSQuotaBytes int64
	// LFSPresigner, when set, sends Git LFS bytes over HTTP straight
	// between clients and the bucket through presigned URLs that expire
	// after LFSPresignExpiry (lfs.Options; docs/adr/0126-lfs-direct-to-s3.md).
	LFSPresigner     lfs.Presigner
	LFSPresignExpiry time.Duration
	// ShutdownTimeout bounds how long Serve waits for in-flight requests
	// after its context ends (default 10 minutes: a large push must be
	// able to finish).
	ShutdownTimeout time.Duration
	// WAL tunes the log's commit loop (tests shorten the backoff).
	WAL wal.Options
	// SSHCloneURL, when set, is the base of the SSH clone URLs the web UI
	// shows ("ssh://git@host:2222").
	SSHCloneURL string
	// Compaction tunes background compaction after pushes; the zero
	// value means compact.DefaultPolicy, one at a time
	// (docs/adr/0050-compaction.md).
	Compaction compact.TriggerOptions
	// Tracer records spans of fetches and pushes (HTTP and SSH) and of
	// the scan workers' shards (internal/tracing); nil records none.
	Tracer trace.Tracer
	// Background tunes how background work (compaction, in-process scan
	// workers) yields to serving: the priority of its git processes and
	// scanning threads, their budget, and how long it pauses for requests
	// in progress (gitexec.Background,
	// docs/adr/0051-geometric-checkpoints.md). The zero value means the
	// defaults.
	Background gitexec.BackgroundOptions
	// PullEvents is told of each pull-request event too (pulls.Events),
	// beside the pull_request webhook event the server queues; nil: only
	// the webhooks.
	PullEvents pulls.Events
	// Scan configures secret scanning over the coordinator, which is on
	// when Coordination or Scan.Coord is set: a push run after every
	// committed push, and the scan endpoints of the API (issue 13).
	// Store, Log and Alerts are filled in by the server, and Coord from
	// Coordination when unset.
	Scan scanner.Options
	// Webhooks configures webhook delivery, which runs with the
	// coordination store (RunWebhooks; docs/adr/0105-webhook-delivery.md).
	Webhooks WebhookOptions
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
	compact  *compact.Trigger
	git      *gitsvc.Service // shared by the transports, and so their git slots
	registry *prometheus.Registry
	sshStats *sshd.Metrics
	handler  http.Handler
	alerts   *alerts.Store
	scanner  *scanner.Scanner // nil: scanning is off
	pulls    *pulls.Service
	// pullSyncs coalesces the updates of refs/pull/<n>/head after pushes.
	pullSyncs pullSyncs
	bgWork    *gitexec.Background

	hooks       *hooks.Store
	dispatcher  *hooks.Dispatcher
	boards      *boards
	webhookOpts WebhookOptions
	lfsTokens   *lfs.Tokens
	lfs         *lfs.Handler // the LFS APIs, and the objects git-lfs-transfer serves

	// bg carries the push-run starts, which outlive their request; Close
	// cancels it and waits for them.
	bg       context.Context
	bgCancel context.CancelFunc
	bgWG     sync.WaitGroup

	etcd *etcdLink // the coordination link the server owns (Options.Etcd); nil otherwise
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
	if opts.Tracer == nil {
		opts.Tracer = noop.NewTracerProvider().Tracer("")
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
	// Every object-store request is counted (issue 22).
	storeRequests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ghost_objstore_requests_total",
		Help: "Requests this node sent to the object store, by operation (get, get_range, put, put_if_match, put_if_absent, delete, list, copy) and result (ok, not_found, precondition_failed, error).",
	}, []string{"op", "result"})
	opts.Registry.MustRegister(storeRequests)
	opts.Store = countstore.New(opts.Store, func(op string, err error) {
		result := "ok"
		switch {
		case err == nil:
		case errors.Is(err, objstore.ErrNotFound):
			result = "not_found"
		case errors.Is(err, objstore.ErrPreconditionFailed):
			result = "precondition_failed"
		default:
			result = "error"
		}
		storeRequests.WithLabelValues(op, result).Inc()
	})
	s := &Server{opts: opts, logger: opts.Logger, registry: opts.Registry}
	// The coordination link comes first: the scanner and the webhook
	// dispatcher take their handle on it.
	if opts.Coordination == nil && opts.Etcd != nil {
		s.etcd = newEtcdLink(opts.Logger, *opts.Etcd, opts.Registry)
		opts.Coordination = s.etcd
		s.opts.Coordination = s.etcd
	}
	s.log = wal.New(opts.Store, opts.WAL)
	// A fork copies its source's LFS references before its name is
	// claimed, admitted against the destination's quota across tenants
	// (docs/adr/0132-lfs-forks.md).
	s.meta = meta.New(opts.Store, s.log, meta.WithForkCopier(lfs.NewForks(opts.Store, lfs.ForkOptions{QuotaBytes: opts.LFSQuotaBytes})))
	metrics := gitsvc.NewMetrics(opts.Registry)
	s.bgWork = gitexec.NewBackground(opts.Background)
	registerBackground(opts.Registry, s.bgWork)
	s.sshStats = sshd.NewMetrics(opts.Registry)
	cache, err := repocache.New(opts.CacheDir, s.log, repocache.Options{
		Git:     &gitexec.Runner{Path: opts.Git},
		Logger:  opts.Logger,
		Observe: cacheadapter.Observe(metrics),
		// The cache's own repacks are background work too.
		Background: s.bgWork,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.cache = cache
	// One place undoes a failed New: what is built so far is closed.
	ok := false
	defer func() {
		if !ok {
			s.closeParts()
		}
	}()
	s.alerts = alerts.New(opts.Store)
	s.setupWebhooks(opts.Webhooks)
	copts := opts.Compaction
	if copts.Logger == nil {
		copts.Logger = opts.Logger
	}
	compactions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ghost_compactions_total",
		Help: "Background compactions this node ran, by result: ok, not_needed (another compactor was first, or nothing to fold) or failed (docs/adr/0050-compaction.md).",
	}, []string{"result"})
	compactFolded := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ghost_compaction_folded_layers_total",
		Help: "Layers (pushes) the background compactions of this node folded into checkpoints.",
	})
	compactBytes := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "ghost_compaction_checkpoint_bytes",
		Help:    "Size of each checkpoint pack the background compactions of this node wrote.",
		Buckets: prometheus.ExponentialBuckets(64<<10, 4, 10), // 64 KiB to 16 GiB
	})
	opts.Registry.MustRegister(compactions, compactFolded, compactBytes)
	done := copts.Done
	copts.Done = func(repo string, res compact.Result, err error) {
		result := "ok"
		switch {
		case errors.Is(err, wal.ErrAlreadyCompacted), errors.Is(err, compact.ErrNothingToCompact), errors.Is(err, wal.ErrRepoDeleted):
			result = "not_needed"
		case err != nil:
			result = "failed"
		default:
			compactFolded.Add(float64(res.Folded))
			compactBytes.Observe(float64(res.Checkpoint.Size))
		}
		compactions.WithLabelValues(result).Inc()
		if done != nil {
			done(repo, res, err)
		}
	}
	// Compaction keeps what hooks have not delivered
	// (docs/adr/0105-webhook-delivery.md).
	cops := compact.Options{Logger: opts.Logger, Git: s.bgWork.Runner(cache.Git()), Events: s.hooks}
	if opts.Scan.Coord != nil || opts.Coordination != nil {
		// Scanning is on: compaction must not fold away what it has not
		// read yet (docs/adr/0033-scan-coverage.md).
		cops.Coverage = scanner.NewCoverage(opts.Store)
	}
	s.compact = compact.NewTrigger(compact.New(s.log, cache, cops), copts)
	s.bg, s.bgCancel = context.WithCancel(context.Background())
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		s.migrate()
	}()
	apiOpts := []api.Option{api.WithAlerts(s.alerts), api.WithHooks(s.hooks)}
	var onCommit func(gitsvc.Request, wal.Result)
	if opts.Scan.Coord == nil && opts.Coordination != nil {
		c := opts.Coordination
		opts.Scan.Coord = func() coord.Backend {
			if b, ok := c.Backend(); ok {
				return b
			}
			return nil
		}
	}
	if opts.Scan.Coord != nil {
		so := opts.Scan
		so.Store, so.Log, so.Alerts = opts.Store, s.log, s.alerts
		if so.Logger == nil {
			so.Logger = opts.Logger
		}
		if so.Metrics == nil {
			so.Metrics = scanner.NewMetrics(opts.Registry)
		}
		if so.Tracer == nil {
			so.Tracer = opts.Tracer
		}
		if so.RunDone == nil {
			so.RunDone = s.scanRunEvent
		}
		sc, err := scanner.New(so)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.scanner = sc
		onCommit = s.startPushRun
		apiOpts = append(apiOpts, api.WithScans(sc))
	}
	auth := opts.Auth
	if auth == nil {
		auth = metaAuth{s.meta}
	}
	svc := cacheadapter.Options(cache, s.log)
	svc.Logger, svc.Metrics = opts.Logger, metrics
	svc.Limits = opts.Limits
	svc.Serving = s.bgWork
	protect, err := pushprotect.New(nil, s.alerts, pushprotect.Options{MaxLFSBytes: opts.PushProtectLFSBytes})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	svc.PushProtect = newMeteredProtect(protect, opts.Registry)
	// After every committed push, off the response path: maybe a
	// background compaction (docs/adr/0050-compaction.md), and the
	// push's scan run when scanning is on.
	scan := onCommit
	// The pending marks go before the commit point: a node that dies
	// right after the commit leaves them for the reconcilers
	// (docs/adr/0033-scan-coverage.md, docs/adr/0105-webhook-delivery.md).
	svc.BeforeCommit = func(ctx context.Context, req gitsvc.Request) error {
		if req.Tenant == "" {
			return nil
		}
		if s.scanner != nil {
			if err := s.scanner.Coverage.MarkPending(ctx, req.Tenant, req.Repo); err != nil {
				return err
			}
		}
		return s.beforeCommitHooks(ctx, req)
	}
	svc.OnCommit = func(req gitsvc.Request, res wal.Result) {
		s.compact.AfterCommit(req.Repo, res)
		if scan != nil {
			scan(req, res)
		}
		s.afterCommitHooks(req, res)
		s.pullsAfterCommit(req, res)
	}
	// The LFS tokens minted over SSH (docs/adr/0124-lfs-over-ssh.md).
	if s.lfsTokens, err = lfs.LoadTokens(ctx, opts.Store); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	lfsHandler, err := lfs.New(lfs.Options{Store: opts.Store, Auth: lfsAuth{Authorizer: auth, meta: metaAuth{s.meta}, tokens: s.lfsTokens}, Logger: opts.Logger, MaxObjectSize: opts.LFSMaxObjectBytes, QuotaBytes: opts.LFSQuotaBytes, IOTimeout: opts.Limits.IOTimeout,
		Presigner: opts.LFSPresigner, PresignExpiry: opts.LFSPresignExpiry})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	// A push whose LFS pointers name objects never uploaded is refused.
	svc.LFS = lfsHandler
	s.lfs = lfsHandler
	git, err := githttp.NewHandler(githttp.Options{
		ServiceOptions: svc,
		Auth:           auth,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if s.pulls, err = s.newPulls(git.Service(), cache); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	apiOpts = append(apiOpts, api.WithPulls(s.pulls), api.WithLFS(lfsAPI{lfsHandler}))
	apiHandler := api.NewHandler(s.meta, opts.Logger, apiOpts...)
	uiOpts := web.Options{
		Store: opts.Store, Auth: s.meta, Repos: s.meta, Authz: s.meta, Cache: cacheDirs{cache}, API: apiHandler,
		Alerts: s.alerts, Git: opts.Git, SSHURL: opts.SSHCloneURL, Logger: opts.Logger, Pulls: s.pulls,
		LFS: lfsWeb{s.lfs},
	}
	if s.scanner != nil {
		uiOpts.Scans = s.scanner
	}
	ui, err := web.New(ctx, uiOpts)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", apiHandler)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelError)}))
	s.git = git.Service()
	// The web UI owns "/", "/owner", "/owner/repo" and "/owner/repo/-/...";
	// the rest is git's.
	gitTraced := traceGit(opts.Tracer, git)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lfs.Owns(r.URL.Path) { // /<owner>/<repo>.git/info/lfs/... (issue 23)
			lfsHandler.ServeHTTP(w, r)
			return
		}
		if web.Owns(r.URL.Path) {
			ui.ServeHTTP(w, r)
			return
		}
		gitTraced.ServeHTTP(w, r)
	}))
	s.handler = s.accessLog(mux)
	ok = true
	return s, nil
}

// Handler returns the server's HTTP handler (git, the web UI, /api/,
// /healthz, /metrics).
func (s *Server) Handler() http.Handler { return s.handler }

// Meta returns the metadata store, for tests that create tenants, tokens
// and repositories in-process.
func (s *Server) Meta() *meta.Store { return s.meta }

// Store returns the object store.
func (s *Server) Store() objstore.Store { return s.opts.Store }

// Log returns the repository log.
func (s *Server) Log() *wal.Log { return s.log }

// Cache returns the repository cache.
func (s *Server) Cache() *repocache.Cache { return s.cache }

// Registry returns the metrics registry.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Scanner returns the secret-scanning run service, or nil when scanning
// is off (Options.Scan.Coord unset).
func (s *Server) Scanner() *scanner.Scanner { return s.scanner }

// Background returns the node's background-work policy: in-process scan
// workers take it so that they yield to serving as compaction does.
func (s *Server) Background() *gitexec.Background { return s.bgWork }

// registerBackground exposes a Background's state on /metrics.
func registerBackground(reg *prometheus.Registry, b *gitexec.Background) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ghost_background_git_processes",
			Help: "Git processes of background work (compaction, scans) running now; they run at a lower priority within their own budget (docs/adr/0051-geometric-checkpoints.md).",
		}, func() float64 { return float64(b.Stats().Running) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ghost_background_git_waiting",
			Help: "Git processes of background work waiting for a place in the background budget.",
		}, func() float64 { return float64(b.Stats().Waiting) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ghost_background_pause_seconds_total",
			Help: "Time background work spent waiting for git requests in progress to finish.",
		}, func() float64 { return b.Stats().Paused.Seconds() }),
	)
}

// Alerts returns the alert store.
func (s *Server) Alerts() *alerts.Store { return s.alerts }

// pushRunTimeout bounds starting one push run; a start that does not
// finish is left to the reconciler.
const pushRunTimeout = time.Minute

// startPushRun starts the push run of a committed push in the
// background: the push's response never waits for it, and a failure
// (etcd down) leaves the run to the reconciler, which finds the seq
// after the repository's scan watermark.
func (s *Server) startPushRun(req gitsvc.Request, res wal.Result) {
	if req.Tenant == "" {
		return
	}
	s.background(pushRunTimeout, func(ctx context.Context) {
		spec := scanner.Spec{Tenant: req.Tenant, RepoID: req.Repo, Kind: scanner.KindPush, Seq: res.Seq}
		if _, err := s.scanner.Start(ctx, spec); err != nil {
			s.logger.Warn("starting a push scan failed; the reconciler retries", "run", spec.String(), "err", err)
		}
	})
}

// background runs fn on a goroutine of its own with the server's
// background context bounded by timeout: the request that asks for it
// never waits, and Close waits for it (bgWG).
func (s *Server) background(timeout time.Duration, fn func(ctx context.Context)) {
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		ctx, cancel := context.WithTimeout(s.bg, timeout)
		defer cancel()
		fn(ctx)
	}()
}

// migrate runs ensureListings once on this node. With a coordination
// store it runs under an election, one node at a time: on an
// installation that predates the listings or the alerts' state index,
// the first node to lead reads every record and writes the markers, and
// each node after it finds them with a GET or two; without it, every node
// started together read all of it (ten million alerts at a hundred nodes
// is a billion GETs; docs/adr/0133-migrations-under-an-election.md).
// Until it has run here, lists read the records, which is slower, not
// wrong.
func (s *Server) migrate() {
	if s.opts.Coordination == nil {
		s.ensureListings(s.bg)
		s.logger.Debug("the listings and the alerts' state index are complete")
		return
	}
	ctx, done := context.WithCancel(s.bg)
	defer done()
	_ = s.lead(ctx, "listings", migrateLeaderTTL, func(lctx context.Context) {
		s.ensureListings(lctx)
		if lctx.Err() == nil { // else leadership was lost: do it again when won
			s.logger.Debug("the listings and the alerts' state index are complete")
			done()
		}
	})
}

// migrateLeaderTTL is how long a node that died while migrating keeps
// the others from taking over.
const migrateLeaderTTL = 30 * time.Second

// ensureListings builds the listing keys of an installation whose
// records predate them (docs/adr/0027-listing-keys.md), and the alerts'
// state index (docs/adr/0122-alert-state-index.md); until then lists
// read the records. It is idempotent, so two nodes that both believe
// they lead (migrate) do nothing wrong.
func (s *Server) ensureListings(ctx context.Context) {
	built, tenants, repos, err := s.meta.EnsureListings(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		s.logger.Warn("building the listings of tenants and repositories failed; lists read every record until a restart builds them", "err", err)
	case built && err == nil:
		s.logger.Info("built the listings of tenants and repositories", "tenants", tenants, "repositories", repos)
	}
	built, alerts, err := s.alerts.EnsureStateIndex(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		s.logger.Warn("building the alerts' state index failed; lists by state read every alert until a restart builds it", "err", err)
	case built && err == nil:
		s.logger.Info("built the alerts' state index", "alerts", alerts)
	}
}

// Close stops background work (compactions in flight are cancelled; an
// interrupted compaction leaves the log as it was). Call it after Serve
// has returned.
func (s *Server) Close() error {
	s.closeParts()
	return nil
}

// closeParts closes what New built, in reverse order of need: the
// compaction trigger, the push-run starts, the cache. It is also New's
// one cleanup when it fails part way.
func (s *Server) closeParts() {
	if s.compact != nil {
		s.compact.Close()
	}
	if s.bgCancel != nil {
		s.bgCancel()
		s.bgWG.Wait()
	}
	s.cache.Close()
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
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/metrics" {
			level = slog.LevelDebug
		}
		s.logger.Log(r.Context(), level, "request", "method", r.Method, "path", r.URL.Path,
			"query", r.URL.RawQuery, "status", lw.Status, "bytes", lw.Bytes,
			"duration", time.Since(start), "remote", r.RemoteAddr)
	})
}

// gitAuthError translates a metadata failure for githttp: a storage
// outage becomes access.ErrUnavailable (503), anything else stays a
// server error.
func gitAuthError(what string, err error) error {
	if errors.Is(err, meta.ErrUnavailable) {
		return fmt.Errorf("%s: %w: %w", what, access.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// cacheDirs adapts the repository cache to the web UI's Materializer.
type cacheDirs struct{ c *repocache.Cache }

func (d cacheDirs) Materialize(ctx context.Context, repoID string) (string, error) {
	snap, err := d.c.Materialize(ctx, repoID)
	if err != nil {
		return "", err
	}
	return snap.Dir, nil
}

// metaAuth adapts the metadata store to what the git transport needs.
type metaAuth struct{ m *meta.Store }

func (a metaAuth) Authorize(ctx context.Context, token, owner, name string) (access.Grant, error) {
	var p *meta.Principal
	if token != "" {
		pr, err := a.m.Authenticate(ctx, token)
		if errors.Is(err, meta.ErrUnauthenticated) {
			return access.Grant{}, fmt.Errorf("%w: %w", access.ErrUnauthenticated, err)
		}
		if err != nil {
			return access.Grant{}, gitAuthError("authenticate", err)
		}
		p = &pr
	}
	return a.grant(ctx, p, owner, name)
}

// grant resolves owner/name and p's level on it (p nil: anonymous).
func (a metaAuth) grant(ctx context.Context, p *meta.Principal, owner, name string) (access.Grant, error) {
	r, err := a.m.Repo(ctx, owner, name)
	if errors.Is(err, meta.ErrNotFound) || errors.Is(err, meta.ErrInvalidName) {
		return access.Grant{}, fmt.Errorf("%w: %w", access.ErrNotFound, err)
	}
	if err != nil {
		return access.Grant{}, gitAuthError("resolve "+owner+"/"+name, err)
	}
	read, err := a.m.CanRead(ctx, p, r)
	if err != nil {
		return access.Grant{}, gitAuthError("authorize read", err)
	}
	write, err := a.m.CanWrite(ctx, p, r)
	if err != nil {
		return access.Grant{}, gitAuthError("authorize write", err)
	}
	g := access.Grant{RepoID: r.ID, Tenant: r.Owner, Name: r.Name, PushProtection: r.PushProtection, AllowReplaceRefs: r.AllowReplaceRefs, DefaultBranch: r.DefaultBranch, BranchRules: r.BranchRules, AllowMissingLFS: r.AllowMissingLFS, LFSScanAfterPush: r.LFSScanAfterPush}
	switch {
	case write:
		g.Level = access.Write
	case read:
		g.Level = access.Read
	}
	// The credential goes with the name: a push-protection bypass is
	// recorded with it (the token's id, or the SSH key's fingerprint and
	// title), and so is the log's pushed-by.
	g.Principal = p.String()
	if p != nil {
		g.Actor = p.Tenant
	}
	return g, nil
}
