package gc_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/gc"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/objstore/s3store"
	"github.com/ghost-scm/ghost/internal/testkit"
	"github.com/ghost-scm/ghost/internal/wal"
)

var errCrashed = errors.New("injected: process died")

// crashStore simulates a process that dies at a chosen operation: the
// armed predicate picks the operation, which fails, and so does every
// mutation after it until reset (the dead process cleans nothing up).
type crashStore struct {
	objstore.Store
	mu    sync.Mutex
	armed func(op, key string) bool
	dead  bool
}

func (s *crashStore) arm(f func(op, key string) bool) {
	s.mu.Lock()
	s.armed, s.dead = f, false
	s.mu.Unlock()
}

func (s *crashStore) check(op, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return errCrashed
	}
	if s.armed != nil && s.armed(op, key) {
		s.dead = true
		return errCrashed
	}
	return nil
}

func (s *crashStore) Put(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	if err := s.check("put", key); err != nil {
		return objstore.Info{}, err
	}
	return s.Store.Put(ctx, key, r, size)
}

func (s *crashStore) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (objstore.Info, error) {
	if err := s.check("cas", key); err != nil {
		return objstore.Info{}, err
	}
	return s.Store.PutIfMatch(ctx, key, r, size, etag)
}

func (s *crashStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	if err := s.check("cas", key); err != nil {
		return objstore.Info{}, err
	}
	return s.Store.PutIfAbsent(ctx, key, r, size)
}

func (s *crashStore) Delete(ctx context.Context, key string) error {
	if err := s.check("delete", key); err != nil {
		return err
	}
	return s.Store.Delete(ctx, key)
}

func (s *crashStore) Copy(ctx context.Context, src, dst string) error {
	if err := s.check("copy", dst); err != nil {
		return err
	}
	return s.Store.Copy(ctx, src, dst)
}

func noSleep(ctx context.Context, d time.Duration) error { return ctx.Err() }

const (
	grace     = 24 * time.Hour
	retention = 72 * time.Hour
)

// history drives random operations on one store through wal's API and
// keeps the model GC is checked against: which logs have a name.
type history struct {
	t     *testing.T
	rnd   *rand.Rand
	clk   *testkit.Clock
	store *crashStore
	log   *wal.Log
	ids   io.Reader // entropy for log ids
	named map[string]bool
	all   []string // every log id ever used
	n     int      // object id counter

	reasons map[gc.Reason]int // objects collected, over every run
	kept    int
	// unrefSince models GC's gc/unreferenced markers: when a GC run first
	// saw an object that waits by marker (an entry of a compacted log, a
	// checkpoint) unreferenced.
	unrefSince map[string]time.Time
	// readers are reads in flight: each read an index and may still be
	// fetching what it referenced.
	readers []reader
	// folded counts entries and checkpoints collected after they stopped
	// being referenced (by a compaction), over every run.
	folded int
	// blind runs GC without names (Options.Live nil).
	blind bool
	// lists counts compactions that landed an index with two or more
	// checkpoints, and rollups those that replaced a checkpoint while
	// keeping an older one (docs/adr/0051-geometric-checkpoints.md).
	lists, rollups int
}

// reader is a read in flight: it read repo's index at at and needs keys.
type reader struct {
	repo string
	at   time.Time
	keys []string
}

func newHistory(t *testing.T, base objstore.Store, seed int64) *history {
	rnd := rand.New(rand.NewSource(seed))
	clk := testkit.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cs := &crashStore{Store: base}
	return &history{
		t: t, rnd: rnd, clk: clk, store: cs,
		log:        wal.New(cs, wal.Options{Sleep: noSleep, Now: clk.Now, MaxAttempts: 2}),
		ids:        ulid.Monotonic(rand.New(rand.NewSource(seed+1)), 0),
		named:      make(map[string]bool),
		reasons:    make(map[gc.Reason]int),
		unrefSince: make(map[string]time.Time),
	}
}

// newID is a fresh log id as the metadata layer makes them: a ULID of now.
func (h *history) newID() string {
	id := ulid.MustNew(ulid.Timestamp(h.clk.Now()), h.ids).String()
	h.all = append(h.all, id)
	return id
}

func (h *history) oid() string { h.n++; return fmt.Sprintf("%040x", h.n) }

func (h *history) pickNamed() (string, bool) {
	var ids []string
	for id := range h.named {
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return "", false
	}
	sort.Strings(ids)
	return ids[h.rnd.Intn(len(ids))], true
}

// push commits (or, crashed, fails to commit) a random transition on one
// ref: a fast-forward, a force-push or a ref deletion are all the same to
// the log, which checks only the old id.
func (h *history) push(ctx context.Context, repo string, crash bool) {
	x, _, err := h.log.ReadIndex(ctx, repo)
	if err != nil || x.Deleted {
		return
	}
	ref := fmt.Sprintf("refs/heads/b%d", h.rnd.Intn(3))
	old := x.Ref(ref)
	if old == "" {
		old = wal.ZeroID
	}
	nw := h.oid()
	if old != wal.ZeroID && h.rnd.Intn(4) == 0 {
		nw = wal.ZeroID
	}
	pack := fmt.Sprintf("PACK %s %s", repo, nw)
	p := wal.Push{
		Transitions: []wal.Transition{{Ref: ref, Old: old, New: nw}},
		PushedBy:    "prop", Pack: strings.NewReader(pack), PackSize: int64(len(pack)),
	}
	if h.rnd.Intn(2) == 0 {
		idx := "IDX " + pack
		p.PackIndex, p.PackIndexSize = strings.NewReader(idx), int64(len(idx))
	}
	if crash {
		// The process dies at the commit point: the entry (and its .idx)
		// are written, the index never is, and nobody deletes them.
		h.store.arm(func(op, key string) bool { return op == "cas" && strings.HasSuffix(key, "/index") })
		defer h.store.arm(nil)
	}
	_, err = h.log.Commit(ctx, repo, p)
	if crash && err == nil {
		h.t.Fatalf("crashed push to %s committed", repo)
	}
	if !crash && err != nil {
		h.t.Fatalf("push to %s: %v", repo, err)
	}
}

