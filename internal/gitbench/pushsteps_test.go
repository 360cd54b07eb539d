package gitbench

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/testkit"
)

// timedStore is a store that adds up the time spent in its writes, by
// what they write: the entry (*.pack), its stored index (*.idx), and the
// log index's compare-and-swap.
type timedStore struct {
	objstore.Store
	mu    sync.Mutex
	spent map[string]time.Duration
}

func (s *timedStore) add(key string, t0 time.Time) {
	what := "cas"
	switch {
	case strings.HasSuffix(key, ".pack"):
		what = "entry"
	case strings.HasSuffix(key, ".idx"):
		what = "idx"
	case !strings.HasSuffix(key, "/index"):
		what = "other"
	}
	s.mu.Lock()
	s.spent[what] += time.Since(t0)
	s.mu.Unlock()
}

func (s *timedStore) Put(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	defer s.add(key, time.Now())
	return s.Store.Put(ctx, key, r, size)
}

func (s *timedStore) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (objstore.Info, error) {
	defer s.add(key, time.Now())
	return s.Store.PutIfMatch(ctx, key, r, size, etag)
}

func (s *timedStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	defer s.add(key, time.Now())
	return s.Store.PutIfAbsent(ctx, key, r, size)
}

// goTreeHistory commits the Go distribution (`go env GOROOT`: its sources,
// tests and built packages and tools) into a new repository at dir in
// commits commits, each adding the next slice of its files (sorted by
// path), without copying them: the work tree is GOROOT itself.
func goTreeHistory(b *testing.B, env []string, dir string, commits int) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatalf("go env GOROOT: %v", err)
	}
	src := strings.TrimSpace(string(out))
	var files []string
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(src, p)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(files)
	gittest.Git(b, env, "", "init", "-q", "-b", "main", dir)
	gd := []string{"-c", "gc.auto=0", "--git-dir=" + filepath.Join(dir, ".git"), "--work-tree=" + src}
	list := filepath.Join(b.TempDir(), "pathspec")
	for i := range commits {
		chunk := files[i*len(files)/commits : (i+1)*len(files)/commits]
		if err := os.WriteFile(list, []byte(strings.Join(chunk, "\n")+"\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		gittest.Git(b, env, "", append(gd, "add", "-f", "--pathspec-from-file="+list)...)
		gittest.Git(b, env, "", append(gd, "commit", "-q", "-m", "go source part "+strconv.Itoa(i))...)
	}
}

// BenchmarkPushSteps pushes one large history ($GOROOT in
// GHOST_BENCH_COMMITS commits, default 50) to git http-backend and to
// ghost in the same run, and reports the push ratio and where ghost's
// push spent its time, step by step (the receive path's log line, and
// the store's writes):
//
//	go test -run='^$' -bench=PushSteps -benchtime=1x -v -timeout=60m ./internal/gitbench/
func BenchmarkPushSteps(b *testing.B) {
	if testing.Short() {
		b.Skip("large push")
	}
	work := b.TempDir()
	env := gittest.Env(filepath.Join(work, "home"))
	src := filepath.Join(work, "src")
	goTreeHistory(b, env, src, envInt("GHOST_BENCH_COMMITS", 50))
	// A pack the client made once, so that both servers get the same
	// bytes and the client's own packing is measured once, outside.
	gittest.Git(b, env, src, "repack", "-a", "-d", "-q")
	push := func(url string) time.Duration {
		return timed(func() {
			gittest.Git(b, env, src, "-c", "http.postBuffer=2147483647", "push", "-q", url, "main:refs/heads/main")
		})
	}
	// A first, untimed push warms the client's side (its pack-objects
	// and the page cache) for both servers alike.
	push(httpBackend(b, env, filepath.Join(work, "warm")).pushURL)
	rounds := envInt("GHOST_BENCH_ROUNDS", 5)
	for i := 0; i < b.N; i++ {
		// Rounds of one push to each, into fresh repositories, in
		// alternating order; medians over the rounds.
		var hs, gs []time.Duration
		var runs []pushRun
		for r := range rounds {
			root := filepath.Join(work, "run"+strconv.Itoa(i)+"-"+strconv.Itoa(r))
			hb := httpBackend(b, env, filepath.Join(root, "hb"))
			gh := newTimedGhost(b, root)
			if r%2 == 0 {
				hs = append(hs, push(hb.pushURL))
				gs = append(gs, push(gh.url))
			} else {
				gs = append(gs, push(gh.url))
				hs = append(hs, push(hb.pushURL))
			}
			runs = append(runs, gh.steps(b, gs[len(gs)-1]))
		}
		slices.SortFunc(runs, func(a, b pushRun) int { return int(a.push - b.push) })
		med := runs[len(runs)/2]
		slices.Sort(hs)
		h, g := hs[len(hs)/2], med.push
		b.ReportMetric(h.Seconds(), "push-httpbackend-s")
		b.ReportMetric(g.Seconds(), "push-ghost-s")
		b.ReportMetric(g.Seconds()/h.Seconds(), "push-ratio")
		total := med.steps["total"]
		b.Logf("steps of the median ghost push (server side; total is the receive path's own duration):")
		for _, k := range slices.Sorted(maps.Keys(med.steps)) {
			b.Logf("  %-12s %8.3fs %5.1f%%", k, med.steps[k].Seconds(), 100*med.steps[k].Seconds()/total.Seconds())
		}
		b.Logf("pack: %d bytes, %d commits, %d rounds", med.bytes, envInt("GHOST_BENCH_COMMITS", 50), rounds)
		b.Logf("push ghost: %v", gs)
		b.Logf("push http-backend: %v", hs)
		b.Logf("medians: ghost %.3fs, http-backend %.3fs, ratio %.3f", g.Seconds(), h.Seconds(), g.Seconds()/h.Seconds())
	}
}

// timedGhost is a ghost server over a timedStore, logging to a buffer.
type timedGhost struct {
	url   string
	srv   *server.Server
	store *timedStore
	logs  *testkit.Buffer
}

// pushRun is one timed push to ghost, with its steps.
type pushRun struct {
	push  time.Duration
	bytes int64
	steps map[string]time.Duration
}

func newTimedGhost(b *testing.B, root string) *timedGhost {
	ctx := context.Background()
	fs, err := fsstore.Open(filepath.Join(root, "objects"))
	if err != nil {
		b.Fatal(err)
	}
	g := &timedGhost{store: &timedStore{Store: fs, spent: map[string]time.Duration{}}, logs: &testkit.Buffer{}}
	g.srv, err = server.New(ctx, server.Options{Store: g.store, CacheDir: filepath.Join(root, "cache"),
		Logger: slog.New(slog.NewJSONHandler(g.logs, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.srv.Close() })
	m := g.srv.Meta()
	if _, err := m.CreateTenant(ctx, "bench", meta.KindUser); err != nil {
		b.Fatal(err)
	}
	tok, _, err := m.CreateToken(ctx, "bench", meta.ScopeWrite, "bench")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.CreateRepo(ctx, "bench", "repo", true); err != nil {
		b.Fatal(err)
	}
	g.store.mu.Lock()
	clear(g.store.spent)
	g.store.mu.Unlock()
	base := serve(b, g.srv.Handler())
	g.url = "http://bench:" + tok + "@" + strings.TrimPrefix(base, "http://") + "/bench/repo.git"
	return g
}

// steps reads the steps of the one push the server took.
func (g *timedGhost) steps(b *testing.B, push time.Duration) pushRun {
	steps := pushedSteps(b, g.logs.String())
	g.store.mu.Lock()
	for k, v := range g.store.spent {
		steps["store-"+k] = v
	}
	g.store.mu.Unlock()
	return pushRun{push: push, bytes: pushedBytes(b, g.logs.String()), steps: steps}
}

// pushedBytes reads the request size of the "push committed" log line.
func pushedBytes(b *testing.B, logs string) int64 {
	for _, l := range strings.Split(logs, "\n") {
		var rec struct {
			Msg   string
			Bytes int64
		}
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "push committed" {
			return rec.Bytes
		}
	}
	b.Fatal("no \"push committed\" line in the log")
	return 0
}

// pushedSteps reads the step durations of the "push committed" log line.
func pushedSteps(b *testing.B, logs string) map[string]time.Duration {
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			Msg      string
			Duration time.Duration
			Steps    map[string]time.Duration
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.Msg != "push committed" {
			continue
		}
		rec.Steps["total"] = rec.Duration
		return rec.Steps
	}
	b.Fatalf("no \"push committed\" line in the log:\n%s", logs)
	return nil
}
