package gitsvc_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/gitsvc/cacheadapter"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// stageEnv is a service over a fault-injecting store that stages every
// pack (Options.StageMinBytes 1), and the objects of one commit to push.
type stageEnv struct {
	svc           *gitsvc.Service
	log           *wal.Log
	store         *faultstore.Store
	mem           objstore.Store
	commit, blob  string
	dir           string // the client's repository
	pack          []byte
	mu            sync.Mutex
	stagedEntries []string // keys of the entry PUTs seen, in order
}

func newStageEnv(t *testing.T) *stageEnv { return newStageEnvMin(t, 1) }

// newStageEnvMin is newStageEnv with Options.StageMinBytes minBytes.
func newStageEnvMin(t *testing.T, minBytes int64) *stageEnv {
	t.Helper()
	e := &stageEnv{mem: memstore.New()}
	e.store = faultstore.New(e.mem)
	e.log = wal.New(e.store, wal.Options{})
	cache, err := repocache.New(t.TempDir(), e.log, repocache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)
	opts := cacheadapter.Options(cache, e.log)
	opts.StageMinBytes = minBytes
	e.svc, err = gitsvc.New(opts)
	if err != nil {
		t.Fatal(err)
	}

	env := gittest.Env(t.TempDir())
	dir := t.TempDir()
	e.dir = dir
	gittest.Git(t, env, "", "init", "-q", "-b", "main", dir)
	data := make([]byte, 64<<10)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(dir, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, env, dir, "add", "f")
	gittest.Git(t, env, dir, "commit", "-q", "-m", "one")
	e.commit = strings.TrimSpace(gittest.Git(t, env, dir, "rev-parse", "HEAD"))
	e.blob = strings.TrimSpace(gittest.Git(t, env, dir, "rev-parse", "HEAD:f"))
	objs := gittest.Git(t, env, dir, "rev-list", "--objects", "HEAD")
	pack, err := gittest.Run(env, dir, strings.NewReader(objs), "pack-objects", "--stdout", "-q")
	if err != nil {
		t.Fatal(err)
	}
	e.pack = []byte(pack)
	return e
}

// watchEntries records the entry PUTs and answers them with put.
func (e *stageEnv) watchEntries(put func(n int) faultstore.Fault, del func(key string) faultstore.Fault) {
	e.store.SetPlan(func(c faultstore.Call) faultstore.Fault {
		switch {
		case c.Op == faultstore.OpPut && strings.HasSuffix(c.Key, ".pack"):
			e.mu.Lock()
			e.stagedEntries = append(e.stagedEntries, c.Key)
			n := len(e.stagedEntries)
			e.mu.Unlock()
			return put(n)
		case c.Op == faultstore.OpDelete && del != nil:
			return del(c.Key)
		}
		return faultstore.Fault{}
	})
}

// push sends one "create refs/heads/main at id" command with the pack
// and returns the report-status.
func (e *stageEnv) push(t *testing.T, id string) string {
	t.Helper()
	return e.pushRef(t, id, "refs/heads/main")
}

// pushRef sends one "create ref at id" command with the pack.
func (e *stageEnv) pushRef(t *testing.T, id, ref string) string {
	t.Helper()
	var body bytes.Buffer
	line := wal.ZeroID + " " + id + " " + ref + "\x00report-status\n"
	fmt.Fprintf(&body, "%04x%s0000", len(line)+4, line)
	body.Write(e.pack)
	var out bytes.Buffer
	err := e.svc.ReceivePack(context.Background(), gitsvc.Request{Repo: "r1", Principal: "alice", Body: &body, Out: &out})
	if err != nil {
		t.Fatalf("ReceivePack: %v", err)
	}
	return out.String()
}

