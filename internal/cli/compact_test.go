package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/compact"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// TestRepoCompact: "ghost repo compact" folds the log into a checkpoint,
// says what it does, and has nothing to do the second time.
func TestRepoCompact(t *testing.T) {
	t.Setenv("GHOST_S3_BUCKET", "")
	dir := newStore(t)
	ctx := context.Background()
	mustGhost(t, dir, "tenant", "create", "acme")
	mustGhost(t, dir, "repo", "create", "acme/app")
	r, err := metaStore(t, dir).Repo(ctx, "acme", "app")
	if err != nil {
		t.Fatal(err)
	}

	// Two pushes of real objects, straight into the log.
	src := t.TempDir()
	env := gittest.Env(t.TempDir())
	git := func(stdin string, args ...string) string {
		return strings.TrimSpace(gittest.Input(t, env, src, strings.NewReader(stdin), args...))
	}
	git("", "init", "-q", "--initial-branch=main")
	objects, err := fsstore.Open(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	log := wal.New(objects, wal.Options{})
	old := wal.ZeroID
	for i := range 2 {
		os.WriteFile(filepath.Join(src, "f"), []byte(strings.Repeat("x", i+1)), 0o644)
		git("", "add", ".")
		git("", "commit", "-qm", "c")
		tip := git("", "rev-parse", "HEAD")
		in := tip + "\n"
		if old != wal.ZeroID {
			in += "^" + old + "\n"
		}
		pk := []byte(gittest.Input(t, env, src, strings.NewReader(in), "pack-objects", "--revs", "--stdout", "-q"))
		if _, err := log.Commit(ctx, r.ID, wal.Push{Transitions: []wal.Transition{{Ref: "refs/heads/main", Old: old, New: tip}}, Pack: bytes.NewReader(pk), PackSize: int64(len(pk))}); err != nil {
			t.Fatal(err)
		}
		old = tip
	}

	out := mustGhost(t, dir, "repo", "compact", "acme/app")
	for _, want := range []string{"compacting " + r.ID, "packed", "done: checkpoint"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	x, err := log.Head(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if x.CompactedThroughSeq != 2 || len(x.Layers) != 0 || x.Ref("refs/heads/main") != old {
		t.Fatalf("index after compaction: %+v", x)
	}
	if out := mustGhost(t, dir, "repo", "compact", "acme/app"); !strings.Contains(out, "nothing to do") {
		t.Fatalf("second run:\n%s", out)
	}
	if r := ghost(t, dir, "repo", "compact", "acme/missing"); r.code == 0 {
		t.Fatal("compacting a missing repository succeeded")
	}
}

// TestCompactFlags: serve's flags default to compact.DefaultPolicy, and 0
// turns a threshold off rather than selecting the default.
func TestCompactFlags(t *testing.T) {
	def := compact.DefaultPolicy()
	on := (&compactFlags{layers: def.MaxLayers, bytes: def.MaxBytes}).options().Policy
	if on != def {
		t.Fatalf("defaults give %+v, want %+v", on, def)
	}
	off := (&compactFlags{}).options().Policy
	if off.Due(1<<20, 1<<40) {
		t.Fatalf("both 0 still compacts: %+v", off)
	}
	if p := (&compactFlags{layers: 3}).options().Policy; !p.Due(3, 0) || p.Due(2, 1<<40) {
		t.Fatalf("--compact-layers 3 --compact-bytes 0: %+v", p)
	}
}
