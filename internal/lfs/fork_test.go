package lfs

// Forks, deletes and LFS references (docs/adr/0132-lfs-forks.md): the
// real metadata store (meta.Store.ForkRepo with Forks as its
// ForkCopier), the real log and the real GC, on memstore behind
// faultstore where a fault or an interleaving must be injected.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/gc"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// forkWorld is tenants and repositories over one store: meta and the
// LFS handler write through the fault store, GC and the checks read
// the store behind it.
type forkWorld struct {
	t     *testing.T
	inner *memstore.Store
	fs    *faultstore.Store
	meta  *meta.Store // through fs, forking with forks
	plain *meta.Store // on inner, for GC's names and for moves inside a plan
	forks *Forks
	h     *Handler
	mu    sync.Mutex
	now   time.Time
}

func newForkWorld(t *testing.T, quota int64, tenants ...string) *forkWorld {
	t.Helper()
	inner := memstore.New()
	fs := faultstore.New(inner)
	w := &forkWorld{t: t, inner: inner, fs: fs, now: time.Unix(1_700_000_000, 0)}
	noSleep := func(context.Context, time.Duration) error { return nil }
	w.forks = NewForks(fs, ForkOptions{QuotaBytes: quota, Now: w.clock, PageSize: 2, Parallel: 3})
	w.meta = meta.New(fs, wal.New(fs, wal.Options{Sleep: noSleep}), meta.WithForkCopier(w.forks))
	w.plain = meta.New(inner, wal.New(inner, wal.Options{Sleep: noSleep}))
	h, err := New(Options{Store: fs, Auth: tableAuth{}, QuotaBytes: quota, Now: w.clock})
	if err != nil {
		t.Fatal(err)
	}
	w.h = h
	for _, tn := range tenants {
		if _, err := w.plain.CreateTenant(context.Background(), tn, meta.KindUser); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *forkWorld) clock() time.Time { w.mu.Lock(); defer w.mu.Unlock(); return w.now }
func (w *forkWorld) advance(d time.Duration) {
	w.mu.Lock()
	w.now = w.now.Add(d)
	w.mu.Unlock()
}

func (w *forkWorld) create(owner, name string) meta.Repo {
	w.t.Helper()
	r, err := w.plain.CreateRepo(context.Background(), owner, name, false)
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

func (w *forkWorld) repo(r meta.Repo) Repo {
	return w.h.Repo(access.Grant{RepoID: r.ID, Tenant: r.Owner, Level: access.Write})
}

func (w *forkWorld) put(r meta.Repo, data []byte) {
	w.t.Helper()
	if err := w.repo(r).Put(context.Background(), oidOf(data), int64(len(data)), bytes.NewReader(data)); err != nil {
		w.t.Fatalf("upload to %s: %v", r.FullName(), err)
	}
}

func (w *forkWorld) gc() gc.LFSReport {
	w.t.Helper()
	rep, err := gc.New(w.inner, gc.Options{Grace: time.Hour, PageSize: 3, Now: w.clock, Owners: gc.MetaOwners(w.inner, w.plain)}).RunLFS(context.Background())
	if err != nil {
		w.t.Fatalf("gc: %v", err)
	}
	return rep
}

// settle runs GC until everything unreferenced is gone.
func (w *forkWorld) settle() {
	for range 3 {
		w.advance(2 * time.Hour)
		w.gc()
	}
}

func (w *forkWorld) keys(prefix string) []string {
	var out []string
	if err := objstore.Walk(context.Background(), w.inner, prefix, func(o objstore.Info) error {
		out = append(out, o.Key)
		return nil
	}); err != nil {
		w.t.Fatal(err)
	}
	return out
}

// serves fails unless r serves every object of objs, byte for byte.
func (w *forkWorld) serves(r meta.Repo, objs ...[]byte) {
	w.t.Helper()
	for _, data := range objs {
		rc, size, err := w.repo(r).Open(context.Background(), oidOf(data))
		if err != nil {
			w.t.Fatalf("%s does not serve %s: %v", r.FullName(), oidOf(data)[:8], err)
		}
		var buf bytes.Buffer
		buf.ReadFrom(rc)
		rc.Close()
		if size != int64(len(data)) || !bytes.Equal(buf.Bytes(), data) {
			w.t.Fatalf("%s serves %d bytes %q for %s", r.FullName(), size, buf.Bytes(), oidOf(data)[:8])
		}
	}
}

// check is the invariant: every reference of a repository a name points
// at serves its object from its owner's objects, and no tenant's usage
// record counts less than it stores.
func (w *forkWorld) check(when string) {
	w.t.Helper()
	ctx := context.Background()
	owners, err := gc.MetaOwners(w.inner, w.plain)(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, k := range w.keys("lfs/refs/") {
		repo, oid, _ := strings.Cut(strings.TrimPrefix(k, "lfs/refs/"), "/")
		tenant, named := owners[repo]
		if !named {
			continue
		}
		rc, _, err := w.h.OpenFor(ctx, tenant, repo, oid)
		if err != nil {
			w.t.Fatalf("%s: %s's repository %s references %s, which does not serve: %v", when, tenant, repo, oid[:8], err)
		}
		rc.Close()
	}
	stored := map[string]int64{}
	for _, k := range w.keys("lfs/objects/") {
		tenant, _, _ := strings.Cut(strings.TrimPrefix(k, "lfs/objects/"), "/")
		infos, _ := w.inner.List(ctx, k, "", 1)
		stored[tenant] += infos[0].Size
	}
	for tenant, n := range stored {
		if used, err := usage(ctx, w.inner, tenant); err != nil || used < n {
			w.t.Fatalf("%s: %s's usage record says %d bytes (%v), it stores %d", when, tenant, used, err, n)
		}
	}
}

// empty fails the test unless no LFS object, reference or GC record is
// left and tenant's usage is back to 0.
func (w *forkWorld) empty(t *testing.T, tenant, when string) {
	t.Helper()
	for _, p := range []string{"lfs/objects/", "lfs/refs/", "gc/lfs/"} {
		if left := w.keys(p); len(left) != 0 {
			t.Fatalf("left %s: %v", when, left)
		}
	}
	if got := w.usage(tenant); got != 0 {
		t.Fatalf("usage %d %s", got, when)
	}
}

func (w *forkWorld) usage(tenant string) int64 {
	w.t.Helper()
	n, err := usage(context.Background(), w.inner, tenant)
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

func objectsOf(n int, tag string) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf("%s object %d: %s", tag, i, strings.Repeat("x", i)))
	}
	return out
}

func sizeOf(objs [][]byte) (n int64) {
	for _, o := range objs {
		n += int64(len(o))
	}
	return n
}

// TestForkSharesObjects: a fork within a tenant gets a reference to each
// of its source's objects, over several pages of the source's
// references; no object is stored twice and the usage is unchanged. The
// fork's pushes need no upload, and deleting the source leaves the fork
// whole through GC; deleting the fork too lets GC take everything.
func TestForkSharesObjects(t *testing.T) {
	ctx := context.Background()
	w := newForkWorld(t, 0, "alice")
	src := w.create("alice", "src")
	objs := objectsOf(5, "shared") // three pages of two
	for _, o := range objs {
		w.put(src, o)
	}
	before := w.usage("alice")
	var mu sync.Mutex
	pages := 0
	w.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpList && c.Key == refKey(src.ID, "") {
			mu.Lock()
			pages++
			mu.Unlock()
		}
		return faultstore.Fault{}
	})
	fork, err := w.meta.ForkRepo(ctx, "alice", "src", "alice", "fork")
	w.fs.SetPlan(nil)
	if err != nil {
		t.Fatal(err)
	}
	if pages != 3 { // 2, 2 and 1 references
		t.Fatalf("%d pages of the source's references, want 3", pages)
	}
	w.serves(fork, objs...)
	if got := len(w.keys("lfs/objects/")); got != len(objs) {
		t.Fatalf("%d objects stored for %d shared", got, len(objs))
	}
	if got := w.usage("alice"); got != before || got != sizeOf(objs) {
		t.Fatalf("usage %d after the fork, %d before, %d stored", got, before, sizeOf(objs))
	}
	// The fork's pushes name the same objects: none is missing.
	oids := make([]string, len(objs))
	for i, o := range objs {
		oids[i] = oidOf(o)
	}
	if missing, err := w.h.Missing(ctx, fork.ID, oids); err != nil || len(missing) != 0 {
		t.Fatalf("missing in the fork: %v, %v", missing, err)
	}

	if err := w.meta.DeleteRepo(ctx, "alice", "src"); err != nil {
		t.Fatal(err)
	}
	w.settle()
	w.check("source deleted")
	w.serves(fork, objs...)
	if got := len(w.keys("lfs/refs/")); got != len(objs) {
		t.Fatalf("references after the source went: %v", w.keys("lfs/refs/"))
	}
	if err := w.meta.DeleteRepo(ctx, "alice", "fork"); err != nil {
		t.Fatal(err)
	}
	w.settle()
	w.empty(t, "alice", "after both repositories went")
}

