package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/certfile"
	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/sshd"
	"github.com/ghost-scm/ghost/internal/tracing"
)

// newServeCmd returns "ghost serve", which runs a ghost node until its
// context ends (SIGINT/SIGTERM in main), then shuts down gracefully. With
// no flags it works out of the box: it listens on 127.0.0.1:8080, and for
// git over SSH on 127.0.0.1:2222, and keeps everything under ./ghost-data.
func newServeCmd(env *Env) *cobra.Command {
	var (
		cfg       config.Config
		listen    string
		logLevel  string
		logFormat string
		limits    config.Limits
		coordNS   string
		compact   compactFlags
		gcEvery   time.Duration
		gcKeep    time.Duration
		sshListen string
		sshAnon   bool
		sshURL    string
		scanN     int
		scanEvery time.Duration
		scanSweep int
		scanShard int
		bg        backgroundFlags
		tlsCert   string
		tlsKey    string
		hookFlags webhookFlags
		lfsDirect lfsDirectFlags
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run the git server (smart HTTP, SSH, REST API)",
		Args:  exactArgs(0),
	}
	f := cmd.Flags()
	cfg.RegisterStore(f)
	cfg.RegisterCache(f)
	cfg.RegisterEtcd(f)
	config.StringVar(f, &listen, "listen", "GHOST_LISTEN", "127.0.0.1:8080", "address to listen on")
	config.StringVar(f, &tlsCert, "tls-cert", "GHOST_TLS_CERT", "", "serve HTTPS with this PEM certificate (chain) file, reloaded when it changes; with --tls-key")
	config.StringVar(f, &tlsKey, "tls-key", "GHOST_TLS_KEY", "", "the PEM private key of --tls-cert")
	config.StringVar(f, &sshListen, "ssh-listen", "GHOST_SSH_LISTEN", defaultSSHListen, `address for git over SSH; "" turns SSH off`)
	config.StringVar(f, &sshURL, "ssh-url", "GHOST_SSH_URL", "", `base of the SSH clone URLs the web UI shows, such as "ssh://git@git.example.com:2222" (default: from --ssh-listen when it names a host)`)
	config.BoolVar(f, &sshAnon, "ssh-anonymous-read", "GHOST_SSH_ANONYMOUS_READ", false, "let SSH clients without a registered key clone public repositories")
	config.StringVar(f, &logLevel, "log-level", "GHOST_LOG_LEVEL", "info", "log level: debug, info, warn, error")
	config.StringVar(f, &logFormat, "log-format", "GHOST_LOG_FORMAT", "text", "log format: text or json")
	limits.Register(f)
	config.StringVar(f, &coordNS, "coord-namespace", "GHOST_COORD_NAMESPACE", defaultCoordNamespace, "etcd key prefix of the coordination records")
	compact.register(f)
	config.DurationVar(f, &gcEvery, "coord-gc-interval", "GHOST_COORD_GC_INTERVAL", defaultCoordGCInterval, "how often to remove old run summaries from etcd, one node at a time; 0 disables")
	config.DurationVar(f, &gcKeep, "coord-gc-retention", "GHOST_COORD_GC_RETENTION", defaultCoordRetention, "how long to keep the summaries of ended runs")
	config.IntVar(f, &scanN, "scan-workers", "GHOST_SCAN_WORKERS", defaultScanWorkers(), "in-process secret-scanning workers; 0 leaves scanning to ghost worker processes")
	config.DurationVar(f, &scanEvery, "scan-reconcile-interval", "GHOST_SCAN_RECONCILE_INTERVAL", defaultScanReconcile, "how often to start the push scans missing after each repository's scan watermark; 0 disables")
	config.IntVar(f, &scanSweep, "scan-sweep-rate", "GHOST_SCAN_SWEEP_RATE", defaultSweepRate, "repositories a second the reconciler's safety sweep looks at, one node at a time; 0 disables the sweep")
	config.IntVar(f, &scanShard, "scan-shards", "GHOST_SCAN_SHARDS", scanner.DefaultInitialShards, "initial shards of a full-history scan (docs/adr/0032-scan-runs.md)")
	bg.register(f)
	hookFlags.register(f)
	lfsDirect.register(f)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		if err := limits.Err(); err != nil {
			return usageErrorf("%v", err)
		}
		if scanN < 0 || scanEvery < 0 || scanSweep < 0 || scanShard < 1 || scanShard > 1<<16 {
			return usageErrorf("--scan-workers, --scan-reconcile-interval and --scan-sweep-rate must not be negative, --scan-shards must be 1 to 65536")
		}
		if err := bg.err(); err != nil {
			return err
		}
		if (tlsCert == "") != (tlsKey == "") {
			return usageErrorf("--tls-cert and --tls-key go together")
		}
		if gcEvery < 0 || gcKeep < 0 {
			return usageErrorf("--coord-gc-interval and --coord-gc-retention must not be negative")
		}
		if err := lfsDirect.apply(&cfg); err != nil {
			return err
		}
		// Bound first, so that what payloads link to is the address
		// actually served (--listen 127.0.0.1:0 names no port).
		ln, err := listenOn(listen, "--listen", "GHOST_LISTEN", "")
		if err != nil {
			return err
		}
		defer ln.Close()
		hookOpts, err := hookFlags.options(ln.Addr().String(), tlsCert != "")
		if err != nil {
			return err
		}
		level, err := parseLogLevel(logLevel)
		if err != nil {
			return err
		}
		hopts := &slog.HandlerOptions{Level: level}
		var logger *slog.Logger
		switch strings.ToLower(logFormat) {
		case "text":
			logger = slog.New(slog.NewTextHandler(env.Stderr, hopts))
		case "json":
			logger = slog.New(slog.NewJSONHandler(env.Stderr, hopts))
		default:
			return usageErrorf("--log-format must be text or json")
		}

		// Traces, when the standard OTEL_* variables ask for them.
		tp, err := tracing.Setup(ctx, "ghost", versionOf(buildInfo()).version)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tp.Shutdown(sctx); err != nil {
				logger.Warn("flushing traces failed", "err", err)
			}
		}()
		if tp.Endpoint != "" {
			fmt.Fprintf(env.Stdout, "ghost: traces to %s\n", tp.Endpoint)
		}

		store, created, err := cfg.CreateStore(ctx)
		if err != nil {
			return err
		}
		if created {
			fmt.Fprintf(env.Stdout, "ghost: created an empty store: %s\n", cfg.Describe())
		}
		presigner, err := lfsDirect.presigner(store)
		if err != nil {
			return err
		}
		// One registry for the node; the server adds its metrics.
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		srv, err := server.New(ctx, server.Options{
			Registry:            reg,
			Store:               store,
			CacheDir:            cfg.Cache(),
			Logger:              logger,
			Limits:              limits.Git(),
			StoreTempMaxAge:     config.Off(limits.StoreTempMaxAge),
			LFSMaxObjectBytes:   config.Off(limits.LFSMaxObjectBytes),
			PushProtectLFSBytes: config.Off(limits.PushProtectLFSBytes),
			LFSQuotaBytes:       limits.LFSQuotaBytes,
			LFSPresigner:        presigner,
			LFSPresignExpiry:    lfsDirect.expiry,

			SSHHandshakeTimeout:            config.Off(limits.SSHHandshakeTimeout),
			SSHMaxUnauthenticated:          config.Off(limits.SSHMaxUnauthenticated),
			SSHMaxUnauthenticatedPerSource: config.Off(limits.SSHMaxUnauthenticatedPerSource),
			SSHMaxConnsPerPrincipal:        config.Off(limits.SSHMaxConnsPerPrincipal),
			SSHMaxSessions:                 config.Off(limits.SSHMaxSessions),
			SSHExecTimeout:                 config.Off(limits.SSHExecTimeout),
			Compaction:                     compact.options(),
			Background:                     bg.options(),
			Etcd: &server.EtcdOptions{DataDir: cfg.DataDir, Endpoints: cfg.EtcdEndpoints,
				Namespace: coordNS, GCInterval: gcEvery, GCRetention: gcKeep},
			ScanWorkers: scanN,
			Reconciler:  scanner.ReconcilerOptions{Every: scanEvery, SweepRate: float64(scanSweep)},
			Tracer:      tp.Tracer(),
			Scan:        scanner.Options{InitialShards: scanShard},
			SSHCloneURL: sshCloneURL(sshURL, sshListen),
			Webhooks:    hookOpts,
		})
		if err != nil {
			return err
		}
		defer srv.Close()
		scheme := "http"
		var certs *certfile.Reloader
		if tlsCert != "" {
			if certs, err = certfile.New(tlsCert, tlsKey, logger); err != nil {
				return err
			}
			scheme = "https"
		}
		if certs != nil {
			ln = tls.NewListener(ln, certs.Config())
		}
		var sshSrv *sshd.Server
		var sshLn net.Listener
		if sshListen != "" {
			if sshSrv, err = srv.SSHServer(ctx, sshAnon); err != nil {
				return err
			}
			// A busy port is an error, not a silent node without SSH:
			// the operator asked for SSH (it is on by default).
			if sshLn, err = listenOn(sshListen, "--ssh-listen", "GHOST_SSH_LISTEN", `, or --ssh-listen "" to turn SSH off`); err != nil {
				return fmt.Errorf("ssh: %w", err)
			}
			defer sshLn.Close()
			// The fingerprint lets users check the key that ssh shows
			// them on first contact.
			fp := ssh.FingerprintSHA256(sshSrv.HostKey())
			fmt.Fprintf(env.Stdout, "ghost: ssh on %s (host key %s)\n", sshLn.Addr(), fp)
			logger.Info("serving ssh", "addr", sshLn.Addr().String(), "host_key", fp, "anonymous_read", sshAnon)
		}
		// The store, the cache and etcd, named so that an operator sees
		// at once which data this node serves (issue 21 §7).
		cache := cfg.Cache()
		if abs, err := filepath.Abs(cache); err == nil {
			cache = abs
		}
		fmt.Fprintf(env.Stdout, "ghost: listening on %s://%s (%s; cache %s; %s)\n", scheme, ln.Addr(), cfg.Describe(), cache, cfg.DescribeEtcd())
		logger.Info("serving", "addr", ln.Addr().String(), "store", cfg.Describe(), "cache", cache, "coordination", cfg.DescribeEtcd())
		return srv.Run(ctx, server.Listeners{HTTP: ln, SSH: sshLn, SSHServer: sshSrv})
	}
	return cmd
}

