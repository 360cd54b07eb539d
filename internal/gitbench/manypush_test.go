package gitbench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/compact"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/wal"
)

// BenchmarkManyPushes replays a history as GHOST_BENCH_PUSHES (default
// 300) pushes, commit range by commit range, to ghost and to git
// http-backend (receive.autogc on, gc.auto defaults) side by side, then
// measures, before and after a compaction, the full clone from a warm and
// from a cold node, the index size and a small incremental fetch, as
// ratios ghost/http-backend; and ghost's push latency while a compaction
// runs against idle (issue 12, "Benchmark"):
//
//	GHOST_BENCH_PUSHES=300 go test -v -run='^$' -bench=ManyPushes -benchtime=1x -timeout=120m ./internal/gitbench/
//
// The history is built offline: the first commit holds the tree of
// GHOST_BENCH_SRC (default $(go env GOROOT)/src), and each later commit
// makes small edits to a few of its files; each push carries
// GHOST_BENCH_COMMITS_PER_PUSH (default 2) commits. Background compaction
// is switched off during the replay, so "before" is the log of N layers,
// and "after" follows one `compact` run.
func BenchmarkManyPushes(b *testing.B) {
	pushes := envInt("GHOST_BENCH_PUSHES", 300)
	per := envInt("GHOST_BENCH_COMMITS_PER_PUSH", 2)
	reps := envInt("GHOST_BENCH_REPS", 3)
	srcTree := os.Getenv("GHOST_BENCH_SRC")
	if srcTree == "" {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			b.Skip("no GHOST_BENCH_SRC and no go env GOROOT")
		}
		srcTree = filepath.Join(strings.TrimSpace(string(out)), "src")
	}
	ctx := context.Background()
	work := b.TempDir()
	env := gittest.Env(filepath.Join(work, "home"))
	src := filepath.Join(work, "src")
	t0 := time.Now()
	commits := buildHistory(b, env, srcTree, src, pushes*per)
	b.Logf("built %d commits from %s in %v", len(commits), srcTree, time.Since(t0).Round(time.Second))

	hb := httpBackend(b, env, filepath.Join(work, "hb"))
	hbRepo := filepath.Join(work, "hb", "repo.git")
	gittest.Git(b, env, hbRepo, "config", "receive.autogc", "true")
	gh, srv, repoID := ghostNoAutoCompact(b, filepath.Join(work, "ghost"))
	targets := []target{hb, gh}

	push := func(tg target, rev string) time.Duration {
		return timed(func() {
			gittest.Git(b, env, src, "-c", "http.postBuffer=2147483647", "push", "-q", tg.pushURL, rev+":refs/heads/main")
		})
	}
	t0 = time.Now()
	replay := map[string]time.Duration{}
	for i := per - 1; i < len(commits); i += per {
		for _, tg := range targets {
			replay[tg.name] += push(tg, commits[i])
		}
	}
	b.Logf("replayed %d commits as %d pushes to each target in %v (ghost %v, http-backend %v)",
		len(commits), len(commits)/per, time.Since(t0).Round(time.Second), replay["ghost"].Round(time.Millisecond), replay["http-backend"].Round(time.Millisecond))

	// extra adds one small commit to src and pushes it to every target
	// given.
	nextExtra := 0
	extra := func(tgs ...target) []time.Duration {
		nextExtra++
		f := filepath.Join(src, "bench-extra.txt")
		if err := os.WriteFile(f, fmt.Appendf(nil, "extra change %d\n", nextExtra), 0o644); err != nil {
			b.Fatal(err)
		}
		gittest.Git(b, env, src, "add", "bench-extra.txt")
		gittest.Git(b, env, src, "commit", "-q", "-m", fmt.Sprint("extra ", nextExtra))
		var ds []time.Duration
		for _, tg := range tgs {
			ds = append(ds, push(tg, "HEAD"))
		}
		return ds
	}

	res := map[string]float64{} // "<phase>/<metric>/<target>"
	measure := func(phase string) {
		for _, tg := range targets {
			dir := filepath.Join(work, "clone-"+phase+"-"+tg.name)
			rm := func() { os.RemoveAll(dir) }
			clone := func() { gittest.Git(b, env, "", "clone", "-q", "--bare", tg.cloneURL, dir) }
			// One untimed clone first, so that "warm" means warm for ghost.
			rm()
			clone()
			res[phase+"/clone-warm-s/"+tg.name] = median(reps, rm, clone).Seconds()
			cold := rm
			if tg.wipe != nil {
				cold = func() { rm(); tg.wipe() }
			}
			res[phase+"/clone-cold-s/"+tg.name] = median(reps, cold, clone).Seconds()
			rm()
			clone() // warm the cache again, and leave a clone to fetch into
			fetches := make([]time.Duration, 0, reps)
			for range reps {
				extra(targets...)
				fetches = append(fetches, timed(func() {
					gittest.Git(b, env, dir, "fetch", "-q", tg.cloneURL, "+refs/heads/*:refs/heads/*")
				}))
			}
			slices.Sort(fetches)
			res[phase+"/fetch-incremental-s/"+tg.name] = fetches[len(fetches)/2].Seconds()
			rm()
		}
		rc, info, err := srv.Store().Get(ctx, wal.IndexKey(repoID))
		if err != nil {
			b.Fatal(err)
		}
		rc.Close()
		res[phase+"/index-bytes/ghost"] = float64(info.Size)
		res[phase+"/packs/ghost"] = float64(countPacks(filepath.Join(work, "ghost", "cache")))
		res[phase+"/packs/http-backend"] = float64(countPacks(hbRepo))
		x, err := srv.Log().Head(ctx, repoID)
		if err != nil {
			b.Fatal(err)
		}
		res[phase+"/layers/ghost"] = float64(len(x.Layers))
	}

	measure("before")
	comp := compact.New(srv.Log(), srv.Cache(), compact.Options{})
	var cres compact.Result
	cdur := timed(func() {
		var err error
		if cres, err = comp.Compact(ctx, repoID); err != nil {
			b.Fatal(err)
		}
	})
	b.Logf("compaction: %v, %d objects", cdur.Round(time.Millisecond), cres.Objects)
	res["compaction-s"] = cdur.Seconds()
	measure("after")
	// A stricter reference: http-backend's repository fully repacked
	// (`git gc`), as if gc.auto had just run; small pushes stay below
	// receive.unpackLimit and land as loose objects until gc.auto's 6700.
	gittest.Git(b, env, hbRepo, "gc", "-q")
	{
		dir := filepath.Join(work, "clone-gc-http-backend")
		rm := func() { os.RemoveAll(dir) }
		res["gc/clone-s/http-backend"] = median(reps, rm, func() { gittest.Git(b, env, "", "clone", "-q", "--bare", hb.cloneURL, dir) }).Seconds()
		rm()
	}

	// Push latency, ghost only: GHOST_BENCH_LATENCY_PUSHES (default 50)
	// pushes while compactions run back to back (each folds the layers
	// the previous pushes added and rewrites the checkpoint), then as
	// many pushes idle.
	nLat := envInt("GHOST_BENCH_LATENCY_PUSHES", 50)
	var busy, idle []time.Duration
	stop := make(chan struct{})
	done := make(chan error, 1)
	runs := 0
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			switch _, err := comp.Compact(ctx, repoID); {
			case errors.Is(err, compact.ErrNothingToCompact):
				time.Sleep(5 * time.Millisecond) // wait for the next push's layer
			case err != nil:
				done <- err
				return
			default:
				runs++
			}
		}
	}()
	for len(busy) < nLat {
		busy = append(busy, extra(gh)[0])
	}
	close(stop)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.Logf("%d compactions ran during %d pushes", runs, len(busy))
	for len(idle) < nLat {
		idle = append(idle, extra(gh)[0])
	}

	b.Logf("%-22s %12s %12s %12s %12s %12s %8s", "metric", "ghost before", "hb before", "ratio", "ghost after", "hb after", "ratio")
	for _, m := range []string{"clone-warm-s", "clone-cold-s", "fetch-incremental-s"} {
		gb, hbb := res["before/"+m+"/ghost"], res["before/"+m+"/http-backend"]
		ga, hba := res["after/"+m+"/ghost"], res["after/"+m+"/http-backend"]
		b.Logf("%-22s %12.3f %12.3f %12.2f %12.3f %12.3f %8.2f", m, gb, hbb, gb/hbb, ga, hba, ga/hba)
		b.ReportMetric(gb/hbb, m+"-before-ratio")
		b.ReportMetric(ga/hba, m+"-after-ratio")
	}
	for _, m := range []string{"index-bytes", "layers"} {
		b.Logf("%-22s %12.0f %12s %12s %12.0f", m+" (ghost)", res["before/"+m+"/ghost"], "", "", res["after/"+m+"/ghost"])
		b.ReportMetric(res["before/"+m+"/ghost"], m+"-before")
		b.ReportMetric(res["after/"+m+"/ghost"], m+"-after")
	}
	b.Logf("%-22s %12.0f %12.0f %12s %12.0f %12.0f", "packs", res["before/packs/ghost"], res["before/packs/http-backend"], "", res["after/packs/ghost"], res["after/packs/http-backend"])
	gcd := res["gc/clone-s/http-backend"]
	b.Logf("http-backend after a full git gc: clone %.3f s; ghost after compaction / that: warm %.2f, cold %.2f",
		gcd, res["after/clone-warm-s/ghost"]/gcd, res["after/clone-cold-s/ghost"]/gcd)
	b.ReportMetric(res["after/clone-warm-s/ghost"]/gcd, "clone-warm-after-vs-gcd-ratio")
	b.ReportMetric(res["after/clone-cold-s/ghost"]/gcd, "clone-cold-after-vs-gcd-ratio")
	p := func(ds []time.Duration, q float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	b.Logf("push latency during compaction (%d pushes): p50 %v p99 %v; idle (%d pushes): p50 %v p99 %v",
		len(busy), p(busy, 0.5).Round(time.Millisecond), p(busy, 0.99).Round(time.Millisecond),
		len(idle), p(idle, 0.5).Round(time.Millisecond), p(idle, 0.99).Round(time.Millisecond))
	b.ReportMetric(p(busy, 0.5).Seconds()/p(idle, 0.5).Seconds(), "push-p50-compacting/idle")
	b.ReportMetric(p(busy, 0.99).Seconds()/p(idle, 0.99).Seconds(), "push-p99-compacting/idle")
}

