package repocache_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/repocache"
)

// TestConsolidateInBackground: with a Background, the packs past
// MaxPacks are rolled up after the materialization that found them, not
// inside it: a push and a materialization go through while the
// consolidation is held after its git work, the consolidation then
// records its pack without losing the layer installed meanwhile, and the
// repository stays whole (docs/design.md §5.6, ADR 0051).
func TestConsolidateInBackground(t *testing.T) {
	f := newFixture(t)
	var mu sync.Mutex
	consolidated := 0
	c, err := repocache.New(t.TempDir(), f.log, repocache.Options{
		MaxPacks:   2,
		Background: gitexec.NewBackground(gitexec.BackgroundOptions{}),
		Observe: func(ev repocache.Event) {
			if ev.Consolidated {
				if ev.Err != nil {
					t.Errorf("background consolidation: %v", ev.Err)
				}
				mu.Lock()
				consolidated++
				mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	packed, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	repocache.SetTestHook(c, func(step string) {
		if step == "packed" {
			once.Do(func() { close(packed); <-release })
		}
	})
	src := newSource(t)
	prev := z()
	push := func() *repocache.Snapshot {
		t.Helper()
		prev = f.commitNext(t, src, prev)
		snap, err := c.Materialize(context.Background(), repo)
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	for range 3 {
		push()
	}
	select {
	case <-packed:
	case <-time.After(time.Minute):
		t.Fatal("no background consolidation past MaxPacks")
	}
	// The consolidation holds no lock while it waits: a push is served.
	f.checkMatches(t, repo, push())
	close(release)
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		n := consolidated
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background consolidation did not record its pack")
		}
		time.Sleep(10 * time.Millisecond)
	}
	snap, err := c.Materialize(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	f.checkMatches(t, repo, snap)
	packs, _ := filepath.Glob(filepath.Join(snap.Dir, "objects", "pack", "*.pack"))
	if len(packs) != 2 {
		t.Fatalf("%d packs after rolling up 3 and installing 1, want 2", len(packs))
	}
}

// TestConsolidationCrashLeavesNoPack: a background consolidation that
// stops after writing its pack and multi-pack index but before recording
// them (the process died) leaves an unrecorded duplicate of the packs it
// rolled up; the next consolidation, in the next process, deletes it (and
// the multi-pack index that names it), and the repository stays whole.
// It also deletes git's scratch packs and a stale multi-pack-index lock,
// which would fail every later consolidation (docs/design.md §5.6).
func TestConsolidationCrashLeavesNoPack(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	consolidated := make(chan struct{}, 16)
	open := func() *repocache.Cache {
		c, err := repocache.New(dir, f.log, repocache.Options{
			MaxPacks:   2,
			Background: gitexec.NewBackground(gitexec.BackgroundOptions{}),
			Observe: func(ev repocache.Event) {
				if ev.Consolidated {
					if ev.Err != nil {
						t.Errorf("background consolidation: %v", ev.Err)
					}
					consolidated <- struct{}{}
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	src := newSource(t)
	prev := z()
	push := func(c *repocache.Cache) *repocache.Snapshot {
		t.Helper()
		prev = f.commitNext(t, src, prev)
		snap, err := c.Materialize(context.Background(), repo)
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	unrecorded := func(snap *repocache.Snapshot) []string {
		t.Helper()
		var out []string
		files, _ := filepath.Glob(filepath.Join(snap.Dir, "objects", "pack", "pack-*"))
		rec := repocache.RecordedPacks(snap.Dir)
		for _, p := range files {
			name := strings.TrimPrefix(filepath.Base(p), "pack-")
			name, _, _ = strings.Cut(name, ".")
			if !slices.Contains(rec, name) {
				out = append(out, filepath.Base(p))
			}
		}
		return out
	}

	// The first process dies once the consolidation's pack is written:
	// its goroutine ends there, releasing its locks as the kernel would.
	c1 := open()
	crashed := make(chan struct{})
	repocache.SetTestHook(c1, func(step string) {
		if step == "packed" {
			close(crashed)
			runtime.Goexit()
		}
	})
	var snap *repocache.Snapshot
	for range 3 {
		snap = push(c1)
	}
	select {
	case <-crashed:
	case <-time.After(time.Minute):
		t.Fatal("no background consolidation past MaxPacks")
	}
	c1.Close()
	left := unrecorded(snap)
	if len(left) == 0 {
		t.Fatal("the interrupted consolidation left no pack: the test does not reproduce the crash")
	}
	// What git leaves when it dies inside pack-objects: a scratch pack.
	packDir := filepath.Join(snap.Dir, "objects", "pack")
	plant := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(packDir, name), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plant("tmp_pack_Ab12Cd")

	// The next process's consolidation removes what it left.
	c2 := open()
	push(c2)
	select {
	case <-consolidated:
	case <-time.After(time.Minute):
		t.Fatal("no consolidation after the restart")
	}
	snap, err := c2.Materialize(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	if got := unrecorded(snap); len(got) > 0 {
		t.Fatalf("unrecorded pack files after the next consolidation: %v (the crash left %v)", got, left)
	}
	if got, _ := filepath.Glob(filepath.Join(packDir, "tmp_*")); len(got) > 0 {
		t.Fatalf("left after the next consolidation: %v", got)
	}
	f.checkMatches(t, repo, snap)
	gitT(t, snap.Dir, "multi-pack-index", "verify")

	// What git leaves when it dies inside multi-pack-index write, with no
	// unrecorded pack: a lock that would fail every later write.
	plant("multi-pack-index.lock")
	push(c2)
	push(c2)
	select {
	case <-consolidated:
	case <-time.After(time.Minute):
		t.Fatal("no consolidation past a stale multi-pack-index lock")
	}
	if got, _ := filepath.Glob(filepath.Join(packDir, "*.lock")); len(got) > 0 {
		t.Fatalf("left after a consolidation: %v", got)
	}
	snap, err = c2.Materialize(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	f.checkMatches(t, repo, snap)
	gitT(t, snap.Dir, "multi-pack-index", "verify")
}
