package etcdcoord

import (
	"errors"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/coord"
)

func TestValidateNamespace(t *testing.T) {
	for _, ns := range []string{"/ghost", "/ghost/coord", "/a.b_c-d/1"} {
		if err := ValidateNamespace(ns); err != nil {
			t.Errorf("%q: %v", ns, err)
		}
	}
	for _, ns := range []string{"", "ghost", "/ghost/", "/", "//ghost", "/a//b", "/gh ost", "/gh\x00", "/ü", "/" + strings.Repeat("a", 128)} {
		if err := ValidateNamespace(ns); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q accepted (err %v)", ns, err)
		}
	}
}

func TestKeyLayout(t *testing.T) {
	k := keys{"/ns"}
	tenant := coord.TenantID{0xAB, 0x01}
	cases := []struct{ got, want string }{
		{k.run(1), "/ns/runs/0000000000000001"},
		{k.shard(0x1f, coord.DerivedBit|2), "/ns/shards/000000000000001f/8000000000000002"},
		{k.shardPrefix(0x1f), "/ns/shards/000000000000001f/"},
		{k.open(2, 3), "/ns/open/0000000000000002/0000000000000003"},
		{k.claim(2, 0xffffffffffffffff), "/ns/claims/0000000000000002/ffffffffffffffff"},
		{k.tenantRun(tenant, 5), "/ns/tenant-runs/ab01" + strings.Repeat("00", 30) + "/0000000000000005"},
		{k.gc(1000, 5), "/ns/gc/00000000000003e8/0000000000000005"},
		{k.tenantCount(tenant), "/ns/tenants/ab01" + strings.Repeat("00", 30) + "/shard_count"},
		{k.globalCount(), "/ns/global/shard_count"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	// Fixed width: shard keys sort like their ids, and one run's prefix
	// never covers another run's keys.
	if !(k.shard(1, 0xf) < k.shard(1, 0x10) && k.shard(1, 0x10) < k.shard(1, coord.DerivedBit)) {
		t.Error("shard keys do not sort by id")
	}
	if strings.HasPrefix(k.shard(0x10, 1), k.shardPrefix(0x1)) || strings.HasPrefix(k.shard(0x1, 1), k.shardPrefix(0x10)) {
		t.Error("one run's prefix matches another's shards")
	}
	if end := prefixEnd(k.shardPrefix(1)); !(k.shard(1, 1<<64-1) < end && end <= k.shardPrefix(2)) {
		t.Errorf("prefixEnd %q does not bound the run", end)
	}
	if k.gc(999, 1<<64-1) >= k.gcBefore(1000) || k.gc(1000, 1) < k.gcBefore(1000) {
		t.Error("gcBefore does not split the gc index at the time")
	}
	run, id, err := k.parseShardKey(k.shard(7, coord.DerivedBit|9))
	if err != nil || run != 7 || id != coord.DerivedBit|9 {
		t.Errorf("parseShardKey: %d %v %v", run, id, err)
	}
	for _, bad := range []string{"/ns/shards/7/9", "/ns/shards/0000000000000007-0000000000000009", "/other/shards/0000000000000007/0000000000000009", "/ns/shards/000000000000000g/0000000000000009"} {
		if _, _, err := k.parseShardKey(bad); !errors.Is(err, coord.ErrCorrupt) {
			t.Errorf("parseShardKey(%q) accepted", bad)
		}
	}
	if got, err := k.parseTenantCountKey(k.tenantCount(tenant)); err != nil || got != tenant {
		t.Errorf("parseTenantCountKey: %x %v", got, err)
	}
	if got, err := k.parseGCKey(k.gc(5, 6)); err != nil || got != 6 {
		t.Errorf("parseGCKey: %d %v", got, err)
	}
}

func TestCounterEncoding(t *testing.T) {
	v := encodeCount(0x0102)
	if string(v) != "\x02\x01\x00\x00\x00\x00\x00\x00" {
		t.Fatalf("not little-endian u64: %x", v)
	}
	if n, err := decodeCount("k", v); err != nil || n != 0x0102 {
		t.Fatalf("decode: %d %v", n, err)
	}
	for _, bad := range [][]byte{nil, {1}, make([]byte, 9), {0, 0, 0, 0, 0, 0, 0, 0x80}} {
		if _, err := decodeCount("k", bad); !errors.Is(err, coord.ErrCorrupt) {
			t.Errorf("decodeCount(%x) accepted", bad)
		}
	}
}

func TestOpenValue(t *testing.T) {
	s := coord.Shard{State: coord.ShardActive, Owner: 3, Deadline: 500}
	e, err := decodeOpen("k", openValue(&s))
	if err != nil || e.state != coord.ShardActive || e.deadline != 500 {
		t.Fatalf("round trip: %+v %v", e, err)
	}
	if e.claimable(499) || !e.claimable(500) {
		t.Error("claimable does not follow the deadline")
	}
	s.State, s.Owner, s.Deadline = coord.ShardParked, 0, 0
	if e, _ := decodeOpen("k", openValue(&s)); e.claimable(1) {
		t.Error("parked shard claimable")
	}
	for _, st := range []coord.ShardState{coord.ShardDone, coord.ShardSplit} {
		s.State = st
		if openValue(&s) != nil {
			t.Errorf("%v shard has an index entry", st)
		}
	}
	good := openValue(&coord.Shard{State: coord.ShardActive})
	for _, bad := range [][]byte{nil, good[:9], append(good, 0), {2, 1, 0, 0, 0, 0, 0, 0, 0, 0}, {1, byte(coord.ShardDone), 0, 0, 0, 0, 0, 0, 0, 0}} {
		if _, err := decodeOpen("k", bad); !errors.Is(err, coord.ErrCorrupt) {
			t.Errorf("decodeOpen(%x) accepted", bad)
		}
	}
}

func TestRecordsRejectTrailingBytes(t *testing.T) {
	r := coord.Run{Tenant: coord.TenantID{1}, ID: 1, State: coord.RunInitializing, CreatedAt: 1, UpdatedAt: 1,
		Config: coord.RunConfig{LeaseDuration: 1e9, Cursor: coord.CursorNonDecreasing}}
	v, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeRun(rec{key: "k", rev: 1, val: append(v, 0)}, r.Tenant, 1); !errors.Is(err, coord.ErrCorrupt) {
		t.Errorf("trailing byte accepted: %v", err)
	}
	if _, err := decodeRun(rec{key: "k", rev: 1, val: v}, r.Tenant, 2); !errors.Is(err, coord.ErrCorrupt) {
		t.Errorf("run stored under another id accepted: %v", err)
	}
	if _, err := decodeRun(rec{key: "k", rev: 1, val: v}, coord.TenantID{2}, 1); !errors.Is(err, coord.ErrTenantMismatch) {
		t.Errorf("other tenant: %v", err)
	}
	if _, err := decodeRun(rec{key: "k"}, r.Tenant, 1); !errors.Is(err, coord.ErrNotFound) {
		t.Errorf("absent: %v", err)
	}
}
