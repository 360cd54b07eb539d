package lfs

// The lifecycle's side of an upload: GC's fence and the tenant's usage
// record (docs/adr/0129-lfs-gc.md).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ghost-scm/ghost/internal/gc"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
)

// ErrQuota: the upload would take the tenant over its LFS quota.
var ErrQuota = gc.ErrLFSQuota

// ErrCollecting: GC is deleting the object; the upload may be retried in
// a few minutes.
var ErrCollecting = gc.ErrLFSCollecting

// admit runs before an upload's copy into tenant's object key: GC's
// fence (an object being deleted refuses the upload; one merely sighted
// is revived), then, if the tenant does not hold the object yet, its
// usage grows by size by compare-and-swap, unless that would take it
// over the quota (ErrQuota): the hard check, for a client that uploads
// without asking the batch first. An addition whose outcome is
// unknown fails the upload before anything is visible, so the record
// can count too much (until GC's recount), never too little.
func (h *Handler) admit(ctx context.Context, tenant, oid string, size int64) error {
	_, err := admit(ctx, h.opts.Store, tenant, oid, size, h.opts.QuotaBytes, h.opts.Now())
	return err
}

// admit is Handler.admit for any writer that makes tenant's object oid
// visible (an upload, a fork across tenants, docs/adr/0132-lfs-forks.md),
// with quota (0 or negative: no bound) and now, GC's fence's clock. It
// reports whether the tenant held the object already, after the fence:
// then nothing was counted, and the object stays until a GC run that
// begins more than the grace period from now (docs/adr/0129-lfs-gc.md).
func admit(ctx context.Context, store objstore.Store, tenant, oid string, size, quota int64, now time.Time) (bool, error) {
	if err := gc.LFSFence(ctx, store, tenant, oid, now); err != nil {
		return false, err
	}
	held, err := holds(ctx, store, tenant, oid)
	if err != nil || held {
		return held, err
	}
	if err := gc.AddLFSUsage(ctx, store, tenant, size, max(0, quota)); err != nil {
		if errors.Is(err, ErrQuota) {
			return false, err
		}
		return false, fmt.Errorf("lfs: count usage: %w", err)
	}
	return false, nil
}

// holds reports whether tenant's object oid is stored.
func (h *Handler) holds(ctx context.Context, tenant, oid string) (bool, error) {
	return holds(ctx, h.opts.Store, tenant, oid)
}

// holds reports whether tenant's object oid is stored: one LIST of at
// most one key (the port has no HEAD).
func holds(ctx context.Context, store objstore.Store, tenant, oid string) (bool, error) {
	key := objectKey(tenant, oid)
	page, err := store.List(ctx, key, "", 1)
	if err != nil {
		return false, err
	}
	return len(page) == 1 && page[0].Key == key, nil
}

// usage returns tenant's stored LFS bytes as its usage record counts
// them (0 without a record).
func (h *Handler) usage(ctx context.Context, tenant string) (int64, error) {
	return usage(ctx, h.opts.Store, tenant)
}

func usage(ctx context.Context, store objstore.Store, tenant string) (int64, error) {
	u, _, err := record.Get(ctx, store, gc.LFSUsageCodec, gc.LFSUsageKey(tenant))
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	}
	return u.Bytes, nil
}

// overQuota decides a batch upload against the tenant's quota: the
// bytes the batch asks to upload and the tenant does not hold yet,
// added to its usage, must fit. It writes the refusal (507, which
// git-lfs shows and does not retry) and reports false when they do not.
// Two batches decided at once may both fit and together overshoot by at
// most one batch.
func (h *Handler) overQuota(w http.ResponseWriter, r *http.Request, tenant string, objs []batchResult) bool {
	if h.opts.QuotaBytes <= 0 {
		return false
	}
	var want int64
	for _, o := range objs {
		if o.Actions["upload"] == nil {
			continue
		}
		held, err := h.holds(r.Context(), tenant, o.OID)
		if err != nil {
			h.storeError(w, r, "read object", err)
			return true
		}
		if !held {
			want += o.Size
		}
	}
	if want == 0 {
		return false
	}
	used, err := h.usage(r.Context(), tenant)
	if err != nil {
		h.storeError(w, r, "read usage", err)
		return true
	}
	if used+want > h.opts.QuotaBytes {
		jsonError(w, http.StatusInsufficientStorage, fmt.Sprintf("%s: %s stores %d bytes of LFS objects, this push adds %d, the quota is %d bytes",
			ErrQuota, tenant, used, want, h.opts.QuotaBytes))
		return true
	}
	return false
}
