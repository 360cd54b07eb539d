package etcdcoord

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ghost-scm/ghost/internal/coord"
)

// GC removes the runs that have been terminal for longer than retention at
// logical time now: the run record, its shards, their index entries and
// claim keys, in one transaction per run that also takes the shards off the
// tenant and global counters. It returns how many runs it removed; on an
// error, the runs removed before it stay removed.
//
// Runs are found through the gc index in completion order, so GC reads only
// what it removes. Concurrent GCs are safe: each run's removal is guarded
// by the run record and the counters, and a run already removed is skipped.
func (b *Backend) GC(ctx context.Context, now coord.Time, retention time.Duration) (int, error) {
	if now < 1 || retention < 0 {
		return 0, fmt.Errorf("%w: gc at %d with retention %v", coord.ErrInvalidArgument, now, retention)
	}
	cutoff := now.Add(-retention)
	if cutoff < 1 {
		return 0, nil
	}
	var runs []coord.RunID
	_, err := b.scan(ctx, 0, b.k.gcPrefix(), b.k.gcBefore(cutoff), []clientv3.OpOption{clientv3.WithKeysOnly()}, func(key string, _ []byte) error {
		id, err := b.k.parseGCKey(key)
		runs = append(runs, id)
		return err
	})
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, id := range runs {
		ok, err := b.removeRun(ctx, id, cutoff)
		if err != nil {
			return removed, err
		}
		if ok {
			removed++
		}
	}
	return removed, nil
}

// removeRun deletes one terminal run completed before cutoff. It reports
// false when another GC removed it first.
func (b *Backend) removeRun(ctx context.Context, id coord.RunID, cutoff coord.Time) (bool, error) {
	removed := false
	err := b.mutate(ctx, "gc", func(ctx context.Context) (*txn, error) {
		removed = false
		rs, err := b.read(ctx, b.k.run(id))
		if err != nil {
			return nil, err
		}
		if !rs[0].exists() {
			return nil, nil
		}
		var run coord.Run
		if err := run.UnmarshalBinary(rs[0].val); err != nil {
			return nil, fmt.Errorf("etcdcoord: %s: %w", rs[0].key, err)
		}
		if !run.State.Terminal() || run.CompletedAt >= cutoff {
			return nil, fmt.Errorf("%w: gc index lists run %d (%v, completed at %d)", coord.ErrCorrupt, id, run.State, run.CompletedAt)
		}
		p := b.k.shardPrefix(id)
		resp, err := b.c.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return nil, b.etcdErr(err, nil)
		}
		t := &txn{}
		// Runs that ended since docs/adr/0023 released their shards when
		// they ended: removing their summary must not rewrite the counters,
		// which would only add contention. Runs that ended before still
		// hold shards and release them here.
		if resp.Count > 0 {
			ctrs, err := b.read(ctx, b.counterKeys(run.Tenant)...)
			if err != nil {
				return nil, err
			}
			if err := b.release(t, ctrs, resp.Count); err != nil {
				return nil, err
			}
		}
		// A terminal run's shards never change (every shard write compares
		// the run record, and the transitions refuse terminal runs), so the
		// count stays exact; the range compare below makes sure of it.
		t.guard(rs[0])
		t.cmps = append(t.cmps, clientv3.Compare(clientv3.ModRevision(p).WithPrefix(), "<", resp.Header.Revision+1))
		t.del(rs[0].key)
		t.delPrefix(p)
		t.delPrefix(b.k.openPrefix(id))
		t.delPrefix(b.k.claimPrefix(id))
		t.del(b.k.tenantRun(run.Tenant, id))
		t.del(b.k.gc(run.CompletedAt, id))
		t.del(b.k.registration(id))
		removed = true
		return t, nil
	})
	return removed, err
}

// Counts is what RepairCounters found and wrote.
type Counts struct {
	// Tenants maps each tenant with a counter or a shard record to its
	// number of shard records.
	Tenants map[coord.TenantID]int64
	// Global is the number of shard records in the namespace.
	Global int64
	// Fixed lists the counters that were rewritten, with the value they
	// held, or -1 when they were absent or unreadable.
	Fixed map[string]int64
}

