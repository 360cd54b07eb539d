package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/client"
	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver"
	"github.com/ghost-scm/ghost/internal/lfs"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/tracing"
	"github.com/ghost-scm/ghost/internal/wal"
)

// scanning is what the scan commands open: the object store's log,
// metadata and alerts, and (when reachable) the coordination store.
type scanning struct {
	// objects is the object store, for the workers' Git LFS reader.
	objects objstore.Store
	log     *wal.Log
	meta    *meta.Store
	alerts  *alerts.Store
	b       *etcdcoord.Backend // nil: the coordination store is not reachable
	sc      *scanner.Scanner
	close   func()
}

// scanFlags are the settings of every scan command.
type scanFlags struct {
	cfg    config.Config
	ns     string
	shards int
	// tracer records the workers' spans (ghost worker); nil: none.
	tracer trace.Tracer
}

func (s *scanFlags) register(cmd *cobra.Command, withCache bool) {
	f := cmd.Flags()
	s.cfg.RegisterStore(f)
	if withCache {
		s.cfg.RegisterCache(f)
	}
	s.registerCoord(cmd)
}

// registerCoord binds the coordination settings alone, for the commands
// whose store flags come from their target (newTarget).
func (s *scanFlags) registerCoord(cmd *cobra.Command) {
	f := cmd.Flags()
	s.cfg.RegisterEtcd(f)
	config.StringVar(f, &s.ns, "coord-namespace", "GHOST_COORD_NAMESPACE", defaultCoordNamespace, "etcd key prefix of the coordination records")
	config.IntVar(f, &s.shards, "scan-shards", "GHOST_SCAN_SHARDS", scanner.DefaultInitialShards, "initial shards of a full-history scan (docs/adr/0032-scan-runs.md)")
}

// open opens the stores. needCoord makes an unreachable coordination
// store an error; otherwise the scanner works without it (runs are
// queued in the object store, progress is what the object store knows).
func (s *scanFlags) open(ctx context.Context, logger *slog.Logger, needCoord bool) (*scanning, error) {
	st, err := openStores(ctx, &s.cfg)
	if err != nil {
		return nil, err
	}
	return s.openCoord(ctx, logger, st, alerts.New(st.objects), needCoord)
}

// openOn opens the scanner over stores already open, for the API the
// CLI serves over the store (repo scan, repo scans); an unreachable
// coordination store is a warning.
func (s *scanFlags) openOn(ctx context.Context, logger *slog.Logger, st stores, as *alerts.Store) (*scanning, error) {
	return s.openCoord(ctx, logger, st, as, false)
}

func (s *scanFlags) openCoord(ctx context.Context, logger *slog.Logger, st stores, as *alerts.Store, needCoord bool) (*scanning, error) {
	if err := etcdcoord.ValidateNamespace(s.ns); err != nil {
		return nil, usageErrorf("--coord-namespace: %v", err)
	}
	if s.shards < 1 || s.shards > 1<<16 {
		return nil, usageErrorf("--scan-shards must be 1 to 65536")
	}
	out := &scanning{objects: st.objects, log: st.log, meta: st.meta, alerts: as, close: func() {}}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	client, closer, err := openCoordClient(octx, s.cfg)
	cancel()
	switch {
	case err != nil && needCoord:
		return nil, fmt.Errorf("coordination store: %w", err)
	case err != nil:
		logger.Warn("coordination store unavailable; showing what the object store knows", "err", err)
	default:
		b, err := newCoordBackend(client, s.ns, s.cfg)
		if err != nil {
			closer.Close()
			return nil, err
		}
		out.b = b
		out.close = func() { closer.Close() }
	}
	var err2 error
	out.sc, err2 = scanner.New(scanner.Options{
		Store: st.objects, Log: out.log, Alerts: out.alerts, Logger: logger, InitialShards: s.shards, Tracer: s.tracer,
		Coord: func() coord.Backend {
			if out.b == nil {
				return nil
			}
			return out.b
		},
	})
	if err2 != nil {
		out.close()
		return nil, err2
	}
	return out, nil
}

