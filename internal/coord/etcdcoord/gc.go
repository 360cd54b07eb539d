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
	// Tenants maps each tenant with a counter, a counter marker or a
	// shard record to its number of shard records, as counted at
	// Revision.
	Tenants map[coord.TenantID]int64
	// Global is the number of shard records in the namespace at Revision.
	Global int64
	// Fixed lists the counters that were corrected, with the value they
	// held at Revision, or -1 when they were absent or unreadable.
	Fixed map[string]int64
	// Revision is the etcd revision the records were counted at.
	Revision int64
}

// maxRepairRecounts bounds how often RepairCounters starts over because
// another repair corrected a counter after its count.
const maxRepairRecounts = 8

// RepairCounters recounts the shard records of every tenant and corrects
// the counters that disagree, and records for each counter that it exists
// (see ErrCounterLost). Use it after a manual edit of the keys, or after a
// removal refused with ErrCounterUnderflow or a creation refused with
// ErrCounterLost.
//
// It converges while creators keep creating (docs/adr/0023-atomic-shard-caps.md):
// the records and counters are read at one revision R, which gives each
// counter's error, stored(R) - records(R). Every creation and removal since
// R moved a counter and its records by the same amount, so the error is
// unchanged, and the correction adds records(R) - stored(R) to the current
// value in a small compare-and-swap per counter, retried like any creation.
// The counter's marker key is written by the same transaction; a repair
// that finds it written after R counts again, so two repairs never apply
// one correction twice. In advisory mode the global counter, which creators do not
// maintain, is instead rewritten with its count, guarded by its own mod
// revision; that makes switching to strict mode safe once creators stop.
func (b *Backend) RepairCounters(ctx context.Context) (Counts, error) {
	for i := 0; ; i++ {
		out, stale, err := b.repairOnce(ctx)
		if err != nil || !stale {
			if err == nil && b.mode == GlobalCapAdvisory {
				b.advisoryMu.Lock()
				b.advisoryAt = time.Time{}
				b.advisoryMu.Unlock()
			}
			return out, err
		}
		if i == maxRepairRecounts {
			return Counts{}, fmt.Errorf("etcdcoord: repair counters: %w (%d recounts)", ErrContention, i+1)
		}
	}
}

// repairOnce counts at one revision and corrects every counter. stale
// reports that another repair corrected a counter after the count.
func (b *Backend) repairOnce(ctx context.Context) (out Counts, stale bool, err error) {
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
		return out, false, err
	}
	out.Revision = rev
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
		return out, false, err
	}
	stored := map[string][]byte{}
	tp := b.k.tenantsPrefix()
	if err := b.scanAt(ctx, rev, tp, prefixEnd(tp), nil, func(key string, val []byte) error {
		tenant, err := b.k.parseTenantCountKey(key)
		if _, ok := out.Tenants[tenant]; !ok {
			out.Tenants[tenant] = 0
		}
		stored[key] = val
		return err
	}); err != nil {
		return out, false, err
	}
	// A counter whose marker exists once existed: one deleted while it
	// held 0 has no key and no shard records to find it by, and a
	// creation by its tenant is refused (ErrCounterLost) until the
	// counter is back, at its count.
	mp := b.k.tenantMarkersPrefix()
	if err := b.scanAt(ctx, rev, mp, prefixEnd(mp), []clientv3.OpOption{clientv3.WithKeysOnly()}, func(key string, _ []byte) error {
		tenant, err := b.k.parseTenantMarkerKey(key)
		if _, ok := out.Tenants[tenant]; !ok && err == nil {
			out.Tenants[tenant] = 0
		}
		return err
	}); err != nil {
		return out, false, err
	}
	g, err := b.c.Get(ctx, b.k.globalCount(), clientv3.WithRev(rev))
	if err != nil {
		return out, false, b.etcdErr(err, nil)
	}
	if len(g.Kvs) > 0 {
		stored[b.k.globalCount()] = g.Kvs[0].Value
	}
	type fix struct {
		key, marker string
		want        int64
	}
	fixes := make([]fix, 0, len(out.Tenants)+1)
	for tenant, n := range out.Tenants {
		fixes = append(fixes, fix{b.k.tenantCount(tenant), b.k.tenantMarker(tenant), n})
	}
	fixes = append(fixes, fix{b.k.globalCount(), b.k.globalMarker(), out.Global})
	for _, f := range fixes {
		was, present := stored[f.key]
		held, derr := decodeCount(f.key, was)
		readable := present && derr == nil
		if !present {
			held = 0
		}
		if readable && held == f.want {
			// Correct: make sure its marker exists (namespaces from before
			// markers have none).
			if err := b.mark(ctx, f.marker); err != nil {
				return out, false, err
			}
			continue
		}
		out.Fixed[f.key] = -1
		if readable {
			out.Fixed[f.key] = held
		}
		absolute := !readable && present || f.key == b.k.globalCount() && b.mode == GlobalCapAdvisory
		stale, err := b.correct(ctx, f.key, f.marker, rev, f.want-held, absolute, f.want)
		if err != nil || stale {
			return out, stale, err
		}
	}
	return out, false, nil
}

