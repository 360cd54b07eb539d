package lfs

// The lifecycle of LFS objects (docs/adr/0129-lfs-gc.md): uploads
// through Repo.Put against garbage collection by gc.Collector.RunLFS,
// on memstore behind faultstore where a fault or an interleaving must
// be injected.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/gc"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// world is one tenant's repositories over a store, with a clock GC reads.
type world struct {
	t     *testing.T
	inner *memstore.Store
	fs    *faultstore.Store
	h     *Handler
	log   *wal.Log
	mu    sync.Mutex
	now   time.Time
	live  map[string]string // repoID -> tenant, what names point at
}

func newWorld(t *testing.T, quota int64, repos ...string) *world {
	t.Helper()
	inner := memstore.New()
	fs := faultstore.New(inner)
	w := &world{t: t, inner: inner, fs: fs, log: wal.New(inner, wal.Options{}), now: time.Unix(1_700_000_000, 0), live: map[string]string{}}
	h, err := New(Options{Store: fs, Auth: tableAuth{}, QuotaBytes: quota, Now: w.clock})
	if err != nil {
		t.Fatal(err)
	}
	w.h = h
	for _, r := range repos {
		if err := w.log.Init(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		w.live[r] = "alice"
	}
	return w
}

func (w *world) clock() time.Time { w.mu.Lock(); defer w.mu.Unlock(); return w.now }
func (w *world) advance(d time.Duration) {
	w.mu.Lock()
	w.now = w.now.Add(d)
	w.mu.Unlock()
}

func (w *world) repo(id string) Repo {
	return w.h.Repo(access.Grant{RepoID: id, Tenant: "alice", Level: access.Write})
}

func (w *world) put(id string, data []byte) error {
	return w.repo(id).Put(context.Background(), oidOf(data), int64(len(data)), bytes.NewReader(data))
}

// deleteRepo is a repository delete as meta does it: the log's
// tombstone, then the name.
func (w *world) deleteRepo(id string) {
	if err := w.log.Delete(context.Background(), id); err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	delete(w.live, id)
	w.mu.Unlock()
}

func (w *world) gc(store objstore.Store, dry bool) (gc.LFSReport, error) {
	return gc.New(store, gc.Options{
		Grace: time.Hour, DryRun: dry, PageSize: 3, Now: w.clock,
		Owners: func(context.Context) (map[string]string, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			out := make(map[string]string, len(w.live))
			for k, v := range w.live {
				out[k] = v
			}
			return out, nil
		},
	}).RunLFS(context.Background())
}

func (w *world) keys(prefix string) []string {
	var out []string
	err := objstore.Walk(context.Background(), w.inner, prefix, func(o objstore.Info) error {
		out = append(out, o.Key)
		return nil
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

// check is the invariant: every reference of a repository whose log is
// not a tombstone serves its object, at its size; and the usage record
// never counts less than the tenant stores.
func (w *world) check(when string) {
	w.t.Helper()
	ctx := context.Background()
	for _, k := range w.keys("lfs/refs/") {
		repo, oid, _ := strings.Cut(strings.TrimPrefix(k, "lfs/refs/"), "/")
		if x, _, err := w.log.ReadIndex(ctx, repo); err != nil || x.Deleted {
			continue
		}
		rc, _, err := w.h.Repo(access.Grant{RepoID: repo, Tenant: "alice", Level: access.Read}).Open(ctx, oid)
		if err != nil {
			w.t.Fatalf("%s: %s references %s, which does not serve: %v", when, repo, oid, err)
		}
		rc.Close()
	}
	var stored int64
	objstore.Walk(ctx, w.inner, "lfs/objects/alice/", func(o objstore.Info) error { stored += o.Size; return nil })
	used, err := w.h.usage(ctx, "alice")
	if err != nil {
		w.t.Fatal(err)
	}
	if used < stored {
		w.t.Fatalf("%s: usage record says %d bytes, the tenant stores %d", when, used, stored)
	}
}

// TestLFSGCProperty: random uploads, repository deletions and GC runs,
// with the clock moving. GC never takes an object a live repository
// references; once nothing references an object, two runs more than the
// grace period apart take it, and its records with it.
func TestLFSGCProperty(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 23))
			w := newWorld(t, 0)
			var repos []string
			pool := make([][]byte, 6)
			for i := range pool {
				pool[i] = []byte(strings.Repeat(fmt.Sprintf("object %d ", i), i+1))
			}
			for step := range 120 {
				switch op := rng.IntN(10); {
				case op < 2 || len(repos) == 0:
					id := fmt.Sprintf("01R%03d", step)
					if err := w.log.Init(context.Background(), id); err != nil {
						t.Fatal(err)
					}
					w.live[id] = "alice"
					repos = append(repos, id)
				case op < 6:
					data := pool[rng.IntN(len(pool))]
					if err := w.put(repos[rng.IntN(len(repos))], data); err != nil && !errors.Is(err, ErrCollecting) {
						t.Fatalf("step %d: upload: %v", step, err)
					}
				case op < 7:
					i := rng.IntN(len(repos))
					w.deleteRepo(repos[i])
					repos = append(repos[:i], repos[i+1:]...)
				default:
					w.advance(time.Duration(rng.IntN(90)) * time.Minute)
					if _, err := w.gc(w.fs, false); err != nil {
						t.Fatalf("step %d: gc: %v", step, err)
					}
				}
				w.check(fmt.Sprintf("seed %d step %d", seed, step))
			}
			// Liveness: with every repository deleted, everything goes.
			for _, r := range repos {
				w.deleteRepo(r)
			}
			for range 3 {
				w.advance(2 * time.Hour)
				if _, err := w.gc(w.fs, false); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range []string{"lfs/objects/", "lfs/refs/", "lfs/tmp/", "gc/"} {
				if left := w.keys(p); len(left) > 0 {
					t.Fatalf("left after GC: %v", left)
				}
			}
			if used, _ := w.h.usage(context.Background(), "alice"); used != 0 {
				t.Fatalf("usage %d after everything went", used)
			}
		})
	}
}