// RepairCounters recounts the shard records of every tenant and rewrites
// the counters that disagree, in one transaction guarded against any
// concurrent creation or removal (each of which rewrites a counter). It
// also writes the global counter in advisory mode, which makes switching
// to strict mode safe. Use it after a manual edit of the keys, or after
// GC refused with ErrCounterUnderflow.
func (b *Backend) RepairCounters(ctx context.Context) (Counts, error) {
	var out Counts
	err := b.mutate(ctx, "repair counters", func(ctx context.Context) (*txn, error) {
		out = Counts{Tenants: map[coord.TenantID]int64{}, Fixed: map[string]int64{}}
		owner := map[coord.RunID]coord.TenantID{}
		rp := b.k.runsPrefix()
		rev, err := b.scan(ctx, 0, rp, prefixEnd(rp), nil, func(key string, val []byte) error {
			var r coord.Run
			if err := r.UnmarshalBinary(val); err != nil {
				return fmt.Errorf("etcdcoord: %s: %w", key, err)
			}
			owner[r.ID] = r.Tenant
			return nil
		})
		if err != nil {
			return nil, err
		}
		sp := b.k.shardsPrefix()
		if err := b.scanAt(ctx, rev, sp, prefixEnd(sp), []clientv3.OpOption{clientv3.WithKeysOnly()}, func(key string, _ []byte) error {
			run, _, err := b.k.parseShardKey(key)
			if err != nil {
				return err
			}
			t, ok := owner[run]
			if !ok {
				return fmt.Errorf("%w: shard %s of a run that does not exist", coord.ErrCorrupt, key)
			}
			out.Tenants[t]++
			out.Global++
			return nil
		}); err != nil {
			return nil, err
		}
		stored := map[string]rec{}
		tp := b.k.tenantsPrefix()
		if err := b.scanAt(ctx, rev, tp, prefixEnd(tp), nil, func(key string, val []byte) error {
			tenant, err := b.k.parseTenantCountKey(key)
			if _, ok := out.Tenants[tenant]; !ok {
				out.Tenants[tenant] = 0
			}
			stored[key] = rec{key: key, rev: 1, val: val}
			return err
		}); err != nil {
			return nil, err
		}
		g, err := b.c.Get(ctx, b.k.globalCount(), clientv3.WithRev(rev))
		if err != nil {
			return nil, b.etcdErr(err, nil)
		}
		if len(g.Kvs) > 0 {
			stored[b.k.globalCount()] = rec{key: b.k.globalCount(), rev: 1, val: g.Kvs[0].Value}
		}
		t := &txn{}
		// Every creation and removal rewrites its tenant's counter, so no
		// counter modified after rev means no shard record was either.
		t.cmps = append(t.cmps,
			clientv3.Compare(clientv3.ModRevision(tp).WithPrefix(), "<", rev+1),
			clientv3.Compare(clientv3.ModRevision(b.k.globalCount()), "<", rev+1))
		fix := func(key string, want int64) {
			r, ok := stored[key]
			if ok && len(r.val) == 8 {
				if n, err := decodeCount(key, r.val); err == nil && n == want {
					return
				}
			}
			out.Fixed[key] = -1
			if ok && len(r.val) == 8 {
				out.Fixed[key], _ = decodeCount(key, r.val)
			}
			t.put(key, encodeCount(want))
		}
		for tenant, n := range out.Tenants {
			fix(b.k.tenantCount(tenant), n)
		}
		fix(b.k.globalCount(), out.Global)
		if len(t.ops) == 0 {
			return nil, nil
		}
		return t, nil
	})
	if err != nil {
		return Counts{}, err
	}
	if b.mode == GlobalCapAdvisory {
		b.advisoryMu.Lock()
		b.advisoryAt = time.Time{}
		b.advisoryMu.Unlock()
	}
	return out, nil
}

// scanAt is scan at a fixed revision.
func (b *Backend) scanAt(ctx context.Context, rev int64, from, end string, opts []clientv3.OpOption, fn func(key string, val []byte) error) error {
	_, err := b.scan(ctx, rev, from, end, opts, fn)
	return err
}

// ActiveRuns returns the tenant's runs that are not terminal, in id order.
func (b *Backend) ActiveRuns(ctx context.Context, tenant coord.TenantID) ([]coord.RunID, error) {
	var out []coord.RunID
	p := b.k.tenantRunPrefix(tenant)
	_, err := b.scan(ctx, 0, p, prefixEnd(p), []clientv3.OpOption{clientv3.WithKeysOnly()}, func(key string, _ []byte) error {
		id, err := parseIDAfter(p, key)
		out = append(out, coord.RunID(id))
		return err
	})
	return out, err
}
