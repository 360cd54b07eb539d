package pushprotect

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// BenchmarkPushProtection measures what push protection adds to the
// validation of a push, both in the same run: "off" is what the receive
// path does anyway (index-pack --fix-thin --strict into a quarantine and
// the connectivity check), "on" is that plus Checker.Check. Pushes of 1,
// 10 and 100 MiB of new text (source-like lines, no secrets) go onto a
// repository with a small and with a large history, to show that the
// cost follows the pushed bytes, not the history:
//
//	go test -run '^$' -bench PushProtection -benchtime 3x -timeout 30m ./internal/pushprotect/
//
// Reported per push: off_ms, on_ms, ratio (on/off) and scan_MiB/s, and
// the same in CPU time (this process and its git children: off_cpu_ms,
// on_cpu_ms, cpu_ratio), which a loaded shared machine disturbs less than
// wall time.
func BenchmarkPushProtection(b *testing.B) {
	for _, hist := range []struct {
		name    string
		commits int
	}{{"history=10", 10}, {"history=2000", 2000}} {
		for _, mib := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("%s/push=%dMiB", hist.name, mib), func(b *testing.B) {
				benchPush(b, hist.commits, mib)
			})
		}
	}
}

func benchPush(b *testing.B, historyCommits, mib int) {
	ctx := context.Background()
	env := gittest.Env(b.TempDir())
	// History: text commits (each 64 KiB, with a secret in every tenth,
	// so that scanning history by mistake would show in time and in
	// findings).
	src := filepath.Join(b.TempDir(), "src")
	gittest.Git(b, env, "", "init", "-q", "-b", "main", src)
	writeHistory(b, env, src, historyCommits)
	srv := filepath.Join(b.TempDir(), "srv.git")
	gittest.Git(b, env, "", "clone", "-q", "--bare", src, srv)
	gittest.Git(b, env, srv, "repack", "-adq")
	f := &fixture{t: b, env: env, srv: srv, client: src}
	old := f.rev("main")

	// The push: mib MiB of new text files in commits of at most 10 MiB.
	rng := rand.New(rand.NewChaCha8([32]byte{byte(mib), 'p'}))
	const fileBytes = 256 << 10
	files := mib << 20 / fileBytes
	for c := 0; files > 0; c++ {
		batch := map[string]string{}
		for i := 0; i < min(files, 40); i++ {
			batch[fmt.Sprintf("push/c%03d/f%03d.go", c, i)] = sourceText(rng, fileBytes)
		}
		files -= len(batch)
		f.commit(fmt.Sprintf("push %d", c), batch)
	}
	tip := f.rev("main")
	pack := buildPack(b, f, tip)
	s := newChecker(b, alerts.New(memstore.New()), Options{})

	var off, on, offCPU, onCPU time.Duration
	var scanned int64
	b.ResetTimer()
	for range b.N {
		for _, protect := range []bool{false, true} {
			q := filepath.Join(b.TempDir(), "q")
			os.MkdirAll(filepath.Join(q, "pack"), 0o755)
			qenv := []string{"GIT_OBJECT_DIRECTORY=" + q, "GIT_ALTERNATE_OBJECT_DIRECTORIES=" + filepath.Join(srv, "objects"), "GIT_QUARANTINE_PATH=" + q}
			genv := append(append([]string(nil), env...), qenv...)
			t0, c0 := time.Now(), cpuTime()
			if _, err := gittest.Run(genv, srv, strings.NewReader(pack), "index-pack", "--stdin", "--fix-thin", "--strict"); err != nil {
				b.Fatal(err)
			}
			if _, err := gittest.Run(genv, srv, strings.NewReader(tip+"\n"), "rev-list", "--objects", "--stdin", "--not", "--all", "--quiet"); err != nil {
				b.Fatal(err)
			}
			if protect {
				v, err := s.Check(ctx, Push{Tenant: "alice", RepoID: repoID, Pusher: "alice", Repo: repoOf(srv, qenv),
					Updates: []Update{{Ref: "refs/heads/main", Old: old, New: tip}}})
				if err != nil {
					b.Fatal(err)
				}
				if v.Blocked {
					b.Fatalf("clean push blocked: %v", v.Message)
				}
				scanned = v.Stats.BytesScanned
				on += time.Since(t0)
				onCPU += cpuTime() - c0
			} else {
				off += time.Since(t0)
				offCPU += cpuTime() - c0
			}
			os.RemoveAll(q)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(off.Milliseconds())/n, "off_ms")
	b.ReportMetric(float64(on.Milliseconds())/n, "on_ms")
	b.ReportMetric(float64(on)/float64(off), "ratio")
	b.ReportMetric(float64(scanned)/(1<<20)/((on-off).Seconds()/n), "scan_MiB/s")
	b.ReportMetric(float64(offCPU.Milliseconds())/n, "off_cpu_ms")
	b.ReportMetric(float64(onCPU.Milliseconds())/n, "on_cpu_ms")
	if offCPU > 0 {
		b.ReportMetric(float64(onCPU)/float64(offCPU), "cpu_ratio")
	}
	if scanned < int64(mib)<<20 {
		b.Fatalf("scanned %d bytes, want the pushed %d MiB", scanned, mib)
	}
}

// buildPack is what git push sends: a thin pack of tip against the
// server's refs.
func buildPack(b *testing.B, f *fixture, tip string) string {
	in := tip + "\n"
	for _, have := range strings.Fields(gittest.Git(b, f.env, f.srv, "for-each-ref", "--format=%(objectname)")) {
		in += "^" + have + "\n"
	}
	pack, err := gittest.Run(f.env, f.client, strings.NewReader(in), "pack-objects", "--revs", "--thin", "--stdout", "-q")
	if err != nil {
		b.Fatal(err)
	}
	return pack
}

// writeHistory commits n text files of 64 KiB through fast-import.
func writeHistory(b *testing.B, env []string, dir string, n int) {
	var sb strings.Builder
	w := bufio.NewWriter(&sb)
	rng := rand.New(rand.NewChaCha8([32]byte{'h'}))
	for i := 1; i <= n; i++ {
		body := sourceText(rng, 64<<10)
		if i%10 == 0 {
			body += "token = \"" + fakePAT + "\"\n"
		}
		fmt.Fprintf(w, "blob\nmark :%d\ndata %d\n%s\n", i, len(body), body)
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter T <t@x> %d +0000\ndata 2\nh\n", 1767225600+i)
		fmt.Fprintf(w, "M 100644 :%d hist/f%04d.go\n\n", i, i%500)
	}
	w.Flush()
	if _, err := gittest.Run(env, dir, strings.NewReader(sb.String()), "fast-import", "--quiet"); err != nil {
		b.Fatal(err)
	}
	gittest.Git(b, env, dir, "reset", "-q", "--hard", "main")
}

var words = strings.Fields("func return if else for range var const type struct interface map chan go defer select case switch " +
	"err nil ctx context string int byte error len append make new copy close value result buffer reader writer handler " +
	"request response client server config options state index offset count total name path file line column")

// sourceText makes n bytes of Go-like text: identifiers, keywords,
// punctuation and numbers on lines of varying length.
func sourceText(rng *rand.Rand, n int) string {
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