// TestForkAcrossTenants: a fork into another tenant gives it its own
// objects, counted in its usage (an object it held already counted once),
// and leaves the source tenant's objects and usage as they were; each
// tenant's objects then live and go with its own references.
func TestForkAcrossTenants(t *testing.T) {
	ctx := context.Background()
	w := newForkWorld(t, 0, "alice", "bob")
	src := w.create("alice", "src")
	objs := objectsOf(5, "across")
	for _, o := range objs {
		w.put(src, o)
	}
	// bob holds one of them already, through a repository of his own.
	own := w.create("bob", "own")
	w.put(own, objs[0])
	aliceBefore, bobBefore := w.usage("alice"), w.usage("bob")

	var mu sync.Mutex
	copies := 0
	w.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpCopy && strings.HasPrefix(c.Key, "lfs/objects/bob/") {
			mu.Lock()
			copies++
			mu.Unlock()
		}
		return faultstore.Fault{}
	})
	fork, err := w.meta.ForkRepo(ctx, "alice", "src", "bob", "fork")
	w.fs.SetPlan(nil)
	if err != nil {
		t.Fatal(err)
	}
	if fork.Owner != "bob" {
		t.Fatalf("fork %+v", fork)
	}
	if copies != len(objs)-1 {
		t.Fatalf("%d objects copied to bob, who held one of %d already", copies, len(objs))
	}
	w.serves(fork, objs...)
	for _, o := range objs {
		if held, _ := holds(ctx, w.inner, "bob", oidOf(o)); !held {
			t.Fatalf("bob does not hold %s", oidOf(o)[:8])
		}
	}
	if got := w.usage("alice"); got != aliceBefore {
		t.Fatalf("alice's usage %d, was %d", got, aliceBefore)
	}
	if got, want := w.usage("bob"), bobBefore+sizeOf(objs[1:]); got != want {
		t.Fatalf("bob's usage %d, want %d", got, want)
	}
	// alice deletes her repository: her objects go, bob's stay.
	if err := w.meta.DeleteRepo(ctx, "alice", "src"); err != nil {
		t.Fatal(err)
	}
	w.settle()
	w.check("alice's source deleted")
	w.serves(fork, objs...)
	for _, k := range w.keys("lfs/objects/") {
		if !strings.HasPrefix(k, "lfs/objects/bob/") {
			t.Fatalf("left of alice's: %s", k)
		}
	}
	if got := w.usage("alice"); got != 0 {
		t.Fatalf("alice's usage %d after her objects went", got)
	}
}