// openCoordClient opens the coordination store for a command other than
// serve: --etcd-endpoints when given; else the embedded etcd under the
// data directory, started in process, or, when a running serve holds it,
// reached at the endpoint serve recorded.
func openCoordClient(ctx context.Context, cfg config.Config) (*clientv3.Client, io.Closer, error) {
	if len(cfg.EtcdEndpoints) > 0 {
		return etcdserver.Open(ctx, cfg.DataDir, cfg.EtcdEndpoints)
	}
	c, closer, err := etcdserver.Open(ctx, cfg.DataDir, nil)
	if !errors.Is(err, etcdserver.ErrDirInUse) {
		return c, closer, err
	}
	b, rerr := os.ReadFile(server.EtcdEndpointFile(cfg.DataDir))
	ep := strings.TrimSpace(string(b))
	if rerr != nil || ep == "" {
		return nil, nil, fmt.Errorf("%w (and no endpoint recorded in %s: pass --etcd-endpoints)", err, server.EtcdEndpointFile(cfg.DataDir))
	}
	return etcdserver.Open(ctx, cfg.DataDir, []string{ep})
}

// newWorkerCmd returns "ghost worker": scan workers that claim shards of
// scan runs from the coordination store and scan them from the object
// store. A scan farm is just more of these, on any machines that reach the
// same object store and etcd.
func newWorkerCmd(env *Env) *cobra.Command {
	var (
		sf        scanFlags
		n         int
		reconcile time.Duration
		sweep     int
		logLevel  string
		batch     int
		nice      int
	)
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "run secret-scanning workers (a scan farm node)",
		Args:  exactArgs(0),
	}
	sf.register(cmd, true)
	f := cmd.Flags()
	config.IntVar(f, &n, "scan-workers", "GHOST_SCAN_WORKERS", 1, "scan workers in this process")
	config.DurationVar(f, &reconcile, "reconcile-interval", "GHOST_SCAN_RECONCILE_INTERVAL", 0, "how often to start the push runs missing after the scan watermarks, one node at a time; 0 leaves it to serve")
	config.IntVar(f, &sweep, "scan-sweep-rate", "GHOST_SCAN_SWEEP_RATE", defaultSweepRate, "repositories a second the reconciler's safety sweep looks at; 0 disables the sweep")
	config.StringVar(f, &logLevel, "log-level", "GHOST_LOG_LEVEL", "info", "log level: debug, info, warn, error")
	config.IntVar(f, &batch, "checkpoint-blobs", "GHOST_SCAN_CHECKPOINT_BLOBS", scanner.DefaultCheckpointBlobs, "blobs scanned between checkpoints: at most this many are scanned again after a crash")
	registerNice(f, &nice)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		if err := lowerProcess(env, nice); err != nil {
			return err
		}
		if batch < 1 {
			return usageErrorf("--checkpoint-blobs must be at least 1")
		}
		if sweep < 0 || reconcile < 0 {
			return usageErrorf("--scan-sweep-rate and --reconcile-interval must not be negative")
		}
		if n < 1 {
			return usageErrorf("--scan-workers must be at least 1")
		}
		level, err := parseLogLevel(logLevel)
		if err != nil {
			return err
		}
		logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
		tp, err := tracing.Setup(ctx, "ghost-worker", versionOf(buildInfo()).version)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			tp.Shutdown(sctx)
		}()
		sf.tracer = tp.Tracer()
		s, err := sf.open(ctx, logger, true)
		if err != nil {
			return err
		}
		defer s.close()
		cache, err := repocache.New(sf.cfg.Cache(), s.log, repocache.Options{Logger: logger})
		if err != nil {
			return err
		}
		defer cache.Close()
		fmt.Fprintf(env.Stdout, "ghost: %d scan worker(s) (%s; cache %s; %s)\n", n, sf.cfg.Describe(), sf.cfg.Cache(), sf.cfg.DescribeEtcd())
		objects, err := lfs.NewReader(s.objects)
		if err != nil {
			return err
		}
		return s.sc.RunWorkers(ctx, n, scanner.WorkerOptions{Cache: cache, CheckpointBlobs: batch, LFS: objects},
			scanner.ReconcilerOptions{Every: reconcile, SweepRate: float64(sweep), Pages: server.RepoPages(s.meta), Logger: logger})
	}
	return cmd
}

