package gc

// Garbage collection of Git LFS objects (docs/design.md §7.10,
// docs/adr/0129-lfs-gc.md).
//
// "Referenced" is the per-repository reference record: an object
// lfs/objects/<tenant>/<oid> is referenced while a repository of that
// tenant whose log is not a tombstone holds lfs/refs/<repoID>/<oid>, or
// while a repository no name points at (a fork being made) holds one.
// The push check (docs/design.md §7.10) refuses a pointer the repository
// holds no reference for, so every pointer in a ref has its record.
//
// An unreferenced object goes in three steps on two runs at least: a
// first sighting (gc/lfs/<tenant>/<oid>, PutIfAbsent), then, on a run
// whose reference listing began more than the grace period after that
// sighting, a "doomed" mark by compare-and-swap, then the delete. An
// upload reads the same record before it copies the object into place
// (LFSFence) and refuses while it is doomed, or marks it revived, which
// makes the doom's compare-and-swap fail.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
)

// The LFS keys of docs/design.md §2.3 that GC reads and writes.
const (
	lfsObjectsPrefix = "lfs/objects/"
	lfsRefsPrefix    = "lfs/refs/"
	lfsTmpPrefix     = "lfs/tmp/"
	lfsUsagePrefix   = "lfs/usage/"
	// lfsMarkPrefix holds gc/lfs/<tenant>/<oid>: GC's record of an
	// unreferenced LFS object (first sighting, doom, revival).
	lfsMarkPrefix = "gc/lfs/"
	// lfsTmpMarkPrefix holds gc/lfstmp/<name>: when GC first saw the
	// upload temporary lfs/tmp/<name>.
	lfsTmpMarkPrefix = "gc/lfstmp/"
)

const (
	// LFSDoomWindow bounds how long GC may take, after it dooms an
	// object, to delete it: the delete runs on a context with this
	// deadline, and a delete that has not landed by then is abandoned.
	LFSDoomWindow = 10 * time.Minute
	// LFSDoomStale is the age, on the reader's clock, after which a doom
	// is abandoned: its delete has landed or never will, so an upload
	// may revive the record and another run may doom it again. It leaves
	// 50 minutes for clocks that differ between nodes.
	LFSDoomStale = time.Hour
)

// ErrLFSCollecting is returned by LFSFence while GC is deleting the
// object: the upload must not make it visible, and may retry later.
var ErrLFSCollecting = errors.New("the object is being garbage collected; retry the upload in a few minutes")

// LFSMarkKey is the key of GC's record of tenant's object oid.
func LFSMarkKey(tenant, oid string) string { return lfsMarkPrefix + tenant + "/" + oid }

// LFSUsageKey is the key of tenant's usage record: the bytes of its LFS
// objects (docs/adr/0129-lfs-gc.md).
func LFSUsageKey(tenant string) string { return lfsUsagePrefix + tenant }

// lfsMark is the content of gc/lfs/<tenant>/<oid>.
type lfsMark struct {
	V         int       `json:"v"`
	FirstSeen time.Time `json:"firstSeen"`
	// Doomed is when a run marked the object for its delete (GC's
	// clock); zero if not.
	Doomed time.Time `json:"doomed,omitzero"`
	// Revived: an upload made the object visible again after the
	// sighting; the next run drops the record.
	Revived bool `json:"revived,omitempty"`
}

func readLFSMark(ctx context.Context, store objstore.Store, key string) (lfsMark, string, bool, error) {
	b, info, err := objstore.ReadAll(ctx, store, key, 4<<10)
	if errors.Is(err, objstore.ErrNotFound) {
		return lfsMark{}, "", false, nil
	}
	if err != nil {
		return lfsMark{}, "", false, fmt.Errorf("read %s: %w", key, err)
	}
	var m lfsMark
	if json.Unmarshal(b, &m) != nil || m.FirstSeen.IsZero() {
		// Unreadable: a sighting now, as for pack markers; never
		// doomed, so an upload revives it.
		m = lfsMark{V: 1, FirstSeen: time.Now().UTC()}
	}
	return m, info.ETag, true, nil
}

func encodeLFSMark(m lfsMark) []byte {
	m.V = 1
	b, _ := json.Marshal(m)
	return b
}

