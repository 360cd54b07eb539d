package repocache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// gitT runs git in dir (a work tree) and returns trimmed stdout.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(gittest.Git(t, gittest.Env(t.TempDir()), dir, args...))
}

// source is a work tree that produces packs for the log.
type source struct {
	t   *testing.T
	dir string
	n   int
}

func newSource(t *testing.T) *source {
	dir := t.TempDir()
	gitT(t, dir, "init", "--quiet", "--initial-branch=main")
	return &source{t: t, dir: dir}
}

func (s *source) commit(branch string) string {
	s.n++
	gitT(s.t, s.dir, "checkout", "--quiet", "-B", branch)
	os.WriteFile(filepath.Join(s.dir, fmt.Sprintf("f%d.txt", s.n)), []byte(strings.Repeat(fmt.Sprintf("line %d\n", s.n), 50)), 0o644)
	gitT(s.t, s.dir, "add", ".")
	gitT(s.t, s.dir, "commit", "--quiet", "-m", fmt.Sprintf("c%d", s.n))
	return gitT(s.t, s.dir, "rev-parse", "HEAD")
}

// pack returns a self-contained pack of the objects reachable from tips
// but not from excl.
func (s *source) pack(tips []string, excl []string) []byte {
	s.t.Helper()
	var in strings.Builder
	for _, t := range tips {
		in.WriteString(t + "\n")
	}
	for _, e := range excl {
		in.WriteString("^" + e + "\n")
	}
	return []byte(gittest.Input(s.t, gittest.Env(s.t.TempDir()), s.dir, strings.NewReader(in.String()), "pack-objects", "--revs", "--stdout", "-q"))
}

// fixture is a log and a cache shared by a test and its subtests. Its
// methods take the *testing.T of whoever calls them: a subtest must never
// fail its parent (FailNow on the parent from a subtest's goroutine aborts
// the subtest with "test executed panic(nil) or runtime.Goexit").
type fixture struct {
	store *memstore.Store
	log   *wal.Log
	cache *repocache.Cache
	dir   string
	runs  atomic.Int32

	mu     sync.Mutex
	events []repocache.Event
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{store: memstore.New(), dir: t.TempDir()}
	f.log = wal.New(f.store, wal.Options{})
	f.cache = f.newCache(t)
	return f
}

