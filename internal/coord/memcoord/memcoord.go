// Package memcoord is the reference in-memory coord.Backend. It applies the
// transitions of package coord under a single mutex, which makes every
// operation trivially atomic; it is used in tests, in single-process
// deployments without etcd, and as the model the etcd backend is checked
// against by the coordtest suite.
package memcoord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ghost-scm/ghost/internal/coord"
)

// Backend is an in-memory coord.Backend, safe for concurrent use.
type Backend struct {
	lim coord.Limits

	mu      sync.Mutex
	runs    map[coord.RunID]*runEntry
	tenants map[coord.TenantID]int64 // shard records per tenant
	global  int64                    // shard records in total
}

type runEntry struct {
	run    coord.Run
	shards map[coord.ShardID]coord.Shard
	ids    []coord.ShardID // sorted ascending
}

// Backend plays every role of package coord; consumers hold it as the one
// they need.
var (
	_ coord.Backend = (*Backend)(nil)
	_ coord.Worker  = (*Backend)(nil)
	_ coord.Admin   = (*Backend)(nil)
	_ coord.Reader  = (*Backend)(nil)
)

// New returns an empty backend enforcing lim (zero fields take defaults).
func New(lim coord.Limits) *Backend {
	return &Backend{
		lim:     lim.WithDefaults(),
		runs:    make(map[coord.RunID]*runEntry),
		tenants: make(map[coord.TenantID]int64),
	}
}

// lookup returns the run entry, checking the tenant. The caller holds b.mu.
func (b *Backend) lookup(tenant coord.TenantID, run coord.RunID) (*runEntry, error) {
	e, ok := b.runs[run]
	if !ok {
		return nil, fmt.Errorf("%w: run %d", coord.ErrNotFound, run)
	}
	if e.run.Tenant != tenant {
		return nil, fmt.Errorf("%w: run %d", coord.ErrTenantMismatch, run)
	}
	return e, nil
}

func (b *Backend) lookupShard(tenant coord.TenantID, run coord.RunID, id coord.ShardID) (*runEntry, coord.Shard, error) {
	e, err := b.lookup(tenant, run)
	if err != nil {
		return nil, coord.Shard{}, err
	}
	s, ok := e.shards[id]
	if !ok {
		if e.run.State.Terminal() {
			return nil, coord.Shard{}, e.run.ShardsReleased(id)
		}
		return nil, coord.Shard{}, fmt.Errorf("%w: run %d shard %v", coord.ErrNotFound, run, id)
	}
	return e, s, nil
}

// putShard validates and stores a shard record. The caller holds b.mu.
func (e *runEntry) putShard(s coord.Shard) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("memcoord: refusing to store: %w", err)
	}
	if _, ok := e.shards[s.ID]; !ok {
		i, _ := slices.BinarySearch(e.ids, s.ID)
		e.ids = slices.Insert(e.ids, i, s.ID)
	}
	e.shards[s.ID] = s
	return nil
}

func (e *runEntry) putRun(r coord.Run) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("memcoord: refusing to store: %w", err)
	}
	e.run = r
	return nil
}

// reserve checks the shard caps for delta new records and counts them.
func (b *Backend) reserve(tenant coord.TenantID, delta int64) error {
	if err := b.lim.CheckShardCaps(b.tenants[tenant], b.global, delta); err != nil {
		return err
	}
	b.tenants[tenant] += delta
	b.global += delta
	return nil
}