// LFSFence is what an upload does before it copies tenant's object oid
// into place and writes its reference (docs/adr/0129-lfs-gc.md): with no
// record, nothing; with a sighting, it marks the record revived by
// compare-and-swap, so that no run can doom it; with a doom younger than
// LFSDoomStale on now's clock, ErrLFSCollecting. A stale doom is revived
// like a sighting.
func LFSFence(ctx context.Context, store objstore.Store, tenant, oid string, now time.Time) error {
	key := LFSMarkKey(tenant, oid)
	for range 8 {
		m, etag, ok, err := readLFSMark(ctx, store, key)
		switch {
		case err != nil:
			return fmt.Errorf("lfs gc fence: %w", err)
		case !ok || m.Revived:
			return nil // no run can doom a revived record
		case !m.Doomed.IsZero() && now.Sub(m.Doomed) <= LFSDoomStale:
			return ErrLFSCollecting
		}
		m.Revived, m.Doomed = true, time.Time{}
		b := encodeLFSMark(m)
		_, err = store.PutIfMatch(ctx, key, bytes.NewReader(b), int64(len(b)), etag)
		if err == nil {
			return nil
		}
		// Lost the race or unknown: read again; a doom that won is seen,
		// and our revival, if it landed, is too.
		if !errors.Is(err, objstore.ErrPreconditionFailed) && ctx.Err() != nil {
			return fmt.Errorf("lfs gc fence: %w", err)
		}
	}
	return fmt.Errorf("lfs gc fence: %w", record.ErrContention)
}

// LFSUsage is tenant's usage record: bytes of LFS objects stored.
type LFSUsage struct {
	Bytes int64 `json:"bytes"`
}

// LFSUsageCodec encodes usage records.
var LFSUsageCodec = record.JSON[LFSUsage]()

// ErrLFSQuota is returned by AddLFSUsage when the addition would take
// the usage over its limit; nothing was written.
var ErrLFSQuota = errors.New("LFS storage quota exceeded")

// AddLFSUsage adds delta (negative: subtracts, not below zero) to
// tenant's usage by compare-and-swap, refusing with ErrLFSQuota an
// addition that would take it over limit (0: no limit). Its other
// outcomes are record.Update's.
func AddLFSUsage(ctx context.Context, store objstore.Store, tenant string, delta, limit int64) error {
	_, err := record.Update(ctx, store, LFSUsageCodec, LFSUsageKey(tenant), record.Options{}, func(cur *LFSUsage) (*LFSUsage, error) {
		var next LFSUsage
		if cur != nil {
			next = *cur
		}
		if limit > 0 && delta > 0 && next.Bytes+delta > limit {
			return nil, fmt.Errorf("%w: %d bytes stored, %d more, the quota is %d", ErrLFSQuota, next.Bytes, delta, limit)
		}
		next.Bytes = max(0, next.Bytes+delta)
		return &next, nil
	})
	return err
}

// LFSReport sums up one LFS run.
type LFSReport struct {
	Objects int   // objects deleted (dry run: that would be)
	Bytes   int64 // their size
	Refs    int   // references of deleted repositories deleted
	Temps   int   // upload temporaries deleted
	// Kept counts unreferenced objects and temporaries waiting for the
	// grace period (or for another run's doom).
	Kept int
}