// TestForkQuota: a fork across tenants that would take the destination
// over its quota is refused before anything is copied, with an error
// the API answers 403 with a message; no fork is visible and the
// destination's usage is unchanged. Within a tenant the quota does not
// apply: nothing is added.
func TestForkQuota(t *testing.T) {
	ctx := context.Background()
	objs := objectsOf(4, "quota")
	w := newForkWorld(t, sizeOf(objs)+10, "alice", "bob")
	src := w.create("alice", "src")
	for _, o := range objs {
		w.put(src, o)
	}
	own := w.create("bob", "own")
	w.put(own, objectsOf(1, "bob's own, which leaves too little room")[0])
	bobBefore := w.usage("bob")

	_, err := w.meta.ForkRepo(ctx, "alice", "src", "bob", "fork")
	var refusal *ForkRefusal
	if !errors.As(err, &refusal) || refusal.HTTPStatus() != http.StatusForbidden || !errors.Is(err, ErrQuota) ||
		!strings.Contains(err.Error(), "LFS storage quota exceeded: bob stores") {
		t.Fatalf("fork over the quota: %v", err)
	}
	if _, err := w.meta.Repo(ctx, "bob", "fork"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("refused fork visible: %v", err)
	}
	if got := w.usage("bob"); got != bobBefore {
		t.Fatalf("bob's usage %d after the refused fork, was %d", got, bobBefore)
	}
	if got := len(w.keys("lfs/objects/bob/")); got != 1 {
		t.Fatalf("bob's objects after the refused fork: %v", w.keys("lfs/objects/bob/"))
	}
	// Within alice, at her quota already, the fork adds nothing.
	fork, err := w.meta.ForkRepo(ctx, "alice", "src", "alice", "fork")
	if err != nil {
		t.Fatalf("fork within the tenant: %v", err)
	}
	w.serves(fork, objs...)
}

