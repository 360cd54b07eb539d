// Package gc collects garbage in ghost's object store: immutable log
// objects that no index references and that no reader or pusher can still
// need (docs/design.md §3.7, docs/adr/0040-garbage-collection.md).
//
// What goes:
//
//   - entries (.pack) and stored pack indexes (.idx) that the repository's
//     index does not reference (wal.Index.ReferencedKeys) and whose ULID
//     time is older than the grace period: orphans of crashed or
//     ambiguous pushes and of failed best-effort deletes;
//   - in a compacted log, and for checkpoints in any log, only what has
//     also been unreferenced for the grace period by GC's own record of
//     when it first saw it so (gc/unreferenced/<repoID>/<hash>): the
//     entries a checkpoint folded, checkpoints a newer one superseded,
//     and checkpoints of compactions that crashed or lost their CAS. A
//     reader of the index a compaction replaced may still be reading
//     them, whatever the age their names carry;
//   - orphan logs: logs that no repository name points at, whose id (a
//     ULID) is older than the grace period, left by a crashed fork or
//     create. They are tombstoned with wal.Delete, so a late writer loses,
//     and their objects purged;
//   - what is left under a tombstoned log (an interrupted purge, a late
//     fork copy) once GC has seen the tombstone for the retention period.
//
// What never goes: the index object of any log (a tombstone is a log's
// permanent "deleted" mark, docs/design.md §3.5), any object an index
// references, any entry younger than the grace period, and any entry of
// a log that has no index and no name (a fork may be copying into it).
//
// Every decision about one log is taken from a listing of that log
// followed by a fresh read of its index, so an entry that a commit
// referenced after the listing is seen as referenced.
package gc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// Defaults, explained in docs/adr/0040-garbage-collection.md.
const (
	// DefaultGrace is how old (by ULID time) an unreferenced entry must be
	// before it goes. A push commits within minutes of allocating its
	// entry's ULID (its context is bounded at 15 minutes, docs/design.md
	// §4.1), so a day leaves a wide margin for that and for clocks that
	// differ between nodes. It is also how long GC must have known an
	// object of a compacted log, or a checkpoint, unreferenced before it
	// goes: reads of an index a compaction replaced end long before.
	DefaultGrace = 24 * time.Hour
	// DefaultRetention is how long GC leaves what remains under a
	// tombstoned log after it first sees the tombstone.
	DefaultRetention = 7 * 24 * time.Hour
	// DefaultConcurrency bounds parallel deletes.
	DefaultConcurrency = 8
)

// Reason says why an object goes.
type Reason string

// Reasons an object is collected.
const (
	// Unreferenced: an entry, pack index or checkpoint no index
	// references, past the grace period.
	Unreferenced Reason = "unreferenced"
	// OrphanLog: an object of a log no name points at.
	OrphanLog Reason = "orphan-log"
	// Tombstoned: a leftover of a tombstoned log past the retention.
	Tombstoned Reason = "tombstoned"
)

// Object is one object GC deleted, or in a dry run would delete.
type Object struct {
	Key    string
	Size   int64
	Reason Reason
}

