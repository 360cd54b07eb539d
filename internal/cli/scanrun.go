package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/wal"
)

// scanning is what the scan commands open: the object store's log,
// metadata and alerts, and (when reachable) the coordination store.
type scanning struct {
	log    *wal.Log
	meta   *meta.Store
	alerts *alerts.Store
	b      *etcdcoord.Backend // nil: the coordination store is not reachable
	sc     *scanner.Scanner
	close  func()
}

// scanFlags are the settings of every scan command.
type scanFlags struct {
	cfg    config.Config
	ns     string
	shards int
}

func (s *scanFlags) register(cmd *cobra.Command, withCache bool) {
	f := cmd.Flags()
	s.cfg.RegisterStore(f)
	s.cfg.RegisterEtcd(f)
	if withCache {
		s.cfg.RegisterCache(f)
	}
	config.StringVar(f, &s.ns, "coord-namespace", "GHOST_COORD_NAMESPACE", defaultCoordNamespace, "etcd key prefix of the coordination records")
	config.IntVar(f, &s.shards, "scan-shards", "GHOST_SCAN_SHARDS", scanner.DefaultInitialShards, "initial shards of a full-history scan (docs/adr/0032-scan-runs.md)")
}

// open opens the stores. needCoord makes an unreachable coordination
// store an error; otherwise the scanner works without it (runs are
// queued in the object store, progress is what the object store knows).
func (s *scanFlags) open(ctx context.Context, logger *slog.Logger, needCoord bool) (*scanning, error) {
	if err := etcdcoord.ValidateNamespace(s.ns); err != nil {
		return nil, usageErrorf("--coord-namespace: %v", err)
	}
	if s.shards < 1 || s.shards > 1<<16 {
		return nil, usageErrorf("--scan-shards must be 1 to 65536")
	}
	objects, err := s.cfg.OpenStore(ctx)
	if err != nil {
		return nil, err
	}
	out := &scanning{log: wal.New(objects, wal.Options{}), alerts: alerts.New(objects), close: func() {}}
	out.meta = meta.New(objects, out.log)
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	client, closer, err := etcdserver.Open(octx, s.cfg.DataDir, s.cfg.EtcdEndpoints)
	cancel()
	switch {
	case err != nil && needCoord:
		return nil, fmt.Errorf("coordination store: %w", err)
	case err != nil:
		logger.Warn("coordination store unavailable; showing what the object store knows", "err", err)
	default:
		b, err := etcdcoord.New(etcdcoord.Config{Client: client, Namespace: s.ns, MaxTxnOps: txnOps(s.cfg), MaxTxnBytes: txnBytes(s.cfg)})
		if err != nil {
			closer.Close()
			return nil, err
		}
		out.b = b
		out.close = func() { closer.Close() }
	}
	out.sc, err = scanner.New(scanner.Options{
		Store: objects, Log: out.log, Alerts: out.alerts, Logger: logger, InitialShards: s.shards,
		Coord: func() coord.Backend {
			if out.b == nil {
				return nil
			}
			return out.b
		},
	})
	if err != nil {
		out.close()
		return nil, err
	}
	return out, nil
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
		var level slog.Level
		if err := level.UnmarshalText([]byte(logLevel)); err != nil {
			return usageErrorf("--log-level: %v", err)
		}
		logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
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
		fmt.Fprintf(env.Stdout, "ghost: %d scan worker(s) (data %s, cache %s)\n", n, sf.cfg.Location(), sf.cfg.Cache())
		return runScanWorkers(ctx, logger, s.sc, scanner.WorkerOptions{Cache: cache, CheckpointBlobs: batch}, s.meta, n,
			scanner.ReconcilerOptions{Every: reconcile, SweepRate: float64(sweep)})
	}
	return cmd
}

// runScanWorkers runs n workers and, when rec.Every > 0, the reconciler
// (one node at a time, docs/adr/0033-scan-coverage.md), until ctx ends.
func runScanWorkers(ctx context.Context, logger *slog.Logger, sc *scanner.Scanner, wo scanner.WorkerOptions, m *meta.Store, n int, rec scanner.ReconcilerOptions) error {
	var wg sync.WaitGroup
	for range n {
		w, err := sc.NewWorker(wo)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Run(ctx)
		}()
	}
	if rec.Every > 0 {
		rec.Pages = repoPages(m)
		rec.Logger = logger
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc.RunReconciler(ctx, rec)
		}()
	}
	wg.Wait()
	return nil
}