// TestForkCopyRefused: the hard check of each object's admission
// refuses what the up-front sum let through (two forks at once): the
// fork fails with the quota's error and leaves no fork; GC then takes
// what it copied and recounts.
func TestForkCopyRefused(t *testing.T) {
	ctx := context.Background()
	objs := objectsOf(4, "race")
	w := newForkWorld(t, sizeOf(objs)+5, "alice", "bob")
	src := w.create("alice", "src")
	for _, o := range objs {
		w.put(src, o)
	}
	// bob's upload lands after the up-front check, before the copies.
	other := w.create("bob", "other")
	late := []byte("bob's late upload, which takes the room")
	var once sync.Once
	w.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpGet && strings.HasPrefix(c.Key, "gc/lfs/bob/") {
			once.Do(func() {
				up, _ := New(Options{Store: w.inner, Auth: tableAuth{}, QuotaBytes: sizeOf(objs) + 5, Now: w.clock})
				g := access.Grant{RepoID: other.ID, Tenant: "bob", Level: access.Write}
				if err := up.Repo(g).Put(ctx, oidOf(late), int64(len(late)), bytes.NewReader(late)); err != nil {
					t.Errorf("late upload: %v", err)
				}
			})
		}
		return faultstore.Fault{}
	})
	_, err := w.meta.ForkRepo(ctx, "alice", "src", "bob", "fork")
	w.fs.SetPlan(nil)
	var refusal *ForkRefusal
	if !errors.As(err, &refusal) || refusal.HTTPStatus() != http.StatusForbidden || !errors.Is(err, ErrQuota) {
		t.Fatalf("fork past the quota: %v", err)
	}
	if _, err := w.meta.Repo(ctx, "bob", "fork"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("refused fork visible: %v", err)
	}
	w.check("refused")
	w.settle()
	w.check("refused, then gc")
	if got, want := w.usage("bob"), int64(len(late)); got != want {
		t.Fatalf("bob's usage %d after GC, want %d (his one object)", got, want)
	}
	if got := w.keys("lfs/objects/bob/"); len(got) != 1 {
		t.Fatalf("bob's objects after GC: %v", got)
	}
}

// TestForkFaults: every write of a fork's copy of its LFS references
// (references, objects, GC's records, usage), in turn, lost, landed then
// reported failed, or refused, within a tenant and across tenants. A
// failed fork is not visible and its log is a tombstone; a fork that
// succeeded serves every object; the invariant holds throughout; and GC
// then takes every reference and copy of the failed fork.
func TestForkFaults(t *testing.T) {
	writes := map[faultstore.Op]bool{faultstore.OpPut: true, faultstore.OpPutIfMatch: true, faultstore.OpPutIfAbsent: true, faultstore.OpCopy: true, faultstore.OpDelete: true}
	for _, dst := range []string{"alice", "bob"} {
		for _, outcome := range faultstore.Faults() {
			for k := 1; ; k++ {
				ctx := context.Background()
				w := newForkWorld(t, 1<<20, "alice", "bob")
				w.forks.opts.Parallel = 1 // the k-th write is the same write every time
				src := w.create("alice", "src")
				objs := objectsOf(3, "faults")
				for _, o := range objs {
					w.put(src, o)
				}
				// One object GC sighted before its reference landed, so
				// that the fork's fence within the tenant writes.
				sighted := []byte("sighted by GC, then referenced")
				w.slowUpload(src, sighted)
				objs = append(objs, sighted)
				bobBefore := w.usage("bob")

				var mu sync.Mutex
				n := 0
				w.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
					if !writes[c.Op] || !strings.HasPrefix(c.Key, "lfs/") && !strings.HasPrefix(c.Key, "gc/") {
						return faultstore.Fault{}
					}
					mu.Lock() // the fork copies several objects at once
					defer mu.Unlock()
					if n++; n == k {
						return faultstore.Fault{Outcome: outcome}
					}
					return faultstore.Fault{}
				})
				fork, err := w.meta.ForkRepo(ctx, "alice", "src", dst, "fork")
				w.fs.SetPlan(nil)
				when := fmt.Sprintf("to %s, %v at write %d", dst, outcome, k)
				w.check(when)
				if n < k {
					if err != nil {
						t.Fatalf("%s: clean fork: %v", when, err)
					}
					t.Logf("to %s, %v: %d writes", dst, outcome, k-1)
					break // every write passed: the matrix is done
				}
				if err == nil {
					w.serves(fork, objs...)
					continue
				}
				if _, rerr := w.meta.Repo(ctx, dst, "fork"); !errors.Is(rerr, meta.ErrNotFound) {
					t.Fatalf("%s: failed fork (%v) visible: %v", when, err, rerr)
				}
				if !errors.Is(err, meta.ErrUnavailable) {
					t.Fatalf("%s: a store fault is %v, want ErrUnavailable", when, err)
				}
				// GC converges: the failed fork's log is a tombstone, so
				// its references go, and bob's copies after them.
				w.settle()
				w.check(when + ", then gc")
				for _, key := range w.keys("lfs/refs/") {
					if !strings.HasPrefix(key, "lfs/refs/"+src.ID+"/") {
						t.Fatalf("%s: reference left of the failed fork: %s", when, key)
					}
				}
				if left := w.keys("lfs/objects/bob/"); len(left) != 0 {
					t.Fatalf("%s: bob's copies left: %v", when, left)
				}
				if got := w.usage("bob"); got != bobBefore {
					t.Fatalf("%s: bob's usage %d after GC, was %d", when, got, bobBefore)
				}
				// And the fork, tried again, succeeds.
				fork, err = w.meta.ForkRepo(ctx, "alice", "src", dst, "fork")
				if err != nil {
					t.Fatalf("%s: retry: %v", when, err)
				}
				w.serves(fork, objs...)
			}
		}
	}
}

