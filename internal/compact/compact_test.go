package compact_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/compact"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

const repo = "r"

// gitT runs git in dir and returns trimmed stdout.
func gitT(t testing.TB, dir string, stdin string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(gittest.Input(t, gittest.Env(t.TempDir()), dir, strings.NewReader(stdin), args...))
}

// pusher owns a work tree and one branch, and pushes one commit at a time
// through the log, as the push path would after validation: a
// self-contained pack of the new objects and one ref transition.
type pusher struct {
	t      testing.TB
	log    *wal.Log
	dir    string
	branch string
	tip    string
	n      int
}

func newPusher(t testing.TB, log *wal.Log, branch string) *pusher {
	dir := t.TempDir()
	gitT(t, dir, "", "init", "--quiet", "--initial-branch="+branch)
	return &pusher{t: t, log: log, dir: dir, branch: branch}
}

// commit makes one commit that changes a shared file a little (so the
// checkpoint has deltas to find) and adds a new one.
func (p *pusher) commit() string {
	p.n++
	body := strings.Repeat(fmt.Sprintf("%s line\n", p.branch), 40) + fmt.Sprintf("change %d\n", p.n)
	os.WriteFile(filepath.Join(p.dir, "shared.txt"), []byte(body), 0o644)
	os.WriteFile(filepath.Join(p.dir, fmt.Sprintf("f%d.txt", p.n)), []byte(fmt.Sprintf("%s %d\n", p.branch, p.n)), 0o644)
	gitT(p.t, p.dir, "", "add", ".")
	gitT(p.t, p.dir, "", "commit", "--quiet", "-m", fmt.Sprintf("%s %d", p.branch, p.n))
	return gitT(p.t, p.dir, "", "rev-parse", "HEAD")
}

// pack returns a self-contained pack of what tip has beyond excl, and
// git's .idx for it, which the push path stores beside the entry
// (docs/design.md §3.4) and which lets nodes install layers by copying.
func (p *pusher) pack(tip, excl string) ([]byte, []byte) {
	in := tip + "\n"
	if excl != "" {
		in += "^" + excl + "\n"
	}
	base := filepath.Join(p.dir, ".git", "out")
	name := base + "-" + gitT(p.t, p.dir, in, "pack-objects", "--revs", "-q", base)
	pk, err := os.ReadFile(name + ".pack")
	if err != nil {
		p.t.Fatal(err)
	}
	idx, err := os.ReadFile(name + ".idx")
	if err != nil {
		p.t.Fatal(err)
	}
	os.Remove(name + ".pack")
	os.Remove(name + ".idx")
	return pk, idx
}

// commitPack lands one push of c on the pusher's branch.
func (p *pusher) commitPack(ctx context.Context, c string) error {
	pk, idx := p.pack(c, p.tip)
	old := p.tip
	if old == "" {
		old = wal.ZeroID
	}
	_, err := p.log.Commit(ctx, repo, wal.Push{
		Transitions: []wal.Transition{{Ref: "refs/heads/" + p.branch, Old: old, New: c}},
		Pack:        bytes.NewReader(pk), PackSize: int64(len(pk)),
		PackIndex: bytes.NewReader(idx), PackIndexSize: int64(len(idx)),
	})
	if err != nil {
		return fmt.Errorf("push %s #%d: %w", p.branch, p.n, err)
	}
	p.tip = c
	return nil
}

// push commits and pushes; it reports the error rather than failing, so
// it can run on other goroutines.
func (p *pusher) push(ctx context.Context) error {
	return p.commitPack(ctx, p.commit())
}