// newCache opens another cache on the fixture's directory; t owns it.
func (f *fixture) newCache(t *testing.T) *repocache.Cache {
	t.Helper()
	c, err := repocache.New(f.dir, f.log, repocache.Options{Observe: func(ev repocache.Event) {
		f.runs.Add(1)
		f.mu.Lock()
		f.events = append(f.events, ev)
		f.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// lastEvent returns the most recent materialization's event.
func (f *fixture) lastEvent(t *testing.T) repocache.Event {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.events) == 0 {
		t.Fatal("no materialization observed")
	}
	return f.events[len(f.events)-1]
}

func (f *fixture) commit(t *testing.T, repo string, pack []byte, ts ...wal.Transition) wal.Result {
	t.Helper()
	res, err := f.log.Commit(context.Background(), repo, wal.Push{Transitions: ts, Pack: bytes.NewReader(pack), PackSize: int64(len(pack))})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (f *fixture) materialize(t *testing.T, repo string) *repocache.Snapshot {
	t.Helper()
	snap, err := f.cache.Materialize(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// commitNext commits a new commit of src's main to repo's log as a push
// after prev (z() when main does not exist yet) would, and returns it.
func (f *fixture) commitNext(t *testing.T, src *source, prev string) string {
	t.Helper()
	cm := src.commit("main")
	var excl []string
	if prev != z() {
		excl = []string{prev}
	}
	f.commit(t, repo, src.pack([]string{cm}, excl), wal.Transition{Ref: "refs/heads/main", Old: prev, New: cm})
	return cm
}

// checkMatches asserts the cached repository's refs equal the log's and
// that it is a sound repository.
func (f *fixture) checkMatches(t *testing.T, repo string, snap *repocache.Snapshot) {
	t.Helper()
	x, err := f.log.Head(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, r := range x.Refs {
		fmt.Fprintf(&want, "%s %s\n", r.ID, r.Name)
	}
	got := gitT(t, snap.Dir, "for-each-ref", "--format=%(objectname) %(refname)")
	if got != strings.TrimSpace(want.String()) {
		t.Fatalf("refs differ:\ngot:\n%s\nwant:\n%s", got, want.String())
	}
	gitT(t, snap.Dir, "fsck", "--full", "--strict")
	if snap.Index.Seq != x.Seq {
		t.Fatalf("snapshot seq %d, log seq %d", snap.Index.Seq, x.Seq)
	}
}

const repo = "r1"

func z() string { return wal.ZeroID }

func TestMaterializeReplaysLayersInOrder(t *testing.T) {
	f := newFixture(t)
	src := newSource(t)
	c1 := src.commit("main")
	f.commit(t, repo, src.pack([]string{c1}, nil), wal.Transition{Ref: "refs/heads/main", Old: z(), New: c1})
	snap := f.materialize(t, repo)
	f.checkMatches(t, repo, snap)

	c2 := src.commit("main")
	f.commit(t, repo, src.pack([]string{c2}, []string{c1}), wal.Transition{Ref: "refs/heads/main", Old: c1, New: c2})
	c3 := src.commit("topic")
	f.commit(t, repo, src.pack([]string{c3}, []string{c2}), wal.Transition{Ref: "refs/heads/topic", Old: z(), New: c3})
	snap = f.materialize(t, repo)
	f.checkMatches(t, repo, snap)
	if got := gitT(t, snap.Dir, "symbolic-ref", "HEAD"); got != "refs/heads/main" {
		t.Fatalf("HEAD = %s", got)
	}

	// A delete-only layer carries no pack.
	f.commit(t, repo, nil, wal.Transition{Ref: "refs/heads/main", Old: c2, New: z()})
	snap = f.materialize(t, repo)
	f.checkMatches(t, repo, snap)
	if got := gitT(t, snap.Dir, "symbolic-ref", "HEAD"); got != "refs/heads/topic" {
		t.Fatalf("HEAD = %s, want the remaining branch", got)
	}
	if snap.Index.Seq != 4 {
		t.Fatalf("seq %d", snap.Index.Seq)
	}
}

func TestMaterializeEmptyRepository(t *testing.T) {
	f := newFixture(t)
	snap := f.materialize(t, "empty")
	if snap.Index.Seq != 0 {
		t.Fatal(snap.Index.Seq)
	}
	if out := gitT(t, snap.Dir, "for-each-ref"); out != "" {
		t.Fatal(out)
	}
}

func TestMaterializeHeals(t *testing.T) {
	f := newFixture(t)
	src := newSource(t)
	c1 := src.commit("main")
	f.commit(t, repo, src.pack([]string{c1}, nil), wal.Transition{Ref: "refs/heads/main", Old: z(), New: c1})
	c2 := src.commit("main")
	f.commit(t, repo, src.pack([]string{c2}, []string{c1}), wal.Transition{Ref: "refs/heads/main", Old: c1, New: c2})
	snap := f.materialize(t, repo)

	t.Run("hand-edited refs", func(t *testing.T) {
		gitT(t, snap.Dir, "update-ref", "refs/heads/main", c1)
		gitT(t, snap.Dir, "update-ref", "refs/heads/extra", c1)
		gitT(t, snap.Dir, "update-ref", "refs/tags/junk", c2)
		os.WriteFile(filepath.Join(snap.Dir, "HEAD"), []byte("ref: refs/heads/extra\n"), 0o644)
		f.checkMatches(t, repo, f.materialize(t, repo))
		if got := gitT(t, snap.Dir, "symbolic-ref", "HEAD"); got != "refs/heads/main" {
			t.Fatalf("HEAD = %s", got)
		}
	})
	t.Run("missing pack", func(t *testing.T) {
		packs, _ := filepath.Glob(filepath.Join(snap.Dir, "objects/pack/*.pack"))
		if len(packs) != 2 {
			t.Fatalf("packs: %v", packs)
		}
		os.Remove(packs[0])
		f.checkMatches(t, repo, f.materialize(t, repo))
	})
	t.Run("seq ahead of the log", func(t *testing.T) {
		st := filepath.Join(snap.Dir, "ghost-state")
		b, _ := os.ReadFile(st)
		b = append(b, "layer 01ARZ3NDEKTSV4RRFFQ69G5FAV -\n"...)
		b = bytes.Replace(b, []byte("seq 2"), []byte("seq 3"), 1)
		os.WriteFile(st, b, 0o644)
		f.checkMatches(t, repo, f.materialize(t, repo))
	})
	t.Run("garbled state", func(t *testing.T) {
		os.WriteFile(filepath.Join(snap.Dir, "ghost-state"), []byte("nonsense"), 0o644)
		f.checkMatches(t, repo, f.materialize(t, repo))
	})
	t.Run("damaged pack", func(t *testing.T) {
		packs, _ := filepath.Glob(filepath.Join(snap.Dir, "objects/pack/*.pack"))
		for _, p := range packs {
			os.Chmod(p, 0o644)
			os.WriteFile(p, []byte("PACK garbage"), 0o644)
		}
		gitT(t, snap.Dir, "update-ref", "-d", "refs/heads/main") // forces a ref write
		f.checkMatches(t, repo, f.materialize(t, repo))
	})
	// A cache whose refs already match the log reads no object while it
	// is brought forward: damaged packs must be noticed by looking at
	// them, or the damaged repository is served as it is.
	t.Run("overwritten packs, refs unchanged", func(t *testing.T) {
		rewritePacks(t, snap.Dir, func([]byte) []byte { return []byte("PACK garbage") })
		f.checkMatches(t, repo, f.materialize(t, repo))
		if !f.lastEvent(t).Rebuilt {
			t.Fatal("damaged cache was not rebuilt")
		}
	})
	t.Run("truncated pack, refs unchanged", func(t *testing.T) {
		rewritePacks(t, snap.Dir, func(b []byte) []byte { return b[:len(b)/2] })
		f.checkMatches(t, repo, f.materialize(t, repo))
		if !f.lastEvent(t).Rebuilt {
			t.Fatal("damaged cache was not rebuilt")
		}
	})
	t.Run("pack data damaged behind a sound header", func(t *testing.T) {
		// Only the objects are zeroed: the packs pass the structural
		// check, and bringing the refs forward fails on reading them.
		rewritePacks(t, snap.Dir, func(b []byte) []byte {
			if len(b) < 32 {
				t.Fatalf("pack of %d bytes", len(b))
			}
			clear(b[12 : len(b)-20])
			return b
		})
		gitT(t, snap.Dir, "update-ref", "-d", "refs/heads/main") // forces a ref write
		f.checkMatches(t, repo, f.materialize(t, repo))
		if !f.lastEvent(t).Rebuilt {
			t.Fatal("damaged cache was not rebuilt")
		}
	})
	t.Run("wiped cache", func(t *testing.T) {
		if err := os.RemoveAll(f.dir); err != nil {
			t.Fatal(err)
		}
		f.checkMatches(t, repo, f.materialize(t, repo))
	})
	t.Run("log recreated under the same id", func(t *testing.T) {
		// The cache has two layers; a different log with other layers
		// must not be mistaken for it.
		f.store.Delete(context.Background(), wal.IndexKey(repo))
		src2 := newSource(t)
		d1 := src2.commit("main")
		f.commit(t, repo, src2.pack([]string{d1}, nil), wal.Transition{Ref: "refs/heads/main", Old: z(), New: d1})
		d2 := src2.commit("main")
		f.commit(t, repo, src2.pack([]string{d2}, []string{d1}), wal.Transition{Ref: "refs/heads/main", Old: d1, New: d2})
		d3 := src2.commit("main")
		f.commit(t, repo, src2.pack([]string{d3}, []string{d2}), wal.Transition{Ref: "refs/heads/main", Old: d2, New: d3})
		f.checkMatches(t, repo, f.materialize(t, repo))
	})
}

// rewritePacks replaces every pack in the repository by edit(its bytes).
func rewritePacks(t *testing.T, dir string, edit func([]byte) []byte) {
	t.Helper()
	packs, err := filepath.Glob(filepath.Join(dir, "objects/pack/*.pack"))
	if err != nil || len(packs) == 0 {
		t.Fatalf("packs: %v %v", packs, err)
	}
	for _, p := range packs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o644)
		if err := os.WriteFile(p, edit(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMaterializeReplacesRefByChildRef(t *testing.T) {
	f := newFixture(t)
	src := newSource(t)
	c1 := src.commit("main")
	f.commit(t, repo, src.pack([]string{c1}, nil),
		wal.Transition{Ref: "refs/heads/main", Old: z(), New: c1},
		wal.Transition{Ref: "refs/heads/a", Old: z(), New: c1})
	f.materialize(t, repo)
	// The log replaces refs/heads/a by refs/heads/a/b in one layer.
	f.commit(t, repo, nil,
		wal.Transition{Ref: "refs/heads/a", Old: c1, New: z()},
		wal.Transition{Ref: "refs/heads/a/b", Old: z(), New: c1})
	f.checkMatches(t, repo, f.materialize(t, repo))
}

func TestMaterializeCollapsesConcurrentCalls(t *testing.T) {
	f := newFixture(t)
	src := newSource(t)
	c1 := src.commit("main")
	f.commit(t, repo, src.pack([]string{c1}, nil), wal.Transition{Ref: "refs/heads/main", Old: z(), New: c1})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			snap, err := f.cache.Materialize(context.Background(), repo)
			if err == nil && snap.Index.Seq != 1 {
				err = fmt.Errorf("seq %d", snap.Index.Seq)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// At most one running and one pending flight: never 16.
	if n := f.runs.Load(); n > 2 {
		t.Fatalf("%d materializations for 16 concurrent calls", n)
	}
}

func TestMaterializeTwoCachesOneDirectory(t *testing.T) {
	f := newFixture(t)
	other := f.newCache(t) // a second process sharing the directory
	src := newSource(t)
	prev := ""
	for i := range 5 {
		c := src.commit("main")
		var excl []string
		old := z()
		if prev != "" {
			excl, old = []string{prev}, prev
		}
		f.commit(t, repo, src.pack([]string{c}, excl), wal.Transition{Ref: "refs/heads/main", Old: old, New: c})
		prev = c
		var wg sync.WaitGroup
		for _, c := range []*repocache.Cache{f.cache, other, f.cache, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Materialize(context.Background(), repo); err != nil {
					t.Errorf("round %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
	}
	f.checkMatches(t, repo, f.materialize(t, repo))
}

func TestMaterializeDeleted(t *testing.T) {
	f := newFixture(t)
	src := newSource(t)
	c1 := src.commit("main")
	f.commit(t, repo, src.pack([]string{c1}, nil), wal.Transition{Ref: "refs/heads/main", Old: z(), New: c1})
	snap := f.materialize(t, repo)
	if err := f.log.Delete(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cache.Materialize(context.Background(), repo); !errors.Is(err, wal.ErrRepoDeleted) {
		t.Fatalf("err = %v, want ErrRepoDeleted", err)
	}
	if _, err := os.Stat(snap.Dir); !os.IsNotExist(err) {
		t.Fatalf("deleted repository's cache still there: %v", err)
	}
}

func TestMaterializeRefusesCorruptLayer(t *testing.T) {
	f := newFixture(t)
	src := newSource(t)
	c1 := src.commit("main")
	res := f.commit(t, repo, src.pack([]string{c1}, nil), wal.Transition{Ref: "refs/heads/main", Old: z(), New: c1})
	// Replace the entry's pack with a different valid pack of equal
	// length: git accepts it, the log's sha256 check must not.
	key := wal.EntryKey(repo, res.ULID)
	rc, _, err := f.store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.ReadFrom(rc)
	rc.Close()
	b := buf.Bytes()
	b[len(b)-1] ^= 0xff // the pack trailer: git rejects it too
	f.store.Put(context.Background(), key, bytes.NewReader(b), int64(len(b)))
	if _, err := f.cache.Materialize(context.Background(), repo); err == nil {
		t.Fatal("corrupt layer was applied")
	}
}

// A layer the log cannot deliver (here a corrupt entry; equally a store
// outage) is not the cache's fault: the cache keeps what it has and
// reports the error, rather than rebuilding from the whole log, which
// would fail the same way.
func TestMaterializeKeepsCacheWhenLogUnreadable(t *testing.T) {
	f := newFixture(t)
	src := newSource(t)
	c1 := src.commit("main")
	f.commit(t, repo, src.pack([]string{c1}, nil), wal.Transition{Ref: "refs/heads/main", Old: z(), New: c1})
	snap := f.materialize(t, repo)
	c2 := src.commit("main")
	res := f.commit(t, repo, src.pack([]string{c2}, []string{c1}), wal.Transition{Ref: "refs/heads/main", Old: c1, New: c2})
	key := wal.EntryKey(repo, res.ULID)
	rc, _, err := f.store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.ReadFrom(rc)
	rc.Close()
	b := buf.Bytes()
	b[len(b)-1] ^= 0xff
	f.store.Put(context.Background(), key, bytes.NewReader(b), int64(len(b)))

	if _, err := f.cache.Materialize(context.Background(), repo); err == nil {
		t.Fatal("corrupt layer was applied")
	}
	if ev := f.lastEvent(t); ev.Rebuilt {
		t.Fatalf("rebuilt the cache for a log error: %v", ev.Err)
	}
	if got := gitT(t, snap.Dir, "rev-parse", "refs/heads/main"); got != c1 {
		t.Fatalf("main = %s, want %s (the cache as of seq 1)", got, c1)
	}
	gitT(t, snap.Dir, "fsck", "--full", "--strict")
}

func TestAdopt(t *testing.T) {
	f := newFixture(t)
	src := newSource(t)
	c1 := src.commit("main")
	f.commit(t, repo, src.pack([]string{c1}, nil), wal.Transition{Ref: "refs/heads/main", Old: z(), New: c1})
	f.materialize(t, repo)

	c2 := src.commit("main")
	pack := src.pack([]string{c2}, []string{c1})
	res := f.commit(t, repo, pack, wal.Transition{Ref: "refs/heads/main", Old: c1, New: c2})
	q := t.TempDir()
	os.MkdirAll(filepath.Join(q, "pack"), 0o755)
	scratch := t.TempDir()
	gitT(t, scratch, "init", "--bare", "-q")
	out := gittest.Input(t, append(gittest.Env(t.TempDir()), "GIT_DIR="+scratch, "GIT_OBJECT_DIRECTORY="+q), "", bytes.NewReader(pack), "index-pack", "--stdin")
	h, err := gitexec.ParsePackName(out)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := f.cache.Adopt(context.Background(), repo, res.Seq, res.ULID, filepath.Join(q, "pack"), h)
	if err != nil || !ok {
		t.Fatalf("adopt: %v %v", ok, err)
	}
	snap := f.materialize(t, repo)
	f.checkMatches(t, repo, snap)
	// Adopting for a seq that does not follow the cache is declined.
	ok, err = f.cache.Adopt(context.Background(), repo, res.Seq+5, res.ULID, q, h)
	if err != nil || ok {
		t.Fatalf("adopt out of order: %v %v", ok, err)
	}
}

// gitIndex returns git's .idx for pack, as the push path stores it.
func gitIndex(t *testing.T, pack []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "p.pack")
	if err := os.WriteFile(p, pack, 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "index-pack", "-o", filepath.Join(dir, "p.idx"), p)
	idx, err := os.ReadFile(filepath.Join(dir, "p.idx"))
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func (f *fixture) commitWithIndex(t *testing.T, repo string, pack, idx []byte, ts ...wal.Transition) wal.Result {
	t.Helper()
	res, err := f.log.Commit(context.Background(), repo, wal.Push{
		Transitions: ts,
		Pack:        bytes.NewReader(pack), PackSize: int64(len(pack)),
		PackIndex: bytes.NewReader(idx), PackIndexSize: int64(len(idx)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestMaterializeInstallsStoredIndex: layers whose entries carry git's
// pack index are installed without index-pack; an index that is damaged,
// or belongs to another pack, is refused and the pack indexed instead.
func TestMaterializeInstallsStoredIndex(t *testing.T) {
	f := newFixture(t)
	src := newSource(t)
	c1 := src.commit("main")
	p1 := src.pack([]string{c1}, nil)
	f.commitWithIndex(t, repo, p1, gitIndex(t, p1), wal.Transition{Ref: "refs/heads/main", Old: z(), New: c1})
	c2 := src.commit("main")
	p2 := src.pack([]string{c2}, []string{c1})
	damaged := gitIndex(t, p2)
	damaged[len(damaged)/2] ^= 0x40
	f.commitWithIndex(t, repo, p2, damaged, wal.Transition{Ref: "refs/heads/main", Old: c1, New: c2})
	c3 := src.commit("main")
	p3 := src.pack([]string{c3}, []string{c2})
	f.commitWithIndex(t, repo, p3, gitIndex(t, p1), wal.Transition{Ref: "refs/heads/main", Old: c2, New: c3}) // p1's index
	c4 := src.commit("main")
	p4 := src.pack([]string{c4}, []string{c3})
	f.commit(t, repo, p4, wal.Transition{Ref: "refs/heads/main", Old: c3, New: c4}) // no index

	snap := f.materialize(t, repo)
	f.checkMatches(t, repo, snap)
	ev := f.lastEvent(t)
	if ev.Layers != 4 || ev.Installed != 1 {
		t.Fatalf("event %+v: want 4 layers, 1 installed from its stored index", ev)
	}
	gitT(t, snap.Dir, "fsck", "--full", "--strict")
	if got := gitT(t, snap.Dir, "rev-parse", "refs/heads/main"); got != c4 {
		t.Fatalf("main = %s, want %s", got, c4)
	}
}

// TestConsolidatePacks: past MaxPacks, the cache rolls its packs up with a
// geometric repack and a multi-pack index, the repository stays whole,
// and a damaged consolidated pack still makes the cache rebuild
// (docs/design.md §5.6).
func TestConsolidatePacks(t *testing.T) {
	f := newFixture(t)
	var evs []repocache.Event
	c, err := repocache.New(t.TempDir(), f.log, repocache.Options{MaxPacks: 4, Observe: func(ev repocache.Event) { evs = append(evs, ev) }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src := newSource(t)
	prev := ""
	consolidated := false
	var snap *repocache.Snapshot
	for i := range 12 {
		cm := src.commit("main")
		old, excl := z(), []string(nil)
		if prev != "" {
			old, excl = prev, []string{prev}
		}
		f.commit(t, repo, src.pack([]string{cm}, excl), wal.Transition{Ref: "refs/heads/main", Old: old, New: cm})
		prev = cm
		if snap, err = c.Materialize(context.Background(), repo); err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
		consolidated = consolidated || evs[len(evs)-1].Consolidated
		packs, _ := filepath.Glob(filepath.Join(snap.Dir, "objects", "pack", "*.pack"))
		if len(packs) > 4+1 {
			t.Fatalf("push %d: %d packs, MaxPacks is 4", i, len(packs))
		}
	}
	if !consolidated {
		t.Fatal("never consolidated")
	}
	if _, err := os.Stat(filepath.Join(snap.Dir, "objects", "pack", "multi-pack-index")); err != nil {
		t.Fatalf("no multi-pack index: %v", err)
	}
	f.checkMatches(t, repo, snap)

	// Self-healing still works on consolidated packs.
	packs, _ := filepath.Glob(filepath.Join(snap.Dir, "objects", "pack", "*.pack"))
	if err := os.Truncate(packs[0], 100); err != nil {
		t.Fatal(err)
	}
	if snap, err = c.Materialize(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
	if !evs[len(evs)-1].Rebuilt {
		t.Fatal("a damaged consolidated pack did not make the cache rebuild")
	}
	f.checkMatches(t, repo, snap)
}
