// Package gc collects garbage in ghost's object store: immutable log
// objects that no index references and that no reader or pusher can still
// need (docs/design.md §10.4, docs/adr/0040-garbage-collection.md).
//
// What goes:
//
//   - entries (.pack) and stored pack indexes (.idx) that the repository's
//     index does not reference (wal.Index.ReferencedKeys) and whose ULID
//     time is older than the grace period: orphans of crashed or
//     ambiguous pushes and of failed best-effort deletes;
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
	"context"
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
	// differ between nodes.
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
	// Unreferenced: an entry or pack index no index references, older
	// than the grace period.
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
	// that may be deleted (default DefaultGrace).
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
	// Skipped counts logs GC does not understand yet (compacted ones)
	// and left alone.
	Skipped int
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
)

// MarkerKey is the key of the record saying when GC first saw repo's
// tombstone with objects left under it.
func MarkerKey(repo string) string { return markerPrefix + repo }

type marker struct {
	V         int       `json:"v"`
	FirstSeen time.Time `json:"firstSeen"`
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
	var errs []error
	var cur string
	var group []objstore.Info
	flush := func() error {
		if cur == "" {
			return nil
		}
		err := c.collectLog(ctx, cur, group, live, markers, &rep)
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
	// drop them so that a later leftover starts a fresh retention.
	if !c.opts.DryRun {
		for repo := range markers {
			if err := c.store.Delete(ctx, MarkerKey(repo)); err != nil {
				errs = append(errs, fmt.Errorf("gc: delete marker of %s: %w", repo, err))
			}
		}
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
		b, _, err := objstore.ReadAll(ctx, c.store, o.Key, 4<<10)
		if errors.Is(err, objstore.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var m marker
		if err := json.Unmarshal(b, &m); err != nil || m.FirstSeen.IsZero() {
			// An unreadable marker restarts the retention: later, never
			// sooner.
			m.FirstSeen = c.opts.Now()
		}
		out[strings.TrimPrefix(o.Key, markerPrefix)] = m.FirstSeen
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("gc: list %s: %w", markerPrefix, err)
	}
	return out, nil
}

// entry is one listed object under a log's entries/.
type entry struct {
	objstore.Info
	id ulid.ULID
}

// parseEntries keeps the objects under repos/<repo>/entries/ whose names
// are exactly what wal writes (<ULID>.pack or <ULID>.idx). Anything else
// is not the log's, and GC leaves it alone.
func parseEntries(repo string, objs []objstore.Info) []entry {
	var out []entry
	prefix := reposPrefix + repo + "/entries/"
	for _, o := range objs {
		name, ok := strings.CutPrefix(o.Key, prefix)
		if !ok {
			continue
		}
		base, ok := strings.CutSuffix(name, ".pack")
		if !ok {
			base, ok = strings.CutSuffix(name, ".idx")
		}
		if !ok {
			continue
		}
		id, err := ulid.ParseStrict(base)
		if err != nil || (o.Key != wal.EntryKey(repo, id) && o.Key != wal.PackIndexKey(repo, id)) {
			continue
		}
		out = append(out, entry{Info: o, id: id})
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

// collectLog decides about one log from its listing and a fresh read of
// its index, taken after the listing.
func (c *Collector) collectLog(ctx context.Context, repo string, objs []objstore.Info, live map[string]bool, markers map[string]time.Time, rep *Report) error {
	if wal.CheckRepoID(repo) != nil {
		return nil // not a key wal writes
	}
	ents := parseEntries(repo, objs)
	if len(ents) == 0 {
		return nil // nothing to reclaim: an index alone is never collected
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
	case !x.Deleted && x.CompactedThroughSeq > 0:
		// A checkpoint drops layers whose ULIDs are old while a reader
		// of the index it replaced may still be reading them: GC must
		// learn checkpoints (docs/design.md §10.3) before it touches a
		// compacted log. Until then it leaves such a log alone.
		rep.Skipped++
		return nil
	case x.Deleted:
		return c.collectTombstoned(ctx, repo, ents, seen, marked, now, rep)
	case live != nil && !live[repo]:
		if age, ok := idAge(repo, now); ok && age > c.opts.Grace {
			return c.collectOrphanLog(ctx, repo, ents, rep)
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
	referenced := make(map[string]bool, 2*len(x.Layers))
	for _, k := range x.ReferencedKeys(repo) {
		referenced[k] = true
	}
	var doomed []Object
	for _, e := range ents {
		if referenced[e.Key] {
			continue
		}
		// Judged by the ULID time, which the writing node's clock set:
		// an entry from a node whose clock is ahead looks younger (kept
		// longer); one from a node behind by far less than the grace
		// period is still kept until its push is long over.
		if now.Sub(ulid.Time(e.id.Time())) <= c.opts.Grace {
			rep.Kept++
			continue
		}
		doomed = append(doomed, Object{Key: e.Key, Size: e.Size, Reason: Unreferenced})
	}
	return c.removeUnreferenced(ctx, repo, doomed, rep)
}

// removeUnreferenced deletes doomed in batches of BatchSize. Before every
// batch after the first it reads the index again and spares anything it
// now references, so a log with many orphans is never judged from an
// index read long before the delete.
func (c *Collector) removeUnreferenced(ctx context.Context, repo string, doomed []Object, rep *Report) error {
	for start := 0; start < len(doomed); start += c.opts.BatchSize {
		batch := doomed[start:min(start+c.opts.BatchSize, len(doomed))]
		if start > 0 {
			x, _, err := c.log.ReadIndex(ctx, repo)
			if err != nil {
				return fmt.Errorf("gc: %s: %w", repo, err)
			}
			if x.Deleted || x.CompactedThroughSeq > 0 {
				return nil // changed under us: the next run decides
			}
			referenced := make(map[string]bool, 2*len(x.Layers))
			for _, k := range x.ReferencedKeys(repo) {
				referenced[k] = true
			}
			batch = slices.DeleteFunc(slices.Clone(batch), func(o Object) bool {
				if referenced[o.Key] {
					rep.Kept++
					return true
				}
				return false
			})
		}
		if err := c.remove(ctx, batch, rep); err != nil {
			return err
		}
	}
	return nil
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
	return c.remove(ctx, objs, rep)
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
		b, _ := json.Marshal(marker{V: 1, FirstSeen: now.UTC()})
		_, err := c.store.PutIfAbsent(ctx, MarkerKey(repo), strings.NewReader(string(b)), int64(len(b)))
		if err != nil && !errors.Is(err, objstore.ErrPreconditionFailed) {
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
	if err := c.remove(ctx, objs, rep); err != nil || c.opts.DryRun {
		return err
	}
	if err := c.store.Delete(ctx, MarkerKey(repo)); err != nil {
		return fmt.Errorf("gc: delete marker of %s: %w", repo, err)
	}
	return nil
}

// remove deletes objs with at most Concurrency deletes in flight, then
// reports the ones that went, in order. In a dry run it only reports.
func (c *Collector) remove(ctx context.Context, objs []Object, rep *Report) error {
	if c.opts.DryRun || len(objs) == 0 {
		c.report(objs, rep)
		return nil
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
	return errors.Join(errs...)
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
