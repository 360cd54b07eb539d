package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/server"
)

// runServe runs a ghost node until ctx ends (SIGINT/SIGTERM in main), then
// shuts down gracefully. With no flags it works out of the box: it
// listens on 127.0.0.1:8080 and keeps everything under ./ghost-data.
func runServe(ctx context.Context, env *Env, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	var cfg config.Config
	cfg.Register(fs)
	listen := fs.String("listen", config.Env("GHOST_LISTEN", "127.0.0.1:8080"), "address to listen on (env GHOST_LISTEN)")
	logLevel := fs.String("log-level", config.Env("GHOST_LOG_LEVEL", "info"), "log level: debug, info, warn, error (env GHOST_LOG_LEVEL)")
	logFormat := fs.String("log-format", config.Env("GHOST_LOG_FORMAT", "text"), "log format: text or json (env GHOST_LOG_FORMAT)")
	var limits config.Limits
	limits.Register(fs)
	coordNS := fs.String("coord-namespace", config.Env("GHOST_COORD_NAMESPACE", defaultCoordNamespace), "etcd key prefix of the coordination records (env GHOST_COORD_NAMESPACE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: ghost serve [flags] takes no arguments", errUsage)
	}
	if err := limits.Err(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("%w: --log-level: %v", errUsage, err)
	}
	hopts := &slog.HandlerOptions{Level: level}
	var logger *slog.Logger
	switch strings.ToLower(*logFormat) {
	case "text":
		logger = slog.New(slog.NewTextHandler(env.Stderr, hopts))
	case "json":
		logger = slog.New(slog.NewJSONHandler(env.Stderr, hopts))
	default:
		return fmt.Errorf("%w: --log-format must be text or json", errUsage)
	}

	store, err := cfg.OpenStore(ctx)
	if err != nil {
		return err
	}
	// The flags' 0 ("no limit") is the server's negative value.
	off := func(v int64) int64 {
		if v == 0 {
			return -1
		}
		return v
	}
	srv, err := server.New(ctx, server.Options{
		Store:                store,
		CacheDir:             cfg.Cache(),
		Logger:               logger,
		MaxPushBytes:         off(limits.MaxPushBytes),
		MaxFetchRequestBytes: off(limits.MaxFetchRequestBytes),
		FetchRequestTimeout:  time.Duration(off(int64(limits.FetchRequestTimeout))),
		IOTimeout:            time.Duration(off(int64(limits.IOTimeout))),
		MaxGitProcesses:      int(off(int64(limits.MaxGitProcesses))),
		GitQueue:             int(off(int64(limits.GitQueue))),
		GitQueueTimeout:      time.Duration(off(int64(limits.GitQueueTimeout))),
		StoreTempMaxAge:      time.Duration(off(int64(limits.StoreTempMaxAge))),
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "ghost: listening on http://%s (data %s, cache %s)\n", ln.Addr(), cfg.DataDir, cfg.Cache())
	logger.Info("serving", "addr", ln.Addr().String(), "data", cfg.DataDir, "cache", cfg.Cache())
	coord := startCoordination(ctx, logger, cfg, *coordNS)
	defer coord.Close()
	return srv.Serve(ctx, ln)
}
