package etcdcoord

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ghost-scm/ghost/internal/coord"
)

// Key layout under the namespace <ns>. Ids are fixed-width lower-case hex,
// so keys of one kind sort by id and no id is a prefix of another; prefix
// scans still end in "/" so that "<ns>/shards/<run>" can never match the
// shards of a run whose id merely starts with the same digits.
//
//	<ns>/runs/<run>                     coord.Run record
//	<ns>/shards/<run>/<shard>           coord.Shard record
//	<ns>/open/<run>/<shard>             index: shard is Active or Parked (openValue)
//	<ns>/claims/<run>/<op>              ClaimNext op id -> shard it claimed (u64 BE)
//	<ns>/tenant-runs/<tenant>/<run>     index: run is not terminal (empty value)
//	<ns>/gc/<completed_at>/<run>        index: terminal run by completion time
//	<ns>/registrations/<run>            chunked RegisterShards in progress (registration)
//	<ns>/tenants/<tenant>/shard_count   shard records of the tenant (u64 LE)
//	<ns>/global/shard_count             shard records in the namespace (u64 LE)
//	<ns>/markers/tenants/<tenant>       the tenant's counter exists (empty value)
//	<ns>/markers/global                 the global counter exists (empty value)
//	<ns>/locks/gc                       held by the node running GC (see TryGC)
//	<ns>/leaders/<name>/<lease>         an election (see Lead)
//	<ns>/boards/<name>/work/<key>       a board's item of work (see Board)
//	<ns>/boards/<name>/hold/<name>      who holds a name of a board, on its session's lease
//
// Nothing but the counters lives under <ns>/tenants/, so the advisory global
// cap can sum them with one range read.
type keys struct{ ns string }

// Namespace limits.
const maxNamespaceLen = 128

// ValidateNamespace reports whether ns can prefix ghost's keys: non-empty,
// at most 128 bytes of [A-Za-z0-9._/-], starting with "/", with no empty
// path element and no trailing "/". A trailing slash would make "<ns>/" and
// "<ns>//" two spellings of one tree; printable ASCII keeps keys readable in
// etcdctl.
func ValidateNamespace(ns string) error {
	switch {
	case ns == "":
		return fmt.Errorf("%w: empty namespace", ErrInvalidConfig)
	case len(ns) > maxNamespaceLen:
		return fmt.Errorf("%w: namespace is %d bytes, max %d", ErrInvalidConfig, len(ns), maxNamespaceLen)
	case ns[0] != '/':
		return fmt.Errorf("%w: namespace %q does not start with /", ErrInvalidConfig, ns)
	case strings.HasSuffix(ns, "/"):
		return fmt.Errorf("%w: namespace %q ends with /", ErrInvalidConfig, ns)
	case strings.Contains(ns, "//"):
		return fmt.Errorf("%w: namespace %q has an empty element", ErrInvalidConfig, ns)
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return fmt.Errorf("%w: namespace %q has byte %#x", ErrInvalidConfig, ns, c)
		}
	}
	return nil
}

func hex16(v uint64) string {
	var b [16]byte
	s := strconv.AppendUint(b[:0], v, 16)
	return strings.Repeat("0", 16-len(s)) + string(s)
}

// parseHex16 accepts exactly what hex16 writes: strconv alone would also
// take upper-case digits, reading a key ghost never writes as another's id.
func parseHex16(s string) (uint64, error) {
	if len(s) != 16 || strings.Trim(s, "0123456789abcdef") != "" {
		return 0, fmt.Errorf("id %q is not 16 lower-case hex digits", s)
	}
	return strconv.ParseUint(s, 16, 64)
}

func (k keys) run(id coord.RunID) string { return k.ns + "/runs/" + hex16(uint64(id)) }
func (k keys) runsPrefix() string        { return k.ns + "/runs/" }

func (k keys) shardsPrefix() string { return k.ns + "/shards/" }
func (k keys) shardPrefix(run coord.RunID) string {
	return k.ns + "/shards/" + hex16(uint64(run)) + "/"
}
func (k keys) shard(run coord.RunID, id coord.ShardID) string {
	return k.shardPrefix(run) + hex16(uint64(id))
}

