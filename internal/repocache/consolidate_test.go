package repocache_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
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
		cm := src.commit("main")
		var excl []string
		if prev != z() {
			excl = []string{prev}
		}
		f.commit(t, repo, src.pack([]string{cm}, excl), wal.Transition{Ref: "refs/heads/main", Old: prev, New: cm})
		prev = cm
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