// history lands n pushes of one commit each on the pusher's branch. The
// commits are made with one git fast-import, which keeps the test fast.
func (p *pusher) history(ctx context.Context, n int, at func(i int)) {
	p.t.Helper()
	var in strings.Builder
	for i := 1; i <= n; i++ {
		blob := func(path, body string) { fmt.Fprintf(&in, "M 644 inline %s\ndata %d\n%s\n", path, len(body), body) }
		msg := fmt.Sprintf("%s %d", p.branch, i)
		fmt.Fprintf(&in, "commit refs/heads/%s\nmark :%d\ncommitter t <t@example.com> %d +0000\ndata %d\n%s\n", p.branch, i, 1700000000+i, len(msg), msg)
		if i > 1 {
			fmt.Fprintf(&in, "from :%d\n", i-1)
		}
		blob("shared.txt", strings.Repeat(p.branch+" line\n", 40)+fmt.Sprintf("change %d\n", i))
		blob(fmt.Sprintf("h%d.txt", i), fmt.Sprintf("%s %d\n", p.branch, i))
	}
	gitT(p.t, p.dir, in.String(), "fast-import", "--quiet")
	gitT(p.t, p.dir, "", "checkout", "--quiet", "-f", p.branch)
	ids := strings.Split(gitT(p.t, p.dir, "", "rev-list", "--reverse", p.branch), "\n")
	for i, c := range ids {
		if err := p.commitPack(ctx, c); err != nil {
			p.t.Fatal(err)
		}
		if at != nil {
			at(i)
		}
	}
}

