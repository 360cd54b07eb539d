// Package gitbench measures ghost against git's own smart HTTP server
// (git http-backend behind net/http/cgi) on the same machine, in the same
// run, with the same stock git client. It holds benchmarks only:
//
//	go test -run='^$' -bench=VsHTTPBackend -benchtime=1x -timeout=60m ./internal/gitbench/
//
// Shape of the generated repository (defaults: 5000 commits of 21 KiB of
// incompressible bytes each, about 103 MiB) can be changed with
// GHOST_BENCH_COMMITS and GHOST_BENCH_BLOB_BYTES.
package gitbench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/server"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// serve runs h on a loopback listener until the benchmark ends.
func serve(b *testing.B, h http.Handler) string {
	url, _ := serveStop(b, h)
	return url
}

// serveStop runs h on a loopback listener until stop is called or the
// benchmark ends.
func serveStop(b *testing.B, h http.Handler) (url string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	stop = sync.OnceFunc(func() { srv.Close() })
	b.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}

// target is one server under test.
type target struct {
	name     string
	pushURL  string
	cloneURL string
	wipe     func() // makes the next clone cold; nil when there is no cache
}

func httpBackend(b *testing.B, env []string, root string) target {
	url := serve(b, httpBackendHandler(b, env, root)) + "/repo.git"
	return target{name: "http-backend", pushURL: url, cloneURL: url}
}

// httpBackendHandler creates root/repo.git, bare and open to pushes, and
// returns git http-backend serving root.
func httpBackendHandler(b *testing.B, env []string, root string) http.Handler {
	execPath := strings.TrimSpace(gittest.Git(b, env, "", "--exec-path"))
	bare := filepath.Join(root, "repo.git")
	gittest.Git(b, env, "", "init", "-q", "--bare", bare)
	gittest.Git(b, env, bare, "config", "http.receivepack", "true")
	return &cgi.Handler{
		Path: filepath.Join(execPath, "git-http-backend"),
		Env:  append(slices.Clone(env), "GIT_PROJECT_ROOT="+root, "GIT_HTTP_EXPORT_ALL=1"),
	}
}

func ghost(b *testing.B, root string) target {
	ctx := context.Background()
	store, err := fsstore.Open(filepath.Join(root, "objects"))
	if err != nil {
		b.Fatal(err)
	}
	cache := filepath.Join(root, "cache")
	srv, err := server.New(ctx, server.Options{Store: store, CacheDir: cache})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	tok := benchTenant(b, srv.Meta(), "repo")
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
	}
}

// benchTenant creates the user bench, a write token of it and its public
// repositories repos, and returns the token.
func benchTenant(b *testing.B, m *meta.Store, repos ...string) string {
	ctx := context.Background()
	if _, err := m.CreateTenant(ctx, "bench", meta.KindUser); err != nil {
		b.Fatal(err)
	}
	tok, _, err := m.CreateToken(ctx, "bench", meta.ScopeWrite, "bench")
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range repos {
		if _, err := m.CreateRepo(ctx, "bench", r, true); err != nil {
			b.Fatal(err)
		}
	}
	return tok
}

func timed(f func()) time.Duration {
	t0 := time.Now()
	f()
	return time.Since(t0)
}

// median of n runs of f, each preceded by prep (untimed).
func median(n int, prep, f func()) time.Duration {
	var ds []time.Duration
	for range n {
		if prep != nil {
			prep()
		}
		ds = append(ds, timed(f))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func BenchmarkVsHTTPBackend(b *testing.B) {
	commits := envInt("GHOST_BENCH_COMMITS", 5000)
	blob := envInt("GHOST_BENCH_BLOB_BYTES", 21*1024)
	work := b.TempDir()
	env := gittest.Env(filepath.Join(work, "home"))
	src := filepath.Join(work, "src")
	gittest.Generate(b, env, src, gittest.Shape{Commits: commits, BlobBytes: blob})
	// Both clients buffer the whole pack, as net/http/cgi refuses chunked
	// request bodies; ghost gets the same client settings for fairness.
	push := func(dir, url string, args ...string) {
		gittest.Git(b, env, dir, append([]string{"-c", "http.postBuffer=2147483647", "push", "-q", url}, args...)...)
	}
	targets := []target{httpBackend(b, env, filepath.Join(work, "hb")), ghost(b, filepath.Join(work, "ghost"))}
	res := map[string]map[string]time.Duration{}
	for i := 0; i < b.N; i++ {
		for _, tg := range targets {
			r := map[string]time.Duration{}
			res[tg.name] = r
			clones := filepath.Join(work, "clones-"+tg.name+strconv.Itoa(i))
			r["push"] = timed(func() { push(src, tg.pushURL, "main:refs/heads/main") })
			n := 0
			clone := func() {
				n++
				gittest.Git(b, env, "", "clone", "-q", "--bare", tg.cloneURL, filepath.Join(clones, strconv.Itoa(n)))
			}
			r["clone-warm"] = median(3, nil, clone)
			if tg.wipe != nil {
				r["clone-cold"] = median(3, tg.wipe, clone)
			} else {
				r["clone-cold"] = median(3, nil, clone)
			}
			// Incremental: 50 new commits pushed, then fetched into an
			// existing clone.
			inc := filepath.Join(work, "inc-"+tg.name+strconv.Itoa(i))
			gittest.Git(b, env, "", "clone", "-q", src, inc)
			for j := range 50 {
				os.WriteFile(filepath.Join(inc, fmt.Sprintf("inc-%d.txt", j)), []byte(fmt.Sprintf("change %d of run %d for %s\n", j, i, tg.name)), 0o644)
				gittest.Git(b, env, inc, "add", ".")
				gittest.Git(b, env, inc, "commit", "-q", "-m", fmt.Sprint("inc ", j))
			}
			r["push-incremental"] = timed(func() { push(inc, tg.pushURL, "HEAD:refs/heads/main") })
			r["fetch-incremental"] = timed(func() {
				gittest.Git(b, env, filepath.Join(clones, "1"), "fetch", "-q", tg.cloneURL, "+refs/heads/*:refs/heads/*")
			})
			// Put the source back in step for the next iteration.
			gittest.Git(b, env, src, "pull", "-q", "--ff-only", inc, "HEAD")
		}
	}
	for _, op := range []string{"push", "clone-warm", "clone-cold", "push-incremental", "fetch-incremental"} {
		g, h := res["ghost"][op], res["http-backend"][op]
		b.ReportMetric(g.Seconds(), op+"-ghost-s")
		b.ReportMetric(h.Seconds(), op+"-httpbackend-s")
		b.ReportMetric(g.Seconds()/h.Seconds(), op+"-ratio")
	}
}