// Options configure a Collector. The zero value means the defaults.
type Options struct {
	// Grace is the minimum age, by ULID time, of an unreferenced entry
	// that may be deleted, and how long GC must have recorded an object
	// of a compacted log or a checkpoint as unreferenced before deleting
	// it (default DefaultGrace). It must exceed wal.MaxCheckpointWait.
	Grace time.Duration
	// Retention is how long leftovers of a tombstoned log are kept after
	// GC first sees the tombstone (default DefaultRetention).
	Retention time.Duration
	// DryRun reports what would go and changes nothing.
	DryRun bool
	// Concurrency bounds parallel deletes (default DefaultConcurrency).
	Concurrency int
	// BatchSize is how many unreferenced objects of one log are deleted
	// between two reads of its index (default 1000).
	BatchSize int
	// PageSize is the List page size (default objstore.ListPageSize);
	// tests lower it to exercise pagination.
	PageSize int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Live returns the ids of every log a repository name points at
	// (see MetaLive). It is called once, before the listing. When nil,
	// GC does not know names: it collects no orphan logs and keeps
	// every entry of a log that has no index.
	Live func(ctx context.Context) (map[string]bool, error)
	// Owners returns the tenant owning each repository a name points
	// at, by log id (see MetaOwners). RunLFS needs it; Run does not.
	Owners func(ctx context.Context) (map[string]string, error)
	// OnObject, when set, is called for every object deleted (or, in a
	// dry run, that would be deleted), in key order within a log.
	OnObject func(Object)
	// OnOrphanLog, when set, is called for every orphan log tombstoned
	// (or that would be).
	OnOrphanLog func(repo string)
}

// Report sums up one run.
type Report struct {
	Logs       int   // logs listed
	Objects    int   // objects deleted (dry run: that would be)
	Bytes      int64 // their total size
	OrphanLogs int   // orphan logs tombstoned (dry run: that would be)
	// Kept counts unreferenced objects kept because they are younger
	// than the grace period or their tombstone is within retention, or
	// because their log has no index and no name.
	Kept int
	// NamesUnknown reports that Live found no names at all, so orphan
	// logs were not collected (see ErrNoNames).
	NamesUnknown bool
}

// Collector runs garbage collection on one object store.
type Collector struct {
	store objstore.Store
	log   *wal.Log
	opts  Options
}

// New returns a Collector for store.
func New(store objstore.Store, opts Options) *Collector {
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 1000
	}
	if opts.PageSize <= 0 {
		opts.PageSize = objstore.ListPageSize
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Collector{store: store, log: wal.New(store, wal.Options{Now: opts.Now}), opts: opts}
}

const (
	reposPrefix = "repos/"
	// markerPrefix holds GC's own records: gc/tombstones/<repoID> says
	// when GC first saw that log's tombstone with leftovers under it.
	markerPrefix = "gc/tombstones/"
	// unrefPrefix holds gc/unreferenced/<repoID>/<hash>: when GC first
	// saw the object of that log whose key hashes to <hash> unreferenced.
	unrefPrefix = "gc/unreferenced/"
)

// MarkerKey is the key of the record saying when GC first saw repo's
// tombstone with objects left under it.
func MarkerKey(repo string) string { return markerPrefix + repo }

// UnreferencedMarkerKey is the key of the record saying when GC first saw
// the object key of log repo unreferenced. The object key is hashed (the
// first 128 bits of its sha256) so that the marker's name has a fixed
// shape; the record also holds the key in clear.
func UnreferencedMarkerKey(repo, key string) string {
	sum := sha256.Sum256([]byte(key))
	return unrefPrefix + repo + "/" + hex.EncodeToString(sum[:16])
}

// marker is the content of every GC record of a first sighting, for a
// tombstone and for an unreferenced object alike.
type marker struct {
	V         int       `json:"v"`
	FirstSeen time.Time `json:"firstSeen"`
	Key       string    `json:"key,omitempty"` // the object, for an unreferenced marker
}

// putMarker records now as the first sighting at key, unless a record is
// already there: PutIfAbsent keeps the earliest sighting, so two runs at
// once never make a record younger than the first one.
func (c *Collector) putMarker(ctx context.Context, key, object string, now time.Time) error {
	b, err := json.Marshal(marker{V: 1, FirstSeen: now.UTC(), Key: object})
	if err != nil {
		return err
	}
	_, err = c.store.PutIfAbsent(ctx, key, bytes.NewReader(b), int64(len(b)))
	if err != nil && !errors.Is(err, objstore.ErrPreconditionFailed) {
		return fmt.Errorf("put marker %s: %w", key, err)
	}
	return nil
}