// RunLFS collects LFS objects no live reference names, references of
// deleted repositories, and upload temporaries, and recounts each
// tenant's usage record. It needs Options.Owners.
func (c *Collector) RunLFS(ctx context.Context) (LFSReport, error) {
	var rep LFSReport
	if c.opts.Owners == nil {
		return rep, errors.New("gc: lfs: Options.Owners is required")
	}
	// Names first: a repository named later either holds references
	// written after this run's listing began, which the grace period
	// covers, or was named before.
	owners, err := c.opts.Owners(ctx)
	if err != nil {
		return rep, fmt.Errorf("gc: lfs: read repository names: %w", err)
	}
	listedAt := c.opts.Now()
	refs, err := c.lfsRefs(ctx, owners, &rep)
	if err != nil {
		return rep, err
	}
	var errs []error
	if err := c.lfsObjects(ctx, refs, listedAt, &rep); err != nil {
		errs = append(errs, err)
	}
	if err := c.lfsTemps(ctx, &rep); err != nil {
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

// lfsRefSet is what the references say: for each tenant the oids its
// live repositories hold, and under "" those of repositories no name
// points at, which count for every tenant.
type lfsRefSet map[string]map[string]bool

func (s lfsRefSet) has(tenant, oid string) bool { return s[tenant][oid] || s[""][oid] }

// lfsRefs lists lfs/refs/ page by page. A repository's references go
// to its owner's set; those of a repository whose log is a tombstone
// are deleted (a tombstone is for ever, docs/design.md §3.5); those of
// a repository with neither a name nor a tombstone count for everyone.
func (c *Collector) lfsRefs(ctx context.Context, owners map[string]string, rep *LFSReport) (lfsRefSet, error) {
	set := lfsRefSet{}
	var cur string
	var group []string
	var errs []error
	flush := func() {
		if cur == "" {
			return
		}
		tenant, named := owners[cur]
		dead := false
		if !named {
			x, _, err := c.log.ReadIndex(ctx, cur)
			if err != nil {
				errs = append(errs, fmt.Errorf("gc: lfs: %s: %w", cur, err))
				tenant = "" // unknown: keep for everyone
			}
			dead = err == nil && x.Deleted
		}
		if dead {
			objs := make([]Object, len(group))
			for i, oid := range group {
				objs[i] = Object{Key: lfsRefsPrefix + cur + "/" + oid, Reason: Tombstoned}
			}
			if c.opts.DryRun {
				rep.Refs += len(objs)
				c.report(objs, &Report{})
			} else {
				done, err := c.remove(ctx, objs, &Report{})
				rep.Refs += len(done)
				if err != nil {
					errs = append(errs, err)
				}
			}
		} else {
			if set[tenant] == nil {
				set[tenant] = map[string]bool{}
			}
			for _, oid := range group {
				set[tenant][oid] = true
			}
		}
		group = group[:0]
	}
	err := c.walk(ctx, lfsRefsPrefix, func(o objstore.Info) error {
		repo, oid, ok := strings.Cut(strings.TrimPrefix(o.Key, lfsRefsPrefix), "/")
		if !ok {
			return nil
		}
		if repo != cur {
			flush()
			cur = repo
		}
		group = append(group, oid)
		return ctx.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("gc: lfs: list %s: %w", lfsRefsPrefix, err)
	}
	flush()
	return set, errors.Join(errs...)
}

// lfsMarks lists the names of GC's records under prefix (few: one per
// object or temporary waiting).
func (c *Collector) lfsMarks(ctx context.Context, prefix string) (map[string]bool, error) {
	out := map[string]bool{}
	err := c.walk(ctx, prefix, func(o objstore.Info) error {
		out[strings.TrimPrefix(o.Key, prefix)] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("gc: lfs: list %s: %w", prefix, err)
	}
	return out, nil
}

// lfsObjects judges every object under lfs/objects/, one tenant at a
// time, and recounts each tenant's usage.
func (c *Collector) lfsObjects(ctx context.Context, refs lfsRefSet, listedAt time.Time, rep *LFSReport) error {
	marks, err := c.lfsMarks(ctx, lfsMarkPrefix)
	if err != nil {
		return err
	}
	var errs []error
	seen := map[string]bool{}
	after := ""
	for {
		// The next tenant: one key past the last one's objects.
		page, err := c.store.List(ctx, lfsObjectsPrefix, after, 1)
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("gc: lfs: list %s: %w", lfsObjectsPrefix, err))...)
		}
		if len(page) == 0 {
			break
		}
		tenant, _, ok := strings.Cut(strings.TrimPrefix(page[0].Key, lfsObjectsPrefix), "/")
		if !ok {
			after = page[0].Key
			continue
		}
		seen[tenant] = true
		if err := c.lfsTenant(ctx, tenant, refs, listedAt, marks, rep); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, err)
		}
		// Past every <tenant>/<hex> key: 'g' sorts after every hex digit.
		after = lfsObjectsPrefix + tenant + "/g"
	}
	// A usage record whose tenant stores no object: an upload or a fork
	// that counted an object and failed before its copy. Recount it too,
	// or it would count that object until the tenant stores another.
	err = c.walk(ctx, lfsUsagePrefix, func(o objstore.Info) error {
		tenant := strings.TrimPrefix(o.Key, lfsUsagePrefix)
		if seen[tenant] || strings.Contains(tenant, "/") {
			return nil
		}
		if err := c.lfsTenant(ctx, tenant, refs, listedAt, marks, rep); err != nil {
			errs = append(errs, err)
		}
		return ctx.Err()
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("gc: lfs: list %s: %w", lfsUsagePrefix, err))
	}
	// Records of objects that are gone: drop them, unless a doom is
	// still at work (its run drops it).
	var stale []string
	for k := range marks {
		stale = append(stale, lfsMarkPrefix+k)
	}
	sort.Strings(stale)
	if !c.opts.DryRun {
		now := c.opts.Now()
		for _, k := range stale {
			m, _, ok, err := readLFSMark(ctx, c.store, k)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if ok && !m.Doomed.IsZero() && now.Sub(m.Doomed) <= LFSDoomStale {
				continue
			}
			if err := c.store.Delete(ctx, k); err != nil {
				errs = append(errs, fmt.Errorf("gc: lfs: delete %s: %w", k, err))
			}
		}
	}
	return errors.Join(errs...)
}

