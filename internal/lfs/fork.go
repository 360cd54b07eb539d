package lfs

// A fork's LFS references (docs/design.md §7.10,
// docs/adr/0132-lfs-forks.md): the fork gets a reference for every object
// its source holds one for, before its name is claimed, so that its
// clones download the objects and its pushes of the same history are not
// refused as missing objects.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ghost-scm/ghost/internal/gc"
	"github.com/ghost-scm/ghost/internal/objstore"
)

// Defaults of ForkOptions.
const (
	DefaultForkParallel = 8
)

// ForkOptions configure Forks. The zero value means the defaults.
type ForkOptions struct {
	// QuotaBytes bounds the LFS bytes of the destination tenant of a fork
	// across tenants, as an upload's (0 or negative: no bound).
	QuotaBytes int64
	// Now is the clock GC's fence reads (default time.Now).
	Now func() time.Time
	// PageSize is how many of the source's references one LIST reads
	// (default objstore.ListPageSize); tests lower it.
	PageSize int
	// Parallel bounds the objects copied at once (default
	// DefaultForkParallel).
	Parallel int
}

// Forks copies a repository's LFS references to its forks. It implements
// meta.ForkCopier, which meta.Store.ForkRepo calls after the fork's log is
// copied and before its name is claimed.
type Forks struct {
	store objstore.Store
	opts  ForkOptions
}

// NewForks returns the Forks of store.
func NewForks(store objstore.Store, opts ForkOptions) *Forks {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PageSize <= 0 {
		opts.PageSize = objstore.ListPageSize
	}
	if opts.Parallel <= 0 {
		opts.Parallel = DefaultForkParallel
	}
	return &Forks{store: store, opts: opts}
}

// ForkRefusal is a fork refused for a reason its user can act on: the
// destination's LFS quota (403), or an object GC is deleting (503, retry
// in a few minutes). HTTPStatus is how the API answers it.
type ForkRefusal struct {
	Status  int
	Message string // for the user
	Err     error  // ErrQuota or ErrCollecting
}

func (e *ForkRefusal) Error() string { return e.Message }

// Unwrap returns the cause (ErrQuota, ErrCollecting).
func (e *ForkRefusal) Unwrap() error { return e.Err }

// HTTPStatus is the API's status for the refusal.
func (e *ForkRefusal) HTTPStatus() int { return e.Status }

// CopyToFork gives repository dstRepoID of dstTenant, a fork no name
// points at yet, a reference to every LFS object repository srcRepoID of
// srcTenant references, a page of references at a time. Within a tenant
// the reference names the same object: no byte is copied and the
// tenant's usage is unchanged. Across tenants the destination gets its
// own object, copied server-side (on the filesystem store a hard link)
// and admitted against its quota and GC's fence as an upload is
// (docs/adr/0132-lfs-forks.md). A reference whose object went meanwhile
// (its source being deleted) is not copied. On an error some references
// may have been written; they belong to a log no name will point at,
// which GC collects (docs/adr/0129-lfs-gc.md).
func (f *Forks) CopyToFork(ctx context.Context, srcTenant, srcRepoID, dstTenant, dstRepoID string) error {
	for _, s := range []string{srcTenant, srcRepoID, dstTenant, dstRepoID} {
		if s == "" || strings.Contains(s, "/") {
			return fmt.Errorf("lfs: fork %s/%s to %s/%s: %q is not a tenant or repository id", srcTenant, srcRepoID, dstTenant, dstRepoID, s)
		}
	}
	if srcRepoID == dstRepoID {
		return fmt.Errorf("lfs: fork %s onto itself", srcRepoID)
	}
	across := srcTenant != dstTenant
	if across && f.opts.QuotaBytes > 0 {
		if err := f.fits(ctx, srcRepoID, dstTenant); err != nil {
			return err
		}
	}
	return f.eachPage(ctx, srcRepoID, func(ctx context.Context, oids []string) error {
		var err error
		if across {
			err = f.copyAcross(ctx, srcTenant, srcRepoID, dstTenant, dstRepoID, oids)
		} else {
			err = f.parallel(ctx, oids, func(ctx context.Context, _ int, oid string) error {
				return f.share(ctx, srcTenant, srcRepoID, dstRepoID, oid)
			})
		}
		var oe *forkObjectError
		switch {
		case errors.Is(err, ErrCollecting) && errors.As(err, &oe):
			return &ForkRefusal{Status: http.StatusServiceUnavailable, Err: err,
				Message: fmt.Sprintf("LFS object %s is being garbage collected; retry the fork in a few minutes", oe.oid)}
		case errors.Is(err, ErrQuota):
			return &ForkRefusal{Status: http.StatusForbidden, Err: err,
				Message: fmt.Sprintf("the LFS objects of the source would take %s over its LFS quota of %d bytes (%v)", dstTenant, f.opts.QuotaBytes, err)}
		case err != nil:
			return fmt.Errorf("lfs: fork: %w", err)
		}
		return nil
	})
}