// compact folds repo's log through its head with wal.Log.Compact and a
// tiny checkpoint pack that keeps a random number of the log's
// checkpoints (a geometric roll-up, or a full repack when it keeps none:
// docs/adr/0051-geometric-checkpoints.md), so histories hold lists of
// checkpoints and replace some of them. A crashed compaction dies at the
// index CAS, after its PUTs; a lost one builds from an index that another
// compaction has already folded past (ErrAlreadyCompacted). Both leave an
// unreferenced checkpoint.
func (h *history) compact(ctx context.Context, repo string, crash, lose bool) {
	x, _, err := h.log.ReadIndex(ctx, repo)
	if err != nil || x.Deleted || x.Seq <= x.CompactedThroughSeq {
		return
	}
	p := h.checkpointPack(x)
	if lose {
		if _, err := h.log.Compact(ctx, repo, h.checkpointPack(x)); err != nil {
			h.t.Fatalf("compact %s: %v", repo, err)
		}
		p = h.checkpointPack(x)
	}
	if crash {
		h.store.arm(func(op, key string) bool { return op == "cas" && strings.HasSuffix(key, "/index") })
		defer h.store.arm(nil)
	}
	res, err := h.log.Compact(ctx, repo, p)
	if err == nil && p.Keep > 0 {
		h.lists++
		if res.Replaced > 0 {
			h.rollups++
		}
	}
	switch {
	case lose && !errors.Is(err, wal.ErrAlreadyCompacted):
		h.t.Fatalf("lost compaction of %s: %v", repo, err)
	case crash && err == nil:
		h.t.Fatalf("crashed compaction of %s landed", repo)
	case !crash && !lose && err != nil:
		h.t.Fatalf("compact %s: %v", repo, err)
	}
}

// checkpointPack is a distinct tiny checkpoint of at that keeps a random
// number of at's checkpoints, with a .idx half of the time.
func (h *history) checkpointPack(at *wal.Index) wal.CheckpointPack {
	pack := fmt.Sprintf("CKPT %d %s", at.Seq, h.oid())
	keep := h.rnd.Intn(min(len(at.Checkpoints), wal.MaxCheckpoints-1) + 1)
	p := wal.CheckpointPack{At: at, Keep: keep, Pack: strings.NewReader(pack), Size: int64(len(pack)), SHA256: sha256.Sum256([]byte(pack))}
	if h.rnd.Intn(2) == 0 {
		idx := "IDX " + pack
		p.PackIndex, p.PackIndexSize = strings.NewReader(idx), int64(len(idx))
	}
	return p
}

// read starts a read in flight of repo: it reads the index now and will
// fetch what it references later (checked after every GC run).
func (h *history) read(ctx context.Context, repo string) {
	x, _, err := h.log.ReadIndex(ctx, repo)
	if err != nil {
		h.t.Fatal(err)
	}
	have := listAll(h.t, h.store.Store)
	r := reader{repo: repo, at: h.clk.Now()}
	for k := range referenced(repo, x) {
		if _, ok := have[k]; ok { // a .idx is optional
			r.keys = append(r.keys, k)
		}
	}
	sort.Strings(r.keys)
	h.readers = append(h.readers, r)
}