// lfsTenant judges tenant's objects and recounts its usage. marks loses
// the records it judges.
func (c *Collector) lfsTenant(ctx context.Context, tenant string, refs lfsRefSet, listedAt time.Time, marks map[string]bool, rep *LFSReport) error {
	// The usage record is read before the listing: if it is unchanged
	// when the recount is written, no upload added an object meanwhile.
	usage, etag, err := record.Get(ctx, c.store, LFSUsageCodec, LFSUsageKey(tenant))
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("gc: lfs: %w", err)
	}
	now := c.opts.Now()
	prefix := lfsObjectsPrefix + tenant + "/"
	var total, freed int64
	var errs []error
	err = c.walk(ctx, prefix, func(o objstore.Info) error {
		oid := strings.TrimPrefix(o.Key, prefix)
		total += o.Size
		mk := tenant + "/" + oid
		had := marks[mk]
		delete(marks, mk)
		if refs.has(tenant, oid) {
			if had && !c.opts.DryRun {
				if err := c.store.Delete(ctx, lfsMarkPrefix+mk); err != nil {
					errs = append(errs, fmt.Errorf("gc: lfs: delete %s: %w", lfsMarkPrefix+mk, err))
				}
			}
			return nil
		}
		gone, err := c.lfsJudge(ctx, Object{Key: o.Key, Size: o.Size, Reason: Unreferenced}, lfsMarkPrefix+mk, had, listedAt, now, rep)
		if err != nil {
			errs = append(errs, err)
		}
		if gone {
			freed += o.Size
		}
		return ctx.Err()
	})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("gc: lfs: list %s: %w", prefix, err))...)
	}
	if c.opts.DryRun {
		return errors.Join(errs...)
	}
	if usage != nil && usage.Bytes == total-freed {
		return errors.Join(errs...) // right already
	}
	// The recount: written only over the record read before the listing,
	// so an upload's addition since is never lost; otherwise the bytes
	// freed are subtracted.
	b, _ := LFSUsageCodec.Encode(&LFSUsage{Bytes: total - freed})
	switch {
	case usage == nil:
		_, err = c.store.PutIfAbsent(ctx, LFSUsageKey(tenant), bytes.NewReader(b), int64(len(b)))
	default:
		_, err = c.store.PutIfMatch(ctx, LFSUsageKey(tenant), bytes.NewReader(b), int64(len(b)), etag)
	}
	switch {
	case errors.Is(err, objstore.ErrPreconditionFailed):
		// Certainly not written: an upload counted meanwhile.
		err = nil
		if freed > 0 {
			err = AddLFSUsage(ctx, c.store, tenant, -freed, 0)
		}
	case err != nil:
		// Perhaps written: subtracting too could count too little. The
		// record may count the bytes freed until the next recount.
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("gc: lfs: usage of %s: %w", tenant, err))
	}
	return errors.Join(errs...)
}

