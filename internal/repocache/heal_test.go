package repocache_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// flipMiddle flips bytes in the middle of a file, keeping its size: damage
// the cheap structural check (which reads only the ends) cannot see.
func flipMiddle(b []byte) []byte {
	for i := len(b)/2 - 8; i < len(b)/2+8; i++ {
		b[i] ^= 0xff
	}
	return b
}

func twoLayers(t *testing.T) (*fixture, *repocache.Snapshot) {
	f := newFixture(t)
	src := newSource(t)
	c1 := src.commit("main")
	f.commit(t, repo, src.pack([]string{c1}, nil), wal.Transition{Ref: "refs/heads/main", Old: z(), New: c1})
	c2 := src.commit("main")
	f.commit(t, repo, src.pack([]string{c2}, []string{c1}), wal.Transition{Ref: "refs/heads/main", Old: c1, New: c2})
	return f, f.materialize(t, repo)
}

// corruptPacks flips bytes in the middle of each of the repository's
// files ending in ext, keeping their sizes.
func corruptPacks(t *testing.T, dir, ext string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "objects/pack/*"+ext))
	if len(files) == 0 {
		t.Fatalf("no %s files", ext)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o644)
		if err := os.WriteFile(p, flipMiddle(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWrittenPackIsVerified(t *testing.T) {
	for _, ext := range []string{".pack", ".idx"} {
		t.Run(ext, func(t *testing.T) {
			f, snap := twoLayers(t)
			corruptPacks(t, snap.Dir, ext)
			s := f.materialize(t, repo)
			if ev := f.lastEvent(t); !ev.Rebuilt || !s.Healed {
				t.Fatalf("a pack written to was served unverified: %+v", ev)
			}
			f.checkMatches(t, repo, s)
			// Verified once, it costs only a stat.
			s = f.materialize(t, repo)
			if ev := f.lastEvent(t); ev.Rebuilt || s.Healed {
				t.Fatalf("rebuilt again: %+v", ev)
			}
		})
	}
}

func TestSuspectVerifiesAndRebuildsDamagedPacks(t *testing.T) {
	for _, ext := range []string{".pack", ".idx"} {
		t.Run(ext, func(t *testing.T) {
			f, snap := twoLayers(t)
			rot := func() {
				corruptPacks(t, snap.Dir, ext)
				repocache.Restamp(snap.Dir)
			}
			rot()
			// Damage no write revealed is not looked for on every request.
			if s := f.materialize(t, repo); s.Healed || f.lastEvent(t).Rebuilt {
				t.Fatal("an ordinary materialization checksummed unchanged packs")
			}
			if !f.cache.Suspect(repo) {
				t.Fatal("Suspect refused the first verification")
			}
			s := f.materialize(t, repo)
			if ev := f.lastEvent(t); !s.Healed || !ev.Healed || !ev.Rebuilt {
				t.Fatalf("damage not healed: snapshot %v, event %+v", s.Healed, ev)
			}
			f.checkMatches(t, repo, s)

			// Within VerifyInterval, another failure does not verify again.
			rot()
			if f.cache.Suspect(repo) {
				t.Fatal("Suspect accepted a second verification at once")
			}
			if s := f.materialize(t, repo); s.Healed {
				t.Fatal("verified again within the interval")
			}
		})
	}
}

func TestSuspectKeepsASoundCache(t *testing.T) {
	f, _ := twoLayers(t)
	if !f.cache.Suspect(repo) {
		t.Fatal("Suspect refused")
	}
	s := f.materialize(t, repo)
	if ev := f.lastEvent(t); s.Healed || ev.Rebuilt {
		t.Fatalf("a sound cache was rebuilt: %+v", ev)
	}
}

func TestNewClearsTempItOwns(t *testing.T) {
	dir := t.TempDir()
	f := &fixture{dir: dir, store: memstore.New()}
	f.log = wal.New(f.store, wal.Options{})
	tmp := filepath.Join(dir, "tmp")
	os.MkdirAll(filepath.Join(tmp, "quarantine-1", "pack"), 0o755)
	os.WriteFile(filepath.Join(tmp, "push-1.spool"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(tmp, "quarantine-1", "pack", "tmp_pack_x"), []byte("x"), 0o644)

	// Alone on the directory: everything in tmp is a crash's leftover.
	c1 := f.newCache(t)
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Fatalf("tmp not cleared: %v", ents)
	}

	// While c1 runs, a second process only removes old leftovers.
	fresh, old := filepath.Join(tmp, "push-2.spool"), filepath.Join(tmp, "push-3.spool")
	os.WriteFile(fresh, []byte("x"), 0o644)
	os.WriteFile(old, []byte("x"), 0o644)
	past := time.Now().Add(-2 * time.Hour)
	os.Chtimes(old, past, past)
	c2, err := repocache.New(dir, f.log, repocache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("a live process's scratch file was removed: %v", err)
	}
	if _, err := os.Stat(old); err == nil {
		t.Fatal("an old leftover survived")
	}
	c2.Close()
	c1.Close()

	// Once they are gone, the next start clears everything.
	c3, err := repocache.New(dir, f.log, repocache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if _, err := os.Stat(fresh); err == nil {
		t.Fatal("leftover survived a restart")
	}
}

// TestSuspectVerifiesConsolidatedPacks: packs the log has no checksum for
// (a consolidation's, here) are verified against git's own checksum, so
// rot inside them is found and healed too (docs/design.md §5.6).
func TestSuspectVerifiesConsolidatedPacks(t *testing.T) {
	f := newFixture(t)
	c, err := repocache.New(t.TempDir(), f.log, repocache.Options{MaxPacks: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src := newSource(t)
	prev := ""
	var snap *repocache.Snapshot
	for range 4 {
		cm := src.commit("main")
		old, excl := z(), []string(nil)
		if prev != "" {
			old, excl = prev, []string{prev}
		}
		f.commit(t, repo, src.pack([]string{cm}, excl), wal.Transition{Ref: "refs/heads/main", Old: old, New: cm})
		prev = cm
		if snap, err = c.Materialize(context.Background(), repo); err != nil {
			t.Fatal(err)
		}
	}
	state, err := os.ReadFile(filepath.Join(snap.Dir, "ghost-state"))
	if err != nil || !strings.Contains(string(state), "\nbase ") {
		t.Fatalf("not consolidated: %s %v", state, err)
	}
	// Rot in the consolidated packs only: the layer after them is
	// checked against the log anyway.
	for _, line := range strings.Split(string(state), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "base" {
			continue
		}
		for _, name := range f[4:] {
			p := filepath.Join(snap.Dir, "objects", "pack", "pack-"+name+".pack")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, 0o644)
			if err := os.WriteFile(p, flipMiddle(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	repocache.Restamp(snap.Dir)
	if !c.Suspect(repo) {
		t.Fatal("Suspect refused")
	}
	if snap, err = c.Materialize(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
	if !snap.Healed {
		t.Fatal("rot in a consolidated pack was not healed")
	}
	f.checkMatches(t, repo, snap)
}
