package scanner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
)

// Errors callers branch on.
var (
	// ErrInvalid reports a malformed request.
	ErrInvalid = errors.New("scanner: invalid argument")
	// ErrNotFound reports a run that has no descriptor.
	ErrNotFound = errors.New("scanner: run not found")
	// ErrContention reports a record that changed under every attempt to
	// update it; nothing applied, and retrying is safe.
	ErrContention = record.ErrContention
)

const (
	recordVersion = 1
	maxRecord     = 1 << 20
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

// records reads and writes the scanner's objects through package record,
// with the write-outcome contract of docs/adr/0006-write-outcomes.md:
// conditional puts, and a re-read to settle any write whose outcome is
// unknown.
type records struct {
	store objstore.Store
}

// rawCodec keeps a record's JSON as it is, for get and create, which take
// any record type.
var rawCodec = record.Codec[json.RawMessage]{
	Encode: func(v *json.RawMessage) ([]byte, error) { return *v, nil },
	Decode: func(b []byte, v *json.RawMessage) error {
		if !json.Valid(b) {
			return errors.New("not JSON")
		}
		*v = b
		return nil
	},
	Max: maxRecord,
}

func (rs records) get(ctx context.Context, key string, v any) (string, error) {
	raw, etag, err := record.Get(ctx, rs.store, rawCodec, key)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(*raw, v); err != nil {
		return "", fmt.Errorf("scanner: decode %s: %w", key, err)
	}
	return etag, nil
}

// create writes v at key unless the key exists: an existing record is not
// an error (a run created twice is one run). A write whose outcome is
// unknown is settled by reading the key back.
func (rs records) create(ctx context.Context, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	raw := json.RawMessage(b)
	if _, err := record.CreateOnce(ctx, rs.store, rawCodec, key, &raw); err != nil {
		return fmt.Errorf("scanner: create %s: %w", key, err)
	}
	return nil
}

// update applies fn to the record at key (nil when absent) by
// compare-and-swap (record.Update); fn returning nil means the record
// already holds the change, and fn must be idempotent. Its errors are
// record.Update's: not applied (ErrContention among them), or unknown.
func update[T any](ctx context.Context, rs records, key string, fn func(cur *T) *T) error {
	c := record.JSON[T]()
	c.Max = maxRecord
	_, err := record.Update(ctx, rs.store, c, key, record.Options{}, func(cur *T) (*T, error) { return fn(cur), nil })
	return err
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