// prepareSighted leaves an object that repository A uploaded and then
// lost (A deleted), sighted by GC more than the grace period ago.
func prepareSighted(t *testing.T) (*world, []byte) {
	w := newWorld(t, 0, "01A", "01B")
	data := []byte("a large file, in spirit")
	if err := w.put("01A", data); err != nil {
		t.Fatal(err)
	}
	w.deleteRepo("01A")
	if rep, err := w.gc(w.fs, false); err != nil || rep.Refs != 1 || rep.Kept != 1 {
		t.Fatalf("first run: %+v, %v", rep, err)
	}
	w.advance(2 * time.Hour)
	return w, data
}

// TestUploadRacesGC: GC's last run starts between an upload's fence and
// its copy. The fence revived the record, so GC's doom loses its
// compare-and-swap and the object stays.
func TestUploadRacesGC(t *testing.T) {
	w, data := prepareSighted(t)
	key := objectKey("alice", oidOf(data))
	var once sync.Once
	w.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpCopy && c.Key == key {
			once.Do(func() {
				if _, err := w.gc(w.inner, false); err != nil {
					t.Errorf("gc: %v", err)
				}
			})
		}
		return faultstore.Fault{}
	})
	if err := w.put("01B", data); err != nil {
		t.Fatal(err)
	}
	w.fs.SetPlan(nil)
	w.check("after the race")
	for range 3 {
		w.advance(2 * time.Hour)
		if _, err := w.gc(w.fs, false); err != nil {
			t.Fatal(err)
		}
		w.check("later runs")
	}
	if got := w.keys("lfs/objects/"); len(got) != 1 {
		t.Fatalf("objects %v", got)
	}
}

// TestGCRacesUpload: an upload arrives while GC deletes the object it
// doomed. The upload is refused (retry later), nothing of it is
// visible, and once GC is done the retry succeeds.
func TestGCRacesUpload(t *testing.T) {
	w, data := prepareSighted(t)
	key := objectKey("alice", oidOf(data))
	var once sync.Once
	var raced error
	w.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpDelete && c.Key == key {
			once.Do(func() {
				raced = w.repo("01B").Put(context.Background(), oidOf(data), int64(len(data)), bytes.NewReader(data))
			})
		}
		return faultstore.Fault{}
	})
	// The upload runs against the inner store inside the plan: point
	// the handler there for it.
	w.h.opts.Store = w.inner
	rep, err := w.gc(w.fs, false)
	w.fs.SetPlan(nil)
	if err != nil || rep.Objects != 1 {
		t.Fatalf("gc: %+v, %v", rep, err)
	}
	if !errors.Is(raced, ErrCollecting) {
		t.Fatalf("upload during the delete: %v, want ErrCollecting", raced)
	}
	if refs := w.keys("lfs/refs/"); len(refs) != 0 {
		t.Fatalf("references after the refused upload: %v", refs)
	}
	w.check("after the race")
	if err := w.put("01B", data); err != nil {
		t.Fatalf("retry: %v", err)
	}
	w.check("after the retry")
}

