package gitbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ghost-scm/ghost/internal/compact"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver"
	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/wal"
)

// BenchmarkBusyRepository replays a real history as N pushes to ghost and
// to git http-backend side by side, as issue 28 asks: ghost as `ghost
// serve` runs it by default (background compaction, a push scan after
// every push by serve's in-process scan workers over an embedded etcd,
// background work yielding to serving), http-backend with
// receive.autogc on. It reports total push time, push p50 and p99, warm
// and cold clone, packs, and the bytes written per pushed byte as they
// grow through the replay: ghost's to the object store, http-backend's to
// its repository's objects directory (diskWrites). -v shows the whole
// table (go test keeps only a benchmark's first 10 log lines without it):
//
//	GHOST_BENCH_REPO=/path/to/git.git GHOST_BENCH_PUSHES=300 \
//	  go test -v -run '^$' -bench BusyRepository -benchtime 1x -timeout 12h ./internal/gitbench/
//
// The history is the first-parent line of GHOST_BENCH_BRANCH (default
// master, else main) of the bare repository GHOST_BENCH_REPO; push i
// moves refs/heads/main to its (i·GHOST_BENCH_COMMITS_PER_PUSH)-th commit
// (default 10), so a push carries those first-parent commits and
// whatever they merged. Without GHOST_BENCH_REPO it is skipped.
// GHOST_BENCH_OUT, when set, is a directory that receives each push's
// latency (pushes.csv), the compactions (compactions.csv), the node's
// log with each push's steps (ghost.log) and a CPU profile of the test
// process during the replay (cpu.pprof; git's processes are not in it).
func BenchmarkBusyRepository(b *testing.B) {
	srcRepo := os.Getenv("GHOST_BENCH_REPO")
	if srcRepo == "" {
		b.Skip("GHOST_BENCH_REPO names no bare repository to replay")
	}
	pushes := envInt("GHOST_BENCH_PUSHES", 300)
	per := envInt("GHOST_BENCH_COMMITS_PER_PUSH", 10)
	reps := envInt("GHOST_BENCH_REPS", 3)
	outDir := os.Getenv("GHOST_BENCH_OUT")
	ctx := context.Background()
	work := b.TempDir()
	env := gittest.Env(filepath.Join(work, "home"))

	// The client's repository borrows the source's objects (alternates):
	// nothing is written to the source.
	src := filepath.Join(work, "src.git")
	gittest.Git(b, env, "", "clone", "-q", "--bare", "--shared", srcRepo, src)
	branch := os.Getenv("GHOST_BENCH_BRANCH")
	if branch == "" {
		branch = "master"
		if _, err := gittest.Run(env, src, nil, "rev-parse", "--verify", "-q", "refs/heads/master"); err != nil {
			branch = "main"
		}
	}
	line := strings.Fields(gittest.Git(b, env, src, "rev-list", "--first-parent", "--reverse", "refs/heads/"+branch))
	if n := len(line) / per; n < pushes {
		b.Logf("%s has %d first-parent commits: %d pushes of %d", branch, len(line), n, per)
		pushes = n
	}

	var hbPushed atomic.Int64
	hbURL := serve(b, countPushes(httpBackendHandler(b, env, filepath.Join(work, "hb")), &hbPushed)) + "/repo.git"
	hb := target{name: "http-backend", pushURL: hbURL, cloneURL: hbURL}
	hbRepo := filepath.Join(work, "hb", "repo.git")
	hbWrites := newDiskWrites(filepath.Join(hbRepo, "objects"))
	gittest.Git(b, env, hbRepo, "config", "receive.autogc", "true")
	gh := busyGhost(b, filepath.Join(work, "ghost"), true, outDir)

	var prof io.Closer = io.NopCloser(nil)
	if outDir != "" {
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(filepath.Join(outDir, "cpu.pprof"))
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		prof = closerFunc(func() error { pprof.StopCPUProfile(); return f.Close() })
	}
	push := func(tg target, rev string) time.Duration {
		return timed(func() {
			gittest.Git(b, env, src, "-c", "http.postBuffer=2147483647", "push", "-q", tg.pushURL, rev+":refs/heads/main")
		})
	}
	lat := map[string][]time.Duration{}
	type sample struct {
		pushes                      int
		pushed, stored, checkpoints int64
		hbPushed, hbWritten         int64
	}
	var samples []sample
	t0 := time.Now()
	for i := range pushes {
		rev := line[(i+1)*per-1]
		// Alternate who goes first: the other's background work (ghost's
		// compactions and scans, http-backend's detached auto gc) lands
		// on both alike.
		order := []target{hb, gh.target}
		if i%2 == 1 {
			order = []target{gh.target, hb}
		}
		for _, tg := range order {
			lat[tg.name] = append(lat[tg.name], push(tg, rev))
		}
		if err := hbWrites.scan(); err != nil {
			b.Fatal(err)
		}
		if (i+1)%max(1, pushes/8) == 0 || i+1 == pushes {
			samples = append(samples, sample{i + 1, gh.pushed.Load(), gh.store.total(), gh.store.class("checkpoints"), hbPushed.Load(), hbWrites.total})
		}
	}
	replay := time.Since(t0)
	prof.Close()
	b.Logf("replayed %d pushes of %d first-parent commits of %s to each target in %v", pushes, per, branch, replay.Round(time.Second))

	// Let ghost's background work finish before the clones: the clones
	// measure serving, not serving during a scan (BenchmarkCloneDuringScan).
	lag := gh.scanLag(ctx)
	drainStart := time.Now()
	gh.drain(ctx, b)
	b.Logf("at the end of the replay %d pushes were not scanned yet; background work took %v more", lag, time.Since(drainStart).Round(time.Second))

	res := map[string]float64{}
	for _, tg := range []target{hb, gh.target} {
		dir := filepath.Join(work, "clone-"+tg.name)
		rm := func() { os.RemoveAll(dir) }
		clone := func() { gittest.Git(b, env, "", "clone", "-q", "--bare", tg.cloneURL, dir) }
		rm()
		clone() // warm means warm for ghost
		res["clone-warm-s/"+tg.name] = median(reps, rm, clone).Seconds()
		cold := rm
		if tg.wipe != nil {
			cold = func() { rm(); tg.wipe() }
		}
		res["clone-cold-s/"+tg.name] = median(reps, cold, clone).Seconds()
		// A cold node's next clones, once the background work its first
		// clone started (a bitmap, docs/design.md §5.6) is done.
		if tg.wipe != nil {
			gh.drain(ctx, b)
		}
		res["clone-cold-next-s/"+tg.name] = median(reps, rm, clone).Seconds()
		rm()
		clone() // leave ghost's cache warm
		rm()
	}
	res["packs/http-backend"] = float64(countPacks(hbRepo))
	res["packs/ghost"] = float64(countPacks(filepath.Join(work, "ghost", "cache", "repos")))
	x, err := gh.srv.Log().Head(ctx, gh.repoID)
	if err != nil {
		b.Fatal(err)
	}

	p := func(ds []time.Duration, q float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	sum := func(ds []time.Duration) (t time.Duration) {
		for _, d := range ds {
			t += d
		}
		return t
	}
	g, h := lat["ghost"], lat["http-backend"]
	b.Logf("%-26s %12s %12s %8s", "", "ghost", "http-backend", "ratio")
	row := func(name string, gv, hv float64, unit string) {
		b.Logf("%-26s %12.3f %12.3f %8.2f  %s", name, gv, hv, gv/hv, unit)
		b.ReportMetric(gv/hv, strings.ReplaceAll(name, " ", "-")+"-ratio")
	}
	row("total push time", sum(g).Seconds(), sum(h).Seconds(), "s")
	row("push p50", p(g, 0.5).Seconds(), p(h, 0.5).Seconds(), "s")
	row("push p99", p(g, 0.99).Seconds(), p(h, 0.99).Seconds(), "s")
	row("clone warm", res["clone-warm-s/ghost"], res["clone-warm-s/http-backend"], "s")
	row("clone cold", res["clone-cold-s/ghost"], res["clone-cold-s/http-backend"], "s")
	row("clone cold next", res["clone-cold-next-s/ghost"], res["clone-cold-next-s/http-backend"], "s")
	b.Logf("%-26s %12.0f %12.0f", "packs", res["packs/ghost"], res["packs/http-backend"])
	b.Logf("ghost's log: %d checkpoints (sizes %s), %d layers; %d compactions (%d full), %v in all",
		len(x.Checkpoints), checkpointSizes(x), len(x.Layers), gh.compactions.n, gh.compactions.full, gh.compactions.took.Round(time.Second))
	for _, s := range samples {
		b.Logf("after %4d pushes: %12d bytes pushed, %12d written to the object store: %.2f per pushed byte, %.2f of it to checkpoints; http-backend: %.2f per pushed byte",
			s.pushes, s.pushed, s.stored, float64(s.stored)/float64(s.pushed), float64(s.checkpoints)/float64(s.pushed), float64(s.hbWritten)/float64(s.hbPushed))
	}
	last := samples[len(samples)-1]
	gw, hw := float64(last.stored)/float64(last.pushed), float64(last.hbWritten)/float64(last.hbPushed)
	b.Logf("%-26s %12.2f %12.2f %8.2f", "written per pushed byte", gw, hw, gw/hw)
	b.ReportMetric(gw, "store-bytes-per-pushed-byte")
	b.ReportMetric(hw, "http-backend-bytes-per-pushed-byte")
	for _, k := range gh.store.classes() {
		b.Logf("  written to %-14s %12d bytes", k, gh.store.class(k))
	}
	if outDir != "" {
		var csv strings.Builder
		csv.WriteString("push,ghost_s,http_backend_s\n")
		for i := range g {
			fmt.Fprintf(&csv, "%d,%.4f,%.4f\n", i+1, g[i].Seconds(), h[i].Seconds())
		}
		if err := os.WriteFile(filepath.Join(outDir, "pushes.csv"), []byte(csv.String()), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outDir, "compactions.csv"), []byte(gh.compactions.csv()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

func checkpointSizes(x *wal.Index) string {
	var s []string
	for _, c := range x.Checkpoints {
		s = append(s, fmt.Sprint(c.Size))
	}
	return strings.Join(s, " ")
}

// busyNode is a ghost node as `ghost serve` runs by default, with what the
// benchmark observes of it.
type busyNode struct {
	target
	srv         *server.Server
	repoID      string
	tenant      string
	store       *countingStore
	pushed      atomic.Int64 // request bytes of receive-pack POSTs
	compactions *compactionLog
	cancel      context.CancelFunc
	workers     sync.WaitGroup
}

// busyGhost starts a node on an fsstore under root with serve's defaults
// for compaction, scanning (an embedded etcd, serve's in-process scan
// workers) and background work; with yield false, background work runs
// as it did before it yielded (full priority, no budget, no pauses, two
// scan workers). With logDir set, the node logs (info, JSON) to
// logDir/ghost.log.
func busyGhost(b *testing.B, root string, yield bool, logDir string) *busyNode {
	ctx := context.Background()
	fs, err := fsstore.Open(filepath.Join(root, "objects"))
	if err != nil {
		b.Fatal(err)
	}
	etcd, err := etcdserver.Start(ctx, etcdserver.Options{Dir: filepath.Join(root, "etcd"), Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { etcd.Close() })
	client, err := etcd.Client()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { client.Close() })
	backend, err := etcdcoord.New(etcdcoord.Config{Client: client, Namespace: "/ghost"})
	if err != nil {
		b.Fatal(err)
	}
	n := &busyNode{store: newCountingStore(fs), compactions: &compactionLog{start: time.Now()}}
	cache := filepath.Join(root, "cache")
	logger := slog.New(slog.DiscardHandler)
	if logDir != "" {
		f, err := os.Create(filepath.Join(logDir, "ghost.log"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		logger = slog.New(slog.NewJSONHandler(f, nil))
	}
	so := server.Options{
		Store: n.store, CacheDir: cache, Logger: logger,
		Compaction: compact.TriggerOptions{Done: n.compactions.done},
		Scan:       scanner.Options{Coord: func() coord.Backend { return backend }},
	}
	workers := max(1, min(2, runtime.NumCPU()/2)) // serve's default (cli.defaultScanWorkers)
	if !yield {
		so.Background = gitexec.BackgroundOptions{Nice: -1, Processes: -1, MaxPause: -1}
		workers = 2
	}
	srv, err := server.New(ctx, so)
	if err != nil {
		b.Fatal(err)
	}
	n.srv = srv
	b.Cleanup(func() { srv.Close() })
	// serve's in-process workers.
	wctx, cancel := context.WithCancel(ctx)
	n.cancel = cancel
	wo := scanner.WorkerOptions{Cache: srv.Cache()}
	if yield {
		wo.Background = srv.Background()
	}
	for range workers {
		w, err := srv.Scanner().NewWorker(wo)
		if err != nil {
			b.Fatal(err)
		}
		n.workers.Add(1)
		go func() {
			defer n.workers.Done()
			w.Run(wctx)
		}()
	}
	b.Cleanup(func() { cancel(); n.workers.Wait() })
	m := srv.Meta()
	if _, err := m.CreateTenant(ctx, "bench", meta.KindUser); err != nil {
		b.Fatal(err)
	}
	tok, _, err := m.CreateToken(ctx, "bench", meta.ScopeWrite, "bench")
	if err != nil {
		b.Fatal(err)
	}
	repo, err := m.CreateRepo(ctx, "bench", "repo", true)
	if err != nil {
		b.Fatal(err)
	}
	n.repoID, n.tenant = repo.ID, "bench"
	base := serve(b, countPushes(srv.Handler(), &n.pushed))
	host := strings.TrimPrefix(base, "http://")
	n.target = target{
		name:     "ghost",
		pushURL:  "http://bench:" + tok + "@" + host + "/bench/repo.git",
		cloneURL: base + "/bench/repo.git",
		wipe: func() {
			entries, _ := os.ReadDir(cache)
			for _, e := range entries {
				os.RemoveAll(filepath.Join(cache, e.Name()))
			}
		},
	}
	return n
}

// stopScanning stops the node's scan workers and waits for them.
func (n *busyNode) stopScanning() {
	n.cancel()
	n.workers.Wait()
}

// scanLag is how many pushes are not scanned yet.
func (n *busyNode) scanLag(ctx context.Context) uint64 {
	x, err := n.srv.Log().Head(ctx, n.repoID)
	if err != nil {
		return 0
	}
	wm, err := n.srv.Scanner().Watermark(ctx, n.repoID)
	if err != nil || wm > x.Seq {
		return 0
	}
	return x.Seq - wm
}

// drain waits until every push is scanned and no compaction, and none of
// the cache's background work, runs.
func (n *busyNode) drain(ctx context.Context, b *testing.B) {
	deadline := time.Now().Add(2 * time.Hour)
	for time.Now().Before(deadline) {
		act, err := n.srv.Scanner().Active(ctx)
		if err == nil && len(act) == 0 && n.srv.Background().Stats().Running == 0 && n.srv.Cache().Consolidating() == 0 {
			return
		}
		time.Sleep(time.Second) // polling background work, not a timed assertion
	}
	b.Fatal("background work did not finish in two hours")
}

// countPushes counts into n the request bytes of the receive-pack POSTs
// that h serves: what the client pushed.
func countPushes(h http.Handler, n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
			r.Body = &countingBody{ReadCloser: r.Body, n: n}
		}
		h.ServeHTTP(w, r)
	})
}

// diskWrites estimates the bytes git writes under a directory (a
// repository's objects, where receive-pack's packs or loose objects and
// gc's repacks land) by scanning it after each push: every file version
// (inode and modification time) counts its size once, a rename does not
// count again, and a file that grew between scans counts what it grew.
// Files written and deleted between two scans (gc's temporaries) are
// missed, so it is a lower bound.
type diskWrites struct {
	dir   string
	seen  map[[2]uint64]int64 // inode, mtime → size counted
	total int64
}

func newDiskWrites(dir string) *diskWrites {
	return &diskWrites{dir: dir, seen: map[[2]uint64]int64{}}
}

func (d *diskWrites) scan() error {
	return filepath.WalkDir(d.dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // gc removed it meanwhile
				return nil
			}
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no inode", p)
		}
		k := [2]uint64{st.Ino, uint64(info.ModTime().UnixNano())}
		if n := info.Size(); n > d.seen[k] {
			d.total += n - d.seen[k]
			d.seen[k] = n
		}
		return nil
	})
}

