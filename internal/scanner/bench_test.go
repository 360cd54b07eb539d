package scanner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ghost-scm/ghost/internal/etcdserver"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// countKV counts the etcd requests of a client: the coordination
// overhead of a scan.
type countKV struct {
	clientv3.KV
	n atomic.Int64
}

func (c *countKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	c.n.Add(1)
	return c.KV.Get(ctx, key, opts...)
}

func (c *countKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	c.n.Add(1)
	return c.KV.Put(ctx, key, val, opts...)
}

func (c *countKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	c.n.Add(1)
	return c.KV.Delete(ctx, key, opts...)
}

func (c *countKV) Txn(ctx context.Context) clientv3.Txn {
	c.n.Add(1)
	return c.KV.Txn(ctx)
}

func (c *countKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	c.n.Add(1)
	return c.KV.Do(ctx, op)
}

func cpuTime() time.Duration {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	tv := func(t syscall.Timeval) time.Duration {
		return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
	}
	return tv(self.Utime) + tv(self.Stime) + tv(children.Utime) + tv(children.Stime)
}

// TestScanBenchmark measures full-history scans with 1, 2 and 4 workers
// (wall time, CPU time per MB, etcd requests per shard and per MB) and
// the time from a one-commit push to its run being done. It is not run
// by default:
//
//	GHOST_SCAN_BENCH_SRC=$(go env GOROOT)/src GHOST_SCAN_BENCH_COMMITS=300 \
//	  go test -run TestScanBenchmark -v -timeout 1h ./internal/scanner/
//
// GHOST_SCAN_BENCH_PUSHES sets the number of one-commit pushes (100).
func TestScanBenchmark(t *testing.T) {
	src := os.Getenv("GHOST_SCAN_BENCH_SRC")
	if src == "" {
		t.Skip("set GHOST_SCAN_BENCH_SRC to a source tree to commit and scan")
	}
	commits := envInt("GHOST_SCAN_BENCH_COMMITS", 300)
	pushes := envInt("GHOST_SCAN_BENCH_PUSHES", 100)

	e, err := etcdserver.Start(context.Background(), etcdserver.Options{Dir: t.TempDir(), UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	client, err := e.Client()
	if err != nil {
		t.Fatal(err)
	}
	kv := &countKV{KV: client.KV}
	client.KV = kv

	f := newFixture(t, fixtureOpts{client: client, scan: &scanner.Options{}})
	f.tenant("alice")
	repo := f.repo("alice", "src")
	buildSrcHistory(t, src, commits, f.remote("alice", "src"))
	ctx := context.Background()
	s := f.srv.Scanner()
	// The push runs of the history's one push: done before measuring.
	if _, err := s.Reconcile(ctx, "alice", repo.ID); err != nil {
		t.Fatal(err)
	}
	drain(t, s, f.worker(s, scanner.WorkerOptions{}))

	for i, n := range []int{1, 2, 4} {
		// A new full run at the same seq is the same run: scan copies.
		r, err := f.srv.Meta().ForkRepo(ctx, "alice", "src", "alice", fmt.Sprint("copy", i))
		if err != nil {
			t.Fatal(err)
		}
		// One cache for the n workers, as "ghost worker --scan-workers n"
		// has: the repository is materialized once.
		cache, err := repocache.New(t.TempDir(), f.srv.Log(), repocache.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer cache.Close()
		ws := make([]*scanner.Worker, n)
		for j := range ws {
			if ws[j], err = s.NewWorker(scanner.WorkerOptions{Cache: cache, EngineWorkers: 1}); err != nil {
				t.Fatal(err)
			}
		}
		ops0, cpu0, t0 := kv.n.Load(), cpuTime(), time.Now()
		run, _, err := s.StartFull(ctx, "alice", r.ID)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					did, err := w.Step(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if !did {
						if st := status(t, s, run.Spec()); st.State == "done" {
							return
						}
						time.Sleep(20 * time.Millisecond)
					}
				}
			}()
		}
		wg.Wait()
		wall, cpu, ops := time.Since(t0), cpuTime()-cpu0, kv.n.Load()-ops0
		st := status(t, s, run.Spec())
		mb := float64(st.Bytes) / (1 << 20)
		t.Logf("full scan, %d worker(s): %.1f MiB in %d blobs, %d shards: wall %v, CPU %.2f s/MiB, etcd %d requests (%.1f/shard, %.2f/MiB)",
			n, mb, st.Blobs, st.ShardsDone, wall.Round(time.Millisecond), cpu.Seconds()/mb, ops, float64(ops)/float64(st.ShardsDone), float64(ops)/mb)
	}

	// Push-to-run-done latency: one worker polling every 20 ms, as serve's
	// would with --scan-workers 1 and a short idle.
	small := f.repo("alice", "small")
	w := f.worker(s, scanner.WorkerOptions{Idle: 20 * time.Millisecond})
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go w.Run(wctx)
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	var lat []time.Duration
	for i := range pushes {
		os.WriteFile(filepath.Join(dir, "f.txt"), []byte(fmt.Sprint("change ", i, "\n")), 0o644)
		git(t, dir, "add", "-A")
		git(t, dir, "commit", "-q", "-m", fmt.Sprint(i))
		t0 := time.Now()
		git(t, dir, "push", "-q", f.remote("alice", "small"), "main")
		spec := scanner.Spec{Tenant: "alice", RepoID: small.ID, Kind: scanner.KindPush, Seq: uint64(i + 1)}
		for {
			if r, err := s.Get(ctx, spec); err == nil && r.Done {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	t.Logf("push to run done over %d one-commit pushes: p50 %v, p99 %v, max %v", pushes,
		lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// buildSrcHistory commits the files under src in about commits commits
// (each adds the next slice of files) and pushes the result once. src
// may list several directories (filepath.ListSeparator).
func buildSrcHistory(t *testing.T, src string, commits int, remote string) {
	type file struct{ path, rel string }
	var files []file
	for i, root := range filepath.SplitList(src) {
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				rel, _ := filepath.Rel(root, p)
				files = append(files, file{p, filepath.Join(fmt.Sprint("src", i), rel)})
			}
			return nil
		})
	}
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	per := max(1, len(files)/commits)
	for i := 0; i < len(files); i += per {
		for _, fl := range files[i:min(i+per, len(files))] {
			p, rel := fl.path, fl.rel
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			dst := filepath.Join(dir, rel)
			os.MkdirAll(filepath.Dir(dst), 0o755)
			os.WriteFile(dst, b, 0o644)
		}
		git(t, dir, "add", "-A")
		git(t, dir, "commit", "-q", "--allow-empty", "-m", fmt.Sprint("slice ", i))
	}
	git(t, dir, "push", "-q", remote, "main")
}