// TestUploadFaults: every write of an upload, in turn, lost or landed
// with an error. A failed upload leaves nothing visible, the usage
// record never counts less than what is stored, and GC then converges.
func TestUploadFaults(t *testing.T) {
	writes := map[faultstore.Op]bool{faultstore.OpPut: true, faultstore.OpPutIfMatch: true, faultstore.OpPutIfAbsent: true, faultstore.OpCopy: true, faultstore.OpDelete: true}
	for _, sighted := range []bool{false, true} {
		for _, outcome := range faultstore.Faults() {
			for k := 1; ; k++ {
				var w *world
				var data []byte
				if sighted {
					w, data = prepareSighted(t)
				} else {
					w, data = newWorld(t, 1<<20, "01B"), []byte("an object")
				}
				n := 0
				w.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
					if !writes[c.Op] {
						return faultstore.Fault{}
					}
					if n++; n == k {
						return faultstore.Fault{Outcome: outcome}
					}
					return faultstore.Fault{}
				})
				err := w.put("01B", data)
				w.fs.SetPlan(nil)
				when := fmt.Sprintf("sighted=%v %v at write %d", sighted, outcome, k)
				w.check(when)
				if n < k {
					break // every write passed: the matrix is done
				}
				if err == nil {
					// Only the temporary's delete may fail unseen.
					if _, err := w.repo("01B").Size(context.Background(), oidOf(data)); err != nil {
						t.Fatalf("%s: upload succeeded, object not served: %v", when, err)
					}
				}
				// GC converges: a retry, then runs.
				if err != nil {
					if err := w.put("01B", data); err != nil {
						t.Fatalf("%s: retry: %v", when, err)
					}
				}
				for range 3 {
					w.advance(2 * time.Hour)
					if _, err := w.gc(w.fs, false); err != nil {
						t.Fatal(err)
					}
					w.check(when + ", then gc")
				}
				if tmp := w.keys("lfs/tmp/"); len(tmp) != 0 {
					t.Fatalf("%s: temporaries left: %v", when, tmp)
				}
				if used, _ := w.h.usage(context.Background(), "alice"); used != int64(len(data)) {
					t.Fatalf("%s: usage %d after the recount, want %d", when, used, len(data))
				}
			}
		}
	}
}

// TestGCFaults: every write of a GC run that deletes an object, in
// turn, lost or landed with an error. No live reference ever names a
// missing object, and clean runs afterwards converge.
func TestGCFaults(t *testing.T) {
	writes := map[faultstore.Op]bool{faultstore.OpPut: true, faultstore.OpPutIfMatch: true, faultstore.OpPutIfAbsent: true, faultstore.OpCopy: true, faultstore.OpDelete: true}
	for _, outcome := range faultstore.Faults() {
		for k := 1; ; k++ {
			w, data := prepareSighted(t)
			keep := []byte("kept: repository B references it")
			if err := w.put("01B", keep); err != nil {
				t.Fatal(err)
			}
			n := 0
			w.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
				if writes[c.Op] {
					if n++; n == k {
						return faultstore.Fault{Outcome: outcome}
					}
				}
				return faultstore.Fault{}
			})
			w.gc(w.fs, false)
			w.fs.SetPlan(nil)
			when := fmt.Sprintf("%v at write %d", outcome, k)
			w.check(when)
			if n < k {
				break
			}
			// A doom left by a failed delete blocks uploads of that
			// object until it is stale, then GC finishes.
			for range 3 {
				w.advance(2 * time.Hour)
				if _, err := w.gc(w.fs, false); err != nil {
					t.Fatalf("%s: clean run: %v", when, err)
				}
				w.check(when + ", then gc")
			}
			if got := w.keys("lfs/objects/"); len(got) != 1 || got[0] != objectKey("alice", oidOf(keep)) {
				t.Fatalf("%s: objects %v", when, got)
			}
			if got := w.keys("gc/"); len(got) != 0 {
				t.Fatalf("%s: records left %v", when, got)
			}
			_ = data
		}
	}
}

// TestGCDryRun changes nothing.
func TestGCDryRun(t *testing.T) {
	w, _ := prepareSighted(t)
	before := w.keys("")
	rep, err := w.gc(w.fs, true)
	if err != nil || rep.Objects != 1 {
		t.Fatalf("dry run: %+v, %v", rep, err)
	}
	if after := w.keys(""); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("dry run changed the store:\n%v\n%v", before, after)
	}
}