// eachPage calls fn with the oids repository repoID references, a LIST
// page at a time: memory holds one page.
func (f *Forks) eachPage(ctx context.Context, repoID string, fn func(ctx context.Context, oids []string) error) error {
	prefix := refKey(repoID, "")
	after := ""
	for {
		page, err := f.store.List(ctx, prefix, after, f.opts.PageSize)
		if err != nil {
			return fmt.Errorf("lfs: fork: list %s: %w", prefix, err)
		}
		oids := make([]string, 0, len(page))
		for _, in := range page {
			if oid := strings.TrimPrefix(in.Key, prefix); validOID(oid) {
				oids = append(oids, oid)
			}
		}
		if err := fn(ctx, oids); err != nil {
			return err
		}
		if len(page) < f.opts.PageSize {
			return nil
		}
		after = page[len(page)-1].Key
	}
}

// parallel calls fn for each of oids, up to Parallel at once, and
// returns the first error, as an *forkObjectError naming its oid.
func (f *Forks) parallel(ctx context.Context, oids []string, fn func(ctx context.Context, i int, oid string) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(f.opts.Parallel)
	for i, oid := range oids {
		g.Go(func() error {
			if err := fn(gctx, i, oid); err != nil {
				return &forkObjectError{oid: oid, err: err}
			}
			return nil
		})
	}
	return g.Wait()
}

// forkObjectError is a fork's failure on one object.
type forkObjectError struct {
	oid string
	err error
}

func (e *forkObjectError) Error() string { return "object " + e.oid + ": " + e.err.Error() }
func (e *forkObjectError) Unwrap() error { return e.err }

// readRef reads repository repoID's reference to oid (ErrNotFound when
// it has none).
func (f *Forks) readRef(ctx context.Context, repoID, oid string) (refRecord, error) {
	b, _, err := objstore.ReadAll(ctx, f.store, refKey(repoID, oid), 4096)
	if err != nil {
		return refRecord{}, err
	}
	var rec refRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Size < 0 {
		return refRecord{}, fmt.Errorf("lfs: reference %s is corrupt: %q", refKey(repoID, oid), b)
	}
	return rec, nil
}

// putRef writes repository repoID's reference to oid.
func (f *Forks) putRef(ctx context.Context, repoID, oid string, size int64) error {
	b, _ := json.Marshal(refRecord{Size: size})
	if _, err := f.store.Put(ctx, refKey(repoID, oid), strings.NewReader(string(b)), int64(len(b))); err != nil {
		return fmt.Errorf("store reference: %w", err)
	}
	return nil
}

// share gives dst a reference to tenant's object oid, which src
// references. The fence comes first, as an upload's: the source's
// reference may be going (its repository deleted) and GC may have seen
// the object unreferenced, so without it a doom could land after our
// check and before our reference (TestForkRacesGC). After the fence, the
// object either is still there, and no doom can land before a reference
// listing that sees our reference, or is gone, and we write nothing.
func (f *Forks) share(ctx context.Context, tenant, src, dst, oid string) error {
	ref, err := f.readRef(ctx, src, oid)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil // deleted meanwhile: its repository is being deleted
	}
	if err != nil {
		return err
	}
	if err := gc.LFSFence(ctx, f.store, tenant, oid, f.opts.Now()); err != nil {
		return err
	}
	held, err := holds(ctx, f.store, tenant, oid)
	if err != nil {
		return err
	}
	if !held {
		return nil // collected since the source's reference went
	}
	return f.putRef(ctx, dst, oid, ref.Size)
}