func newCache(t testing.TB, log *wal.Log, opts repocache.Options) *repocache.Cache {
	t.Helper()
	c, err := repocache.New(t.TempDir(), log, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func materialize(t testing.TB, c *repocache.Cache) *repocache.Snapshot {
	t.Helper()
	snap, err := c.Materialize(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// reachable lists the refs and every object they reach: what a full
// clone gets.
func reachable(t *testing.T, dir string) string {
	t.Helper()
	refs := gitT(t, dir, "", "for-each-ref", "--format=%(objectname) %(refname)")
	objs := strings.Split(gitT(t, dir, "", "rev-list", "--objects", "--all"), "\n")
	sort.Strings(objs)
	return refs + "\n--\n" + strings.Join(objs, "\n")
}

// checkSnapshot asserts that a cached repository's refs are the log's and
// that it passes git fsck --full.
func checkSnapshot(t *testing.T, log *wal.Log, snap *repocache.Snapshot) {
	t.Helper()
	x, err := log.Head(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, r := range x.Refs {
		fmt.Fprintf(&want, "%s %s\n", r.ID, r.Name)
	}
	if got := gitT(t, snap.Dir, "", "for-each-ref", "--format=%(objectname) %(refname)"); got != strings.TrimSpace(want.String()) {
		t.Fatalf("refs differ:\ngot:\n%s\nwant:\n%s", got, want.String())
	}
	gitT(t, snap.Dir, "", "fsck", "--full", "--strict", "--no-dangling")
}

func packCount(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestCompactUnderLoad makes many small pushes (200 here; the benchmark
// of issue 12 uses 2,000), then compacts while four pushers keep pushing.
// No push is lost, every ref is right, a cold node and a warm node serve
// the same clone, and both pass git fsck --full.
func TestCompactUnderLoad(t *testing.T) {
	ctx := context.Background()
	log := wal.New(memstore.New(), wal.Options{})
	warm := newCache(t, log, repocache.Options{})
	main := newPusher(t, log, "main")
	const history = 200
	main.history(ctx, history, func(i int) {
		if i == history/2 {
			materialize(t, warm) // the warm node saw half the history
		}
	})
	// A branch pushed and deleted: its objects are unreachable at the
	// checkpoint, but recent, so they are kept (Options.KeepRecent).
	junk := newPusher(t, log, "junk")
	if err := junk.push(ctx); err != nil {
		t.Fatal(err)
	}
	junkTip := junk.tip
	if _, err := log.Commit(ctx, repo, wal.Push{Transitions: []wal.Transition{{Ref: "refs/heads/junk", Old: junkTip, New: wal.ZeroID}}, Pack: bytes.NewReader(nil)}); err != nil {
		t.Fatal(err)
	}

	scratch := newCache(t, log, repocache.Options{})
	var lines []string
	comp := compact.New(log, scratch, compact.Options{Progress: func(m string) { lines = append(lines, m); t.Log(m) }})

	// Four pushers push 8 times each; the compaction starts once each has
	// pushed once, so pushes land while it runs (wal's
	// TestCompactKeepsLayersPushedMeanwhile forces the interleaving).
	const pushers = 4
	started := make(chan struct{}, pushers)
	var wg sync.WaitGroup
	ps := make([]*pusher, pushers)
	errs := make([]error, pushers)
	for i := range ps {
		ps[i] = newPusher(t, log, fmt.Sprintf("p%d", i))
	}
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				if n == 1 {
					started <- struct{}{}
				}
				if n == 8 {
					return
				}
				if err := p.push(ctx); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	for range pushers {
		<-started
	}
	res, err := comp.Compact(ctx, repo)
	wg.Wait()
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(lines) == 0 {
		t.Fatal("no progress reported")
	}

	// No push lost: every branch is at its pusher's last commit.
	x, err := log.Head(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(ps, main) {
		if got := x.Ref("refs/heads/" + p.branch); got != p.tip {
			t.Fatalf("%s is %s in the log, its pusher pushed %s", p.branch, got, p.tip)
		}
	}
	if x.Ref("refs/heads/junk") != "" {
		t.Fatal("junk came back")
	}
	if x.CompactedThroughSeq != res.Checkpoint.Seq || res.Checkpoint.Seq < history+2 || x.Seq-x.CompactedThroughSeq != uint64(len(x.Layers)) {
		t.Fatalf("index %d..%d with %d layers, compaction %+v", x.CompactedThroughSeq, x.Seq, len(x.Layers), res)
	}

	// A cold node installs the checkpoint and the layers after it.
	var ev repocache.Event
	cold := newCache(t, log, repocache.Options{Observe: func(e repocache.Event) { ev = e }})
	cs := materialize(t, cold)
	if !ev.Checkpoint || ev.Layers > len(x.Layers) {
		t.Fatalf("cold materialization: %+v, want the checkpoint and %d layers", ev, len(x.Layers))
	}
	checkSnapshot(t, log, cs)
	gitT(t, cs.Dir, "", "cat-file", "-e", junkTip) // recent strays are kept

	// The warm node predates the checkpoint by half the history; it
	// comes forward and serves the same clone.
	ws := materialize(t, warm)
	checkSnapshot(t, log, ws)
	if a, b := reachable(t, cs.Dir), reachable(t, ws.Dir); a != b {
		t.Fatal("a clone from the cold node differs from one from the warm node")
	}
	if n := packCount(t, cs.Dir); n > 16+1 {
		t.Fatalf("the cold node holds %d packs", n)
	}
	if n := packCount(t, ws.Dir); n > 16+1 {
		t.Fatalf("the warm node holds %d packs", n)
	}
}

// TestCompactDropsUnreachable: objects no ref reaches at the checkpoint's
// seq, from layers older than KeepRecent, are not in the checkpoint, and
// KeepRecent keeps younger ones (the guard of Options.KeepRecent), also
// through a second compaction soon after the first, when they live in
// the previous checkpoint rather than in a layer.
func TestCompactDropsUnreachable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		keep  time.Duration
		twice bool
		kept  bool
	}{
		{"old", time.Minute, false, false},
		{"recent", 24 * time.Hour, false, true},
		{"old/twice", time.Minute, true, false},
		{"recent/twice", 24 * time.Hour, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			log := wal.New(memstore.New(), wal.Options{})
			main := newPusher(t, log, "main")
			junk := newPusher(t, log, "junk")
			for _, p := range []*pusher{main, junk, main} {
				if err := p.push(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := log.Commit(ctx, repo, wal.Push{Transitions: []wal.Transition{{Ref: "refs/heads/junk", Old: junk.tip, New: wal.ZeroID}}, Pack: bytes.NewReader(nil)}); err != nil {
				t.Fatal(err)
			}
			cache := newCache(t, log, repocache.Options{})
			later := func() time.Time { return time.Now().Add(time.Hour) }
			comp := compact.New(log, cache, compact.Options{KeepRecent: tc.keep, Now: later})
			if _, err := comp.Compact(ctx, repo); err != nil {
				t.Fatal(err)
			}
			if tc.twice {
				if err := main.push(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := comp.Compact(ctx, repo); err != nil {
					t.Fatal(err)
				}
			}
			snap := materialize(t, newCache(t, log, repocache.Options{}))
			checkSnapshot(t, log, snap)
			_, err := gittest.Run(gittest.Env(t.TempDir()), snap.Dir, nil, "cat-file", "-e", junk.tip)
			if got := err == nil; got != tc.kept {
				t.Fatalf("junk commit in the checkpoint: %v, want %v", got, tc.kept)
			}
		})
	}
}

// TestCompactTwiceAndNothing: a second compaction folds the first
// checkpoint with the later layers; with no layer left it does nothing. A
// warm node that was at the head when the log was compacted keeps its
// repository and only installs the layers after it.
func TestCompactTwiceAndNothing(t *testing.T) {
	ctx := context.Background()
	log := wal.New(memstore.New(), wal.Options{})
	comp := compact.New(log, newCache(t, log, repocache.Options{}), compact.Options{})
	var ev repocache.Event
	warm := newCache(t, log, repocache.Options{Observe: func(e repocache.Event) { ev = e }})
	main := newPusher(t, log, "main")
	for round := range 2 {
		for range 3 {
			if err := main.push(ctx); err != nil {
				t.Fatal(err)
			}
		}
		materialize(t, warm)
		res, err := comp.Compact(ctx, repo)
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(4*round + 3); res.Checkpoint.Seq != want || res.Folded != 3+round {
			t.Fatalf("round %d: %+v, want a checkpoint at seq %d", round, res, want)
		}
		if err := main.push(ctx); err != nil {
			t.Fatal(err)
		}
		snap := materialize(t, warm)
		if ev.Rebuilt || ev.Checkpoint || ev.Layers != 1 {
			t.Fatalf("round %d: the warm node did %+v, want one layer", round, ev)
		}
		checkSnapshot(t, log, snap)
	}
	if _, err := comp.Compact(ctx, repo); err != nil {
		t.Fatal(err)
	}
	if _, err := comp.Compact(ctx, repo); !errors.Is(err, compact.ErrNothingToCompact) {
		t.Fatalf("err = %v, want ErrNothingToCompact", err)
	}
	checkSnapshot(t, log, materialize(t, newCache(t, log, repocache.Options{})))
	checkSnapshot(t, log, materialize(t, warm))
}

// TestTrigger: a commit below the policy starts nothing; one at it
// compacts in the background.
func TestTrigger(t *testing.T) {
	ctx := context.Background()
	log := wal.New(memstore.New(), wal.Options{})
	cache := newCache(t, log, repocache.Options{})
	ran := make(chan error, 1)
	tr := compact.NewTrigger(compact.New(log, cache, compact.Options{}), compact.TriggerOptions{
		Policy: compact.Policy{MaxLayers: 3},
		Done:   func(_ string, _ compact.Result, err error) { ran <- err },
	})
	defer tr.Close()
	main := newPusher(t, log, "main")
	for i := range 3 {
		if err := main.push(ctx); err != nil {
			t.Fatal(err)
		}
		x, _ := log.Head(ctx, repo)
		started := tr.AfterCommit(repo, wal.Result{Layers: len(x.Layers)})
		if started != (i == 2) {
			t.Fatalf("push %d: started = %v", i+1, started)
		}
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if x, _ := log.Head(ctx, repo); x.CompactedThroughSeq != 3 {
		t.Fatalf("not compacted: %+v", x)
	}
	if !compact.DefaultPolicy().Due(50, 0) || compact.DefaultPolicy().Due(49, 1) || !compact.DefaultPolicy().Due(1, 256<<20) || compact.DefaultPolicy().Due(0, 1<<40) {
		t.Fatal("DefaultPolicy.Due")
	}
}

// TestCompactNoRefs: a log whose refs were all deleted compacts to an
// empty checkpoint, which nodes install, and pushes go on from there.
func TestCompactNoRefs(t *testing.T) {
	ctx := context.Background()
	log := wal.New(memstore.New(), wal.Options{})
	p := newPusher(t, log, "main")
	if err := p.push(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := log.Commit(ctx, repo, wal.Push{Transitions: []wal.Transition{{Ref: "refs/heads/main", Old: p.tip, New: wal.ZeroID}}, Pack: bytes.NewReader(nil)}); err != nil {
		t.Fatal(err)
	}
	res, err := compact.New(log, newCache(t, log, repocache.Options{}), compact.Options{KeepRecent: -1}).Compact(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if res.Objects != 0 {
		t.Fatalf("checkpoint of no refs holds %d objects", res.Objects)
	}
	checkSnapshot(t, log, materialize(t, newCache(t, log, repocache.Options{})))
	p.tip = ""
	if err := p.push(ctx); err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, log, materialize(t, newCache(t, log, repocache.Options{})))
}

// TestTriggerOneAtATime: while a compaction runs, a second one for the
// same repository, or one beyond the concurrency, is not started.
func TestTriggerOneAtATime(t *testing.T) {
	ctx := context.Background()
	log := wal.New(memstore.New(), wal.Options{})
	p := newPusher(t, log, "main")
	if err := p.push(ctx); err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	comp := compact.New(log, newCache(t, log, repocache.Options{}), compact.Options{Progress: func(msg string) {
		if strings.HasPrefix(msg, "compacting") {
			close(entered)
			<-release
		}
	}})
	ran := make(chan error, 1)
	tr := compact.NewTrigger(comp, compact.TriggerOptions{Done: func(_ string, _ compact.Result, err error) { ran <- err }})
	defer tr.Close()
	if !tr.Start(repo) {
		t.Fatal("first start refused")
	}
	<-entered
	if tr.Start(repo) {
		t.Fatal("a second compaction of the same repository started")
	}
	if tr.Start("other") {
		t.Fatal("a compaction beyond the concurrency started")
	}
	close(release)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
}

// TestTriggerBacksOffAfterFailure: a compaction that failed is not
// retried on the very next push, only after more layers landed.
func TestTriggerBacksOffAfterFailure(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	log := wal.New(store, wal.Options{})
	p := newPusher(t, log, "main")
	if err := p.push(ctx); err != nil {
		t.Fatal(err)
	}
	x, err := log.Head(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	// A log whose entry is gone cannot be built: every compaction fails.
	if err := store.Delete(ctx, wal.EntryKey(repo, x.Layers[0].ULID)); err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	tr := compact.NewTrigger(compact.New(log, newCache(t, log, repocache.Options{}), compact.Options{}), compact.TriggerOptions{
		Policy: compact.Policy{MaxLayers: 5},
		Done:   func(_ string, _ compact.Result, err error) { ran <- err },
	})
	defer tr.Close()
	if !tr.AfterCommit(repo, wal.Result{Layers: 5}) {
		t.Fatal("not started")
	}
	if err := <-ran; err == nil {
		t.Fatal("the compaction of a broken log succeeded")
	}
	if tr.AfterCommit(repo, wal.Result{Layers: 5}) {
		t.Fatal("retried at once after a failure")
	}
	if !tr.AfterCommit(repo, wal.Result{Layers: 6}) {
		t.Fatal("not retried after more layers landed")
	}
	<-ran
}