// ghostNoAutoCompact is ghost() with background compaction switched off,
// returning the server and the repository's log id too.
func ghostNoAutoCompact(b *testing.B, root string) (target, *server.Server, string) {
	ctx := context.Background()
	store, err := fsstore.Open(filepath.Join(root, "objects"))
	if err != nil {
		b.Fatal(err)
	}
	cache := filepath.Join(root, "cache")
	srv, err := server.New(ctx, server.Options{
		Store: store, CacheDir: cache,
		Compaction: compact.TriggerOptions{Policy: compact.Policy{MaxLayers: -1, MaxBytes: -1}},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
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
	base := serve(b, srv.Handler())
	host := strings.TrimPrefix(base, "http://")
	return target{
		name:     "ghost",
		pushURL:  "http://bench:" + tok + "@" + host + "/bench/repo.git",
		cloneURL: base + "/bench/repo.git",
		wipe: func() {
			entries, _ := os.ReadDir(cache)
			for _, e := range entries {
				os.RemoveAll(filepath.Join(cache, e.Name()))
			}
		},
	}, srv, repo.ID
}

// buildHistory makes a repository in dir whose first commit holds tree's
// files and whose n-1 later commits each edit up to three of its .go
// files; it returns the commits, oldest first.
func buildHistory(b *testing.B, env []string, tree, dir string, n int) []string {
	gittest.Git(b, env, "", "init", "-q", "-b", "main", dir)
	var files []string
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(tree, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if strings.HasSuffix(rel, ".go") {
			files = append(files, rel)
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		b.Fatal(err)
	}
	// Nested .git files or .gitignore rules in the tree must not hide
	// files: add everything by force.
	gittest.Git(b, env, dir, "add", "-A", "-f", ".")
	gittest.Git(b, env, dir, "commit", "-q", "-m", "import")
	slices.Sort(files)
	rng := rand.New(rand.NewPCG(12, 0))
	for i := 1; i < n; i++ {
		for range 1 + rng.IntN(3) {
			f := filepath.Join(dir, files[rng.IntN(len(files))])
			data, err := os.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			// Replace one line with an edited copy, or append a comment.
			lines := strings.Split(string(data), "\n")
			if k := rng.IntN(len(lines)); strings.TrimSpace(lines[k]) != "" && rng.IntN(2) == 0 {
				lines[k] += " // edit " + strconv.Itoa(i)
			} else {
				lines = append(lines, "// change "+strconv.Itoa(i))
			}
			if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		gittest.Git(b, env, dir, "commit", "-q", "-a", "-m", fmt.Sprint("change ", i))
	}
	return strings.Fields(gittest.Git(b, env, dir, "rev-list", "--reverse", "main"))
}

// countPacks counts the .pack files under dir.
func countPacks(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".pack") {
			n++
		}
		return nil
	})
	return n
}