// readMarker returns the first sighting a record holds, and false when
// there is no record. An unreadable record reads as now: the wait
// restarts, later and never sooner.
func (c *Collector) readMarker(ctx context.Context, key string) (time.Time, bool, error) {
	b, _, err := objstore.ReadAll(ctx, c.store, key, 4<<10)
	if errors.Is(err, objstore.ErrNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read marker %s: %w", key, err)
	}
	var m marker
	if err := json.Unmarshal(b, &m); err != nil || m.FirstSeen.IsZero() {
		return c.opts.Now(), true, nil
	}
	return m.FirstSeen, true, nil
}

// dropMarkers deletes records (never in a dry run). Dropping a record is
// always safe: at worst the wait it measured starts again.
func (c *Collector) dropMarkers(ctx context.Context, keys []string) error {
	if c.opts.DryRun {
		return nil
	}
	var errs []error
	for _, k := range keys {
		if err := c.store.Delete(ctx, k); err != nil {
			errs = append(errs, fmt.Errorf("gc: delete marker %s: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

// Run collects once. A failure on one log does not stop the others: their
// errors are joined and returned with the report of what was done.
func (c *Collector) Run(ctx context.Context) (Report, error) {
	var rep Report
	var live map[string]bool
	if c.opts.Live != nil {
		// Names are read before the listing: a log named later is either
		// younger than the grace period or was named long before.
		var err error
		live, err = c.opts.Live(ctx)
		switch {
		case errors.Is(err, ErrNoNames):
			live = nil // collect as if names were unknown
			rep.NamesUnknown = true
		case err != nil:
			return rep, fmt.Errorf("gc: read repository names: %w", err)
		}
	}
	markers, err := c.markers(ctx)
	if err != nil {
		return rep, err
	}
	unref, err := c.unrefMarkers(ctx)
	if err != nil {
		return rep, err
	}
	var errs []error
	var cur string
	var group []objstore.Info
	flush := func() error {
		if cur == "" {
			return nil
		}
		mine := unref[cur]
		delete(unref, cur)
		err := c.collectLog(ctx, cur, group, live, markers, mine, &rep)
		group = group[:0]
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			errs = append(errs, err)
		}
		return nil
	}
	err = c.walk(ctx, reposPrefix, func(o objstore.Info) error {
		repo, _, ok := strings.Cut(strings.TrimPrefix(o.Key, reposPrefix), "/")
		if !ok {
			return nil // not a log object; never ours to judge
		}
		if repo != cur {
			// A log's keys are contiguous in key order: they share the
			// prefix repos/<id>/.
			if err := flush(); err != nil {
				return err
			}
			cur = repo
			rep.Logs++
		}
		group = append(group, o)
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return rep, fmt.Errorf("gc: list %s: %w", reposPrefix, err)
	}
	// Markers of logs that have nothing left (another run purged them):
	// drop them so that a later leftover starts a fresh retention, or a
	// fresh grace.
	var stale []string
	for repo := range markers {
		stale = append(stale, MarkerKey(repo))
	}
	for _, keys := range unref {
		stale = append(stale, keys...)
	}
	slices.Sort(stale)
	if err := c.dropMarkers(ctx, stale); err != nil {
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

// walk pages through List with startAfter, like objstore.Walk but with
// the configured page size.
func (c *Collector) walk(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	after := ""
	for {
		page, err := c.store.List(ctx, prefix, after, c.opts.PageSize)
		if err != nil {
			return err
		}
		for _, o := range page {
			if err := fn(o); err != nil {
				return err
			}
		}
		if len(page) < c.opts.PageSize {
			return nil
		}
		after = page[len(page)-1].Key
	}
}

// markers reads GC's tombstone records. They are few: one per tombstoned
// log that still has objects under it.
func (c *Collector) markers(ctx context.Context) (map[string]time.Time, error) {
	out := make(map[string]time.Time)
	err := c.walk(ctx, markerPrefix, func(o objstore.Info) error {
		seen, ok, err := c.readMarker(ctx, o.Key)
		if ok {
			out[strings.TrimPrefix(o.Key, markerPrefix)] = seen
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("gc: list %s: %w", markerPrefix, err)
	}
	return out, nil
}

// unrefMarkers lists the keys of GC's unreferenced-object records, by
// log. Only the names are listed; a record is read when its object is
// judged.
func (c *Collector) unrefMarkers(ctx context.Context) (map[string][]string, error) {
	out := make(map[string][]string)
	err := c.walk(ctx, unrefPrefix, func(o objstore.Info) error {
		repo, _, ok := strings.Cut(strings.TrimPrefix(o.Key, unrefPrefix), "/")
		if ok {
			out[repo] = append(out[repo], o.Key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("gc: list %s: %w", unrefPrefix, err)
	}
	return out, nil
}

// entry is one listed object of a log that GC judges: an entry or its
// stored pack index under entries/ (id is its ULID), or a checkpoint's
// pack or .idx under checkpoints/ (checkpoint is set).
type entry struct {
	objstore.Info
	id         ulid.ULID
	checkpoint bool
}

// parseEntries keeps the objects of repo's log that GC judges: entries
// and their stored pack indexes, checkpoints and theirs, named exactly as
// wal writes them (wal.ParseKey). Anything else is not the log's, and GC
// leaves it alone.
func parseEntries(repo string, objs []objstore.Info) []entry {
	var out []entry
	for _, o := range objs {
		k, ok := wal.ParseKey(o.Key)
		if !ok || k.Repo != repo {
			continue
		}
		switch k.Kind {
		case wal.KeyEntry, wal.KeyPackIndex:
			out = append(out, entry{Info: o, id: k.Entry})
		case wal.KeyCheckpoint, wal.KeyCheckpointIndex:
			out = append(out, entry{Info: o, checkpoint: true})
		}
	}
	return out
}

// idAge returns how old a log id is by its ULID time, or false when the
// id is not a ULID (GC cannot tell its age and never treats it as an
// orphan).
func idAge(repo string, now time.Time) (time.Duration, bool) {
	id, err := ulid.ParseStrict(repo)
	if err != nil {
		return 0, false
	}
	return now.Sub(ulid.Time(id.Time())), true
}

// referencedSet is x.ReferencedKeys(repo) as a set.
func referencedSet(repo string, x *wal.Index) map[string]bool {
	keys := x.ReferencedKeys(repo)
	out := make(map[string]bool, len(keys))
	for _, k := range keys {
		out[k] = true
	}
	return out
}

// collectLog decides about one log from its listing and a fresh read of
// its index, taken after the listing. marks are the keys of the log's
// unreferenced-object records listed at the start of the run; the ones
// no longer needed are dropped.
func (c *Collector) collectLog(ctx context.Context, repo string, objs []objstore.Info, live map[string]bool, markers map[string]time.Time, marks []string, rep *Report) error {
	if wal.CheckRepoID(repo) != nil {
		return nil // not a key wal writes
	}
	ents := parseEntries(repo, objs)
	if len(ents) == 0 {
		// Nothing to reclaim (an index alone is never collected), and no
		// object left for a record to time.
		return c.dropMarkers(ctx, marks)
	}
	// A marker outlives its log's leftovers only until the end of the
	// run (Run deletes the ones left in the map).
	seen, marked := markers[repo]
	delete(markers, repo)
	x, etag, err := c.log.ReadIndex(ctx, repo)
	if err != nil {
		return fmt.Errorf("gc: %s: %w", repo, err)
	}
	now := c.opts.Now()
	switch {
	case x.Deleted:
		// The tombstone's retention governs everything under it.
		if err := c.dropMarkers(ctx, marks); err != nil {
			return err
		}
		return c.collectTombstoned(ctx, repo, ents, seen, marked, now, rep)
	case live != nil && !live[repo]:
		if age, ok := idAge(repo, now); ok && age > c.opts.Grace {
			if err := c.collectOrphanLog(ctx, repo, ents, rep); err != nil {
				return err
			}
			return c.dropMarkers(ctx, marks)
		}
		if etag == "" {
			// No name and no index: a fork may be copying entries into
			// this log, with their source's (old) ULIDs.
			rep.Kept += len(ents)
			return nil
		}
	case live == nil && etag == "":
		rep.Kept += len(ents) // without names, the same caution
		return nil
	}
	have := make(map[string]bool, len(marks))
	for _, k := range marks {
		have[k] = true
	}
	keep := make(map[string]bool) // records still timing a kept object
	referenced := referencedSet(repo, x)
	compacted := x.CompactedThroughSeq > 0
	var doomed []Object
	for _, e := range ents {
		if referenced[e.Key] {
			continue
		}
		// An entry is judged by its ULID time, which the writing node's
		// clock set: one from a node whose clock is ahead looks younger
		// (kept longer); one from a node behind by far less than the
		// grace period is still kept until its push is long over.
		young := !e.checkpoint && now.Sub(ulid.Time(e.id.Time())) <= c.opts.Grace
		// In a compacted log an unreferenced entry may be a layer that a
		// compaction folded moments ago, however old its ULID, and a
		// checkpoint's name carries no time at all: both wait until GC
		// has seen them unreferenced for the grace period.
		if compacted || e.checkpoint {
			mk := UnreferencedMarkerKey(repo, e.Key)
			keep[mk] = true
			first, ok := time.Time{}, false
			if have[mk] {
				if first, ok, err = c.readMarker(ctx, mk); err != nil {
					return fmt.Errorf("gc: %s: %w", repo, err)
				}
			}
			if !ok {
				// First sighting: the wait starts now.
				if !c.opts.DryRun {
					if err := c.putMarker(ctx, mk, e.Key, now); err != nil {
						return fmt.Errorf("gc: %s: %w", repo, err)
					}
				}
				rep.Kept++
				continue
			}
			if now.Sub(first) <= c.opts.Grace {
				rep.Kept++
				continue
			}
		}
		if young {
			rep.Kept++
			continue
		}
		doomed = append(doomed, Object{Key: e.Key, Size: e.Size, Reason: Unreferenced})
	}
	settled, err := c.removeUnreferenced(ctx, repo, doomed, rep)
	if err != nil {
		return err
	}
	// Drop the records of objects that went, that are referenced again
	// (an index write that landed late), or that are no longer there: a
	// record must never outlive a reference, or the object would go at
	// once when it became unreferenced again.
	for _, k := range settled {
		delete(keep, UnreferencedMarkerKey(repo, k))
	}
	var stale []string
	for _, k := range marks {
		if !keep[k] {
			stale = append(stale, k)
		}
	}
	return c.dropMarkers(ctx, stale)
}

// removeUnreferenced deletes doomed in batches of BatchSize and returns
// the keys deleted or found referenced. Before every batch it reads the index again and
// spares anything it now references, so nothing is deleted on the word
// of an index read before the markers were read or before the batch
// before it.
func (c *Collector) removeUnreferenced(ctx context.Context, repo string, doomed []Object, rep *Report) ([]string, error) {
	var settled []string
	for start := 0; start < len(doomed); start += c.opts.BatchSize {
		batch := doomed[start:min(start+c.opts.BatchSize, len(doomed))]
		x, _, err := c.log.ReadIndex(ctx, repo)
		if err != nil {
			return settled, fmt.Errorf("gc: %s: %w", repo, err)
		}
		if x.Deleted {
			return settled, nil // changed under us: the next run decides
		}
		referenced := referencedSet(repo, x)
		batch = slices.DeleteFunc(slices.Clone(batch), func(o Object) bool {
			if referenced[o.Key] {
				rep.Kept++
				settled = append(settled, o.Key)
				return true
			}
			return false
		})
		done, err := c.remove(ctx, batch, rep)
		for _, o := range done {
			settled = append(settled, o.Key)
		}
		if err != nil {
			return settled, err
		}
	}
	return settled, nil
}

// collectOrphanLog tombstones a log no name points at and purges it. The
// tombstone (written by compare-and-swap) makes a late fork's index write
// or a stray push fail rather than land on half-deleted history.
func (c *Collector) collectOrphanLog(ctx context.Context, repo string, ents []entry, rep *Report) error {
	rep.OrphanLogs++
	if c.opts.OnOrphanLog != nil {
		c.opts.OnOrphanLog(repo)
	}
	objs := make([]Object, len(ents))
	for i, e := range ents {
		objs[i] = Object{Key: e.Key, Size: e.Size, Reason: OrphanLog}
	}
	if c.opts.DryRun {
		c.report(objs, rep)
		return nil
	}
	if err := c.log.Delete(ctx, repo); err != nil && !errors.Is(err, wal.ErrRepoDeleted) {
		return fmt.Errorf("gc: tombstone orphan log %s: %w", repo, err)
	}
	// wal.Delete purged what it listed; delete what we listed too (a
	// no-op for what is gone), so the report is exact.
	_, err := c.remove(ctx, objs, rep)
	return err
}

// collectTombstoned removes what is left under a tombstoned log once GC
// has known about the tombstone for the retention period (seen is when
// it first did, if marked). A tombstone
// references nothing and never changes, so nothing under it can become
// referenced again.
func (c *Collector) collectTombstoned(ctx context.Context, repo string, ents []entry, seen time.Time, marked bool, now time.Time, rep *Report) error {
	if !marked {
		rep.Kept += len(ents)
		if c.opts.DryRun {
			return nil
		}
		if err := c.putMarker(ctx, MarkerKey(repo), "", now); err != nil {
			return fmt.Errorf("gc: mark tombstoned log %s: %w", repo, err)
		}
		return nil
	}
	if now.Sub(seen) <= c.opts.Retention {
		rep.Kept += len(ents)
		return nil
	}
	objs := make([]Object, len(ents))
	for i, e := range ents {
		objs[i] = Object{Key: e.Key, Size: e.Size, Reason: Tombstoned}
	}
	if _, err := c.remove(ctx, objs, rep); err != nil || c.opts.DryRun {
		return err
	}
	if err := c.store.Delete(ctx, MarkerKey(repo)); err != nil {
		return fmt.Errorf("gc: delete marker of %s: %w", repo, err)
	}
	return nil
}

// remove deletes objs with at most Concurrency deletes in flight, then
// reports and returns the ones that went, in order. In a dry run it only
// reports.
func (c *Collector) remove(ctx context.Context, objs []Object, rep *Report) ([]Object, error) {
	if c.opts.DryRun || len(objs) == 0 {
		c.report(objs, rep)
		return nil, nil
	}
	errs := make([]error, len(objs))
	sem := make(chan struct{}, c.opts.Concurrency)
	var wg sync.WaitGroup
	for i, o := range objs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[i] = ctx.Err()
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := c.store.Delete(ctx, o.Key); err != nil {
				errs[i] = fmt.Errorf("gc: delete %s: %w", o.Key, err)
			}
		}()
	}
	wg.Wait()
	var done []Object
	for i, o := range objs {
		if errs[i] == nil {
			done = append(done, o)
		}
	}
	c.report(done, rep)
	return done, errors.Join(errs...)
}

func (c *Collector) report(objs []Object, rep *Report) {
	for _, o := range objs {
		rep.Objects++
		rep.Bytes += o.Size
		if c.opts.OnObject != nil {
			c.opts.OnObject(o)
		}
	}
}