// copyAcross gives dst, of another tenant than src, its own copy of
// each of oids (a page), admitted as uploads are
// (docs/adr/0129-lfs-gc.md): GC's fence and a look for each object, then
// one addition to the destination's usage, by compare-and-swap and
// against its quota, for the objects it does not hold (one per object
// would have the page's objects contend for the one record), then the
// copies, then the references.
func (f *Forks) copyAcross(ctx context.Context, srcTenant, src, dstTenant, dst string, oids []string) error {
	type object struct {
		size       int64
		gone, held bool
	}
	objs := make([]object, len(oids))
	now := f.opts.Now()
	err := f.parallel(ctx, oids, func(ctx context.Context, i int, oid string) error {
		ref, err := f.readRef(ctx, src, oid)
		if errors.Is(err, objstore.ErrNotFound) {
			objs[i].gone = true // deleted meanwhile: its repository is being deleted
			return nil
		}
		if err != nil {
			return err
		}
		if err := gc.LFSFence(ctx, f.store, dstTenant, oid, now); err != nil {
			return err
		}
		held, err := holds(ctx, f.store, dstTenant, oid)
		objs[i] = object{size: ref.Size, held: held}
		return err
	})
	if err != nil {
		return err
	}
	var add int64
	for _, o := range objs {
		if !o.gone && !o.held {
			add += o.size
		}
	}
	if add > 0 {
		// An addition whose outcome is unknown fails the fork before any
		// copy: the record may count too much, never too little.
		if err := gc.AddLFSUsage(ctx, f.store, dstTenant, add, max(0, f.opts.QuotaBytes)); err != nil {
			if errors.Is(err, ErrQuota) {
				return err
			}
			return fmt.Errorf("count usage: %w", err)
		}
	}
	return f.parallel(ctx, oids, func(ctx context.Context, i int, oid string) error {
		o := objs[i]
		if o.gone {
			return nil
		}
		if !o.held {
			err := f.store.Copy(ctx, objectKey(srcTenant, oid), objectKey(dstTenant, oid))
			if errors.Is(err, objstore.ErrNotFound) {
				// Collected since the source's reference went: the usage
				// counts it until GC's next recount, as after a failed
				// upload.
				return nil
			}
			if err != nil {
				return fmt.Errorf("store object: %w", err)
			}
		}
		return f.putRef(ctx, dst, oid, o.size)
	})
}

// fits refuses, before anything is copied, a fork across tenants whose
// objects the destination does not hold would take it over its quota:
// the batch's check (Handler.overQuota), so that a refused fork does not
// leave the destination's usage counting objects it copied before it
// reached the limit. Two forks or uploads at once may both fit; each
// object's admission then refuses the one that would pass the quota.
func (f *Forks) fits(ctx context.Context, src, dstTenant string) error {
	var want atomic.Int64
	err := f.eachPage(ctx, src, func(ctx context.Context, oids []string) error {
		return f.parallel(ctx, oids, func(ctx context.Context, _ int, oid string) error {
			ref, err := f.readRef(ctx, src, oid)
			if errors.Is(err, objstore.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			held, err := holds(ctx, f.store, dstTenant, oid)
			if err != nil || held {
				return err
			}
			want.Add(ref.Size)
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("lfs: fork: %w", err)
	}
	if want.Load() == 0 {
		return nil
	}
	used, err := usage(ctx, f.store, dstTenant)
	if err != nil {
		return fmt.Errorf("lfs: fork: read usage: %w", err)
	}
	if used+want.Load() > f.opts.QuotaBytes {
		return &ForkRefusal{Status: http.StatusForbidden, Err: ErrQuota,
			Message: fmt.Sprintf("%s: %s stores %d bytes of LFS objects, the fork adds %d, the quota is %d bytes", ErrQuota, dstTenant, used, want.Load(), f.opts.QuotaBytes)}
	}
	return nil
}