// repoPages lists every repository a page at a time, for the sweep.
func repoPages(m *meta.Store) scanner.RepoPager {
	return func(ctx context.Context, after string, limit int) ([]scanner.RepoRef, string, error) {
		rs, next, err := m.ReposPage(ctx, after, limit)
		out := make([]scanner.RepoRef, 0, len(rs))
		for _, r := range rs {
			out = append(out, scanner.RepoRef{Tenant: r.Owner, RepoID: r.ID})
		}
		return out, next, err
	}
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
	sf.register(cmd, false)
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the scan is done, with a progress bar on a terminal")
	cmd.Flags().BoolVar(&noProg, "no-progress", false, "no progress bar even on a terminal")
	cmd.Flags().DurationVar(&poll, "poll", 500*time.Millisecond, "how often --wait reads the progress")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		if poll <= 0 {
			return usageErrorf("--poll must be positive")
		}
		logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		s, err := sf.open(ctx, logger, false)
		if err != nil {
			return err
		}
		defer s.close()
		repo, err := s.meta.Repo(ctx, owner, name)
		if err != nil {
			return err
		}
		run, created, err := s.sc.StartFull(ctx, repo.Owner, repo.ID)
		if err != nil {
			return err
		}
		verb := "started"
		if !created {
			verb = "already exists:"
		}
		fmt.Fprintf(env.Stdout, "scan %d-full of %s %s (run %d, %d shards)\n", run.Seq, repo.FullName(), verb, run.ID, run.Shards)
		if !wait {
			return nil
		}
		var bar *progressbar.ProgressBar
		if !noProg && isTerminal(env.Stderr) {
			bar = progressbar.NewOptions(1000, progressbar.OptionSetWriter(env.Stderr), progressbar.OptionFullWidth(),
				progressbar.OptionSetPredictTime(false), progressbar.OptionClearOnFinish())
		}
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			r, err := s.sc.Get(ctx, run.Spec())
			if err != nil {
				return err
			}
			st, err := s.sc.Status(ctx, r)
			if err != nil {
				return err
			}
			if bar != nil {
				bar.Describe(fmt.Sprintf("%d/%d shards, %d blobs, %s", st.ShardsDone, st.ShardsTotal, st.Blobs, etaString(st)))
				bar.Set(int(st.Covered * 1000))
			}
			switch st.State {
			case "done":
				if bar != nil {
					bar.Finish()
				}
				fmt.Fprintf(env.Stdout, "scan %d-full done: %d blobs, %d bytes, %d findings\n", st.Seq, st.Blobs, st.Bytes, st.Findings)
				return nil
			case "failed", "cancelled":
				return fmt.Errorf("scan %d-full %s", st.Seq, st.State)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		}
	}
	return cmd
}

func etaString(st scanner.Status) string {
	if st.ETA <= 0 {
		return "ETA unknown"
	}
	return "ETA " + st.ETA.Round(time.Second).String()
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
	sf.register(cmd, false)
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	cmd.Flags().IntVar(&limit, "limit", 20, "newest runs to show")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		if format != "table" && format != "json" {
			return usageErrorf("--format %q: want table or json", format)
		}
		logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		s, err := sf.open(ctx, logger, false)
		if err != nil {
			return err
		}
		defer s.close()
		repo, err := s.meta.Repo(ctx, owner, name)
		if err != nil {
			return err
		}
		sts, err := s.sc.Runs(ctx, repo.ID, limit)
		if err != nil {
			return err
		}
		if format == "table" {
			lag, err := s.sc.Lag(ctx, repo.ID)
			if err != nil {
				return err
			}
			writeLag(env.Stdout, lag, time.Now())
		}
		return writeScans(env.Stdout, format, sts)
	}
	return cmd
}

// writeLag says how far the repository's scans trail its pushes
// (docs/adr/0033-scan-coverage.md).
func writeLag(w io.Writer, l scanner.Lag, now time.Time) {
	if l.Seqs == 0 {
		fmt.Fprintf(w, "every push scanned (through seq %d)\n", l.Watermark)
		return
	}
	fmt.Fprintf(w, "%d push(es) not scanned yet: scanned through seq %d of %d", l.Seqs, l.Watermark, l.Head)
	if !l.Oldest.IsZero() {
		fmt.Fprintf(w, ", the oldest pushed %s ago", now.Sub(l.Oldest).Round(time.Second))
	}
	fmt.Fprintln(w)
}

func writeScans(w io.Writer, format string, sts []scanner.Status) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if sts == nil {
			sts = []scanner.Status{}
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
		if st.ETA > 0 {
			eta = st.ETA.Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%d-%s\t%d\t%s\t%d/%d\t%d\t%d\t%d\t%sB/s\t%s\t%s\n", st.Seq, st.Kind, st.ID, st.State,
			st.ShardsDone, st.ShardsTotal, st.Blobs, st.Bytes, st.Findings, strconv.FormatFloat(st.Rate, 'f', 0, 64), eta, strings.Join(parked, "; "))
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

// startServeScanning runs serve's in-process scan workers and reconciler
// on the server's scanner and cache; the returned func stops them and
// waits.
func startServeScanning(ctx context.Context, logger *slog.Logger, srv *server.Server, n int, rec scanner.ReconcilerOptions) func() {
	sc := srv.Scanner()
	if sc == nil || (n == 0 && rec.Every == 0) {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// In-process workers yield to serving (docs/adr/0051-geometric-checkpoints.md).
		wo := scanner.WorkerOptions{Cache: srv.Cache(), Background: srv.Background()}
		if err := runScanWorkers(ctx, logger, sc, wo, srv.Meta(), n, rec); err != nil && ctx.Err() == nil {
			logger.Warn("scan workers stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }
}