// entries lists the store's entry objects of r1, and the index.
func (e *stageEnv) entries(t *testing.T) ([]string, *wal.Index) {
	t.Helper()
	infos, err := e.mem.List(context.Background(), "repos/r1/entries/", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, in := range infos {
		keys = append(keys, in.Key)
	}
	x, _, err := e.log.ReadIndex(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	return keys, x
}

// A push that fails validation after its pack was staged leaves the log
// as it was; its staged entry is deleted, or, when the delete fails,
// left as an orphan that no index references (for GC).
func TestStagedPushFailingValidation(t *testing.T) {
	for _, deleteFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("deleteFails=%v", deleteFails), func(t *testing.T) {
			e := newStageEnv(t)
			var del func(string) faultstore.Fault
			if deleteFails {
				del = func(string) faultstore.Fault { return faultstore.Fault{Outcome: faultstore.Refused} }
			}
			e.watchEntries(func(int) faultstore.Fault { return faultstore.Fault{} }, del)
			// A branch at a blob: the pack indexes, the checks refuse it.
			rep := e.push(t, e.blob)
			if !strings.Contains(rep, "ng refs/heads/main branch must point to a commit") {
				t.Fatalf("report = %q, want the branch refused", rep)
			}
			if len(e.stagedEntries) != 1 {
				t.Fatalf("entry PUTs = %v, want the one staged", e.stagedEntries)
			}
			keys, x := e.entries(t)
			if x.Seq != 0 || len(x.Layers) != 0 || len(x.Refs) != 0 {
				t.Fatalf("index changed: seq %d, layers %v, refs %v", x.Seq, x.Layers, x.Refs)
			}
			if deleteFails {
				if len(keys) != 1 || keys[0] != e.stagedEntries[0] {
					t.Fatalf("entries = %v, want the orphan %s", keys, e.stagedEntries[0])
				}
			} else if len(keys) != 0 {
				t.Fatalf("entries = %v, want the staged entry deleted", keys)
			}
		})
	}
}

// A staged entry PUT that lands and then errs (outcome unknown) does not
// fail the push: the validated pack is uploaded again as a new entry,
// which is the one committed; the staged one is deleted.
func TestStagedEntryLandedThenError(t *testing.T) {
	e := newStageEnv(t)
	e.watchEntries(func(n int) faultstore.Fault {
		if n == 1 {
			return faultstore.Fault{Outcome: faultstore.LandedThenError}
		}
		return faultstore.Fault{}
	}, nil)
	rep := e.push(t, e.commit)
	if !strings.Contains(rep, "ok refs/heads/main") {
		t.Fatalf("report = %q, want ok", rep)
	}
	if len(e.stagedEntries) != 2 {
		t.Fatalf("entry PUTs = %v, want the staged one and the retry", e.stagedEntries)
	}
	keys, x := e.entries(t)
	if len(x.Layers) != 1 || len(x.Refs) != 1 || x.Refs[0].ID != e.commit {
		t.Fatalf("index: layers %v, refs %v; want one layer and main at %s", x.Layers, x.Refs, e.commit)
	}
	committed := wal.EntryKey("r1", x.Layers[0].ULID)
	if committed != e.stagedEntries[1] {
		t.Fatalf("committed entry %s, want the retry %s", committed, e.stagedEntries[1])
	}
	want := []string{wal.PackIndexKey("r1", x.Layers[0].ULID), committed} // key order
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Fatalf("entries = %v, want %v (the landed staged entry deleted)", keys, want)
	}
}

// A staged pack that validates is the entry committed: one upload.
func TestStagedPushCommitsStagedEntry(t *testing.T) {
	e := newStageEnv(t)
	e.watchEntries(func(int) faultstore.Fault { return faultstore.Fault{} }, nil)
	rep := e.push(t, e.commit)
	if !strings.Contains(rep, "ok refs/heads/main") {
		t.Fatalf("report = %q, want ok", rep)
	}
	keys, x := e.entries(t)
	if len(e.stagedEntries) != 1 || len(x.Layers) != 1 || wal.EntryKey("r1", x.Layers[0].ULID) != e.stagedEntries[0] {
		t.Fatalf("entry PUTs %v, layers %v: want the staged entry committed", e.stagedEntries, x.Layers)
	}
	if !slices.Contains(keys, e.stagedEntries[0]) {
		t.Fatalf("entries = %v: the committed entry %s is gone", keys, e.stagedEntries[0])
	}
}