// slowUpload uploads data to r, with two GC runs between the upload's
// fence and its reference: GC sights the object (no reference yet), and
// the reference lands right after, as a slow upload's may
// (docs/adr/0129-lfs-gc.md). The sighting is then older than the grace
// period.
func (w *forkWorld) slowUpload(r meta.Repo, data []byte) {
	w.t.Helper()
	ref := refKey(r.ID, oidOf(data))
	var once sync.Once
	w.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpPut && c.Key == ref {
			once.Do(func() { w.gc() })
		}
		return faultstore.Fault{}
	})
	w.put(r, data)
	w.fs.SetPlan(nil)
	if len(w.keys(gc.LFSMarkKey(r.Owner, oidOf(data)))) != 1 {
		w.t.Fatal("the slow upload's object was not sighted")
	}
	w.advance(2 * time.Hour)
}

// TestForkRacesGC: the source is deleted and GC runs while the fork
// copies a reference, after the fork read the source's reference and
// before it wrote its own; the object had been sighted more than the
// grace period before (a slow upload). Without the fork's fence GC would
// doom and delete the object the fork's new reference names; with it,
// the doom loses and the object stays. Across tenants, the destination's
// own copy does not depend on the source's object that GC takes.
func TestForkRacesGC(t *testing.T) {
	for _, dst := range []string{"alice", "bob"} {
		t.Run(dst, func(t *testing.T) {
			ctx := context.Background()
			w := newForkWorld(t, 0, "alice", "bob")
			src := w.create("alice", "src")
			data := []byte("uploaded slowly, forked while its source goes")
			w.slowUpload(src, data)
			var once sync.Once
			w.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
				if (c.Op == faultstore.OpPut || c.Op == faultstore.OpCopy) && strings.HasPrefix(c.Key, "lfs/refs/") && !strings.HasPrefix(c.Key, "lfs/refs/"+src.ID) {
					once.Do(func() {
						if err := w.plain.DeleteRepo(ctx, "alice", "src"); err != nil {
							t.Errorf("delete: %v", err)
						}
						w.gc()
					})
				}
				return faultstore.Fault{}
			})
			fork, err := w.meta.ForkRepo(ctx, "alice", "src", dst, "fork")
			w.fs.SetPlan(nil)
			if err != nil {
				t.Fatal(err)
			}
			w.check("after the race")
			w.serves(fork, data)
			w.settle()
			w.check("later runs")
			w.serves(fork, data)
		})
	}
}