// step runs one random operation.
func (h *history) step(ctx context.Context) {
	switch k := h.rnd.Intn(26); {
	case k < 2: // create
		id := h.newID()
		if err := h.log.Init(ctx, id); err != nil {
			h.t.Fatal(err)
		}
		h.named[id] = true
	case k < 9: // push, force-push, ref delete
		if id, ok := h.pickNamed(); ok {
			h.push(ctx, id, false)
		}
	case k < 11: // crashed push
		if id, ok := h.pickNamed(); ok {
			h.push(ctx, id, true)
		}
	case k < 12: // fork
		if src, ok := h.pickNamed(); ok {
			dst := h.newID()
			if err := h.log.Fork(ctx, src, dst); err != nil && !errors.Is(err, wal.ErrRepoDeleted) {
				h.t.Fatal(err)
			} else if err == nil {
				h.named[dst] = true // the name is claimed after the copy
			}
		}
	case k < 13: // crashed fork: mid-copy, or just before its index
		if src, ok := h.pickNamed(); ok {
			dst := h.newID()
			copies := h.rnd.Intn(4)
			h.store.arm(func(op, key string) bool {
				if op == "copy" {
					copies--
					return copies < 0
				}
				return op == "cas" && key == wal.IndexKey(dst)
			})
			_ = h.log.Fork(ctx, src, dst)
			h.store.arm(nil)
		}
	case k < 14: // crashed fork after its index: copied, but the name was lost
		if src, ok := h.pickNamed(); ok {
			_ = h.log.Fork(ctx, src, h.newID())
		}
	case k < 15: // crashed create: the log was made, the name released
		if err := h.log.Init(ctx, h.newID()); err != nil {
			h.t.Fatal(err)
		}
	case k < 16: // create whose Init died: a name and no index
		h.named[h.newID()] = true
	case k < 17: // delete
		if id, ok := h.pickNamed(); ok {
			if err := h.log.Delete(ctx, id); err != nil {
				h.t.Fatal(err)
			}
			delete(h.named, id)
		}
	case k < 18: // delete whose purge died after the tombstone
		if id, ok := h.pickNamed(); ok {
			h.store.arm(func(op, key string) bool { return op == "delete" })
			_ = h.log.Delete(ctx, id)
			h.store.arm(nil)
			delete(h.named, id)
		}
	case k < 20: // compaction
		if id, ok := h.pickNamed(); ok {
			h.compact(ctx, id, false, false)
		}
	case k < 21: // compaction that died after its PUTs
		if id, ok := h.pickNamed(); ok {
			h.compact(ctx, id, true, false)
		}
	case k < 22: // compaction that lost to another
		if id, ok := h.pickNamed(); ok {
			h.compact(ctx, id, false, true)
		}
	case k < 24: // a read starts (and is still in flight for a while)
		if id, ok := h.pickNamed(); ok {
			h.read(ctx, id)
		}
	default:
		h.clk.Advance(time.Duration(h.rnd.Intn(30)) * time.Hour)
	}
}

func (h *history) live(context.Context) (map[string]bool, error) {
	out := make(map[string]bool, len(h.named))
	for id := range h.named {
		out[id] = true
	}
	return out, nil
}

// snapshot is the store's state just before a GC run.
type snapshot struct {
	keys    map[string]int64
	indexes map[string]*wal.Index // absent logs are missing
}

func (h *history) snapshot(ctx context.Context) snapshot {
	s := snapshot{keys: listAll(h.t, h.store.Store), indexes: make(map[string]*wal.Index)}
	for _, id := range h.all {
		x, etag, err := h.log.ReadIndex(ctx, id)
		if err != nil {
			h.t.Fatal(err)
		}
		if etag != "" {
			s.indexes[id] = x
		}
	}
	return s
}