// A thin pack is staged as sent, but index-pack completes it: the entry
// committed is the completed, self-contained pack, uploaded after
// validation, and the staged one is deleted, once.
func TestStagedThinPackCommitsCompletedPack(t *testing.T) {
	e := newStageEnv(t)
	if rep := e.push(t, e.commit); !strings.Contains(rep, "ok refs/heads/main") {
		t.Fatalf("first push: %q", rep)
	}
	// A second commit that changes f a little: its blob is a delta
	// against the first one, which a thin pack leaves out.
	env := gittest.Env(t.TempDir())
	f := filepath.Join(e.dir, "f")
	old, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, append(old, "one more line\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, env, e.dir, "commit", "-q", "-am", "two")
	second := strings.TrimSpace(gittest.Git(t, env, e.dir, "rev-parse", "HEAD"))
	pack, err := gittest.Run(env, e.dir, strings.NewReader(second+"\n^"+e.commit+"\n"), "pack-objects", "--stdout", "-q", "--revs", "--thin")
	if err != nil {
		t.Fatal(err)
	}
	e.pack = []byte(pack)
	var deletes []string
	e.watchEntries(func(int) faultstore.Fault { return faultstore.Fault{} }, func(key string) faultstore.Fault {
		e.mu.Lock()
		deletes = append(deletes, key)
		e.mu.Unlock()
		return faultstore.Fault{}
	})
	var body bytes.Buffer
	line := e.commit + " " + second + " refs/heads/main\x00report-status\n"
	fmt.Fprintf(&body, "%04x%s0000", len(line)+4, line)
	body.Write(e.pack)
	var out bytes.Buffer
	if err := e.svc.ReceivePack(context.Background(), gitsvc.Request{Repo: "r1", Principal: "alice", Body: &body, Out: &out}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "ok refs/heads/main") {
		t.Fatalf("second push: %q", out.String())
	}
	if len(e.stagedEntries) != 2 {
		t.Fatalf("entry PUTs = %v, want the staged thin pack and the completed one", e.stagedEntries)
	}
	keys, x := e.entries(t)
	last := x.Layers[len(x.Layers)-1]
	if committed := wal.EntryKey("r1", last.ULID); committed != e.stagedEntries[1] {
		t.Fatalf("committed %s, want the completed pack's entry %s", committed, e.stagedEntries[1])
	}
	if last.Size <= int64(len(e.pack)) {
		t.Fatalf("committed pack is %d bytes, the thin one %d: not completed", last.Size, len(e.pack))
	}
	if slices.Contains(keys, e.stagedEntries[0]) {
		t.Fatalf("entries = %v: the staged thin entry was kept", keys)
	}
	if n := strings.Count(strings.Join(deletes, " "), e.stagedEntries[0]); n != 1 {
		t.Fatalf("the staged entry was deleted %d times (%v), want once", n, deletes)
	}
}

// Packs below StageMinBytes, and pushes already refused against the
// current refs, are not staged: no entry PUT before validation.
func TestNotStaged(t *testing.T) {
	t.Run("small", func(t *testing.T) {
		e := newStageEnvMin(t, gitsvc.DefaultStageMinBytes)
		e.watchEntries(func(int) faultstore.Fault { return faultstore.Fault{} }, nil)
		if rep := e.push(t, e.blob); !strings.Contains(rep, "ng refs/heads/main") {
			t.Fatalf("report = %q, want refused", rep)
		}
		if len(e.stagedEntries) != 0 {
			t.Fatalf("entry PUTs = %v, want none for a %d-byte pack", e.stagedEntries, len(e.pack))
		}
	})
	t.Run("refused", func(t *testing.T) {
		e := newStageEnv(t)
		if rep := e.push(t, e.commit); !strings.Contains(rep, "ok refs/heads/main") {
			t.Fatalf("first push: %q", rep)
		}
		e.watchEntries(func(int) faultstore.Fault { return faultstore.Fault{} }, nil)
		if rep := e.pushRef(t, e.commit, "refs/heads/main/sub"); !strings.Contains(rep, "ng refs/heads/main/sub ref conflicts") {
			t.Fatalf("report = %q, want a ref conflict", rep)
		}
		if len(e.stagedEntries) != 0 {
			t.Fatalf("entry PUTs = %v, want none for a refused push", e.stagedEntries)
		}
	})
}
