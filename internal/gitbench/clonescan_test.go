package gitbench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/gittest"
)

// BenchmarkCloneDuringScan measures issue 19's case: a full clone from a
// node while the scan of a large push runs on it, against the same clone
// once the node is idle (goal: within 1.2×), with git http-backend's clone
// of the same repository as a reference:
//
//	GHOST_BENCH_REPO=/path/to/git.git go test -run '^$' -bench CloneDuringScan -benchtime 1x -timeout 6h ./internal/gitbench/
//
// The push is the tip of GHOST_BENCH_BRANCH (default master, else main)
// of GHOST_BENCH_REPO, in one push, to a node with serve's defaults
// (BenchmarkBusyRepository's node). GHOST_BENCH_YIELD=off runs the node
// without the background priorities, budget and pauses, and with two scan
// workers, as serve ran before background work yielded. Clones during the
// scan count only if the scan was still running when they ended; the idle
// clones follow once the scan workers are stopped.
func BenchmarkCloneDuringScan(b *testing.B) {
	srcRepo := os.Getenv("GHOST_BENCH_REPO")
	if srcRepo == "" {
		b.Skip("GHOST_BENCH_REPO names no bare repository to push")
	}
	reps := envInt("GHOST_BENCH_REPS", 3)
	yield := os.Getenv("GHOST_BENCH_YIELD") != "off"
	ctx := context.Background()
	work := b.TempDir()
	env := gittest.Env(filepath.Join(work, "home"))
	src := filepath.Join(work, "src.git")
	gittest.Git(b, env, "", "clone", "-q", "--bare", "--shared", srcRepo, src)
	branch := os.Getenv("GHOST_BENCH_BRANCH")
	if branch == "" {
		branch = "master"
		if _, err := gittest.Run(env, src, nil, "rev-parse", "--verify", "-q", "refs/heads/master"); err != nil {
			branch = "main"
		}
	}
	hb := httpBackend(b, env, filepath.Join(work, "hb"))
	gh := busyGhost(b, filepath.Join(work, "ghost"), yield, os.Getenv("GHOST_BENCH_OUT"))
	for _, tg := range []target{hb, gh.target} {
		d := timed(func() {
			gittest.Git(b, env, src, "-c", "http.postBuffer=2147483647", "push", "-q", tg.pushURL, "refs/heads/"+branch+":refs/heads/main")
		})
		b.Logf("push of %s to %s: %v", branch, tg.name, d.Round(time.Millisecond))
	}
	scanStart := time.Now()
	dir := filepath.Join(work, "clone")
	rm := func() { os.RemoveAll(dir) }
	clone := func(tg target) time.Duration {
		rm()
		return timed(func() { gittest.Git(b, env, "", "clone", "-q", "--bare", tg.cloneURL, dir) })
	}
	scanning := func() bool {
		act, err := gh.srv.Scanner().Active(ctx)
		return err == nil && len(act) > 0
	}
	if !scanning() {
		b.Fatal("the push's scan was not running after the push")
	}
	var during []time.Duration
	for len(during) < reps && scanning() {
		d := clone(gh.target)
		if scanning() {
			during = append(during, d)
		}
	}
	// Idle: the scan workers stop (the scan of a large history takes far
	// longer than the clones), and nothing else runs in the background.
	scanFor := time.Since(scanStart)
	gh.stopScanning()
	for gh.srv.Background().Stats().Running > 0 {
		time.Sleep(time.Second) // polling background work, not a timed assertion
	}
	var idle, ref []time.Duration
	for range reps {
		idle = append(idle, clone(gh.target))
		ref = append(ref, clone(hb))
	}
	rm()
	med := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	mode := "yielding"
	if !yield {
		mode = "not yielding"
	}
	b.Logf("background work %s; the scan was still running %v after the push, when the workers were stopped", mode, scanFor.Round(time.Second))
	if len(during) == 0 {
		b.Fatalf("the scan ended before a clone did (idle clone %v)", med(idle))
	}
	b.Logf("clone from ghost: idle %v, during the scan %v (%d clones: %s): %.2f× idle; http-backend %v",
		med(idle).Round(time.Millisecond), med(during).Round(time.Millisecond), len(during), durations(during), med(during).Seconds()/med(idle).Seconds(), med(ref).Round(time.Millisecond))
	b.ReportMetric(med(during).Seconds()/med(idle).Seconds(), "clone-during-scan/idle")
	b.ReportMetric(med(idle).Seconds()/med(ref).Seconds(), "clone-idle/http-backend")
}

func durations(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.Round(time.Millisecond).String())
	}
	return strings.Join(s, " ")
}
