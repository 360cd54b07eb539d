package etcdcoord

import (
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultRecordCache is how many run and shard records a Backend
// remembers by default (Config.RecordCache).
const DefaultRecordCache = 4096

// recCache remembers run and shard records as this Backend last read or
// wrote them, each with the mod revision it had then, so that a mutation
// of a record it just wrote (a worker's next checkpoint, its renewal, its
// completion) needs no read before its transaction: one round trip to
// etcd instead of two (docs/adr/0026-coordination-round-trips.md).
//
// A cached record is a guess, never a decision. The transaction built on
// it compares the mod revision of every record it was built from, exactly
// as one built on a fresh read does, so a stale entry can only make the
// compare fail; the failed transaction returns the records as they are
// (its Else branch), and the mutation is decided again on those. A
// mutation that would write nothing on cached records (a replay, a
// refusal) is decided again on a fresh read before it is reported, so no
// answer ever rests on what the cache alone says.
//
// The cache holds at most max records; when full, an arbitrary one goes.
type recCache struct {
	mu  sync.Mutex
	max int
	m   map[string]rec
}

func newRecCache(max int) *recCache {
	if max <= 0 {
		return nil
	}
	return &recCache{max: max, m: make(map[string]rec, min(max, 1024))}
}

// get returns the records of keys, in order, if the cache holds every
// one of them.
func (c *recCache) get(keys []string) ([]rec, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]rec, len(keys))
	for i, k := range keys {
		r, ok := c.m[k]
		if !ok {
			return nil, false
		}
		out[i] = r
	}
	return out, true
}

// put remembers records as read. Absent ones are forgotten: absence is
// what a fresh read says, and it is cheap to learn again.
func (c *recCache) put(rs ...rec) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rs {
		if !r.exists() {
			delete(c.m, r.key)
			continue
		}
		c.set(r)
	}
}

// set stores r; the caller holds mu.
func (c *recCache) set(r rec) {
	if _, ok := c.m[r.key]; !ok && len(c.m) >= c.max {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[r.key] = r
}

// drop forgets keys, after a write whose outcome is unknown.
func (c *recCache) drop(keys ...string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		delete(c.m, k)
	}
}

// committed updates the cache after t committed at revision rev: every
// record t wrote now has that mod revision, and every key it deleted is
// gone. Records t only compared keep the revision they were read at,
// which the compare just confirmed.
func (c *recCache) committed(t *txn, rev int64) {
	if c == nil || len(t.remember) == 0 && len(t.forget) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range t.forget {
		for k := range c.m {
			if strings.HasPrefix(k, p) {
				delete(c.m, k)
			}
		}
	}
	for _, r := range t.remember {
		r.rev = rev
		c.set(r)
	}
}

// gets returns the operations reading keys, for a transaction's Else
// branch: a failed compare then brings the records as they are.
func gets(keys []string) []clientv3.Op {
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpGet(k)
	}
	return ops
}

// elseRecs decodes the records read by gets(keys) in the Else branch of a
// failed transaction, or in a read-only one.
func elseRecs(keys []string, resp *clientv3.TxnResponse) []rec { return recsAt(keys, resp, 0) }

// recsAt decodes the records of keys read by the transaction's responses
// from the from-th on.
func recsAt(keys []string, resp *clientv3.TxnResponse, from int) []rec {
	out := make([]rec, len(keys))
	for i, k := range keys {
		out[i].key = k
		if kvs := resp.Responses[from+i].GetResponseRange().GetKvs(); len(kvs) > 0 {
			out[i].rev, out[i].val = kvs[0].ModRevision, kvs[0].Value
		}
	}
	return out
}
