// Package loadtest drives real ghost processes (the built binary) with a
// stock git client: their resources measured from /proc, and deployments
// shaped like production (nodes sharing only an S3 bucket).
package loadtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/gittest"
)

// built is the ghost binary, compiled once for all the package's tests
// (a build takes most of a minute on two busy cores) into binDir, which
// TestMain removes.
var (
	binDir    string
	buildOnce sync.Once
	built     string
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ghost-loadtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildGhost compiles the ghost binary, once per test run.
func buildGhost(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		bin := filepath.Join(binDir, "ghost")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/ghost-scm/ghost/cmd/ghost")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		built = bin
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

func ghostCmd(t *testing.T, bin, dataDir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "GHOST_DATA_DIR="+dataDir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ghost %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// peakRSS reads the high-water mark of a process's resident set.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// TestPushMemoryStaysFlat pushes more than 200 MiB of incompressible blobs
// to a ghost server process and checks that the process's peak resident
// set stays under 150 MiB: packs are streamed to disk and to the object
// store, never held in memory. git subprocesses are separate processes and
// are not counted.
func TestPushMemoryStaysFlat(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/<pid>/status, which only Linux has")
	}
	const limit = 150 << 20
	bin := buildGhost(t)
	data, token := memRepo(t, bin, "big")

	srv := startGhost(t, bin, nil, "--data-dir", data)
	addr := srv.Addr
	baseline := peakRSS(t, srv.Pid)

	env := gittest.Env(t.TempDir())
	src := filepath.Join(t.TempDir(), "src")
	// 52 commits of 4 MiB each: 208 MiB of random, incompressible data.
	gittest.Generate(t, env, src, gittest.Shape{Commits: 52, BlobBytes: 4 << 20, Files: 52})
	url := "http://mem:" + token + "@" + addr + "/mem/big.git"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	push := exec.CommandContext(ctx, "git", "push", "-q", url, "main")
	push.Dir, push.Env = src, env
	if out, err := push.CombinedOutput(); err != nil {
		t.Fatalf("git push: %v\n%s", err, out)
	}
	peak := peakRSS(t, srv.Pid)

	// The push really landed: a clone has the same head.
	clone := filepath.Join(t.TempDir(), "clone")
	gittest.Git(t, env, "", "clone", "-q", "--bare", url, clone)
	if want, got := gittest.Git(t, env, src, "rev-parse", "main"), gittest.Git(t, env, clone, "rev-parse", "main"); want != got {
		t.Fatalf("cloned main = %s, pushed %s", got, want)
	}
	t.Logf("server peak RSS %.1f MiB after pushing 208 MiB (%.1f MiB before the push)", float64(peak)/(1<<20), float64(baseline)/(1<<20))
	if peak > limit {
		t.Fatalf("server peak RSS %d bytes exceeds %d", peak, limit)
	}
}

// memRepo sets up a store with tenant mem and its repository mem/name,
// and returns the data directory and a write token of mem.
func memRepo(t *testing.T, bin, name string) (data, token string) {
	t.Helper()
	data = t.TempDir()
	ghostCmd(t, bin, data, "init")
	ghostCmd(t, bin, data, "tenant", "create", "mem")
	token = strings.TrimSpace(strings.SplitN(ghostCmd(t, bin, data, "token", "create", "mem", "--scope", "write"), "\n", 2)[0])
	ghostCmd(t, bin, data, "repo", "create", "mem/"+name)
	return data, token
}

func waitHealthy(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("server at %s did not become healthy", url)
}