// TestForkAfterCollection: the source is deleted and GC takes its
// object after the fork read the source's reference and before the
// fork's fence. The fork must not write a reference to the missing
// object: it skips it, and succeeds without it (its pushes will ask for
// the upload).
func TestForkAfterCollection(t *testing.T) {
	for _, dst := range []string{"alice", "bob"} {
		t.Run(dst, func(t *testing.T) {
			ctx := context.Background()
			w := newForkWorld(t, 0, "alice", "bob")
			src := w.create("alice", "src")
			data := []byte("collected while the fork looks")
			w.put(src, data)
			mark := gc.LFSMarkKey(dst, oidOf(data))
			var once sync.Once
			w.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
				if c.Op == faultstore.OpGet && c.Key == mark {
					once.Do(func() {
						if err := w.plain.DeleteRepo(ctx, "alice", "src"); err != nil {
							t.Errorf("delete: %v", err)
						}
						w.settle()
					})
				}
				return faultstore.Fault{}
			})
			fork, err := w.meta.ForkRepo(ctx, "alice", "src", dst, "fork")
			w.fs.SetPlan(nil)
			if err != nil {
				t.Fatal(err)
			}
			w.check("after the race")
			if _, err := w.repo(fork).Size(ctx, oidOf(data)); !errors.Is(err, ErrNoObject) {
				t.Fatalf("the fork references the collected object: %v", err)
			}
		})
	}
}

// TestForkProperty: random uploads, forks within and across tenants,
// deletes and GC runs, some GC runs inside a fork (between two of its
// writes, the clock moving by minutes), with the clock moving. The
// invariant holds after every step, and once every repository is gone,
// GC takes everything.
func TestForkProperty(t *testing.T) {
	tenants := []string{"alice", "bob"}
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, 132))
			w := newForkWorld(t, 0, tenants...)
			pool := objectsOf(5, "pool")
			var repos []meta.Repo
			for step := range 100 {
				switch op := rng.IntN(10); {
				case op < 2 || len(repos) == 0:
					repos = append(repos, w.create(tenants[rng.IntN(2)], fmt.Sprintf("r%d", step)))
				case op < 5:
					r := repos[rng.IntN(len(repos))]
					data := pool[rng.IntN(len(pool))]
					if err := w.repo(r).Put(ctx, oidOf(data), int64(len(data)), bytes.NewReader(data)); err != nil && !errors.Is(err, ErrCollecting) {
						t.Fatalf("step %d: upload: %v", step, err)
					}
				case op < 7:
					src := repos[rng.IntN(len(repos))]
					at := rng.IntN(6) + 1
					skew := time.Duration(rng.IntN(5)) * time.Minute
					var mu sync.Mutex
					n := 0
					w.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
						if !strings.HasPrefix(c.Key, "lfs/refs/") || c.Op == faultstore.OpList {
							return faultstore.Fault{}
						}
						mu.Lock() // the fork copies several objects at once
						defer mu.Unlock()
						if n++; n == at {
							w.advance(skew)
							w.gc()
						}
						return faultstore.Fault{}
					})
					fork, err := w.meta.ForkRepo(ctx, src.Owner, src.Name, tenants[rng.IntN(2)], fmt.Sprintf("f%d", step))
					w.fs.SetPlan(nil)
					var refusal *ForkRefusal
					switch {
					case errors.As(err, &refusal) && errors.Is(err, ErrCollecting):
					case err != nil:
						t.Fatalf("step %d: fork: %v", step, err)
					default:
						repos = append(repos, fork)
					}
				case op < 8:
					i := rng.IntN(len(repos))
					if err := w.plain.DeleteRepo(ctx, repos[i].Owner, repos[i].Name); err != nil {
						t.Fatal(err)
					}
					repos = append(repos[:i], repos[i+1:]...)
				default:
					w.advance(time.Duration(rng.IntN(90)) * time.Minute)
					w.gc()
				}
				w.check(fmt.Sprintf("seed %d step %d", seed, step))
			}
			for _, r := range repos {
				if err := w.plain.DeleteRepo(ctx, r.Owner, r.Name); err != nil {
					t.Fatal(err)
				}
			}
			w.settle()
			for _, p := range []string{"lfs/objects/", "lfs/refs/", "lfs/tmp/", "gc/lfs/"} {
				if left := w.keys(p); len(left) > 0 {
					t.Fatalf("left after GC: %v", left)
				}
			}
			for _, tn := range tenants {
				if used := w.usage(tn); used != 0 {
					t.Fatalf("%s's usage %d after everything went", tn, used)
				}
			}
		})
	}
}

