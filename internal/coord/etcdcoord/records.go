package etcdcoord

import (
	"bytes"
	"fmt"

	"github.com/ghost-scm/ghost/internal/coord"
)

// decodeRun decodes the run record r for a request by tenant: ErrNotFound
// when absent, ErrTenantMismatch when another tenant owns it.
func decodeRun(r rec, tenant coord.TenantID, id coord.RunID) (coord.Run, error) {
	if !r.exists() {
		return coord.Run{}, fmt.Errorf("%w: run %d", coord.ErrNotFound, id)
	}
	var run coord.Run
	if err := run.UnmarshalBinary(r.val); err != nil {
		return coord.Run{}, fmt.Errorf("etcdcoord: %s: %w", r.key, err)
	}
	if run.ID != id {
		return coord.Run{}, fmt.Errorf("%w: %s holds run %d", coord.ErrCorrupt, r.key, run.ID)
	}
	if run.Tenant != tenant {
		return coord.Run{}, fmt.Errorf("%w: run %d", coord.ErrTenantMismatch, id)
	}
	return run, nil
}

// decodeShard decodes the shard record r of run.
func decodeShard(r rec, run *coord.Run, id coord.ShardID) (coord.Shard, error) {
	if !r.exists() {
		if run.State.Terminal() {
			return coord.Shard{}, run.ShardsReleased(id)
		}
		return coord.Shard{}, fmt.Errorf("%w: run %d shard %v", coord.ErrNotFound, run.ID, id)
	}
	var s coord.Shard
	if err := s.UnmarshalBinary(r.val); err != nil {
		return coord.Shard{}, fmt.Errorf("etcdcoord: %s: %w", r.key, err)
	}
	if s.ID != id || s.Run != run.ID || s.Tenant != run.Tenant {
		return coord.Shard{}, fmt.Errorf("%w: %s holds %v of another tenant or run", coord.ErrCorrupt, r.key, &s)
	}
	return s, nil
}

// putRun writes run, guarded by old, and keeps the run indexes in step: a
// new run enters the tenant's active runs; a run turning terminal leaves
// them and enters the gc index.
func (b *Backend) putRun(t *txn, old rec, prev *coord.Run, run *coord.Run) error {
	v, err := run.MarshalBinary()
	if err != nil {
		return fmt.Errorf("etcdcoord: refusing to store: %w", err)
	}
	t.guard(old)
	t.putRecord(old.key, v)
	wasOpen := prev != nil && !prev.State.Terminal()
	switch {
	case prev == nil && !run.State.Terminal():
		t.put(b.k.tenantRun(run.Tenant, run.ID), nil)
	case wasOpen && run.State.Terminal():
		t.del(b.k.tenantRun(run.Tenant, run.ID))
		t.put(b.k.gc(run.CompletedAt, run.ID), nil)
	}
	return nil
}

// putShard writes s over the record old (prev is its decoded form, nil for
// a new shard), guarded by old, and keeps the open index in step.
func (b *Backend) putShard(t *txn, old rec, prev *coord.Shard, s *coord.Shard) error {
	v, err := s.MarshalBinary()
	if err != nil {
		return fmt.Errorf("etcdcoord: refusing to store: %w", err)
	}
	t.guard(old)
	t.putRecord(old.key, v)
	var was []byte
	if prev != nil {
		was = openValue(prev)
	}
	switch now := openValue(s); {
	case now == nil && was != nil:
		t.del(b.k.open(s.Run, s.ID))
	case now != nil && !bytes.Equal(now, was):
		t.put(b.k.open(s.Run, s.ID), now)
	}
	return nil
}