// listenOn listens on addr, which the flag (or its environment variable
// env) chose. Its error says which address failed and how to choose
// another, and, for a busy port, that another server holds it: the
// net package's "listen tcp ...: bind: address already in use" names
// neither. more ends the hint (", or ... to turn it off").
func listenOn(addr, flag, env, more string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	why := err
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		why = op.Err
		var sys *os.SyscallError
		if errors.As(why, &sys) {
			why = sys.Err
		}
	}
	hint := fmt.Sprintf("choose another address with %s or %s%s", flag, env, more)
	if errors.Is(err, syscall.EADDRINUSE) {
		hint = "another server holds it; " + hint
	}
	return nil, fmt.Errorf("listen on %s: %w (%s)", addr, why, hint)
}

// defaultSSHListen is where "ghost serve" listens for git over SSH.
const defaultSSHListen = "127.0.0.1:2222"

// sshCloneURL is the base of the SSH clone URLs the web UI shows: the
// --ssh-url flag, else ssh://git@<--ssh-listen> when that names a host and
// a port (not 0.0.0.0, not port 0), else none.
func sshCloneURL(flag, listen string) string {
	if flag != "" || listen == "" {
		return flag
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil || host == "" || port == "0" {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return ""
	}
	return "ssh://git@" + net.JoinHostPort(host, port)
}

// parseLogLevel reads --log-level in ghost's words, not slog's.
func parseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, usageErrorf("--log-level %q: want debug, info, warn or error", s)
}