// newRepoScanCmd returns "ghost repo scan": start a full-history secret
// scan of a repository; workers (serve's, or ghost worker) do the work.
func newRepoScanCmd(env *Env) *cobra.Command {
	var (
		sf     scanFlags
		wait   bool
		noProg bool
		poll   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "scan <owner>/<name>",
		Short: "start a full-history secret scan (run by serve's workers or ghost worker)",
		Args:  exactArgs(1),
	}
	t := newTarget(env, cmd)
	sf.registerCoord(cmd)
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the scan is done, with a progress bar on a terminal")
	cmd.Flags().BoolVar(&noProg, "no-progress", false, "no progress bar even on a terminal")
	config.Duration(cmd.Flags(), &poll, "poll", 500*time.Millisecond, "how often --wait reads the progress")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		if poll <= 0 {
			return usageErrorf("--poll must be positive")
		}
		logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		return t.runAPI(true, storeOptions{scans: &sf, logger: logger}, func(ctx context.Context, c *conn, _ []string) error {
			run, created, err := c.StartScan(ctx, owner, name)
			if err != nil {
				return err
			}
			verb := "started"
			if !created {
				verb = "already exists:"
			}
			fmt.Fprintf(env.Stdout, "scan %s of %s %s (run %s, %d shards)\n", run.ID, run.Repository, verb, run.RunID, run.ShardsTotal)
			if !wait {
				return nil
			}
			var bar *progressbar.ProgressBar
			if !noProg && isTerminal(env.Stderr) {
				bar = progressbar.NewOptions(1000, progressbar.OptionSetWriter(env.Stderr), progressbar.OptionFullWidth(),
					progressbar.OptionSetPredictTime(false), progressbar.OptionClearOnFinish())
			}
			tick := time.NewTicker(poll)
			defer tick.Stop()
			for {
				st, err := c.Scan(ctx, owner, name, run.ID)
				if err != nil {
					return err
				}
				if bar != nil {
					bar.Describe(fmt.Sprintf("%d/%d shards, %d blobs, %s", st.ShardsDone, st.ShardsTotal, st.Blobs, etaString(st.ETASeconds)))
					bar.Set(int(st.Covered * 1000))
				}
				switch st.State {
				case "done":
					if bar != nil {
						bar.Finish()
					}
					fmt.Fprintf(env.Stdout, "scan %s done: %d blobs, %s, %d findings\n", st.ID, st.Blobs, config.HumanBytes(st.Bytes), st.Findings)
					return nil
				case "failed", "cancelled":
					return fmt.Errorf("scan %s %s", st.ID, st.State)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-tick.C:
				}
			}
		})(cmd, args)
	}
	return cmd
}

func etaString(seconds float64) string {
	if seconds <= 0 {
		return "ETA unknown"
	}
	return "ETA " + config.FormatDuration(time.Duration(seconds*float64(time.Second)).Round(time.Second))
}

// newRepoScansCmd returns "ghost repo scans": a repository's scan runs
// with their progress.
func newRepoScansCmd(env *Env) *cobra.Command {
	var (
		sf     scanFlags
		format string
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "scans <owner>/<name>",
		Short: "list a repository's secret-scan runs with their progress",
		Args:  exactArgs(1),
	}
	t := newTarget(env, cmd)
	sf.registerCoord(cmd)
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	cmd.Flags().IntVar(&limit, "limit", 20, "newest runs to show (at most 100)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		if format != "table" && format != "json" {
			return usageErrorf("--format %q: want table or json", format)
		}
		if limit < 1 {
			return usageErrorf("--limit must be at least 1")
		}
		logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		return t.runAPI(false, storeOptions{scans: &sf, logger: logger}, func(ctx context.Context, c *conn, _ []string) error {
			l, err := c.ListScans(ctx, owner, name, limit)
			if err != nil {
				return err
			}
			if format == "table" {
				writeLag(env.Stdout, l.Lag, time.Now())
			}
			return writeScans(env.Stdout, format, l.Scans)
		})(cmd, args)
	}
	return cmd
}

