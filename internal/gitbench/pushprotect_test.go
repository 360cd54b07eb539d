package gitbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/server"
)

// BenchmarkPushProtectionHTTP measures what push protection adds to a
// whole push, stock git over HTTP to an in-process ghost: the same commit
// of 1, 10 or 100 MiB of new text is pushed to a repository with
// protection off and to one with it on, in the same run, onto the same
// history (GHOST_BENCH_PP_HISTORY commits of 64 KiB text, default 500):
//
//	go test -run '^$' -bench PushProtectionHTTP -benchtime 3x -timeout 60m ./internal/gitbench/
//
// Reported: off_ms, on_ms and ratio (on/off) per push.
func BenchmarkPushProtectionHTTP(b *testing.B) {
	ctx := context.Background()
	work := b.TempDir()
	env := gittest.Env(filepath.Join(work, "home"))
	store, err := fsstore.Open(filepath.Join(work, "objects"))
	if err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(ctx, server.Options{Store: store, CacheDir: filepath.Join(work, "cache")})
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
	for _, name := range []string{"off", "on"} {
		if _, err := m.CreateRepo(ctx, "bench", name, false); err != nil {
			b.Fatal(err)
		}
	}
	if err := m.SetPushProtection(ctx, "bench", "on", true); err != nil {
		b.Fatal(err)
	}
	host := strings.TrimPrefix(serve(b, srv.Handler()), "http://")
	url := func(repo string) string { return "http://bench:" + tok + "@" + host + "/bench/" + repo + ".git" }

	src := filepath.Join(work, "src")
	gittest.Git(b, env, "", "init", "-q", "-b", "main", src)
	rng := rand.New(rand.NewChaCha8([32]byte{'h'}))
	for i := range envInt("GHOST_BENCH_PP_HISTORY", 500) {
		write(b, filepath.Join(src, fmt.Sprintf("hist/f%03d.go", i%200)), text(rng, 64<<10))
		if i%50 == 49 || i == 0 {
			gittest.Git(b, env, src, "add", "-A")
			gittest.Git(b, env, src, "commit", "-q", "-m", fmt.Sprint("history ", i))
		}
	}
	push := func(repo string, args ...string) error {
		_, err := gittest.Run(env, src, nil, append([]string{"-c", "http.postBuffer=2147483647", "push", "-q", url(repo)}, args...)...)
		return err
	}
	for _, repo := range []string{"off", "on"} {
		if err := push(repo, "main"); err != nil {
			b.Fatal(err)
		}
	}
	// Protection is really on: a secret is refused.
	write(b, filepath.Join(src, "leak.txt"), "token = ghp_"+"Xk2Lq9Zr7Tm4Vb8Nc3Wd6Yf1Hg5Js0Pa2Qe7\n")
	gittest.Git(b, env, src, "add", "-A")
	gittest.Git(b, env, src, "commit", "-q", "-m", "leak")
	if err := push("on", "main"); err == nil || !strings.Contains(err.Error(), "secret detected") {
		b.Fatalf("a secret pushed to the protected repository: %v", err)
	}
	gittest.Git(b, env, src, "reset", "-q", "--hard", "HEAD~1")

	round := 0 // b.Run runs a sub-benchmark more than once: every push is new
	for _, mib := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("push=%dMiB", mib), func(b *testing.B) {
			var off, on time.Duration
			for range b.N {
				round++
				rng := rand.New(rand.NewChaCha8([32]byte{byte(mib), byte(round), 'p'}))
				dir := fmt.Sprintf("push%d-%d", mib, round)
				for j := range mib * 4 {
					write(b, filepath.Join(src, dir, fmt.Sprintf("f%03d.go", j)), text(rng, 256<<10))
				}
				gittest.Git(b, env, src, "add", "-A")
				gittest.Git(b, env, src, "commit", "-q", "-m", dir)
				for _, repo := range []string{"off", "on"} {
					d := timed(func() {
						if err := push(repo, "main"); err != nil {
							b.Fatal(err)
						}
					})
					if repo == "on" {
						on += d
					} else {
						off += d
					}
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(off.Milliseconds())/n, "off_ms")
			b.ReportMetric(float64(on.Milliseconds())/n, "on_ms")
			b.ReportMetric(float64(on)/float64(off), "ratio")
		})
	}
}

func write(b *testing.B, path, content string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
}

var words = strings.Fields("func return if else for range var const type struct interface map chan go defer select case switch " +
	"err nil ctx context string int byte error len append make new copy close value result buffer reader writer handler " +
	"request response client server config options state index offset count total name path file line column")

// text makes n bytes of Go-like text.
func text(rng *rand.Rand, n int) string {
	var sb strings.Builder
	sb.Grow(n + 128)
	for sb.Len() < n {
		sb.WriteString(strings.Repeat("\t", rng.IntN(3)))
		for k := 2 + rng.IntN(8); k > 0; k-- {
			sb.WriteString(words[rng.IntN(len(words))])
			switch rng.IntN(6) {
			case 0:
				fmt.Fprintf(&sb, "%d", rng.IntN(100000))
			case 1:
				sb.WriteString("(")
			case 2:
				sb.WriteString(".")
			}
			sb.WriteByte(' ')
		}
		sb.WriteString("\n")
	}
	return sb.String()[:n-1] + "\n"
}