// lfsJudge decides about one unreferenced object and reports whether it
// went.
func (c *Collector) lfsJudge(ctx context.Context, o Object, mk string, had bool, listedAt, now time.Time, rep *LFSReport) (bool, error) {
	var m lfsMark
	var etag string
	if had {
		var ok bool
		var err error
		if m, etag, ok, err = readLFSMark(ctx, c.store, mk); err != nil {
			return false, fmt.Errorf("gc: lfs: %w", err)
		}
		had = ok
	}
	switch {
	case !had:
		rep.Kept++ // first sighting: the wait starts now
		if c.opts.DryRun {
			return false, nil
		}
		b := encodeLFSMark(lfsMark{FirstSeen: now.UTC()})
		if _, err := c.store.PutIfAbsent(ctx, mk, bytes.NewReader(b), int64(len(b))); err != nil && !errors.Is(err, objstore.ErrPreconditionFailed) {
			return false, fmt.Errorf("gc: lfs: put %s: %w", mk, err)
		}
		return false, nil
	case m.Revived:
		// An upload made it visible after the sighting; this run's
		// references may predate its reference, so start again.
		rep.Kept++
		if c.opts.DryRun {
			return false, nil
		}
		return false, c.store.Delete(ctx, mk)
	case !m.Doomed.IsZero() && now.Sub(m.Doomed) <= LFSDoomStale:
		rep.Kept++ // another run is deleting it
		return false, nil
	case !listedAt.After(m.FirstSeen.Add(c.opts.Grace)):
		// The references were listed too soon after the sighting to
		// have seen one written by an upload that passed the fence
		// just before it.
		rep.Kept++
		return false, nil
	}
	if c.opts.DryRun {
		rep.Objects++
		rep.Bytes += o.Size
		if c.opts.OnObject != nil {
			c.opts.OnObject(o)
		}
		return false, nil
	}
	m.Doomed = now.UTC()
	b := encodeLFSMark(m)
	if _, err := c.store.PutIfMatch(ctx, mk, bytes.NewReader(b), int64(len(b)), etag); err != nil {
		rep.Kept++
		if errors.Is(err, objstore.ErrPreconditionFailed) {
			return false, nil // revived, or doomed by another run
		}
		return false, fmt.Errorf("gc: lfs: doom %s: %w", o.Key, err)
	}
	dctx, cancel := context.WithTimeout(ctx, LFSDoomWindow)
	err := c.store.Delete(dctx, o.Key)
	cancel()
	if err != nil {
		// The record stays doomed: uploads wait until it is stale.
		return false, fmt.Errorf("gc: lfs: delete %s: %w", o.Key, err)
	}
	rep.Objects++
	rep.Bytes += o.Size
	if c.opts.OnObject != nil {
		c.opts.OnObject(o)
	}
	if err := c.store.Delete(ctx, mk); err != nil {
		return true, fmt.Errorf("gc: lfs: delete %s: %w", mk, err)
	}
	return true, nil
}

// lfsTemps deletes upload temporaries GC has seen for longer than the
// grace period. A temporary is listed only once its PUT completed, and
// an upload copies and deletes it within its request: minutes.
func (c *Collector) lfsTemps(ctx context.Context, rep *LFSReport) error {
	marks, err := c.lfsMarks(ctx, lfsTmpMarkPrefix)
	if err != nil {
		return err
	}
	now := c.opts.Now()
	var errs []error
	err = c.walk(ctx, lfsTmpPrefix, func(o objstore.Info) error {
		name := strings.TrimPrefix(o.Key, lfsTmpPrefix)
		mk := lfsTmpMarkPrefix + name
		had := marks[name]
		delete(marks, name)
		var first time.Time
		if had {
			var err error
			if first, had, err = c.readMarker(ctx, mk); err != nil {
				errs = append(errs, err)
				return ctx.Err()
			}
		}
		switch {
		case !had:
			rep.Kept++
			if !c.opts.DryRun {
				if err := c.putMarker(ctx, mk, o.Key, now); err != nil {
					errs = append(errs, err)
				}
			}
		case now.Sub(first) <= c.opts.Grace:
			rep.Kept++
		default:
			if !c.opts.DryRun {
				if err := c.store.Delete(ctx, o.Key); err != nil {
					errs = append(errs, fmt.Errorf("gc: lfs: delete %s: %w", o.Key, err))
					return ctx.Err()
				}
				marks[name] = true // its record is dropped below
			}
			rep.Temps++
			rep.Bytes += o.Size
			if c.opts.OnObject != nil {
				c.opts.OnObject(Object{Key: o.Key, Size: o.Size, Reason: Unreferenced})
			}
		}
		return ctx.Err()
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("gc: lfs: list %s: %w", lfsTmpPrefix, err))
	}
	var stale []string
	for name := range marks {
		stale = append(stale, lfsTmpMarkPrefix+name)
	}
	sort.Strings(stale)
	return errors.Join(append(errs, c.dropMarkers(ctx, stale))...)
}
