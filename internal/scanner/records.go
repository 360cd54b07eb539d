package scanner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// Errors callers branch on.
var (
	// ErrInvalid reports a malformed request.
	ErrInvalid = errors.New("scanner: invalid argument")
	// ErrNotFound reports a run that has no descriptor.
	ErrNotFound = errors.New("scanner: run not found")
	// ErrContention reports a record that changed under every attempt to
	// update it; nothing applied, and retrying is safe.
	ErrContention = errors.New("scanner: record changed concurrently too often")
)

const (
	recordVersion = 1
	maxRecord     = 1 << 20
	casAttempts   = 8
)

// Run is a run's descriptor in the object store: what the run is, and,
// once its shards are all done, what it scanned. The descriptor outlives
// the coord records (which GC removes), so run history and statistics
// come from here.
type Run struct {
	V      int    `json:"v"`
	Tenant string `json:"tenant"`
	RepoID string `json:"repo_id"`
	Kind   Kind   `json:"kind"`
	Seq    uint64 `json:"seq"`
	// ID is the coord run id (Spec.RunID).
	ID        uint64    `json:"id"`
	Shards    int       `json:"shards"` // root shards
	CreatedAt time.Time `json:"created_at"`
	// Final is set once every shard is done, before the coord run is
	// completed, so the statistics survive the shard records.
	Final *Final `json:"final,omitempty"`
	// Done is set once the coord run is Done and the run's follow-ups
	// (watermark, active marker) are written.
	Done bool `json:"done,omitempty"`
	// SupersededBy is set on a push run whose layer was folded by a
	// compaction that preserved no object list for it (one that ran
	// before docs/adr/0033-scan-coverage.md, or a fork's copied
	// history): the full run at that seq covers it instead. Such a run
	// is done once its shard is, but the watermark passes it only when
	// the full run is done.
	SupersededBy uint64 `json:"superseded_by,omitempty"`
}

// Final is what a finished run scanned.
type Final struct {
	// Shards counts the shards scanned: the root shards and those split
	// off them, less the ones split.
	Shards   int       `json:"shards"`
	Blobs    int64     `json:"blobs"`
	Bytes    int64     `json:"bytes"`
	Findings int64     `json:"findings"`
	At       time.Time `json:"at"`
}

// Spec returns the run's identity.
func (r *Run) Spec() Spec { return Spec{Tenant: r.Tenant, RepoID: r.RepoID, Kind: r.Kind, Seq: r.Seq} }

func runsPrefix(repoID string) string { return "scans/" + repoID + "/runs/" }

func runKey(s Spec) string { return fmt.Sprintf("%s%020d-%s", runsPrefix(s.RepoID), s.Seq, s.Kind) }

func watermarkKey(repoID string) string { return "scans/" + repoID + "/watermark" }

const activePrefix = "scans/active/"

func activeKindPrefix(k Kind) string { return activePrefix + string(k) + "/" }

func activeKey(s Spec) string {
	return fmt.Sprintf("%s%s/%s/%020d", activeKindPrefix(s.Kind), s.Tenant, s.RepoID, s.Seq)
}

// parseActiveKey is the inverse of activeKey.
func parseActiveKey(key string) (Spec, bool) {
	rest, ok := strings.CutPrefix(key, activePrefix)
	if !ok {
		return Spec{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 4 {
		return Spec{}, false
	}
	seq, err := strconv.ParseUint(parts[3], 10, 64)
	if err != nil {
		return Spec{}, false
	}
	s := Spec{Kind: Kind(parts[0]), Tenant: parts[1], RepoID: parts[2], Seq: seq}
	return s, s.check() == nil
}

// records reads and writes the scanner's objects with the write-outcome
// contract of docs/adr/0006-write-outcomes.md: conditional puts, and a
// re-read to settle any write whose outcome is unknown.
type records struct {
	store objstore.Store
}

func (rs records) get(ctx context.Context, key string, v any) (string, error) {
	b, info, err := objstore.ReadAll(ctx, rs.store, key, maxRecord)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return "", fmt.Errorf("scanner: decode %s: %w", key, err)
	}
	return info.ETag, nil
}

// create writes v at key unless the key exists. It reports whether the
// object now holds v's bytes or an earlier value: an existing object is
// not an error (a run created twice is one run).
func (rs records) create(ctx context.Context, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = rs.store.PutIfAbsent(ctx, key, bytes.NewReader(b), int64(len(b)))
	switch {
	case err == nil, errors.Is(err, objstore.ErrPreconditionFailed):
		return nil
	case errors.Is(err, objstore.ErrOutcomeUnknown):
		// Settle by reading: present (ours or anyone's) is success.
		if _, _, gerr := objstore.ReadAll(ctx, rs.store, key, maxRecord); gerr == nil {
			return nil
		}
	}
	return fmt.Errorf("scanner: create %s: %w", key, err)
}

// update applies fn to the record at key (nil when absent) and writes
// the result conditionally, retrying lost races. fn returning nil means
// no change. An unknown outcome is settled by re-reading: if the stored
// record is what we wrote, it applied.
func update[T any](ctx context.Context, rs records, key string, fn func(cur *T) *T) error {
	for range casAttempts {
		var cur T
		etag, err := rs.get(ctx, key, &cur)
		var curp *T
		switch {
		case err == nil:
			curp = &cur
		case errors.Is(err, objstore.ErrNotFound):
		default:
			return err
		}
		next := fn(curp)
		if next == nil {
			return nil
		}
		b, err := json.Marshal(next)
		if err != nil {
			return err
		}
		if curp == nil {
			_, err = rs.store.PutIfAbsent(ctx, key, bytes.NewReader(b), int64(len(b)))
		} else {
			_, err = rs.store.PutIfMatch(ctx, key, bytes.NewReader(b), int64(len(b)), etag)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, objstore.ErrPreconditionFailed):
			continue
		case errors.Is(err, objstore.ErrOutcomeUnknown):
			got, _, gerr := objstore.ReadAll(ctx, rs.store, key, maxRecord)
			if gerr == nil && bytes.Equal(got, b) {
				return nil
			}
			continue // fn is idempotent: apply it to whatever is there now
		default:
			return fmt.Errorf("scanner: write %s: %w", key, err)
		}
	}
	return fmt.Errorf("%w: %s", ErrContention, key)
}

// Watermark is the per-repository "scanned through seq" record: every
// push run of a seq <= Seq is done. It lives beside the repository's
// other scan records in the object store, so it survives etcd; the
// reconciler starts push runs for the seqs after it.
type Watermark struct {
	V      int    `json:"v"`
	Tenant string `json:"tenant"`
	RepoID string `json:"repo_id"`
	Seq    uint64 `json:"seq"`
}