func (k keys) openPrefix(run coord.RunID) string { return k.ns + "/open/" + hex16(uint64(run)) + "/" }
func (k keys) open(run coord.RunID, id coord.ShardID) string {
	return k.openPrefix(run) + hex16(uint64(id))
}

func (k keys) claimPrefix(run coord.RunID) string {
	return k.ns + "/claims/" + hex16(uint64(run)) + "/"
}
func (k keys) claim(run coord.RunID, op coord.OpID) string {
	return k.claimPrefix(run) + hex16(uint64(op))
}

func (k keys) tenantRunPrefix(t coord.TenantID) string {
	return k.ns + "/tenant-runs/" + hex.EncodeToString(t[:]) + "/"
}
func (k keys) tenantRun(t coord.TenantID, run coord.RunID) string {
	return k.tenantRunPrefix(t) + hex16(uint64(run))
}

func (k keys) registration(run coord.RunID) string {
	return k.ns + "/registrations/" + hex16(uint64(run))
}

func (k keys) gcPrefix() string { return k.ns + "/gc/" }

// gcBefore is the end of the range of gc keys whose time is below t.
func (k keys) gcBefore(t coord.Time) string { return k.gcPrefix() + hex16(uint64(t)) }
func (k keys) gc(at coord.Time, run coord.RunID) string {
	return k.gcPrefix() + hex16(uint64(at)) + "/" + hex16(uint64(run))
}

func (k keys) tenantsPrefix() string { return k.ns + "/tenants/" }
func (k keys) tenantCount(t coord.TenantID) string {
	return k.tenantsPrefix() + hex.EncodeToString(t[:]) + "/shard_count"
}
func (k keys) globalCount() string { return k.ns + "/global/shard_count" }

// Markers tell a counter that was never created (zero) from one that was
// deleted (see ErrCounterLost); RepairCounters also compares them.
func (k keys) tenantMarker(t coord.TenantID) string {
	return k.tenantMarkersPrefix() + hex.EncodeToString(t[:])
}
func (k keys) tenantMarkersPrefix() string { return k.ns + "/markers/tenants/" }

// parseTenantMarkerKey returns the tenant of a key under tenantMarkersPrefix.
func (k keys) parseTenantMarkerKey(key string) (coord.TenantID, error) {
	var t coord.TenantID
	h, ok := strings.CutPrefix(key, k.tenantMarkersPrefix())
	if !ok || len(h) != 2*len(t) {
		return t, fmt.Errorf("%w: bad tenant marker key %q", coord.ErrCorrupt, key)
	}
	if _, err := hex.Decode(t[:], []byte(h)); err != nil || hex.EncodeToString(t[:]) != h {
		return coord.TenantID{}, fmt.Errorf("%w: tenant marker key %q: not lower-case hex", coord.ErrCorrupt, key)
	}
	return t, nil
}
func (k keys) globalMarker() string { return k.ns + "/markers/global" }

func (k keys) gcLock() string { return k.ns + "/locks/gc" }

// parseShardKey returns the run and shard of a key under shardsPrefix.
func (k keys) parseShardKey(key string) (coord.RunID, coord.ShardID, error) {
	rest, ok := strings.CutPrefix(key, k.shardsPrefix())
	if !ok || len(rest) != 33 || rest[16] != '/' {
		return 0, 0, fmt.Errorf("%w: bad shard key %q", coord.ErrCorrupt, key)
	}
	run, err1 := parseHex16(rest[:16])
	id, err2 := parseHex16(rest[17:])
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("%w: shard key %q: %w", coord.ErrCorrupt, key, err)
	}
	return coord.RunID(run), coord.ShardID(id), nil
}

// parseIDAfter parses the fixed-width hex id that follows prefix in key.
func parseIDAfter(prefix, key string) (uint64, error) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return 0, fmt.Errorf("%w: key %q outside %q", coord.ErrCorrupt, key, prefix)
	}
	id, err := parseHex16(rest)
	if err != nil {
		return 0, fmt.Errorf("%w: key %q: %w", coord.ErrCorrupt, key, err)
	}
	return id, nil
}