// TestDeleteAndRecreate: a deleted repository's references go with its
// log's tombstone, its objects after the grace period; a repository
// created again under the same name is a new log and holds none of the
// old references (ghost has no restore: docs/adr/0040-garbage-collection.md),
// so its pushes ask for the uploads again, and the upload of an object
// GC has sighted revives it.
func TestDeleteAndRecreate(t *testing.T) {
	ctx := context.Background()
	w := newForkWorld(t, 0, "alice")
	old := w.create("alice", "proj")
	data := []byte("the old repository's object")
	w.put(old, data)
	if err := w.meta.DeleteRepo(ctx, "alice", "proj"); err != nil {
		t.Fatal(err)
	}
	again := w.create("alice", "proj")
	if again.ID == old.ID {
		t.Fatal("recreated under the same id")
	}
	if missing, err := w.h.Missing(ctx, again.ID, []string{oidOf(data)}); err != nil || len(missing) != 1 {
		t.Fatalf("recreated repository holds the old reference: missing %v, %v", missing, err)
	}
	if rep := w.gc(); rep.Refs != 1 || rep.Kept != 1 {
		t.Fatalf("first run after the delete: %+v", rep)
	}
	if refs := w.keys("lfs/refs/"); len(refs) != 0 {
		t.Fatalf("references of the deleted log: %v", refs)
	}
	w.check("deleted")
	// Uploaded again within the grace period: kept.
	w.put(again, data)
	w.settle()
	w.serves(again, data)
	// Deleted again: gone after the grace period.
	if err := w.meta.DeleteRepo(ctx, "alice", "proj"); err != nil {
		t.Fatal(err)
	}
	w.gc()
	if got := w.keys("lfs/objects/"); len(got) != 1 {
		t.Fatalf("object gone before the grace period: %v", got)
	}
	w.settle()
	w.empty(t, "alice", "after the purge")
}

// TestForkSourceDeletedMidway: the source is deleted, and GC takes its
// references, while the fork copies them. The fork copies what it still
// finds and succeeds; it never names an object it does not hold.
func TestForkSourceDeletedMidway(t *testing.T) {
	for _, dst := range []string{"alice", "bob"} {
		t.Run(dst, func(t *testing.T) {
			ctx := context.Background()
			w := newForkWorld(t, 0, "alice", "bob")
			w.forks.opts.Parallel = 1
			src := w.create("alice", "src")
			objs := objectsOf(4, "midway")
			for _, o := range objs {
				w.put(src, o)
			}
			reads := 0
			w.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
				if c.Op == faultstore.OpGet && strings.HasPrefix(c.Key, refKey(src.ID, "")) {
					if reads++; reads == 3 {
						if err := w.plain.DeleteRepo(ctx, "alice", "src"); err != nil {
							t.Errorf("delete: %v", err)
						}
						w.gc()
					}
				}
				return faultstore.Fault{}
			})
			fork, err := w.meta.ForkRepo(ctx, "alice", "src", dst, "fork")
			w.fs.SetPlan(nil)
			if err != nil {
				t.Fatal(err)
			}
			w.check("after the race")
			var held []string
			for _, k := range w.keys(refKey(fork.ID, "")) {
				held = append(held, strings.TrimPrefix(k, refKey(fork.ID, "")))
			}
			if len(held) != 2 {
				t.Fatalf("the fork references %d objects, want the 2 copied before the source went", len(held))
			}
			w.settle()
			w.check("later")
		})
	}
}

// TestForkWhileCollecting: an object the source references is being
// deleted by GC (a fresh doom: the source is going). The fork is
// refused with a 503 to retry, and leaves no fork.
func TestForkWhileCollecting(t *testing.T) {
	ctx := context.Background()
	w := newForkWorld(t, 0, "alice")
	src := w.create("alice", "src")
	data := []byte("doomed")
	w.put(src, data)
	mark := fmt.Sprintf(`{"v":1,"firstSeen":%q,"doomed":%q}`, w.clock().Add(-3*time.Hour).UTC().Format(time.RFC3339), w.clock().UTC().Format(time.RFC3339))
	if _, err := w.inner.Put(ctx, gc.LFSMarkKey("alice", oidOf(data)), strings.NewReader(mark), int64(len(mark))); err != nil {
		t.Fatal(err)
	}
	_, err := w.meta.ForkRepo(ctx, "alice", "src", "alice", "fork")
	var refusal *ForkRefusal
	if !errors.As(err, &refusal) || refusal.HTTPStatus() != http.StatusServiceUnavailable || !errors.Is(err, ErrCollecting) ||
		!strings.Contains(err.Error(), "is being garbage collected; retry the fork in a few minutes") {
		t.Fatalf("fork of an object being collected: %v", err)
	}
	if _, err := w.meta.Repo(ctx, "alice", "fork"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("refused fork visible: %v", err)
	}
	if refs := w.keys("lfs/refs/"); len(refs) != 1 {
		t.Fatalf("references after the refused fork: %v", refs)
	}
}

