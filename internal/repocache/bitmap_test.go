package repocache_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/repocache"
)

// TestBitmapWhenMissing: a node that builds a repository from the log
// and holds fewer packs than MaxPacks (here two layers' packs) gets a
// multi-pack index with a reachability bitmap in the background, so that a clone does not count
// every object (docs/design.md §5.6); the repository stays whole and git
// answers the same with the bitmap as without it. Below BitmapMinBytes,
// and with it negative, none is written.
func TestBitmapWhenMissing(t *testing.T) {
	f := newFixture(t)
	src := newSource(t)
	prev := z()
	for range 2 {
		prev = f.commitNext(t, src, prev)
	}
	open := func(minBytes int64) (*repocache.Cache, <-chan int) {
		t.Helper()
		wrote := make(chan int, 8) // what Consolidating said while it wrote
		c, err := repocache.New(t.TempDir(), f.log, repocache.Options{
			BitmapMinBytes: minBytes,
			Background:     gitexec.NewBackground(gitexec.BackgroundOptions{}),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		repocache.SetTestHook(c, func(step string) {
			if step == "bitmap" {
				wrote <- c.Consolidating()
			}
		})
		return c, wrote
	}
	bitmaps := func(dir string) int {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.bitmap"))
		if err != nil {
			t.Fatal(err)
		}
		return len(m)
	}

	c, wrote := open(1)
	snap, err := c.Materialize(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-wrote:
		if n != 1 {
			t.Errorf("Consolidating was %d while the bitmap was written, want 1", n)
		}
	case <-time.After(time.Minute):
		t.Fatal("no bitmap written for a repository without one")
	}
	c.Close() // waits for the background work
	if n := c.Consolidating(); n != 0 {
		t.Errorf("%d repositories still counted as in background work after it ended", n)
	}
	if n := bitmaps(snap.Dir); n != 1 {
		t.Fatalf("%d bitmaps after the background write, want 1", n)
	}
	if repocache.WantsBitmap(c, snap.Dir) {
		t.Error("a repository with a bitmap still wants one")
	}
	gitT(t, snap.Dir, "multi-pack-index", "verify")
	with := gitT(t, snap.Dir, "rev-list", "--objects", "--use-bitmap-index", "--all")
	without := gitT(t, snap.Dir, "-c", "core.multiPackIndex=false", "rev-list", "--objects", "--all")
	if got, want := len(strings.Fields(with)), len(strings.Fields(without)); got == 0 || got > want {
		t.Errorf("rev-list with the bitmap lists %d words, without %d", got, want)
	}
	f.checkMatches(t, repo, snap)

	// Too small for the bound, or turned off: nothing is wanted, and
	// nothing is written.
	for _, min := range []int64{1 << 40, -1} {
		c, wrote := open(min)
		snap, err := c.Materialize(context.Background(), repo)
		if err != nil {
			t.Fatal(err)
		}
		if repocache.WantsBitmap(c, snap.Dir) {
			t.Errorf("BitmapMinBytes %d: the repository wants a bitmap", min)
		}
		c.Close()
		select {
		case <-wrote:
			t.Errorf("BitmapMinBytes %d: a bitmap was written", min)
		default:
		}
		if n := bitmaps(snap.Dir); n != 0 {
			t.Errorf("BitmapMinBytes %d: %d bitmaps", min, n)
		}
	}
}

// TestBitmapRetryBounded: a repository that still has no bitmap after
// one was started (git failed, or wrote none) is not started again on
// the next request, only after the retry interval.
func TestBitmapRetryBounded(t *testing.T) {
	f := newFixture(t)
	c, err := repocache.New(t.TempDir(), f.log, repocache.Options{BitmapMinBytes: 1, Background: gitexec.NewBackground(gitexec.BackgroundOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !repocache.BitmapDue(c, "a") {
		t.Fatal("the first bitmap of a repository is not due")
	}
	if repocache.BitmapDue(c, "a") {
		t.Error("a bitmap is due again at once")
	}
	if !repocache.BitmapDue(c, "b") {
		t.Error("another repository's bitmap is not due")
	}
}
