package web_test

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/server"
)

// goHistory builds a bare repository of $(go env GOROOT)/src (its root is
// src's root, as in the Go repository's src directory): the files
// arrive in commits of about equal size (imports commits in all), followed
// by edits commits that each change a few lines of three files, so the
// head commit has a typical diff. It uses git fast-import: one process.
func goHistory(b *testing.B, dir string, imports, edits int) {
	b.Helper()
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Skipf("go env GOROOT: %v", err)
	}
	root := filepath.Join(strings.TrimSpace(string(goroot)), "src")
	var files []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil || len(files) < imports {
		b.Skipf("GOROOT/src unusable (%d files): %v", len(files), err)
	}
	env := gittest.Env(b.TempDir())
	gittest.Git(b, env, "", "init", "-q", "--bare", "-b", "main", dir)
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir, cmd.Env = dir, env
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(in, 1<<20)
	when := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	n := 0
	commit := func(msg string, body func()) {
		n++
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter Go Gopher <gopher@example.com> %d +0000\ndata %d\n%s\n", when+int64(n)*3600, len(msg), msg)
		body()
		fmt.Fprintln(w)
	}
	per := (len(files) + imports - 1) / imports
	for i := 0; i < len(files); i += per {
		chunk := files[i:min(i+per, len(files))]
		commit(fmt.Sprintf("import %s and %d more", strings.TrimPrefix(chunk[0], root+"/"), len(chunk)-1), func() {
			for _, p := range chunk {
				data, err := os.ReadFile(p)
				if err != nil {
					b.Fatal(err)
				}
				fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n", strings.TrimPrefix(p, root+"/"), len(data))
				w.Write(data)
				fmt.Fprintln(w)
			}
		})
	}
	targets := []string{"net/http/server.go", "runtime/proc.go", "fmt/print.go"}
	for e := 0; e < edits; e++ {
		commit(fmt.Sprintf("edit %d: touch three files", e), func() {
			for _, rel := range targets {
				data, err := os.ReadFile(filepath.Join(root, rel))
				if err != nil {
					b.Fatal(err)
				}
				lines := strings.Split(string(data), "\n")
				for k := e; k < len(lines); k += 400 {
					lines[k] = lines[k] + fmt.Sprintf(" // edit %d", e)
				}
				out := strings.Join(lines, "\n")
				fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n%s\n", rel, len(out), out)
			}
		})
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPages measures the server time of the main pages on a large
// real history ($(go env GOROOT)/src in about 200 commits, through a real
// server: the node cache, the metadata store, authorization), and
// reports the median in ms-p50. Run it with 50 requests per page:
//
//	go test -run '^$' -bench BenchmarkPages -benchtime 50x ./internal/web/
func BenchmarkPages(b *testing.B) {
	ctx := context.Background()
	bare := filepath.Join(b.TempDir(), "go.git")
	start := time.Now()
	goHistory(b, bare, 200, 20)
	b.Logf("built the history in %v", time.Since(start).Round(time.Millisecond))
	store, err := fsstore.Open(filepath.Join(b.TempDir(), "objects"))
	if err != nil {
		b.Fatal(err)
	}
	s, err := server.New(ctx, server.Options{Store: store, CacheDir: filepath.Join(b.TempDir(), "cache")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	m := s.Meta()
	if _, err := m.CreateTenant(ctx, "alice", meta.KindUser); err != nil {
		b.Fatal(err)
	}
	tok, _, err := m.CreateToken(ctx, "alice", meta.ScopeWrite, "bench")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.CreateRepo(ctx, "alice", "go", true); err != nil {
		b.Fatal(err)
	}
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("alice", tok)
	gittest.Git(b, gittest.Env(b.TempDir()), bare, "push", "-q", u.String()+"/alice/go.git", "main")
	head := strings.TrimSpace(gittest.Git(b, gittest.Env(b.TempDir()), bare, "rev-parse", "main"))
	h := s.Handler()
	pages := []struct{ name, path string }{
		{"home", "/alice/go"},
		{"tree", "/alice/go/-/tree/main"},
		{"log", "/alice/go/-/commits/main"},
		{"log-page-4", "/alice/go/-/commits/main?page=4"},
		{"commit", "/alice/go/-/commit/" + head},
		{"blob", "/alice/go/-/blob/main/net/http/server.go"},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			get := func() time.Duration {
				req := httptest.NewRequest("GET", p.path, nil)
				rec := httptest.NewRecorder()
				t0 := time.Now()
				h.ServeHTTP(rec, req)
				d := time.Since(t0)
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s: %d %s", p.path, rec.Code, rec.Body.String())
				}
				return d
			}
			get() // warm the cache
			ds := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ds = append(ds, get())
			}
			b.StopTimer()
			slices.Sort(ds)
			b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "ms-p50")
			b.ReportMetric(float64(ds[len(ds)*9/10].Microseconds())/1000, "ms-p90")
		})
	}
}