// CreateRun implements coord.Admin.
func (b *Backend) CreateRun(ctx context.Context, now coord.Time, req coord.CreateRunRequest) (coord.Run, error) {
	if err := ctx.Err(); err != nil {
		return coord.Run{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.runs[req.Run]; ok {
		r, err := e.run.ApplyCreateRun(req, now)
		if err != nil {
			return coord.Run{}, err
		}
		return r.Clone(), nil
	}
	r, err := coord.NewRun(req, now)
	if err != nil {
		return coord.Run{}, err
	}
	e := &runEntry{shards: make(map[coord.ShardID]coord.Shard)}
	if err := e.putRun(r); err != nil {
		return coord.Run{}, err
	}
	b.runs[req.Run] = e
	return r.Clone(), nil
}

// RegisterShards implements coord.Admin.
func (b *Backend) RegisterShards(ctx context.Context, now coord.Time, req coord.RegisterShardsRequest) (coord.Run, error) {
	if err := ctx.Err(); err != nil {
		return coord.Run{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.lookup(req.Tenant, req.Run)
	if err != nil {
		return coord.Run{}, err
	}
	t, err := e.run.ApplyRegisterShards(req, now, b.lim)
	if err != nil {
		return coord.Run{}, err
	}
	if !t.Changed {
		return t.Run.Clone(), nil
	}
	for i := range t.Created {
		if err := t.Created[i].Validate(); err != nil {
			return coord.Run{}, fmt.Errorf("memcoord: refusing to store: %w", err)
		}
	}
	if err := b.reserve(req.Tenant, int64(len(t.Created))); err != nil {
		return coord.Run{}, err
	}
	if err := e.putRun(t.Run); err != nil {
		return coord.Run{}, err
	}
	for _, s := range t.Created {
		e.shards[s.ID] = s
		e.ids = append(e.ids, s.ID)
	}
	slices.Sort(e.ids)
	return t.Run.Clone(), nil
}

// Acquire implements coord.Worker.
func (b *Backend) Acquire(ctx context.Context, now coord.Time, req coord.AcquireRequest) (coord.Lease, error) {
	if err := ctx.Err(); err != nil {
		return coord.Lease{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e, s, err := b.lookupShard(req.Tenant, req.Run, req.Shard)
	if err != nil {
		return coord.Lease{}, err
	}
	t, err := s.ApplyAcquire(&e.run, req, now)
	if t.Changed {
		if perr := e.putShard(t.Shard); perr != nil {
			return coord.Lease{}, perr
		}
	}
	return t.Lease, err
}

// ClaimNext implements coord.Worker. Candidates are scanned in id order
// starting at coord.ClaimOffset, so concurrent workers spread over the run.
func (b *Backend) ClaimNext(ctx context.Context, now coord.Time, req coord.ClaimRequest) (coord.Lease, error) {
	if err := ctx.Err(); err != nil {
		return coord.Lease{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.lookup(req.Tenant, req.Run)
	if err != nil {
		return coord.Lease{}, err
	}
	var candidates []coord.ShardID
	for _, id := range e.ids {
		s := e.shards[id]
		lease, ok, err := s.ClaimReplay(req)
		if err != nil {
			return coord.Lease{}, err
		}
		if ok {
			return lease, nil
		}
		if s.Claimable(now) {
			candidates = append(candidates, id)
		}
	}
	switch {
	case e.run.State.Terminal():
		return coord.Lease{}, fmt.Errorf("%w: run %d is %v", coord.ErrRunTerminal, req.Run, e.run.State)
	case e.run.State != coord.RunActive:
		return coord.Lease{}, fmt.Errorf("%w: run %d is %v", coord.ErrRunNotActive, req.Run, e.run.State)
	}
	off := coord.ClaimOffset(req.Worker, len(candidates))
	for i := range candidates {
		s := e.shards[candidates[(off+i)%len(candidates)]]
		t, err := s.ApplyClaim(&e.run, req, now)
		if t.Changed {
			if perr := e.putShard(t.Shard); perr != nil {
				return coord.Lease{}, perr
			}
		}
		switch {
		case err == nil:
			return t.Lease, nil
		case errorsIsAny(err, coord.ErrRetriesExhausted, coord.ErrLeaseHeld, coord.ErrShardParked, coord.ErrShardTerminal):
			// This candidate went away (in etcd: raced away); try the next.
			continue
		default:
			return coord.Lease{}, err
		}
	}
	return coord.Lease{}, fmt.Errorf("%w: run %d", coord.ErrNoShardAvailable, req.Run)
}

// shardOp runs a mutation of one shard that writes only that shard.
func (b *Backend) shardOp(ctx context.Context, l coord.Lease, apply func(run *coord.Run, s coord.Shard) (coord.ShardTransition, error)) (coord.ShardTransition, error) {
	if err := ctx.Err(); err != nil {
		return coord.ShardTransition{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e, s, err := b.lookupShard(l.Tenant, l.Run, l.Shard)
	if err != nil {
		return coord.ShardTransition{}, err
	}
	t, err := apply(&e.run, s)
	if err != nil {
		return coord.ShardTransition{}, err
	}
	if t.Changed {
		if err := e.putShard(t.Shard); err != nil {
			return coord.ShardTransition{}, err
		}
	}
	t.Shard = t.Shard.Clone()
	return t, nil
}

// Renew implements coord.Worker.
func (b *Backend) Renew(ctx context.Context, now coord.Time, req coord.RenewRequest) (coord.Lease, error) {
	t, err := b.shardOp(ctx, req.Lease, func(run *coord.Run, s coord.Shard) (coord.ShardTransition, error) {
		return s.ApplyRenew(run, req, now)
	})
	if err != nil {
		return coord.Lease{}, err
	}
	return t.Lease, nil
}

// Checkpoint implements coord.Worker.
func (b *Backend) Checkpoint(ctx context.Context, now coord.Time, req coord.CheckpointRequest) (coord.Shard, error) {
	t, err := b.shardOp(ctx, req.Lease, func(run *coord.Run, s coord.Shard) (coord.ShardTransition, error) {
		return s.ApplyCheckpoint(run, req, now, b.lim)
	})
	return t.Shard, err
}

// Complete implements coord.Worker.
func (b *Backend) Complete(ctx context.Context, now coord.Time, req coord.CompleteRequest) (coord.Shard, error) {
	t, err := b.shardOp(ctx, req.Lease, func(run *coord.Run, s coord.Shard) (coord.ShardTransition, error) {
		return s.ApplyComplete(run, req, now)
	})
	return t.Shard, err
}

// Park implements coord.Worker.
func (b *Backend) Park(ctx context.Context, now coord.Time, req coord.ParkRequest) (coord.Shard, error) {
	t, err := b.shardOp(ctx, req.Lease, func(run *coord.Run, s coord.Shard) (coord.ShardTransition, error) {
		return s.ApplyPark(run, req, now, b.lim)
	})
	return t.Shard, err
}

// Unpark implements coord.Admin.
func (b *Backend) Unpark(ctx context.Context, now coord.Time, req coord.UnparkRequest) (coord.Shard, error) {
	l := coord.Lease{Tenant: req.Tenant, Run: req.Run, Shard: req.Shard}
	t, err := b.shardOp(ctx, l, func(run *coord.Run, s coord.Shard) (coord.ShardTransition, error) {
		return s.ApplyUnpark(run, req, now)
	})
	return t.Shard, err
}

// SplitReplace implements coord.Worker.
func (b *Backend) SplitReplace(ctx context.Context, now coord.Time, req coord.SplitReplaceRequest) (coord.Shard, []coord.Shard, error) {
	if err := ctx.Err(); err != nil {
		return coord.Shard{}, nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	l := req.Lease
	e, s, err := b.lookupShard(l.Tenant, l.Run, l.Shard)
	if err != nil {
		return coord.Shard{}, nil, err
	}
	t, err := s.ApplySplitReplace(&e.run, req, now, b.lim)
	if err != nil {
		return coord.Shard{}, nil, err
	}
	if !t.Changed {
		out := make([]coord.Shard, 0, len(req.Children))
		for _, id := range coord.ReplaceChildIDs(req) {
			if c, ok := e.shards[id]; ok {
				out = append(out, c.Clone())
			}
		}
		return t.Shard.Clone(), out, nil
	}
	if err := b.addShards(e, t.Shard, t.Created); err != nil {
		return coord.Shard{}, nil, err
	}
	out := make([]coord.Shard, len(t.Created))
	for i := range t.Created {
		out[i] = t.Created[i].Clone()
	}
	return t.Shard.Clone(), out, nil
}

// addShards stores an updated parent and new shards, all or nothing.
func (b *Backend) addShards(e *runEntry, parent coord.Shard, created []coord.Shard) error {
	if err := parent.Validate(); err != nil {
		return fmt.Errorf("memcoord: refusing to store: %w", err)
	}
	for i := range created {
		if _, exists := e.shards[created[i].ID]; exists {
			return fmt.Errorf("%w: %v", coord.ErrIDCollision, created[i].ID)
		}
		if err := created[i].Validate(); err != nil {
			return fmt.Errorf("memcoord: refusing to store: %w", err)
		}
	}
	if err := b.reserve(parent.Tenant, int64(len(created))); err != nil {
		return err
	}
	for _, s := range append([]coord.Shard{parent}, created...) {
		if err := e.putShard(s); err != nil {
			return err // unreachable: validated above
		}
	}
	return nil
}

// SplitResidual implements coord.Worker.
func (b *Backend) SplitResidual(ctx context.Context, now coord.Time, req coord.SplitResidualRequest) (coord.Shard, coord.Shard, error) {
	if err := ctx.Err(); err != nil {
		return coord.Shard{}, coord.Shard{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	l := req.Lease
	e, s, err := b.lookupShard(l.Tenant, l.Run, l.Shard)
	if err != nil {
		return coord.Shard{}, coord.Shard{}, err
	}
	t, err := s.ApplySplitResidual(&e.run, req, now, b.lim)
	if err != nil {
		return coord.Shard{}, coord.Shard{}, err
	}
	if !t.Changed {
		return t.Shard.Clone(), e.shards[coord.ResidualID(req)].Clone(), nil
	}
	if err := b.addShards(e, t.Shard, t.Created); err != nil {
		return coord.Shard{}, coord.Shard{}, err
	}
	return t.Shard.Clone(), t.Created[0].Clone(), nil
}

// runOp runs a mutation of a run record.
func (b *Backend) runOp(ctx context.Context, tenant coord.TenantID, run coord.RunID, apply func(e *runEntry) (coord.RunTransition, error)) (coord.Run, error) {
	if err := ctx.Err(); err != nil {
		return coord.Run{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.lookup(tenant, run)
	if err != nil {
		return coord.Run{}, err
	}
	t, err := apply(e)
	if err != nil {
		return coord.Run{}, err
	}
	if t.Changed {
		if err := e.putRun(t.Run); err != nil {
			return coord.Run{}, err
		}
		if t.Run.State.Terminal() {
			b.release(e)
		}
	}
	return t.Run.Clone(), nil
}

// summary counts the run's shards by state.
func (e *runEntry) summary() coord.RunSummary {
	var m coord.RunSummary
	for _, s := range e.shards {
		m.Add(&s)
	}
	return m
}

// release deletes the shards of a run that just turned terminal and takes
// them off the counters (docs/adr/0023-atomic-shard-caps.md). The caller
// holds b.mu.
func (b *Backend) release(e *runEntry) {
	n := int64(len(e.shards))
	b.tenants[e.run.Tenant] -= n
	b.global -= n
	e.shards, e.ids = map[coord.ShardID]coord.Shard{}, nil
}

// CompleteRun implements coord.Admin.
func (b *Backend) CompleteRun(ctx context.Context, now coord.Time, req coord.CompleteRunRequest) (coord.Run, error) {
	return b.runOp(ctx, req.Tenant, req.Run, func(e *runEntry) (coord.RunTransition, error) {
		return e.run.ApplyCompleteRun(req, now, e.summary())
	})
}

// FailRun implements coord.Admin.
func (b *Backend) FailRun(ctx context.Context, now coord.Time, req coord.FailRunRequest) (coord.Run, error) {
	return b.runOp(ctx, req.Tenant, req.Run, func(e *runEntry) (coord.RunTransition, error) {
		return e.run.ApplyFailRun(req, now, b.lim, e.summary())
	})
}

// CancelRun implements coord.Admin.
func (b *Backend) CancelRun(ctx context.Context, now coord.Time, req coord.CancelRunRequest) (coord.Run, error) {
	return b.runOp(ctx, req.Tenant, req.Run, func(e *runEntry) (coord.RunTransition, error) {
		return e.run.ApplyCancelRun(req, now, e.summary())
	})
}

// GetRun implements coord.Reader.
func (b *Backend) GetRun(ctx context.Context, tenant coord.TenantID, run coord.RunID) (coord.Run, error) {
	if err := ctx.Err(); err != nil {
		return coord.Run{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.lookup(tenant, run)
	if err != nil {
		return coord.Run{}, err
	}
	return e.run.Clone(), nil
}

// GetShard implements coord.Reader.
func (b *Backend) GetShard(ctx context.Context, tenant coord.TenantID, run coord.RunID, shard coord.ShardID) (coord.Shard, error) {
	if err := ctx.Err(); err != nil {
		return coord.Shard{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	_, s, err := b.lookupShard(tenant, run, shard)
	if err != nil {
		return coord.Shard{}, err
	}
	return s.Clone(), nil
}

// Progress implements coord.Reader.
func (b *Backend) Progress(ctx context.Context, now coord.Time, tenant coord.TenantID, run coord.RunID) (coord.Progress, error) {
	if err := ctx.Err(); err != nil {
		return coord.Progress{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.lookup(tenant, run)
	if err != nil {
		return coord.Progress{}, err
	}
	if e.run.State.Terminal() {
		return e.run.Progress(), nil
	}
	p := coord.Progress{State: e.run.State, Total: len(e.shards)}
	for _, s := range e.shards {
		p.Add(&s, now)
	}
	return p, nil
}

// ListShards implements coord.Reader.
func (b *Backend) ListShards(ctx context.Context, now coord.Time, tenant coord.TenantID, run coord.RunID, filter coord.ShardFilter) ([]coord.Shard, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.lookup(tenant, run)
	if err != nil {
		return nil, err
	}
	start, found := slices.BinarySearch(e.ids, filter.After)
	if found {
		start++
	}
	out := make([]coord.Shard, 0, len(e.ids)-start)
	for _, id := range e.ids[start:] {
		if filter.Limit > 0 && len(out) >= filter.Limit {
			break
		}
		s := e.shards[id]
		if filter.Match(&s, now) {
			out = append(out, s.Clone())
		}
	}
	return out, nil
}

func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