// parseGCKey returns the run of a key under gcPrefix.
func (k keys) parseGCKey(key string) (coord.RunID, error) {
	rest, ok := strings.CutPrefix(key, k.gcPrefix())
	if !ok || len(rest) != 33 || rest[16] != '/' {
		return 0, fmt.Errorf("%w: bad gc key %q", coord.ErrCorrupt, key)
	}
	_, err1 := parseHex16(rest[:16]) // the completion time: checked, not needed
	run, err2 := parseHex16(rest[17:])
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("%w: gc key %q: %w", coord.ErrCorrupt, key, err)
	}
	return coord.RunID(run), nil
}

// parseTenantCountKey returns the tenant of a key under tenantsPrefix.
func (k keys) parseTenantCountKey(key string) (coord.TenantID, error) {
	var t coord.TenantID
	rest, ok := strings.CutPrefix(key, k.tenantsPrefix())
	if !ok {
		return t, fmt.Errorf("%w: bad tenant counter key %q", coord.ErrCorrupt, key)
	}
	h, ok := strings.CutSuffix(rest, "/shard_count")
	if !ok || len(h) != 2*len(t) {
		return t, fmt.Errorf("%w: bad tenant counter key %q", coord.ErrCorrupt, key)
	}
	if _, err := hex.Decode(t[:], []byte(h)); err != nil {
		return t, fmt.Errorf("%w: tenant counter key %q: %w", coord.ErrCorrupt, key, err)
	}
	if hex.EncodeToString(t[:]) != h {
		return coord.TenantID{}, fmt.Errorf("%w: tenant counter key %q: not lower-case hex", coord.ErrCorrupt, key)
	}
	return t, nil
}

// Counters are little-endian u64, exactly 8 bytes.
func encodeCount(n int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(n)) }

func decodeCount(key string, v []byte) (int64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: counter %s is %d bytes, want 8", coord.ErrCorrupt, key, len(v))
	}
	n := binary.LittleEndian.Uint64(v)
	if n > 1<<62 {
		return 0, fmt.Errorf("%w: counter %s holds %d", coord.ErrCorrupt, key, n)
	}
	return int64(n), nil
}

// openValue is the value of an open-shard index key: what ClaimNext needs to
// pick candidates without reading every shard record. Version 1 is the
// version byte, the state byte and the lease deadline as u64 little-endian
// (zero when no lease is held).
const openValueVersion = 1

type openEntry struct {
	state    coord.ShardState
	deadline coord.Time
}

// openValue returns the index value for s, or nil when s is terminal and
// has no index entry.
func openValue(s *coord.Shard) []byte {
	if s.State.Terminal() {
		return nil
	}
	b := []byte{openValueVersion, byte(s.State)}
	return binary.LittleEndian.AppendUint64(b, uint64(s.Deadline))
}

func decodeOpen(key string, v []byte) (openEntry, error) {
	if len(v) != 10 || v[0] != openValueVersion {
		return openEntry{}, fmt.Errorf("%w: open index %s: bad value %x", coord.ErrCorrupt, key, v)
	}
	e := openEntry{state: coord.ShardState(v[1]), deadline: coord.Time(binary.LittleEndian.Uint64(v[2:]))}
	if e.state != coord.ShardActive && e.state != coord.ShardParked {
		return openEntry{}, fmt.Errorf("%w: open index %s: state %v", coord.ErrCorrupt, key, e.state)
	}
	return e, nil
}

// claimable mirrors coord.Shard.Claimable on the index entry.
func (e openEntry) claimable(now coord.Time) bool {
	return e.state == coord.ShardActive && (e.deadline == 0 || now >= e.deadline)
}

func encodeShardID(id coord.ShardID) []byte { return binary.BigEndian.AppendUint64(nil, uint64(id)) }

func decodeShardID(key string, v []byte) (coord.ShardID, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: %s: bad shard id %x", coord.ErrCorrupt, key, v)
	}
	return coord.ShardID(binary.BigEndian.Uint64(v)), nil
}
