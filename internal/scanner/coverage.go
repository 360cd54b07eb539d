package scanner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// Coverage is the part of scanning that compaction must respect, so that
// folding a layer never makes its pending push run impossible and never
// drops an object no scan has read (docs/adr/0033-scan-coverage.md):
//
//   - ScannedThrough is the repository's watermark: every push at a seq
//     at or below it has been scanned (or is covered by a finished
//     full-history run). Compaction keeps, in the checkpoint it writes,
//     every object of the layers above it, reachable or not.
//   - PreserveLayer stores, before compaction folds a layer above the
//     watermark, the layer's object list (git's pack index of its pack).
//     The push run of that seq reads it instead of the layer, which the
//     index no longer lists.
//
// It needs the object store alone, so `ghost repo compact` and a node
// whose coordination store is down honour it as serve does.
type Coverage struct {
	store objstore.Store
	recs  records
}

// NewCoverage returns the coverage records of store.
func NewCoverage(store objstore.Store) *Coverage {
	return &Coverage{store: store, recs: records{store}}
}

func layersPrefix(repoID string) string { return "scans/" + repoID + "/layers/" }

func seqPrefix(repoID string, seq uint64) string {
	return fmt.Sprintf("%s%020d-", layersPrefix(repoID), seq)
}

// preservedKey names the preserved object list of the layer at seq: the
// seq first, so a listing is in seq order and one prefix finds it, then
// the entry's ULID, which dates the push (the scan-lag metrics read it).
func preservedKey(repoID string, seq uint64, id ulid.ULID) string {
	return seqPrefix(repoID, seq) + id.String() + ".idx"
}

// parsePreservedKey is the inverse of preservedKey.
func parsePreservedKey(repoID, key string) (seq uint64, id ulid.ULID, ok bool) {
	rest, found := strings.CutPrefix(key, layersPrefix(repoID))
	if !found {
		return 0, ulid.ULID{}, false
	}
	s, u, found := strings.Cut(strings.TrimSuffix(rest, ".idx"), "-")
	if !found || len(s) != 20 {
		return 0, ulid.ULID{}, false
	}
	seq, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, ulid.ULID{}, false
	}
	id, err = ulid.ParseStrict(u)
	if err != nil {
		return 0, ulid.ULID{}, false
	}
	return seq, id, true
}

// ScannedThrough returns repo's scan watermark (0 when it has none).
func (c *Coverage) ScannedThrough(ctx context.Context, repoID string) (uint64, error) {
	var w Watermark
	_, err := c.recs.get(ctx, watermarkKey(repoID), &w)
	if errors.Is(err, objstore.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("scanner: watermark of %s: %w", repoID, err)
	}
	return w.Seq, nil
}

// PreserveLayer stores idx, git's pack index of the pack of the layer at
// seq (size bytes; zero for a layer without objects), under a key of the
// scanner's own. It is an unconditional put of bytes that only this layer
// can have, so an outcome that is unknown is simply an error: the caller
// (a compaction, before its index write) gives up, and whatever landed is
// overwritten by the next attempt or removed once the watermark passes
// the seq.
func (c *Coverage) PreserveLayer(ctx context.Context, repoID string, seq uint64, layer wal.Layer, idx io.Reader, size int64) error {
	if idx == nil {
		idx, size = strings.NewReader(""), 0
	}
	key := preservedKey(repoID, seq, layer.ULID)
	if _, err := c.store.Put(ctx, key, idx, size); err != nil {
		return fmt.Errorf("scanner: preserve the object list of seq %d of %s: %w", seq, repoID, err)
	}
	return nil
}

// preserved is a preserved object list found in the store.
type preserved struct {
	key  string
	seq  uint64
	id   ulid.ULID
	size int64
}

// preservedAt returns the preserved object list of seq, if there is one.
func (c *Coverage) preservedAt(ctx context.Context, repoID string, seq uint64) (preserved, bool, error) {
	page, err := c.store.List(ctx, seqPrefix(repoID, seq), "", 1)
	if err != nil {
		return preserved{}, false, err
	}
	if len(page) == 0 {
		return preserved{}, false, nil
	}
	s, id, ok := parsePreservedKey(repoID, page[0].Key)
	if !ok || s != seq {
		return preserved{}, false, nil
	}
	return preserved{key: page[0].Key, seq: s, id: id, size: page[0].Size}, true, nil
}

// preservedAfter lists up to limit preserved lists with a seq above after,
// in seq order.
func (c *Coverage) preservedAfter(ctx context.Context, repoID string, after uint64, limit int) ([]preserved, error) {
	start := ""
	if after > 0 {
		start = seqPrefix(repoID, after) + "~" // past every key of seq after
	}
	page, err := c.store.List(ctx, layersPrefix(repoID), start, limit)
	if err != nil {
		return nil, err
	}
	out := make([]preserved, 0, len(page))
	for _, o := range page {
		if s, id, ok := parsePreservedKey(repoID, o.Key); ok && s > after {
			out = append(out, preserved{key: o.Key, seq: s, id: id, size: o.Size})
		}
	}
	return out, nil
}

// dropPreservedThrough deletes the preserved lists of seqs at or below
// seq: their pushes are scanned. It removes at most one page per call; a
// list left over is removed by a later call (every advance of the
// watermark and every reconcile pass makes one).
func (c *Coverage) dropPreservedThrough(ctx context.Context, repoID string, seq uint64) error {
	page, err := c.store.List(ctx, layersPrefix(repoID), "", maxReconcile)
	if err != nil {
		return err
	}
	for _, o := range page {
		s, _, ok := parsePreservedKey(repoID, o.Key)
		if !ok {
			continue
		}
		if s > seq {
			break
		}
		if err := c.store.Delete(ctx, o.Key); err != nil {
			return err
		}
	}
	return nil
}