func listAll(t *testing.T, s objstore.Store) map[string]int64 {
	t.Helper()
	out := make(map[string]int64)
	if err := objstore.Walk(context.Background(), s, "", func(o objstore.Info) error {
		out[o.Key] = o.Size
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// referenced is computed here from the layers, independently of
// wal.Index.ReferencedKeys, which GC uses.
func referenced(id string, x *wal.Index) map[string]bool {
	out := make(map[string]bool)
	if x == nil || x.Deleted {
		return out
	}
	for _, c := range x.Checkpoints {
		base := fmt.Sprintf("repos/%s/checkpoints/%020d-%x", id, c.Seq, c.SHA256)
		out[base+".pack"] = true
		out[base+".idx"] = true
	}
	for _, l := range x.Layers {
		out["repos/"+id+"/entries/"+l.ULID.String()+".pack"] = true
		out["repos/"+id+"/entries/"+l.ULID.String()+".idx"] = true
	}
	return out
}

// entryTime parses repos/<id>/entries/<ULID>.{pack,idx}, and
// repos/<id>/checkpoints/<seq>-<sha256>.{pack,idx} (checkpoint set, no
// time).
func entryTime(t *testing.T, key string) (id string, at time.Time, checkpoint, ok bool) {
	rest, ok := strings.CutPrefix(key, "repos/")
	if !ok {
		return "", time.Time{}, false, false
	}
	if id, _, ok := strings.Cut(rest, "/checkpoints/"); ok {
		return id, time.Time{}, true, true
	}
	id, name, ok := strings.Cut(rest, "/entries/")
	if !ok {
		return "", time.Time{}, false, false
	}
	u, err := ulid.ParseStrict(strings.TrimSuffix(strings.TrimSuffix(name, ".pack"), ".idx"))
	if err != nil {
		t.Fatalf("unexpected key %s", key)
	}
	return id, ulid.Time(u.Time()), false, true
}

// runGC runs one collection and checks it against the snapshot taken just
// before: nothing referenced went, every orphan past the grace period
// went, young orphans stayed, and every named log still reads whole.
func (h *history) runGC(ctx context.Context, pageSize int) gc.Report {
	t := h.t
	before := h.snapshot(ctx)
	now := h.clk.Now()
	var deleted []string
	live := h.live
	if h.blind {
		live = nil
	}
	rep, err := gc.New(h.store, gc.Options{
		Grace: grace, Retention: retention, Now: h.clk.Now, PageSize: pageSize,
		Concurrency: 3, BatchSize: 2, Live: live,
		OnObject: func(o gc.Object) {
			deleted = append(deleted, o.Key)
			h.reasons[o.Reason]++
		},
	}).Run(ctx)
	h.kept += rep.Kept
	if err != nil {
		t.Fatalf("gc: %v", err)
	}
	after := listAll(t, h.store.Store)
	judged := make(map[string]bool)
	for _, k := range deleted {
		if _, ok := after[k]; ok {
			t.Errorf("gc reported %s deleted, but it is there", k)
		}
	}
	orphanLog := func(id string) bool {
		x := before.indexes[id]
		u, err := ulid.ParseStrict(id)
		return !h.blind && err == nil && !h.named[id] && (x == nil || !x.Deleted) && now.Sub(ulid.Time(u.Time())) > grace
	}
	for k := range before.keys {
		_, there := after[k]
		if strings.HasSuffix(k, "/index") {
			if !there {
				t.Errorf("gc deleted index %s", k)
			}
			continue
		}
		id, at, checkpoint, ok := entryTime(t, k)
		if !ok {
			continue // gc's own markers
		}
		x := before.indexes[id]
		// An object that waits by marker: GC must have seen it
		// unreferenced for the grace period, on an earlier run.
		first, seen := h.unrefSince[k]
		byMarker := x != nil && !x.Deleted && !orphanLog(id) && !referenced(id, x)[k] && (checkpoint || x.CompactedThroughSeq > 0)
		if byMarker {
			judged[k] = true
			if !seen {
				h.unrefSince[k] = now
			}
		}
		switch {
		case referenced(id, x)[k] && !orphanLog(id):
			if !there {
				t.Errorf("gc deleted referenced %s", k)
			}
		case x != nil && x.Deleted:
			// Leftovers of a tombstone: retention, checked at the end.
		case orphanLog(id):
			if there {
				t.Errorf("gc kept %s of orphan log %s", k, id)
			}
		case x == nil && (h.blind || !h.named[id]):
			if !there {
				t.Errorf("gc deleted %s of an unnamed log without index (a fork may be copying)", k)
			}
		case byMarker:
			due := seen && now.Sub(first) > grace && (checkpoint || now.Sub(at) > grace)
			switch {
			case due && there:
				t.Errorf("gc kept %s, unreferenced since %v (%v)", k, first, now.Sub(first))
			case !due && !there:
				t.Errorf("gc deleted %s within the grace of its becoming unreferenced (first seen %v, seen %v, now %v)", k, first, seen, now)
			case !there:
				h.folded++
			}
		case now.Sub(at) > grace:
			if there {
				t.Errorf("gc kept orphan %s, %v old", k, now.Sub(at))
			}
		default:
			if !there {
				t.Errorf("gc deleted young orphan %s, %v old", k, now.Sub(at))
			}
		}
	}
	for k := range h.unrefSince {
		if _, there := after[k]; !there || !judged[k] {
			delete(h.unrefSince, k) // gone, or referenced again: GC drops its marker
		}
	}
	for id := range before.indexes {
		if orphanLog(id) && hasEntries(before.keys, id) {
			if x, _, err := h.log.ReadIndex(ctx, id); err != nil || !x.Deleted {
				t.Errorf("orphan log %s not tombstoned: %+v %v", id, x, err)
			}
		}
	}
	// Every named log still reads, pack by pack.
	for id := range h.named {
		x, _, err := h.log.ReadIndex(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range x.Layers {
			rc, _, err := h.log.OpenPack(ctx, id, l)
			if err == nil {
				_, err = io.Copy(io.Discard, rc)
				rc.Close()
			}
			if err != nil {
				t.Errorf("named log %s layer %s after gc: %v", id, l.ULID, err)
			}
		}
		for _, c := range x.Checkpoints {
			rc, err := h.log.OpenCheckpoint(ctx, id, c)
			if err == nil {
				_, err = io.Copy(io.Discard, rc)
				rc.Close()
			}
			if err != nil {
				t.Errorf("named log %s checkpoint %d after gc: %v", id, c.Seq, err)
			}
		}
	}
	// Every read in flight for less than the grace period still finds
	// what the index it read referenced, even if a compaction has since
	// dropped it (a delete purges at once: its readers are not counted).
	readers := h.readers[:0]
	for _, r := range h.readers {
		if now.Sub(r.at) > grace || !h.named[r.repo] {
			continue
		}
		readers = append(readers, r)
		for _, k := range r.keys {
			if _, ok := after[k]; !ok {
				t.Errorf("gc deleted %s under a read of %s in flight since %v (%v ago)", k, r.repo, r.at, now.Sub(r.at))
			}
		}
	}
	h.readers = readers
	if t.Failed() {
		t.FailNow()
	}
	return rep
}

func hasEntries(keys map[string]int64, id string) bool {
	for k := range keys {
		if strings.HasPrefix(k, "repos/"+id+"/entries/") {
			return true
		}
	}
	return false
}

// finish lets every grace period and retention pass and checks that only
// what is needed is left: indexes, referenced objects, and entries of
// unnamed logs without an index younger than the grace period (none,
// once it has passed: those logs are orphans then).
func (h *history) finish(ctx context.Context, pageSize int) {
	t := h.t
	h.clk.Advance(grace + time.Hour)
	h.runGC(ctx, pageSize) // marks tombstones with leftovers
	h.clk.Advance(retention + time.Hour)
	h.runGC(ctx, pageSize) // retention over
	rest := listAll(t, h.store.Store)
	need := make(map[string]bool)
	for _, id := range h.all {
		x, etag, err := h.log.ReadIndex(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if etag != "" {
			need[wal.IndexKey(id)] = true
		} else if h.blind {
			// Without names, entries of a log without an index stay.
			for _, k := range entriesOf(t, h.store, id) {
				need[k] = true
			}
			for k := range listAll(t, h.store) {
				if strings.HasPrefix(k, "repos/"+id+"/checkpoints/") {
					need[k] = true // a fork copies its source's checkpoint first
				}
			}
		}
		for k := range referenced(id, x) {
			need[k] = true
		}
	}
	for k := range rest {
		if !need[k] {
			t.Errorf("left after every grace and retention: %s", k)
		}
	}
}

// propertyRun is the property test body: random histories with GC runs
// interleaved, on one backend.
func propertyRun(t *testing.T, newStore func(t *testing.T) objstore.Store, seeds, steps, pageSize int, blind bool) {
	var total struct {
		sync.Mutex
		reasons        map[gc.Reason]int
		folded         int
		lists, rollups int
	}
	total.reasons = make(map[gc.Reason]int)
	defer func() {
		// The histories must have produced every kind of garbage, or the
		// property proves less than it claims.
		for _, r := range []gc.Reason{gc.Unreferenced, gc.OrphanLog, gc.Tombstoned} {
			if total.reasons[r] == 0 && !t.Failed() && !(blind && r == gc.OrphanLog) {
				t.Errorf("no history produced %s garbage", r)
			}
		}
		if total.folded == 0 && !t.Failed() {
			t.Error("no history collected an object that waits by record (folded entry, checkpoint)")
		}
		if (total.lists == 0 || total.rollups == 0) && !t.Failed() {
			t.Errorf("the histories landed %d lists of checkpoints and %d roll-ups that replaced one", total.lists, total.rollups)
		}
	}()
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			ctx := context.Background()
			h := newHistory(t, newStore(t), int64(seed))
			h.blind = blind
			for i := 0; i < steps; i++ {
				h.step(ctx)
				if h.rnd.Intn(15) == 0 {
					h.runGC(ctx, pageSize)
				}
			}
			h.finish(ctx, pageSize)
			t.Logf("collected %v (%d waited by record: folded, superseded, orphan checkpoints), kept %d young or retained", h.reasons, h.folded, h.kept)
			total.Lock()
			for r, n := range h.reasons {
				total.reasons[r] += n
			}
			total.folded += h.folded
			total.lists += h.lists
			total.rollups += h.rollups
			total.Unlock()
		})
	}
}

// TestPropertyMemstore: GC never deletes a referenced object and deletes
// every orphan past the grace period, over random histories of pushes,
// force-pushes, forks, deletes and crashes (docs/adr/0040).
func TestPropertyMemstore(t *testing.T) {
	propertyRun(t, func(*testing.T) objstore.Store { return memstore.New() }, 40, 150, 7, false)
}

// TestPropertyWithoutNames: the same property when GC does not know the
// repository names: no orphan logs are collected, entries of logs without
// an index are kept, everything else holds.
func TestPropertyWithoutNames(t *testing.T) {
	propertyRun(t, func(*testing.T) objstore.Store { return memstore.New() }, 20, 150, 7, true)
}

// TestPropertyFsstore is the same property on the filesystem store.
func TestPropertyFsstore(t *testing.T) {
	propertyRun(t, func(t *testing.T) objstore.Store {
		s, err := fsstore.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, 8, 100, 5, false)
}

// TestPropertyS3 is the same property on the S3 backend, against an
// in-process S3 server on 127.0.0.1, with small pages so that GC's
// listing paginates.
func TestPropertyS3(t *testing.T) {
	propertyRun(t, newS3, 4, 80, 4, false)
}

func newS3(t *testing.T) objstore.Store {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket("ghost"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	s, err := s3store.New(context.Background(), s3store.Config{
		Endpoint: srv.URL, Region: "us-east-1", Bucket: "ghost", Prefix: "p", UsePathStyle: true,
		AWSConfig: &aws.Config{
			Region:      "us-east-1",
			Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hookStore runs a hook once, right after the first listing of repos/.
type hookStore struct {
	objstore.Store
	once sync.Once
	hook func()
}

func (s *hookStore) List(ctx context.Context, prefix, after string, limit int) ([]objstore.Info, error) {
	page, err := s.Store.List(ctx, prefix, after, limit)
	if prefix == "repos/" {
		s.once.Do(s.hook)
	}
	return page, err
}

// TestIndexReadAfterListing: an old unreferenced entry that a CAS
// references after GC listed it is kept, because GC reads the index after
// the listing. (A fork's copies carry their source's old ULIDs, so age
// alone would not protect them.)
func TestIndexReadAfterListing(t *testing.T) {
	ctx := context.Background()
	clk := testkit.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	mem := memstore.New()
	cs := &crashStore{Store: mem}
	l := wal.New(cs, wal.Options{Sleep: noSleep, Now: clk.Now, MaxAttempts: 1})
	const repo = "r1"
	if _, err := l.Commit(ctx, repo, wal.Push{
		Transitions: []wal.Transition{{Ref: "refs/heads/main", Old: wal.ZeroID, New: fmt.Sprintf("%040x", 1)}},
		Pack:        strings.NewReader("one"), PackSize: 3,
	}); err != nil {
		t.Fatal(err)
	}
	pack := "two"
	cs.arm(func(op, key string) bool { return op == "cas" })
	res, err := l.Commit(ctx, repo, wal.Push{
		Transitions: []wal.Transition{{Ref: "refs/heads/main", Old: fmt.Sprintf("%040x", 1), New: fmt.Sprintf("%040x", 2)}},
		Pack:        strings.NewReader(pack), PackSize: int64(len(pack)),
	})
	cs.arm(nil)
	if err == nil {
		t.Fatal("crashed commit landed")
	}
	orphan := wal.EntryKey(repo, res.ULID)
	clk.Advance(10 * grace)
	hs := &hookStore{Store: mem, hook: func() {
		// A writer references the old entry after GC listed it.
		x, etag, err := l.ReadIndex(ctx, repo)
		if err != nil {
			t.Error(err)
			return
		}
		x.Seq++
		x.Layers = append(x.Layers, wal.Layer{ULID: res.ULID, SHA256: sha256.Sum256([]byte(pack)), Size: int64(len(pack))})
		b, err := x.MarshalBinary()
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := mem.PutIfMatch(ctx, wal.IndexKey(repo), bytes.NewReader(b), int64(len(b)), etag); err != nil {
			t.Error(err)
		}
	}}
	rep, err := gc.New(hs, gc.Options{Now: clk.Now}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listAll(t, mem)[orphan]; !ok || rep.Objects != 0 {
		t.Fatalf("entry referenced after the listing was deleted (report %+v)", rep)
	}
}

// TestDryRunChangesNothing: a dry run reports what a real run then
// deletes, byte for byte, and leaves the store as it was.
func TestDryRunChangesNothing(t *testing.T) {
	ctx := context.Background()
	h := newHistory(t, memstore.New(), 99)
	for i := 0; i < 200; i++ {
		h.step(ctx)
	}
	h.clk.Advance(2 * grace)
	before := listAll(t, h.store.Store)
	var would []gc.Object
	dry, err := gc.New(h.store, gc.Options{DryRun: true, Now: h.clk.Now, Live: h.live,
		OnObject: func(o gc.Object) { would = append(would, o) }}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after := listAll(t, h.store.Store); len(after) != len(before) {
		t.Fatalf("dry run changed the store: %d keys, then %d", len(before), len(after))
	}
	if dry.Objects == 0 {
		t.Fatal("history left nothing to collect; the test proves nothing")
	}
	var did []gc.Object
	real, err := gc.New(h.store, gc.Options{Now: h.clk.Now, Live: h.live,
		OnObject: func(o gc.Object) { did = append(did, o) }}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if real.Objects != dry.Objects || real.Bytes != dry.Bytes || real.OrphanLogs != dry.OrphanLogs || fmt.Sprint(did) != fmt.Sprint(would) {
		t.Fatalf("dry run %+v %v, real run %+v %v", dry, would, real, did)
	}
}

// TestNoNamesMeansNoOrphanLogs: with an empty name space GC does not
// take every log for an orphan.
func TestNoNamesMeansNoOrphanLogs(t *testing.T) {
	ctx := context.Background()
	h := newHistory(t, memstore.New(), 7)
	id := h.newID()
	h.named[id] = true
	h.push(ctx, id, false)
	h.clk.Advance(3 * grace)
	rep, err := gc.New(h.store, gc.Options{Now: h.clk.Now, Live: func(context.Context) (map[string]bool, error) {
		return nil, gc.ErrNoNames
	}}).Run(ctx)
	if err != nil || !rep.NamesUnknown || rep.OrphanLogs != 0 || rep.Objects != 0 {
		t.Fatalf("report %+v, %v", rep, err)
	}
}

// TestFoldedWaitForGraceAfterCompaction: the entries a compaction folds
// and the checkpoint a later one supersedes carry old names, but go only
// once GC has seen them unreferenced for the grace period, so a read that
// began on the index before the compaction finishes. A checkpoint whose
// compaction crashed after its PUT, and one that lost its CAS, go by the
// same rule.
func TestFoldedWaitForGraceAfterCompaction(t *testing.T) {
	ctx := context.Background()
	h := newHistory(t, memstore.New(), 11)
	id := h.newID()
	h.named[id] = true
	if err := h.log.Init(ctx, id); err != nil {
		t.Fatal(err)
	}
	h.push(ctx, id, false)
	h.push(ctx, id, false)
	h.clk.Advance(3 * grace) // the layers' ULIDs are long past the grace
	h.read(ctx, id)
	folded := append([]string(nil), h.readers[0].keys...)
	h.compact(ctx, id, false, false)
	h.compact(ctx, id, true, false) // nothing to fold: a no-op
	h.push(ctx, id, false)
	h.compact(ctx, id, true, false) // crashed after its PUTs
	run := func() gc.Report {
		t.Helper()
		rep, err := gc.New(h.store, gc.Options{Now: h.clk.Now, Grace: grace, Live: h.live}).Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	have := func(keys []string) int {
		all := listAll(t, h.store)
		n := 0
		for _, k := range keys {
			if _, ok := all[k]; ok {
				n++
			}
		}
		return n
	}
	orphans := func() []string {
		x, _, err := h.log.ReadIndex(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		ref := referenced(id, x)
		var out []string
		for k := range listAll(t, h.store) {
			if _, _, _, ok := entryTime(t, k); ok && strings.HasPrefix(k, "repos/"+id+"/") && !ref[k] {
				out = append(out, k)
			}
		}
		sort.Strings(out)
		return out
	}
	unref := orphans()
	if have(folded) != len(folded) || len(unref) < len(folded)+1 {
		t.Fatalf("folded %v, unreferenced %v", folded, unref)
	}
	if rep := run(); rep.Objects != 0 || have(unref) != len(unref) {
		t.Fatalf("first sighting deleted: %+v", rep)
	}
	h.clk.Advance(grace - time.Minute)
	if rep := run(); rep.Objects != 0 || have(unref) != len(unref) {
		t.Fatalf("deleted within the grace of the compaction: %+v", rep)
	}
	h.clk.Advance(2 * time.Minute)
	if rep := run(); rep.Objects != len(unref) || have(unref) != 0 {
		t.Fatalf("kept past the grace: %+v, left %d of %v", rep, have(unref), unref)
	}
	if n := len(listAll(t, h.store)) - len(nonMarkers(listAll(t, h.store))); n != 0 {
		t.Fatalf("%d markers left after their objects went", n)
	}

	// A later compaction supersedes the checkpoint; one that lost its CAS
	// leaves another. Both wait a full grace from this sighting.
	h.push(ctx, id, false)
	h.compact(ctx, id, false, true)
	unref = orphans()
	if len(unref) < 3 { // the old checkpoint, the lost one, the folded entry
		t.Fatalf("unreferenced %v", unref)
	}
	run()
	h.clk.Advance(grace)
	if rep := run(); rep.Objects != 0 {
		t.Fatalf("deleted within the grace of the compaction: %+v", rep)
	}
	h.clk.Advance(time.Minute)
	if rep := run(); rep.Objects != len(unref) || have(unref) != 0 {
		t.Fatalf("kept past the grace: %+v", rep)
	}
}

// nonMarkers drops GC's own records from a listing.
func nonMarkers(keys map[string]int64) map[string]int64 {
	out := make(map[string]int64)
	for k, v := range keys {
		if !strings.HasPrefix(k, "gc/") {
			out[k] = v
		}
	}
	return out
}

// TestLateReferenceRestartsGrace: a checkpoint GC saw unreferenced (its
// compaction's CAS still in flight) that an index then references loses
// its marker, so once a newer checkpoint supersedes it, it waits a full
// grace again rather than go at once on the first sighting's age.
func TestLateReferenceRestartsGrace(t *testing.T) {
	ctx := context.Background()
	h := newHistory(t, memstore.New(), 13)
	id := h.newID()
	h.named[id] = true
	h.push(ctx, id, false)
	x, _, err := h.log.ReadIndex(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	p := h.checkpointPack(x)
	first := wal.CheckpointKey(id, wal.Checkpoint{Seq: x.Seq, SHA256: p.SHA256})
	// The compaction's PUT lands, GC runs, then its CAS lands: wal.Compact
	// does both, so the GC run happens in a hook on the index CAS.
	hs := &casHookStore{Store: h.store, hook: func() {
		if _, err := gc.New(h.store, gc.Options{Now: h.clk.Now, Live: h.live}).Run(ctx); err != nil {
			t.Error(err)
		}
		if _, ok := listAll(t, h.store)[gc.UnreferencedMarkerKey(id, first)]; !ok {
			t.Error("in-flight checkpoint not marked")
		}
	}}
	l := wal.New(hs, wal.Options{Sleep: noSleep, Now: h.clk.Now})
	if _, err := l.Compact(ctx, id, p); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(2 * grace)
	run := func() gc.Report {
		t.Helper()
		rep, err := gc.New(h.store, gc.Options{Now: h.clk.Now, Live: h.live}).Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	run() // referenced now: the marker goes
	if _, ok := listAll(t, h.store)[gc.UnreferencedMarkerKey(id, first)]; ok {
		t.Fatal("marker of a referenced checkpoint kept")
	}
	h.push(ctx, id, false)
	h.compact(ctx, id, false, false)
	if rep := run(); rep.Objects != 0 {
		t.Fatalf("superseded checkpoint went on its first sighting: %+v", rep)
	}
	if _, ok := listAll(t, h.store)[first]; !ok {
		t.Fatal("superseded checkpoint deleted at once")
	}
}

// casHookStore runs a hook once, before the first conditional write of an
// index that already exists.
type casHookStore struct {
	objstore.Store
	once sync.Once
	hook func()
}

func (s *casHookStore) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (objstore.Info, error) {
	if strings.HasSuffix(key, "/index") {
		s.once.Do(s.hook)
	}
	return s.Store.PutIfMatch(ctx, key, r, size, etag)
}

// TestRetentionMarker: GC starts a tombstone's retention when it first
// sees leftovers, deletes them only after it, and drops a marker whose
// leftovers went some other way, so a later leftover gets a full
// retention again.
func TestRetentionMarker(t *testing.T) {
	ctx := context.Background()
	h := newHistory(t, memstore.New(), 5)
	id := h.newID()
	h.named[id] = true
	h.push(ctx, id, false)
	h.push(ctx, id, false)
	h.store.arm(func(op, key string) bool { return op == "delete" })
	if err := h.log.Delete(ctx, id); err == nil {
		t.Fatal("purge did not die")
	}
	h.store.arm(nil)
	delete(h.named, id)
	run := func() gc.Report {
		t.Helper()
		rep, err := gc.New(h.store, gc.Options{Now: h.clk.Now, Retention: retention, Live: h.live}).Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	left := func() int { return len(entriesOf(t, h.store, id)) }
	n := left()
	if n < 2 {
		t.Fatalf("%d leftovers", n)
	}
	if rep := run(); rep.Objects != 0 || left() != n {
		t.Fatalf("first sighting deleted: %+v", rep)
	}
	h.clk.Advance(retention - time.Minute)
	if rep := run(); rep.Objects != 0 || left() != n {
		t.Fatalf("deleted within retention: %+v", rep)
	}
	h.clk.Advance(2 * time.Minute)
	if rep := run(); rep.Objects != n || left() != 0 {
		t.Fatalf("kept past retention: %+v", rep)
	}
	if _, ok := listAll(t, h.store)[gc.MarkerKey(id)]; ok {
		t.Fatal("marker kept after its leftovers went")
	}

	// A marker whose leftovers someone else removed is dropped.
	if _, err := h.store.Put(ctx, wal.EntryKey(id, ulid.MustNew(ulid.Timestamp(h.clk.Now()), h.ids)), strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	run()
	for _, k := range entriesOf(t, h.store, id) {
		if err := h.store.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if _, ok := listAll(t, h.store)[gc.MarkerKey(id)]; ok {
		t.Fatal("stale marker kept")
	}
}

func entriesOf(t *testing.T, s objstore.Store, id string) []string {
	var out []string
	for k := range listAll(t, s) {
		if strings.HasPrefix(k, "repos/"+id+"/entries/") {
			out = append(out, k)
		}
	}
	return out
}

// deleteHookStore runs a hook once, before the first Delete.
type deleteHookStore struct {
	objstore.Store
	once sync.Once
	hook func(key string)
}

func (s *deleteHookStore) Delete(ctx context.Context, key string) error {
	s.once.Do(func() { s.hook(key) })
	return s.Store.Delete(ctx, key)
}

// TestBatchesRereadIndex: between two batches of deletes GC reads the
// index again, and spares an orphan that a CAS referenced meanwhile.
func TestBatchesRereadIndex(t *testing.T) {
	ctx := context.Background()
	h := newHistory(t, memstore.New(), 3)
	const repo = "r1"
	h.named[repo] = true
	h.push(ctx, repo, false)
	packs := map[string]string{}
	for i := 0; i < 2; i++ {
		x, _, err := h.log.ReadIndex(ctx, repo)
		if err != nil {
			t.Fatal(err)
		}
		pack := fmt.Sprintf("orphan %d", i)
		h.store.arm(func(op, key string) bool { return op == "cas" })
		res, err := h.log.Commit(ctx, repo, wal.Push{
			Transitions: []wal.Transition{{Ref: "refs/heads/b9", Old: wal.ZeroID, New: x.Refs[0].ID}},
			Pack:        strings.NewReader(pack), PackSize: int64(len(pack)),
		})
		h.store.arm(nil)
		if err == nil {
			t.Fatal("crashed commit landed")
		}
		packs[wal.EntryKey(repo, res.ULID)] = pack
	}
	h.clk.Advance(2 * grace)
	var rescued string
	ds := &deleteHookStore{Store: h.store, hook: func(first string) {
		// A writer references the other orphan while GC deletes the first.
		for k, pack := range packs {
			if k == first {
				continue
			}
			rescued = k
			x, etag, err := h.log.ReadIndex(ctx, repo)
			if err != nil {
				t.Error(err)
				return
			}
			id := ulid.MustParse(strings.TrimSuffix(strings.TrimPrefix(k, "repos/"+repo+"/entries/"), ".pack"))
			x.Seq++
			x.Layers = append(x.Layers, wal.Layer{ULID: id, SHA256: sha256.Sum256([]byte(pack)), Size: int64(len(pack))})
			b, err := x.MarshalBinary()
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := h.store.PutIfMatch(ctx, wal.IndexKey(repo), bytes.NewReader(b), int64(len(b)), etag); err != nil {
				t.Error(err)
			}
		}
	}}
	rep, err := gc.New(ds, gc.Options{Now: h.clk.Now, Live: h.live, BatchSize: 1, Concurrency: 1}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listAll(t, h.store)[rescued]; !ok || rep.Objects != 1 {
		t.Fatalf("orphan referenced between batches was deleted (report %+v)", rep)
	}
}

// TestSweepTemps: leftover temporaries of the filesystem store older than
// the grace period go; recent ones and other files stay.
func TestSweepTemps(t *testing.T) {
	root := t.TempDir()
	s, err := fsstore.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(context.Background(), "repos/r/index", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "tmp")
	now := time.Now()
	for name, age := range map[string]time.Duration{"put-old": 48 * time.Hour, "put-new": time.Minute, "other": 48 * time.Hour} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	n, _, err := gc.SweepTemps(dir, grace, now, true, nil)
	if err != nil || n != 1 {
		t.Fatalf("dry run: %d, %v", n, err)
	}
	n, size, err := gc.SweepTemps(dir, grace, now, false, nil)
	if err != nil || n != 1 || size != int64(len("partial")) {
		t.Fatalf("sweep: %d %d, %v", n, size, err)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 2 {
		t.Fatalf("left %v", left)
	}
	if _, ok := listAll(t, s)["repos/r/index"]; !ok {
		t.Fatal("an object went")
	}
}
