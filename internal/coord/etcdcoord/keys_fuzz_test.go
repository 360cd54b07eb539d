package etcdcoord

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/coord"
)

// FuzzParseKeys reads arbitrary etcd keys with every key parser. A key
// that does not parse is ErrCorrupt; one that does is exactly the key
// ghost writes for what it parsed to, so no two keys read as one record.
func FuzzParseKeys(f *testing.F) {
	k := keys{"/ns"}
	tenant := coord.TenantID{0xab, 0x01}
	for _, s := range []string{
		k.shard(0x1f, coord.DerivedBit|2), k.gc(1000, 5), k.tenantCount(tenant), k.run(7), k.globalCount(),
		"/ns/shards/7/9", "/ns/gc/x/0000000000000005", "/ns/runs/+000000000000007", "",
	} {
		f.Add("/ns", s)
	}
	f.Add("/a/b", "/a/b/runs/0000000000000001")
	f.Add("/a//b", "/a//b/runs/0000000000000001")
	f.Fuzz(func(t *testing.T, ns, key string) {
		if err := ValidateNamespace(ns); err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("namespace %q: error %v is not ErrInvalidConfig", ns, err)
			}
			ns = "/ns"
		} else if ns[0] != '/' || strings.HasSuffix(ns, "/") || strings.Contains(ns, "//") || len(ns) > maxNamespaceLen || strings.ContainsAny(ns, " \x00\n") {
			t.Fatalf("namespace %q accepted", ns)
		}
		k := keys{ns}
		check := func(what string, err error, canonical string) {
			t.Helper()
			if err != nil {
				if !errors.Is(err, coord.ErrCorrupt) {
					t.Fatalf("%s(%q): error %v is not ErrCorrupt", what, key, err)
				}
				return
			}
			if canonical != key {
				t.Fatalf("%s(%q) accepted a key ghost writes as %q", what, key, canonical)
			}
		}
		run, id, err := k.parseShardKey(key)
		check("parseShardKey", err, k.shard(run, id))
		if err == nil && !strings.HasPrefix(key, k.shardPrefix(run)) {
			t.Fatalf("shard key %q outside its run's prefix", key)
		}
		gcRun, err := k.parseGCKey(key)
		if err == nil {
			// The time is not returned, only checked to be hex.
			at, perr := parseHex16(key[len(k.gcPrefix()) : len(k.gcPrefix())+16])
			if perr != nil {
				t.Fatalf("parseGCKey(%q) accepted a bad time", key)
			}
			check("parseGCKey", nil, k.gc(coord.Time(at), gcRun))
		} else {
			check("parseGCKey", err, "")
		}
		rid, err := parseIDAfter(k.runsPrefix(), key)
		check("parseIDAfter", err, k.run(coord.RunID(rid)))
		tn, err := k.parseTenantCountKey(key)
		check("parseTenantCountKey", err, k.tenantCount(tn))
		if v, err := parseHex16(key); err == nil && hex16(v) != key {
			t.Fatalf("parseHex16(%q) = %d, written %q", key, v, hex16(v))
		}
	})
}

// FuzzDecodeValues reads arbitrary etcd values as each small value type:
// errors are ErrCorrupt, and what decodes re-encodes to the same bytes.
func FuzzDecodeValues(f *testing.F) {
	f.Add(encodeCount(0))
	f.Add(encodeCount(0x0102))
	f.Add(encodeCount(1 << 62))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0x80})
	f.Add(openValue(&coord.Shard{State: coord.ShardActive, Deadline: 500}))
	f.Add(openValue(&coord.Shard{State: coord.ShardParked}))
	f.Add(encodeShardID(coord.DerivedBit | 9))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		mustCorrupt := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, coord.ErrCorrupt) {
				t.Fatalf("%s(%x): error %v is not ErrCorrupt", what, v, err)
			}
		}
		if n, err := decodeCount("k", v); err != nil {
			mustCorrupt("decodeCount", err)
		} else if n < 0 || !bytes.Equal(encodeCount(n), v) {
			t.Fatalf("decodeCount(%x) = %d", v, n)
		}
		if e, err := decodeOpen("k", v); err != nil {
			mustCorrupt("decodeOpen", err)
		} else if b := openValue(&coord.Shard{State: e.state, Deadline: e.deadline}); !bytes.Equal(b, v) {
			t.Fatalf("decodeOpen(%x) = %+v, written %x", v, e, b)
		}
		if id, err := decodeShardID("k", v); err != nil {
			mustCorrupt("decodeShardID", err)
		} else if !bytes.Equal(encodeShardID(id), v) {
			t.Fatalf("decodeShardID(%x) = %v", v, id)
		}
	})
}

// TestKeyParsersRefuseUpperCaseHex is the regression test for what
// FuzzParseKeys found (testdata/fuzz/FuzzParseKeys): strconv.ParseUint and
// hex.Decode take upper-case digits, so the parsers read keys ghost never
// writes as the ids of keys it does. RepairCounts then left such a tenant
// counter in place (it only rewrites the canonical key) while the advisory
// cap summed both. The same canonical-key check showed that parseGCKey did
// not look at the completion time at all.
func TestKeyParsersRefuseUpperCaseHex(t *testing.T) {
	k := keys{"/ns"}
	upper := "/ns/tenants/AB01" + strings.Repeat("00", 30) + "/shard_count"
	if _, err := k.parseTenantCountKey(upper); !errors.Is(err, coord.ErrCorrupt) {
		t.Errorf("parseTenantCountKey(%q) accepted", upper)
	}
	for _, key := range []string{"/ns/shards/A000000000000000/0000000000000000", "/ns/shards/000000000000001f/800000000000000F"} {
		if _, _, err := k.parseShardKey(key); !errors.Is(err, coord.ErrCorrupt) {
			t.Errorf("parseShardKey(%q) accepted", key)
		}
	}
	if _, err := k.parseGCKey("/ns/gc/00000000000003e8/000000000000000A"); !errors.Is(err, coord.ErrCorrupt) {
		t.Error("parseGCKey accepted an upper-case run id")
	}
	if _, err := k.parseGCKey("/ns/gc/zzzzzzzzzzzzzzzz/0000000000000005"); !errors.Is(err, coord.ErrCorrupt) {
		t.Error("parseGCKey accepted a key whose time is not hex")
	}
	if _, err := parseIDAfter(k.runsPrefix(), "/ns/runs/00000000000000FF"); !errors.Is(err, coord.ErrCorrupt) {
		t.Error("parseIDAfter accepted an upper-case id")
	}
}
