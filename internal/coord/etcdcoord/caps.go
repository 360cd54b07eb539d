package etcdcoord

import (
	"context"
	"fmt"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
)

// counterKeys returns the counters a creation or removal of tenant's shards
// must read and rewrite: the tenant's, and in strict mode the global one.
func (b *Backend) counterKeys(tenant coord.TenantID) []string {
	if b.mode == GlobalCapStrict {
		return []string{b.k.tenantCount(tenant), b.k.globalCount()}
	}
	return []string{b.k.tenantCount(tenant)}
}

// count decodes a counter record; an absent counter is zero.
func count(r rec) (int64, error) {
	if !r.exists() {
		return 0, nil
	}
	return decodeCount(r.key, r.val)
}

// reserve checks the shard caps for delta new records and adds to t the
// compares and writes that move the counters read in ctrs (as listed by
// counterKeys) by delta, so the check and the creation commit together.
func (b *Backend) reserve(ctx context.Context, t *txn, ctrs []rec, delta int64) error {
	if err := b.checkMarkers(ctx, t, ctrs); err != nil {
		return err
	}
	tc, err := count(ctrs[0])
	if err != nil {
		return err
	}
	var gc int64
	if b.mode == GlobalCapStrict {
		if gc, err = count(ctrs[1]); err != nil {
			return err
		}
	} else if gc, err = b.advisoryGlobal(ctx); err != nil {
		return err
	}
	if err := b.lim.CheckShardCaps(tc, gc, delta); err != nil {
		return err
	}
	t.guard(ctrs[0])
	t.put(ctrs[0].key, encodeCount(tc+delta))
	if b.mode == GlobalCapStrict {
		t.guard(ctrs[1])
		t.put(ctrs[1].key, encodeCount(gc+delta))
	} else {
		t.committed = func() { b.advisoryAdd(delta) }
	}
	return nil
}

// checkMarkers refuses a creation when a counter in ctrs is absent but its
// marker exists (ErrCounterLost), and otherwise adds to t the writes of
// the markers of the counters the creation creates. Present counters cost
// nothing: their markers are only read when a counter is absent.
func (b *Backend) checkMarkers(ctx context.Context, t *txn, ctrs []rec) error {
	var markers []string
	var absent []string
	for _, c := range ctrs {
		if !c.exists() {
			absent = append(absent, c.key)
			markers = append(markers, b.markerOf(c.key))
		}
	}
	if len(markers) == 0 {
		return nil
	}
	// Read each marker together with its counter again: a counter created
	// since ctrs was read came with its marker, and the creation's compare
	// of the counter's absence will fail and retry.
	ms, err := b.read(ctx, append(markers, absent...)...)
	if err != nil {
		return err
	}
	for i, m := range ms[:len(markers)] {
		if ms[len(markers)+i].exists() {
			continue
		}
		if m.exists() {
			return fmt.Errorf("%w: %s is gone but %s records that it existed; run \"ghost coord repair-counters\"",
				ErrCounterLost, absent[i], m.key)
		}
		t.put(m.key, nil)
	}
	return nil
}

// markerOf returns the marker key of a counter key from counterKeys.
func (b *Backend) markerOf(counter string) string {
	if counter == b.k.globalCount() {
		return b.k.globalMarker()
	}
	tenant, _ := b.k.parseTenantCountKey(counter)
	return b.k.tenantMarker(tenant)
}

// release adds to t the compares and writes that take delta records off the
// counters read in ctrs, refusing with ErrCounterUnderflow rather than
// wrapping below zero.
func (b *Backend) release(t *txn, ctrs []rec, delta int64) error {
	for _, r := range ctrs {
		n, err := count(r)
		if err != nil {
			return err
		}
		if n < delta {
			return fmt.Errorf("%w: %s holds %d, removing %d; run \"ghost coord repair-counters\"", ErrCounterUnderflow, r.key, n, delta)
		}
		t.guard(r)
		t.put(r.key, encodeCount(n-delta))
	}
	if b.mode == GlobalCapAdvisory {
		t.committed = func() { b.advisoryAdd(-delta) }
	}
	return nil
}

// advisoryGlobal returns the shard count the advisory global cap is checked
// against: the sum of all tenant counters, re-read when older than the
// refresh interval, plus this Backend's own creations since.
func (b *Backend) advisoryGlobal(ctx context.Context) (int64, error) {
	b.advisoryMu.Lock()
	defer b.advisoryMu.Unlock()
	if !b.advisoryAt.IsZero() && time.Since(b.advisoryAt) < b.refresh {
		return b.advisoryCount, nil
	}
	sum, err := b.sumTenantCounters(ctx)
	if err != nil {
		return 0, err
	}
	b.advisoryCount, b.advisoryAt = sum, time.Now()
	return sum, nil
}

func (b *Backend) advisoryAdd(delta int64) {
	b.advisoryMu.Lock()
	b.advisoryCount += delta
	b.advisoryMu.Unlock()
}

func (b *Backend) sumTenantCounters(ctx context.Context) (int64, error) {
	var sum int64
	p := b.k.tenantsPrefix()
	_, err := b.scan(ctx, 0, p, prefixEnd(p), nil, func(key string, val []byte) error {
		n, err := decodeCount(key, val)
		sum += n
		return err
	})
	return sum, err
}

// prefixEnd returns the smallest key greater than every key with prefix p.
// Prefixes here end in "/", so incrementing the last byte suffices.
func prefixEnd(p string) string {
	b := []byte(p)
	b[len(b)-1]++
	return string(b)
}
