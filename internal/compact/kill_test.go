package compact_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/compact"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// A child process (this test binary, re-executed) runs one compaction and
// stops dead at a step, where the parent kills it with SIGKILL.
const (
	killStepEnv = "GHOST_COMPACT_KILL_STEP"
	killDirEnv  = "GHOST_COMPACT_KILL_DIR"
)

func TestMain(m *testing.M) {
	if step := os.Getenv(killStepEnv); step != "" {
		os.Exit(killChild(step, os.Getenv(killDirEnv)))
	}
	os.Exit(m.Run())
}

// killChild compacts the repository in dir and, at step, writes the
// marker file and waits to be killed.
func killChild(step, dir string) int {
	store, err := fsstore.Open(filepath.Join(dir, "objects"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stop := func() {
		os.WriteFile(filepath.Join(dir, "reached"), []byte(step), 0o644)
		select {} // until SIGKILL
	}
	fs := faultstore.New(store)
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		ck := strings.Contains(c.Key, "/checkpoints/")
		switch {
		case step == "put-pack" && c.Op == faultstore.OpPut && ck && strings.HasSuffix(c.Key, ".pack"),
			step == "put-idx" && c.Op == faultstore.OpPut && ck && strings.HasSuffix(c.Key, ".idx"),
			step == "cas" && c.Op == faultstore.OpPutIfMatch:
			stop()
		}
		return faultstore.Fault{}
	})
	log := wal.New(fs, wal.Options{})
	cache, err := repocache.New(filepath.Join(dir, "cache"), log, repocache.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c := compact.New(log, cache, compact.Options{Progress: func(msg string) {
		if step == "built" && strings.HasPrefix(msg, "built seq") || step == "landed" && strings.HasPrefix(msg, "checkpoint at seq") {
			stop()
		}
	}})
	if _, err := c.Compact(context.Background(), repo); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestCompactSIGKILL kills a compactor process at each of its steps:
// after building the scratch repository, before storing the checkpoint's
// pack, before its index, before the index CAS, and after it; for a first
// compaction, and for a geometric roll-up around its index write. The repository stays consistent, and
// the next run completes.
func TestCompactSIGKILL(t *testing.T) {
	cases := []struct{ kind, step string }{}
	for _, step := range []string{"built", "put-pack", "put-idx", "cas", "landed"} {
		cases = append(cases, struct{ kind, step string }{"first", step})
	}
	for _, step := range []string{"cas", "landed"} {
		cases = append(cases, struct{ kind, step string }{"rollup", step})
	}
	for _, tc := range cases {
		step := tc.step
		t.Run(tc.kind+"/"+step, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			store, err := fsstore.Open(filepath.Join(dir, "objects"))
			if err != nil {
				t.Fatal(err)
			}
			log := wal.New(store, wal.Options{})
			main := newPusher(t, log, "main")
			var head uint64 = 3
			if tc.kind == "first" {
				main.history(ctx, 3, nil)
			} else {
				head = seedRollUp(t, ctx, log, main)
			}
			before, err := log.Head(ctx, repo)
			if err != nil {
				t.Fatal(err)
			}

			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), killStepEnv+"="+step, killDirEnv+"="+dir)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			marker := filepath.Join(dir, "reached")
		wait:
			for {
				select {
				case err := <-exited:
					t.Fatalf("the compactor exited before step %s: %v: %s", step, err, stderr.String())
				default:
				}
				if _, err := os.Stat(marker); err == nil {
					break wait
				}
				time.Sleep(10 * time.Millisecond) // polling, not a timed assertion
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-exited

			x, err := log.Head(ctx, repo)
			if err != nil {
				t.Fatal(err)
			}
			wantCompacted := step == "landed"
			if compacted := x.CompactedThroughSeq == head; compacted != wantCompacted || !compacted && (len(x.Layers) != len(before.Layers) || len(x.Checkpoints) != len(before.Checkpoints)) {
				t.Fatalf("after a kill at %s: index %+v", step, x)
			}
			checkSnapshot(t, log, materialize(t, newCache(t, log, repocache.Options{})))

			// The next run, on the node that was killed, completes.
			cache, err := repocache.New(filepath.Join(dir, "cache"), log, repocache.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer cache.Close()
			if _, err := compact.New(log, cache, compact.Options{}).Compact(ctx, repo); err != nil && !errors.Is(err, compact.ErrNothingToCompact) {
				t.Fatalf("next run: %v", err)
			}
			if x, _ := log.Head(ctx, repo); x.CompactedThroughSeq != head || len(x.Checkpoints) != max(1, len(before.Checkpoints)) {
				t.Fatalf("after the next run: %+v", x)
			}
			checkSnapshot(t, log, materialize(t, newCache(t, log, repocache.Options{})))
		})
	}
}
