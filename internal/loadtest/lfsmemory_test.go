package loadtest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/gittest"
)

// TestLFSMemoryStaysFlat pushes Git LFS objects through a ghost server
// process with the stock git-lfs client and clones them back, and checks
// that the process's peak resident set grows by at most 64 MiB over its
// idle peak (issue 23: "node RSS flat, at ≤ 64 MiB above idle"): uploads
// stream through a hasher to the store and downloads stream from it, so
// no object is held in memory whatever its size. By default one 128 MiB
// object (CI); GHOST_LFS_RSS=<count>x<bytes> sets the shape, e.g.
//
//	GHOST_LFS_RSS=1x1073741824 go test -v -run TestLFSMemoryStaysFlat -timeout 30m ./internal/loadtest/
//	GHOST_LFS_RSS=1000x1048576 go test -v -run TestLFSMemoryStaysFlat -timeout 30m ./internal/loadtest/
func TestLFSMemoryStaysFlat(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/<pid>/status, which only Linux has")
	}
	if _, err := exec.LookPath("git-lfs"); err != nil {
		t.Skip("git-lfs is not installed (apt-get install git-lfs; .ci/run installs it)")
	}
	const limit = 64 << 20
	count, size := 1, int64(128<<20)
	if v := os.Getenv("GHOST_LFS_RSS"); v != "" {
		c, s, ok := strings.Cut(v, "x")
		n, err1 := strconv.Atoi(c)
		b, err2 := strconv.ParseInt(s, 10, 64)
		if !ok || err1 != nil || err2 != nil || n < 1 || b < 1 {
			t.Fatalf("GHOST_LFS_RSS=%q: want <count>x<bytes>", v)
		}
		count, size = n, b
	}
	bin := buildGhost(t)
	data, token := memRepo(t, bin, "assets")
	srv := startGhost(t, bin, nil, "--data-dir", data)
	// Idle: the server answered its health check and settled.
	time.Sleep(2 * time.Second)
	idle := peakRSS(t, srv.Pid)

	home := t.TempDir()
	env := gittest.Env(home)
	gittest.Git(t, env, home, "lfs", "install", "--skip-repo")
	src := filepath.Join(t.TempDir(), "src")
	gittest.Git(t, env, "", "init", "-q", "-b", "main", src)
	gittest.Git(t, env, src, "lfs", "track", "*.bin")
	rng := rand.NewChaCha8([32]byte{23})
	for i := range count {
		f, err := os.Create(filepath.Join(src, fmt.Sprintf("obj%04d.bin", i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(f, rng, size); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	gittest.Git(t, env, src, "add", "-A")
	gittest.Git(t, env, src, "commit", "-q", "-m", "objects")
	url := "http://mem:" + token + "@" + srv.Addr + "/mem/assets.git"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	run := func(dir string, args ...string) time.Duration {
		t.Helper()
		start := time.Now()
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return time.Since(start)
	}
	pushed := run(src, "push", "-q", url, "main")
	afterPush := peakRSS(t, srv.Pid)
	clone := filepath.Join(t.TempDir(), "clone")
	cloned := run("", "clone", "-q", url, clone)
	peak := peakRSS(t, srv.Pid)

	// The objects came back whole (spot-check the last; git-lfs checks
	// every object's sha256 as it downloads).
	last := fmt.Sprintf("obj%04d.bin", count-1)
	if want, got := gittest.Git(t, env, src, "lfs", "ls-files", "--long"), gittest.Git(t, env, clone, "lfs", "ls-files", "--long"); want != got {
		t.Fatalf("the clone's LFS files differ:\n%s\nwant\n%s", got, want)
	}
	if st, err := os.Stat(filepath.Join(clone, last)); err != nil || st.Size() != size {
		t.Fatalf("the clone's %s: %v, %v bytes, want %d", last, err, st, size)
	}
	total := float64(int64(count)*size) / (1 << 20)
	t.Logf("%d × %d bytes (%.0f MiB): push %v (%.0f MiB/s), clone %v; server peak RSS idle %.1f MiB, after the push %.1f MiB, after the clone %.1f MiB (+%.1f MiB)",
		count, size, total, pushed.Round(time.Millisecond), total/pushed.Seconds(), cloned.Round(time.Millisecond),
		float64(idle)/(1<<20), float64(afterPush)/(1<<20), float64(peak)/(1<<20), float64(peak-idle)/(1<<20))
	if peak-idle > limit {
		t.Fatalf("server peak RSS grew by %d bytes over idle, more than %d", peak-idle, limit)
	}
}