// correct adds delta to the counter key, or with absolute writes want,
// together with its marker, unless the marker changed after rev (stale).
func (b *Backend) correct(ctx context.Context, key, marker string, rev, delta int64, absolute bool, want int64) (bool, error) {
	stale := false
	// A correction is as small as a creation and races the same creators,
	// so it gets the most retries a Config allows.
	err := b.mutateN(ctx, "repair counters", MaxMaxRetries, func(ctx context.Context) (*txn, error) {
		rs, err := b.read(ctx, key, marker)
		if err != nil {
			return nil, err
		}
		if rs[1].rev > rev {
			stale = true
			return nil, nil
		}
		// Another repair that corrected this counter after rev wrote the
		// marker: its correction and ours are the same, so count again.
		// (A correction committed between this read and the commit below
		// rewrote the counter, which the commit compares.)
		t := &txn{}
		t.put(marker, nil)
		if absolute {
			// Nobody else rewrites this key: creators refuse an
			// unreadable counter, and advisory creators leave the global
			// one alone.
			t.cmps = append(t.cmps, clientv3.Compare(clientv3.ModRevision(key), "<", rev+1))
			t.put(key, encodeCount(want))
			return t, nil
		}
		cur, err := count(rs[0])
		if err != nil {
			return nil, err
		}
		if cur+delta < 0 {
			return nil, fmt.Errorf("%w: %s holds %d, correcting by %d", coord.ErrCorrupt, key, cur, delta)
		}
		t.guard(rs[0])
		t.put(key, encodeCount(cur+delta))
		return t, nil
	})
	return stale, err
}

// mark writes marker if it is absent.
func (b *Backend) mark(ctx context.Context, marker string) error {
	_, err := b.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(marker), "=", 0)).Then(clientv3.OpPut(marker, "")).Commit()
	if err != nil {
		return b.etcdErr(err, nil)
	}
	return nil
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

// TryGC runs GC unless another node of the namespace is running it. It
// takes the lock <ns>/locks/gc, attached to an etcd lease of ttl so that
// the lock frees itself when its node dies, and releases it when GC
// returns; ran is false, with no error, when another node holds it. The
// lock saves the nodes of a cluster from all scanning the gc index and
// racing for the same runs; it is not needed for safety, since concurrent
// GCs are safe (see GC), so a GC that outlives ttl is harmless.
func (b *Backend) TryGC(ctx context.Context, now coord.Time, retention, ttl time.Duration) (ran bool, removed int, err error) {
	secs := int64(ttl / time.Second)
	if secs < 1 || retention < 0 {
		return false, 0, fmt.Errorf("%w: gc lock ttl %v, retention %v", coord.ErrInvalidArgument, ttl, retention)
	}
	lease, err := b.c.Grant(ctx, secs)
	if err != nil {
		return false, 0, fmt.Errorf("etcdcoord: gc lock: %w", b.etcdErr(err, nil))
	}
	// Revoking deletes the lock with the lease, and ends a lease that took
	// nothing; it runs on a fresh context so that it happens even when ctx
	// ended, bounded so that a lost etcd cannot hold the caller.
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = b.c.Revoke(rctx, lease.ID) // on failure the lease expires anyway
	}()
	key := b.k.gcLock()
	resp, err := b.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, "", clientv3.WithLease(lease.ID))).Commit()
	if err != nil {
		return false, 0, fmt.Errorf("etcdcoord: gc lock: %w", b.etcdErr(err, nil))
	}
	if !resp.Succeeded {
		return false, 0, nil
	}
	removed, err = b.GC(ctx, now, retention)
	return true, removed, err
}