// writeLag says how far the repository's scans trail its pushes
// (docs/adr/0033-scan-coverage.md).
func writeLag(w io.Writer, l client.ScanLag, now time.Time) {
	if l.Pending == 0 {
		fmt.Fprintf(w, "every push scanned (through seq %d)\n", l.ScannedThrough)
		return
	}
	fmt.Fprintf(w, "%d push(es) not scanned yet: scanned through seq %d of %d", l.Pending, l.ScannedThrough, l.Head)
	if l.OldestPendingPushAt != nil {
		if ago := now.Sub(*l.OldestPendingPushAt).Round(time.Second); ago >= time.Second {
			fmt.Fprintf(w, ", the oldest pushed %s ago", config.FormatDuration(ago))
		} else {
			fmt.Fprint(w, ", the oldest pushed just now")
		}
	}
	fmt.Fprintln(w)
}

func writeScans(w io.Writer, format string, sts []client.Scan) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if sts == nil {
			sts = []client.Scan{}
		}
		return enc.Encode(sts)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCAN\tRUN\tSTATE\tSHARDS\tBLOBS\tBYTES\tFINDINGS\tRATE\tETA\tPARKED")
	for _, st := range sts {
		var parked []string
		for _, p := range st.Parked {
			parked = append(parked, p.Shard+": "+p.Reason)
		}
		eta := "-"
		if st.ETASeconds > 0 {
			eta = config.FormatDuration(time.Duration(st.ETASeconds * float64(time.Second)).Round(time.Second))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%s\t%d\t%s/s\t%s\t%s\n", st.ID, st.RunID, st.State,
			st.ShardsDone, st.ShardsTotal, st.Blobs, config.HumanBytes(st.Bytes), st.Findings, config.HumanBytes(int64(st.BytesPerSecond)), eta, oneLine(strings.Join(parked, "; ")))
	}
	return tw.Flush()
}

// newCoordUnparkCmd returns "ghost coord unpark": resume a parked shard
// (ghost repo scans lists them with their reasons).
func newCoordUnparkCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "unpark <tenant> <run-id> <shard-id>",
		Short: "make a parked shard of a scan run claimable again",
		Args:  exactArgs(3),
	}
	c := newCoordAdmin(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		run, err := strconv.ParseUint(args[1], 10, 64)
		if err != nil {
			return usageErrorf("run id %q: %v", args[1], err)
		}
		shard, err := strconv.ParseUint(strings.TrimPrefix(args[2], "0x"), 16, 64)
		if err != nil {
			return usageErrorf("shard id %q: want the hexadecimal id ghost repo scans shows", args[2])
		}
		b, closeFn, err := c.open(cmd)
		if err != nil {
			return err
		}
		defer closeFn()
		sh, err := b.Unpark(cmd.Context(), coord.TimeOf(time.Now()), coord.UnparkRequest{
			Tenant: scanner.TenantID(args[0]), Run: coord.RunID(run), Shard: coord.ShardID(shard), Op: coord.OpID(time.Now().UnixNano()&(1<<62-1) | 1),
		})
		if err != nil {
			if errors.Is(err, coord.ErrTenantMismatch) {
				return fmt.Errorf("run %d is not %s's: %w", run, args[0], err)
			}
			return err
		}
		fmt.Fprintf(env.Stdout, "unparked shard %v of run %d (fence %d)\n", sh.ID, sh.Run, sh.Fence)
		return nil
	}
	return cmd
}

// Serve's scanning defaults: in-process workers (defaultScanWorkers: a
// node scans its own pushes without a farm; more come from ghost
// worker), and a reconcile pass a minute.
const (
	defaultScanReconcile = time.Minute
	// defaultSweepRate paces the reconciler's sweep of every repository:
	// about 3 object-store reads each, so an idle cluster spends some 6
	// requests a second on it, however many repositories it holds.
	defaultSweepRate = 2
)