// TestQuotaBatch: the quota through the real HTTP Batch API. An upload
// that would take the tenant over its quota is refused with 507 and
// the spec's error body, which git-lfs prints; bytes the tenant holds
// already (uploaded to another repository) do not count again; an
// upload that skips the batch is refused too.
func TestQuotaBatch(t *testing.T) {
	f := newFixture(t, 0)
	h, err := New(Options{Store: f.store, Auth: tableAuth{
		repos:  map[string]string{"alice/pub": "01PUB", "alice/other": "01OTHER"},
		levels: map[string]map[string]access.Level{writer: {"alice/pub": access.Write, "alice/other": access.Write}},
	}, QuotaBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h) // 127.0.0.1
	t.Cleanup(ts.Close)
	f.url = ts.URL

	first := bytes.Repeat([]byte("x"), 60)
	code, res := f.batch(t, "alice/pub", writer, "upload", batchObject{OID: oidOf(first), Size: 60})
	if code != 200 || res.Objects[0].Actions["upload"] == nil {
		t.Fatalf("first batch: %d %+v", code, res)
	}
	if code := f.put(t, "alice/pub", writer, oidOf(first), first); code != 200 {
		t.Fatalf("first upload: %d", code)
	}
	second := bytes.Repeat([]byte("y"), 50)
	b := fmt.Sprintf(`{"operation":"upload","objects":[{"oid":%q,"size":50}]}`, oidOf(second))
	code, hdr, body := f.do(t, "POST", "/alice/pub.git/info/lfs/objects/batch", writer, MediaType, strings.NewReader(b), int64(len(b)))
	if code != http.StatusInsufficientStorage || hdr.Get("Content-Type") != MediaType || !strings.Contains(string(body), `"message":"LFS storage quota exceeded`) {
		t.Fatalf("over quota: %d %s %s", code, hdr.Get("Content-Type"), body)
	}
	// The same bytes for another repository of the tenant: stored once.
	code, res = f.batch(t, "alice/other", writer, "upload", batchObject{OID: oidOf(first), Size: 60})
	if code != 200 || res.Objects[0].Actions["upload"] == nil {
		t.Fatalf("shared object: %d %+v", code, res)
	}
	if code := f.put(t, "alice/other", writer, oidOf(first), first); code != 200 {
		t.Fatalf("shared upload: %d", code)
	}
	// Skipping the batch does not skip the quota.
	if code := f.put(t, "alice/pub", writer, oidOf(second), second); code != http.StatusInsufficientStorage {
		t.Fatalf("upload past the batch: %d", code)
	}
	if used, _ := h.usage(context.Background(), "alice"); used != 60 {
		t.Fatalf("usage %d, want 60", used)
	}
	if got := len(f.visible(t)); got != 3 { // one object, two references
		t.Fatalf("visible keys: %v", f.visible(t))
	}
}

// TestSlowUploadOutlivesSighting: an upload passes the fence before GC
// first sees the object unreferenced and writes its reference only after
// two GC runs listed the references. The grace period between the
// sighting and the listing that may doom keeps the object.
func TestSlowUploadOutlivesSighting(t *testing.T) {
	w := newWorld(t, 0, "01A", "01B")
	data := []byte("uploaded while GC looks")
	if err := w.put("01A", data); err != nil {
		t.Fatal(err)
	}
	w.deleteRepo("01A")
	ref := refKey("01B", oidOf(data))
	var once sync.Once
	w.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpPut && c.Key == ref {
			once.Do(func() {
				for range 2 {
					w.advance(time.Minute)
					if _, err := w.gc(w.inner, false); err != nil {
						t.Errorf("gc: %v", err)
					}
				}
			})
		}
		return faultstore.Fault{}
	})
	if err := w.put("01B", data); err != nil {
		t.Fatal(err)
	}
	w.fs.SetPlan(nil)
	w.check("after the slow upload")
}

// TestFenceBetweenReadAndDoom: an upload revives the record after GC
// read it and before GC's doom. The doom is a compare-and-swap over what
// GC read, so it loses, and the object stays.
func TestFenceBetweenReadAndDoom(t *testing.T) {
	w, data := prepareSighted(t)
	mark := gc.LFSMarkKey("alice", oidOf(data))
	up, err := New(Options{Store: w.inner, Auth: tableAuth{}, Now: w.clock})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	w.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpPutIfMatch && c.Key == mark {
			once.Do(func() {
				g := access.Grant{RepoID: "01B", Tenant: "alice", Level: access.Write}
				if err := up.Repo(g).Put(context.Background(), oidOf(data), int64(len(data)), bytes.NewReader(data)); err != nil {
					t.Errorf("upload: %v", err)
				}
			})
		}
		return faultstore.Fault{}
	})
	if rep, err := w.gc(w.fs, false); err != nil || rep.Objects != 0 {
		t.Fatalf("gc: %+v, %v", rep, err)
	}
	w.fs.SetPlan(nil)
	w.check("after the race")
}