// TestForkBadInput: what is not a tenant or a repository id is refused
// before anything is read or written.
func TestForkBadInput(t *testing.T) {
	store := faultstore.New(memstore.New())
	f := NewForks(store, ForkOptions{})
	for _, args := range [][4]string{
		{"", "01A", "bob", "01B"},
		{"alice", "", "bob", "01B"},
		{"alice", "01A", "b/ob", "01B"},
		{"alice", "01A", "bob", "01B/.."},
		{"alice", "01A", "alice", "01A"},
	} {
		if err := f.CopyToFork(context.Background(), args[0], args[1], args[2], args[3]); err == nil {
			t.Errorf("CopyToFork%q succeeded", args)
		}
	}
	if n := store.Count(faultstore.OpList) + store.Count(faultstore.OpGet) + store.Count(faultstore.OpPut); n != 0 {
		t.Fatalf("%d store calls for bad input", n)
	}
}

// TestForkAcrossManyAtOnce: a fork across tenants copies a page of
// objects at once, and they all count in the one usage record of the
// destination: one addition per page, not one per object racing the
// others for the record (which, on the filesystem store, lost every
// compare-and-swap).
func TestForkAcrossManyAtOnce(t *testing.T) {
	ctx := context.Background()
	fsys, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Store: fsys, Auth: tableAuth{}})
	if err != nil {
		t.Fatal(err)
	}
	src := h.Repo(access.Grant{RepoID: "01SRC", Tenant: "alice", Level: access.Write})
	objs := objectsOf(64, "many")
	for _, o := range objs {
		if err := src.Put(ctx, oidOf(o), int64(len(o)), bytes.NewReader(o)); err != nil {
			t.Fatal(err)
		}
	}
	f := NewForks(fsys, ForkOptions{Parallel: 16})
	if err := f.CopyToFork(ctx, "alice", "01SRC", "bob", "01DST"); err != nil {
		t.Fatal(err)
	}
	if got, _ := usage(ctx, fsys, "bob"); got != sizeOf(objs) {
		t.Fatalf("bob's usage %d, want %d", got, sizeOf(objs))
	}
	dst := h.Repo(access.Grant{RepoID: "01DST", Tenant: "bob", Level: access.Read})
	for _, o := range objs {
		if _, err := dst.Size(ctx, oidOf(o)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestForkAcrossRacesGC: the destination tenant holds the object
// already, unreferenced (its repository deleted) and sighted by GC more
// than the grace period before; the fork finds it held and copies
// nothing, and GC runs before the fork's reference lands. The fork's
// fence revived the sighting, so GC's doom loses and the object stays.
func TestForkAcrossRacesGC(t *testing.T) {
	ctx := context.Background()
	w := newForkWorld(t, 0, "alice", "bob")
	src := w.create("alice", "src")
	data := []byte("bob had it, then dropped it")
	w.put(src, data)
	old := w.create("bob", "old")
	w.put(old, data)
	if err := w.plain.DeleteRepo(ctx, "bob", "old"); err != nil {
		t.Fatal(err)
	}
	w.gc() // sights bob's object
	w.advance(2 * time.Hour)
	var once sync.Once
	w.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpPut && strings.HasPrefix(c.Key, "lfs/refs/") {
			once.Do(func() { w.gc() })
		}
		return faultstore.Fault{}
	})
	fork, err := w.meta.ForkRepo(ctx, "alice", "src", "bob", "fork")
	w.fs.SetPlan(nil)
	if err != nil {
		t.Fatal(err)
	}
	w.check("after the race")
	w.serves(fork, data)
	w.settle()
	w.check("later runs")
	w.serves(fork, data)
}