// countingBody counts the bytes read from a request body.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	k, err := c.ReadCloser.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// countingStore counts the bytes written to a store, by kind of key.
type countingStore struct {
	objstore.Store
	mu sync.Mutex
	by map[string]int64
}

func newCountingStore(s objstore.Store) *countingStore {
	return &countingStore{Store: s, by: map[string]int64{}}
}

// keyClass names what a key holds.
func keyClass(key string) string {
	switch {
	case strings.HasSuffix(key, "/index") && strings.HasPrefix(key, "repos/"):
		return "index"
	case strings.Contains(key, "/checkpoints/"):
		return "checkpoints"
	case strings.Contains(key, "/entries/") && strings.HasSuffix(key, ".idx"):
		return "entry .idx"
	case strings.Contains(key, "/entries/"):
		return "entries"
	case strings.HasPrefix(key, "scans/"):
		return "scans"
	case strings.HasPrefix(key, "meta/"):
		return "meta"
	}
	return "other"
}

func (c *countingStore) add(key string, n int64) {
	c.mu.Lock()
	c.by[keyClass(key)] += n
	c.mu.Unlock()
}

func (c *countingStore) total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t int64
	for _, v := range c.by {
		t += v
	}
	return t
}

func (c *countingStore) classes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ks []string
	for k := range c.by {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func (c *countingStore) class(k string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.by[k]
}

func (c *countingStore) Put(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	info, err := c.Store.Put(ctx, key, r, size)
	if err == nil {
		c.add(key, size)
	}
	return info, err
}

func (c *countingStore) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (objstore.Info, error) {
	info, err := c.Store.PutIfMatch(ctx, key, r, size, etag)
	if err == nil {
		c.add(key, size)
	}
	return info, err
}

func (c *countingStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	info, err := c.Store.PutIfAbsent(ctx, key, r, size)
	if err == nil {
		c.add(key, size)
	}
	return info, err
}

// compactionLog records the background compactions.
type compactionLog struct {
	mu    sync.Mutex
	n     int
	full  int
	took  time.Duration
	start time.Time
	rows  []string
}

func (l *compactionLog) done(repo string, res compact.Result, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.start.IsZero() {
		l.start = now
	}
	if err != nil && !errors.Is(err, wal.ErrAlreadyCompacted) && !errors.Is(err, compact.ErrNothingToCompact) {
		l.rows = append(l.rows, fmt.Sprintf("%.1f,failed,%q", now.Sub(l.start).Seconds(), err.Error()))
		return
	}
	if err != nil {
		return
	}
	l.n++
	l.took += res.Took
	if res.Full {
		l.full++
	}
	kind := "rollup"
	if res.Full {
		kind = "full"
	}
	l.rows = append(l.rows, fmt.Sprintf("%.1f,%s,%d,%d,%d,%d,%d,%.2f", now.Sub(l.start).Seconds(), kind, res.Checkpoint.Seq, res.Folded, res.Replaced, res.Objects, res.Checkpoint.Size, res.Took.Seconds()))
}

func (l *compactionLog) csv() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return "t_s,kind,seq,folded,replaced,objects,bytes,took_s\n" + strings.Join(l.rows, "\n") + "\n"
}
