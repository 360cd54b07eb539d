package coord

import (
	"bytes"
	"fmt"
)

// This file holds the state machine as pure functions. Each Apply* method
// takes the current records and a request and returns the records to write
// as a ShardTransition or RunTransition. Their Changed field tells the
// backend whether to write anything: it is false for replays and for
// refused requests. One refusal does write: an acquisition that exhausts
// RunConfig.MaxRetries parks the shard and reports ErrRetriesExhausted with
// Changed set.
//
// The checks of every worker mutation run in this order:
//
//	request shape (now >= 1, non-zero op id, lease names this shard)
//	tenant matches the record           ErrTenantMismatch
//	idempotency log                     replay: success, no effect; ErrOpConflict
//	run not terminal, run Active        ErrRunTerminal, ErrRunNotActive
//	shard not terminal, not parked      ErrShardTerminal, ErrShardParked
//	fence equal                         ErrStaleFence
//	lease present and now < deadline    ErrLeaseExpired
//	owner matches                       ErrNotOwner
//	operation-specific validation and limits
//
// The tenant is checked before the idempotency log so that one tenant can
// never observe another's operations through replays.

// The clock rule (docs/adr/0005-coord-pure-transitions.md): nodes' clocks
// differ, so a caller's now may be older than a timestamp another node just
// wrote. Every transition therefore runs at clock(now) = max(now, the
// record's UpdatedAt) instead of refusing or storing a record whose
// UpdatedAt would go backwards. Lease expiry decisions do not change: while
// a lease is held its deadline lies above the record's UpdatedAt (the
// deadline is set from the same clamped time plus a positive duration, and
// every later write under the lease happens before the deadline), so
// clock(now) >= deadline exactly when now >= deadline.

// ShardTransition is what a transition of one shard decided. The backend
// writes Shard and Created in one atomic step when Changed is set, and
// answers the caller from them.
type ShardTransition struct {
	// Shard is the shard's record after the transition. When Changed is
	// false it is the record as read: a replay is answered from it.
	Shard Shard
	// Lease is the lease that ApplyAcquire, ApplyClaim or ApplyRenew granted
	// or extended; for a replay, the lease originally granted, with a zero
	// deadline if it is no longer current. Other transitions leave it zero.
	Lease Lease
	// Created holds the shards the transition creates: the children of
	// ApplySplitReplace in order, or the one residual of
	// ApplySplitResidual. The backend checks the shard caps for
	// len(Created) new records and refuses an id that already exists
	// (ErrIDCollision). It is empty unless Changed: the shards of a replay
	// exist already, and the backend reads them by ReplaceChildIDs or
	// ResidualID.
	Created []Shard
	// Changed reports that the backend must write. It is false for replays
	// and refusals but one: an acquisition that exhausts
	// RunConfig.MaxRetries parks the shard and fails with
	// ErrRetriesExhausted with Changed set.
	Changed bool
}

// RunTransition is what a transition of a run decided. The backend writes
// Run and Created in one atomic step when Changed is set.
type RunTransition struct {
	// Run is the run's record after the transition. When Changed is false
	// it is the record as read: a replay is answered from it.
	Run Run
	// Created holds the root shards ApplyRegisterShards creates, in
	// manifest order. The backend checks the shard caps for len(Created)
	// new records.
	Created []Shard
	// Changed reports that the backend must write; it is false for replays
	// and refusals.
	Changed bool
}

// clock returns the time a transition of s runs at: now, or the record's
// UpdatedAt when now is older.
func (s *Shard) clock(now Time) Time { return max(now, s.UpdatedAt) }

// clock returns the time a transition of r runs at: see Shard.clock.
func (r *Run) clock(now Time) Time { return max(now, r.UpdatedAt) }

func checkCall(now Time, op OpID) error {
	if now < 1 || now > MaxTime {
		return fmt.Errorf("%w: now %d outside [1, MaxTime]", ErrInvalidArgument, now)
	}
	if op == 0 {
		return fmt.Errorf("%w: zero op id", ErrInvalidArgument)
	}
	return nil
}

// findOp looks op up in a log: found reports a replay of the same payload;
// a different payload is ErrOpConflict.
func findOp(ops []OpRecord, op OpID, h Digest) (rec OpRecord, found bool, err error) {
	for _, r := range ops {
		if r.ID == op {
			if r.Hash != h {
				return OpRecord{}, false, fmt.Errorf("%w: op %d", ErrOpConflict, op)
			}
			return r, true, nil
		}
	}
	return OpRecord{}, false, nil
}

// appendOp returns a new log with rec appended, evicting the oldest entries
// beyond max.
func appendOp(ops []OpRecord, rec OpRecord, max int) []OpRecord {
	if len(ops) >= max {
		ops = ops[len(ops)-max+1:]
	}
	out := make([]OpRecord, 0, len(ops)+1)
	return append(append(out, ops...), rec)
}

func (r *Run) checkTenant(t TenantID) error {
	if r.Tenant != t {
		return fmt.Errorf("%w: run %d", ErrTenantMismatch, r.ID)
	}
	return nil
}

// checkWorkable reports whether shards of the run may be worked on.
func (r *Run) checkWorkable() error {
	switch {
	case r.State.Terminal():
		return fmt.Errorf("%w: run %d is %v", ErrRunTerminal, r.ID, r.State)
	case r.State != RunActive:
		return fmt.Errorf("%w: run %d is %v", ErrRunNotActive, r.ID, r.State)
	}
	return nil
}

func (s *Shard) checkTarget(run *Run, runID RunID, shard ShardID) error {
	if run.ID != s.Run || runID != s.Run || shard != s.ID || run.Tenant != s.Tenant {
		return fmt.Errorf("%w: request names run %d shard %v, record is %v", ErrInvalidArgument, runID, shard, s)
	}
	return nil
}

func (s *Shard) checkTenant(t TenantID) error {
	if s.Tenant != t {
		return fmt.Errorf("%w: %v", ErrTenantMismatch, s)
	}
	return nil
}

func (s *Shard) checkState() error {
	switch s.State {
	case ShardDone, ShardSplit:
		return fmt.Errorf("%w: %v is %v", ErrShardTerminal, s, s.State)
	case ShardParked:
		return fmt.Errorf("%w: %v: %s", ErrShardParked, s, s.ParkReason)
	}
	return nil
}

// begin runs the common checks of a worker mutation presenting a lease, up to
// and including the lease itself. It returns the replayed op record, if any.
func (s *Shard) begin(run *Run, l Lease, op OpID, h Digest, now Time) (replay OpRecord, replayed bool, err error) {
	if err := checkCall(now, op); err != nil {
		return OpRecord{}, false, err
	}
	now = s.clock(now) // see the clock rule above
	if err := s.checkTarget(run, l.Run, l.Shard); err != nil {
		return OpRecord{}, false, err
	}
	if err := s.checkTenant(l.Tenant); err != nil {
		return OpRecord{}, false, err
	}
	if rec, ok, err := findOp(s.Ops, op, h); err != nil || ok {
		return rec, ok, err
	}
	if err := run.checkWorkable(); err != nil {
		return OpRecord{}, false, err
	}
	if err := s.checkState(); err != nil {
		return OpRecord{}, false, err
	}
	if l.Fence != s.Fence {
		return OpRecord{}, false, fmt.Errorf("%w: %v: presented %d, current %d", ErrStaleFence, s, l.Fence, s.Fence)
	}
	if s.Owner == 0 {
		return OpRecord{}, false, fmt.Errorf("%w: %v holds no lease", ErrLeaseExpired, s)
	}
	if now >= s.Deadline {
		return OpRecord{}, false, fmt.Errorf("%w: %v: deadline %d, now %d", ErrLeaseExpired, s, s.Deadline, now)
	}
	if l.Worker != s.Owner {
		return OpRecord{}, false, fmt.Errorf("%w: %v: worker %d, owner %d", ErrNotOwner, s, l.Worker, s.Owner)
	}
	return OpRecord{}, false, nil
}

// lease describes the shard's lease for worker at fence. When the record has
// moved on from that fence the deadline is zero: the lease is dead.
func (s *Shard) lease(worker WorkerID, fence uint64) Lease {
	l := Lease{Tenant: s.Tenant, Run: s.Run, Shard: s.ID, Worker: worker, Fence: fence}
	if s.Fence == fence && s.Owner == worker {
		l.Deadline = s.Deadline
	}
	return l
}

// next returns a copy of s updated at now with rec logged.
func (s *Shard) next(now Time, rec OpRecord) Shard {
	n := s.Clone()
	n.UpdatedAt = now
	n.Ops = appendOp(n.Ops, rec, MaxShardOps)
	return n
}

func (s *Shard) acquire(run *Run, worker WorkerID, op OpID, h Digest, now Time) (ShardTransition, error) {
	if worker == 0 {
		return ShardTransition{Shard: *s}, fmt.Errorf("%w: zero worker id", ErrInvalidArgument)
	}
	now = s.clock(now)
	if err := run.checkWorkable(); err != nil {
		return ShardTransition{Shard: *s}, err
	}
	if err := s.checkState(); err != nil {
		return ShardTransition{Shard: *s}, err
	}
	if s.LeaseLive(now) {
		return ShardTransition{Shard: *s}, fmt.Errorf("%w: %v until %d", ErrLeaseHeld, s, s.Deadline)
	}
	if run.Config.MaxRetries > 0 && s.Attempts > run.Config.MaxRetries {
		n := s.Clone()
		n.UpdatedAt = now
		n.State, n.ParkReason = ShardParked, ReasonRetriesExhausted
		n.Owner, n.Deadline = 0, 0
		return ShardTransition{Shard: n, Changed: true}, fmt.Errorf("%w: %v acquired %d times", ErrRetriesExhausted, s, s.Attempts)
	}
	n := s.next(now, OpRecord{ID: op, Hash: h, Result: s.Fence + 1})
	n.Fence++
	n.Attempts++
	n.Owner, n.Deadline = worker, now.Add(run.Config.LeaseDuration)
	return ShardTransition{Shard: n, Lease: n.lease(worker, n.Fence), Changed: true}, nil
}

// ApplyAcquire leases the shard to req.Worker. A replay returns the lease
// originally granted (with a zero deadline if it is no longer current).
func (s Shard) ApplyAcquire(run *Run, req AcquireRequest, now Time) (ShardTransition, error) {
	if err := checkCall(now, req.Op); err != nil {
		return ShardTransition{Shard: s}, err
	}
	if err := s.checkTarget(run, req.Run, req.Shard); err != nil {
		return ShardTransition{Shard: s}, err
	}
	if err := s.checkTenant(req.Tenant); err != nil {
		return ShardTransition{Shard: s}, err
	}
	h := req.PayloadHash()
	if rec, ok, err := findOp(s.Ops, req.Op, h); err != nil {
		return ShardTransition{Shard: s}, err
	} else if ok {
		return ShardTransition{Shard: s, Lease: s.lease(req.Worker, rec.Result)}, nil
	}
	return s.acquire(run, req.Worker, req.Op, h, now)
}

// ClaimReplay reports whether req was already applied to this shard and, if
// so, the lease it granted. Backends call it on every shard of the run before
// trying candidates, so a retried ClaimNext returns the original claim.
func (s *Shard) ClaimReplay(req ClaimRequest) (lease Lease, replayed bool, err error) {
	if s.Tenant != req.Tenant {
		return Lease{}, false, nil
	}
	rec, ok, err := findOp(s.Ops, req.Op, req.PayloadHash())
	if err != nil || !ok {
		return Lease{}, false, err
	}
	return s.lease(req.Worker, rec.Result), true, nil
}

// Claimable reports whether ClaimNext may try this shard at now.
func (s *Shard) Claimable(now Time) bool { return s.State == ShardActive && !s.LeaseLive(now) }

// ApplyClaim leases a candidate shard for ClaimNext. The caller has already
// checked ClaimReplay on every shard of the run.
func (s Shard) ApplyClaim(run *Run, req ClaimRequest, now Time) (ShardTransition, error) {
	if err := checkCall(now, req.Op); err != nil {
		return ShardTransition{Shard: s}, err
	}
	if err := s.checkTarget(run, req.Run, s.ID); err != nil {
		return ShardTransition{Shard: s}, err
	}
	if err := s.checkTenant(req.Tenant); err != nil {
		return ShardTransition{Shard: s}, err
	}
	return s.acquire(run, req.Worker, req.Op, req.PayloadHash(), now)
}

// ApplyRenew extends the lease to now + the run's lease duration.
func (s Shard) ApplyRenew(run *Run, req RenewRequest, now Time) (ShardTransition, error) {
	h := req.PayloadHash()
	if _, ok, err := s.begin(run, req.Lease, req.Op, h, now); err != nil {
		return ShardTransition{Shard: s}, err
	} else if ok {
		return ShardTransition{Shard: s, Lease: s.lease(req.Lease.Worker, req.Lease.Fence)}, nil
	}
	now = s.clock(now)
	n := s.next(now, OpRecord{ID: req.Op, Hash: h})
	n.Deadline = now.Add(run.Config.LeaseDuration)
	return ShardTransition{Shard: n, Lease: n.lease(n.Owner, n.Fence), Changed: true}, nil
}

// ApplyCheckpoint moves the cursor. The key, if any, must stay inside the
// range and must not move backwards (see CursorMode); a cursor without a key
// is accepted only while no key has been recorded.
func (s Shard) ApplyCheckpoint(run *Run, req CheckpointRequest, now Time, lim Limits) (ShardTransition, error) {
	h := req.PayloadHash()
	if _, ok, err := s.begin(run, req.Lease, req.Op, h, now); err != nil || ok {
		return ShardTransition{Shard: s}, err
	}
	now = s.clock(now)
	c := req.Cursor
	if err := lim.checkCursor(c); err != nil {
		return ShardTransition{Shard: s}, err
	}
	if !c.HasKey && len(c.Key) != 0 {
		return ShardTransition{Shard: s}, fmt.Errorf("%w: cursor key without HasKey", ErrInvalidArgument)
	}
	if c.HasKey && !s.Contains(c.Key) {
		return ShardTransition{Shard: s}, fmt.Errorf("%w: %v: key %q", ErrCursorOutOfRange, &s, c.Key)
	}
	if s.Cursor.HasKey {
		if !c.HasKey {
			return ShardTransition{Shard: s}, fmt.Errorf("%w: %v: cursor key dropped", ErrCursorRegression, &s)
		}
		cmp := bytes.Compare(c.Key, s.Cursor.Key)
		if cmp < 0 || (cmp == 0 && run.Config.Cursor == CursorStrictlyIncreasing) {
			return ShardTransition{Shard: s}, fmt.Errorf("%w: %v: key %q after %q", ErrCursorRegression, &s, c.Key, s.Cursor.Key)
		}
	}
	n := s.next(now, OpRecord{ID: req.Op, Hash: h})
	n.Cursor = c.Clone()
	return ShardTransition{Shard: n, Changed: true}, nil
}

// ApplyComplete marks the shard Done and drops its lease.
func (s Shard) ApplyComplete(run *Run, req CompleteRequest, now Time) (ShardTransition, error) {
	h := req.PayloadHash()
	if _, ok, err := s.begin(run, req.Lease, req.Op, h, now); err != nil || ok {
		return ShardTransition{Shard: s}, err
	}
	now = s.clock(now)
	n := s.next(now, OpRecord{ID: req.Op, Hash: h})
	n.State, n.Owner, n.Deadline = ShardDone, 0, 0
	return ShardTransition{Shard: n, Changed: true}, nil
}

// ApplyPark marks the shard Parked and drops its lease.
func (s Shard) ApplyPark(run *Run, req ParkRequest, now Time, lim Limits) (ShardTransition, error) {
	h := req.PayloadHash()
	if _, ok, err := s.begin(run, req.Lease, req.Op, h, now); err != nil || ok {
		return ShardTransition{Shard: s}, err
	}
	now = s.clock(now)
	if req.Reason == "" {
		return ShardTransition{Shard: s}, fmt.Errorf("%w: empty park reason", ErrInvalidArgument)
	}
	if err := lim.check(LimitReasonSize, len(req.Reason), lim.MaxReasonSize); err != nil {
		return ShardTransition{Shard: s}, err
	}
	n := s.next(now, OpRecord{ID: req.Op, Hash: h})
	n.State, n.ParkReason, n.Owner, n.Deadline = ShardParked, req.Reason, 0, 0
	return ShardTransition{Shard: n, Changed: true}, nil
}

// ApplyUnpark makes a Parked shard Active again, bumping its fence so that
// any lease from before the park stays dead, and resetting its attempts.
func (s Shard) ApplyUnpark(run *Run, req UnparkRequest, now Time) (ShardTransition, error) {
	if err := checkCall(now, req.Op); err != nil {
		return ShardTransition{Shard: s}, err
	}
	if err := s.checkTarget(run, req.Run, req.Shard); err != nil {
		return ShardTransition{Shard: s}, err
	}
	if err := s.checkTenant(req.Tenant); err != nil {
		return ShardTransition{Shard: s}, err
	}
	h := req.PayloadHash()
	if _, ok, err := findOp(s.Ops, req.Op, h); err != nil || ok {
		return ShardTransition{Shard: s}, err
	}
	now = s.clock(now)
	if run.State.Terminal() {
		return ShardTransition{Shard: s}, fmt.Errorf("%w: run %d is %v", ErrRunTerminal, run.ID, run.State)
	}
	if s.State != ShardParked {
		return ShardTransition{Shard: s}, fmt.Errorf("%w: %v is %v", ErrShardNotParked, &s, s.State)
	}
	n := s.next(now, OpRecord{ID: req.Op, Hash: h})
	n.State, n.ParkReason, n.Attempts = ShardActive, "", 0
	n.Fence++
	return ShardTransition{Shard: n, Changed: true}, nil
}

// ReplaceChildIDs returns the ids SplitReplace gives the children of req,
// which lets a backend answer a replay with the children's current records.
func ReplaceChildIDs(req SplitReplaceRequest) []ShardID {
	ids := make([]ShardID, len(req.Children))
	for i := range ids {
		ids[i] = DeriveShardID(req.Lease.Run, req.Lease.Shard, req.Op, SplitKindReplace, uint32(i))
	}
	return ids
}

// ResidualID returns the id SplitResidual gives the residual shard of req.
func ResidualID(req SplitResidualRequest) ShardID {
	return DeriveShardID(req.Lease.Run, req.Lease.Shard, req.Op, SplitKindResidual, 0)
}

// ValidateChildren checks that children exactly tile [start, end): at least
// two, the first starting at start, each starting where the previous ended,
// the last ending at end, none empty.
func ValidateChildren(start, end []byte, children []ChildSpec, lim Limits) error {
	if len(children) < 2 {
		return &SplitError{Reason: ErrSplitSingleChild, Index: -1}
	}
	if err := lim.check(LimitChildrenPerSplit, len(children), lim.MaxChildrenPerSplit); err != nil {
		return err
	}
	for i, c := range children {
		if err := lim.check(LimitKeySize, max(len(c.Start), len(c.End)), lim.MaxKeySize); err != nil {
			return err
		}
		if err := lim.check(LimitMetadataSize, len(c.Metadata), lim.MaxMetadataSize); err != nil {
			return err
		}
		last := i == len(children)-1
		if len(c.End) == 0 && !last {
			return &SplitError{Reason: ErrSplitOverlap, Index: i}
		}
		if len(c.End) != 0 && bytes.Compare(c.Start, c.End) >= 0 {
			return &SplitError{Reason: ErrSplitEmptyChild, Index: i}
		}
		if i == 0 {
			if !bytes.Equal(c.Start, start) {
				return &SplitError{Reason: ErrSplitWrongStart, Index: i}
			}
		} else {
			switch cmp := bytes.Compare(c.Start, children[i-1].End); {
			case cmp > 0:
				return &SplitError{Reason: ErrSplitGap, Index: i}
			case cmp < 0:
				return &SplitError{Reason: ErrSplitOverlap, Index: i}
			}
		}
		if last && !bytes.Equal(c.End, end) {
			return &SplitError{Reason: ErrSplitWrongEnd, Index: i}
		}
	}
	return nil
}

// ApplySplitReplace replaces the shard by req.Children and marks it Split.
// The children get ids from ReplaceChildIDs, fence 1 and no lease. Progress
// is inherited: the child whose range holds the parent's cursor gets that
// cursor, and children wholly below the cursor are born Done because the
// parent already processed them. A replay creates no children: the backend
// reads them by ReplaceChildIDs.
func (s Shard) ApplySplitReplace(run *Run, req SplitReplaceRequest, now Time, lim Limits) (ShardTransition, error) {
	h := req.PayloadHash()
	if _, ok, err := s.begin(run, req.Lease, req.Op, h, now); err != nil || ok {
		return ShardTransition{Shard: s}, err
	}
	now = s.clock(now)
	if err := ValidateChildren(s.Start, s.End, req.Children, lim); err != nil {
		return ShardTransition{Shard: s}, err
	}
	if err := lim.check(LimitSpawnedPerShard, len(s.Children)+len(req.Children), lim.MaxSpawnedPerShard); err != nil {
		return ShardTransition{Shard: s}, err
	}
	ids := ReplaceChildIDs(req)
	children := make([]Shard, len(req.Children))
	for i, c := range req.Children {
		md := c.Metadata
		if md == nil {
			md = s.Metadata
		}
		child := Shard{
			Tenant: s.Tenant, Run: s.Run, ID: ids[i], Parent: s.ID,
			Start: cloneBytes(c.Start), End: cloneBytes(c.End), Metadata: cloneBytes(md),
			State: ShardActive, Fence: 1, CreatedAt: now, UpdatedAt: now,
		}
		if s.Cursor.HasKey {
			switch {
			case inRange(s.Cursor.Key, c.Start, c.End):
				child.Cursor = s.Cursor.Clone()
			case len(c.End) != 0 && bytes.Compare(s.Cursor.Key, c.End) >= 0:
				child.State = ShardDone
			}
		}
		children[i] = child
	}
	n := s.next(now, OpRecord{ID: req.Op, Hash: h, Result: uint64(len(ids))})
	n.State, n.Owner, n.Deadline = ShardSplit, 0, 0
	n.Children = append(n.Children, ids...)
	return ShardTransition{Shard: n, Created: children, Changed: true}, nil
}

// ApplySplitResidual shrinks the shard to [Start, req.Key) and returns a new
// residual shard for [req.Key, End). The shard keeps its lease and cursor,
// which must lie below req.Key. A replay creates no residual: the backend
// reads it by ResidualID.
func (s Shard) ApplySplitResidual(run *Run, req SplitResidualRequest, now Time, lim Limits) (ShardTransition, error) {
	h := req.PayloadHash()
	if _, ok, err := s.begin(run, req.Lease, req.Op, h, now); err != nil || ok {
		return ShardTransition{Shard: s}, err
	}
	now = s.clock(now)
	if err := lim.check(LimitKeySize, len(req.Key), lim.MaxKeySize); err != nil {
		return ShardTransition{Shard: s}, err
	}
	if err := lim.check(LimitMetadataSize, len(req.Metadata), lim.MaxMetadataSize); err != nil {
		return ShardTransition{Shard: s}, err
	}
	if bytes.Compare(req.Key, s.Start) <= 0 || !s.Contains(req.Key) {
		return ShardTransition{Shard: s}, &SplitError{Reason: ErrSplitKey, Index: -1}
	}
	if s.Cursor.HasKey && bytes.Compare(s.Cursor.Key, req.Key) >= 0 {
		return ShardTransition{Shard: s}, &SplitError{Reason: ErrSplitCursor, Index: -1}
	}
	if err := lim.check(LimitSpawnedPerShard, len(s.Children)+1, lim.MaxSpawnedPerShard); err != nil {
		return ShardTransition{Shard: s}, err
	}
	md := req.Metadata
	if md == nil {
		md = s.Metadata
	}
	id := ResidualID(req)
	res := Shard{
		Tenant: s.Tenant, Run: s.Run, ID: id, Parent: s.ID,
		Start: cloneBytes(req.Key), End: cloneBytes(s.End), Metadata: cloneBytes(md),
		State: ShardActive, Fence: 1, CreatedAt: now, UpdatedAt: now,
	}
	n := s.next(now, OpRecord{ID: req.Op, Hash: h, Result: 1})
	n.End = cloneBytes(req.Key)
	n.Children = append(n.Children, id)
	return ShardTransition{Shard: n, Created: []Shard{res}, Changed: true}, nil
}

// NewRun builds the record CreateRun stores for a run that does not exist.
func NewRun(req CreateRunRequest, now Time) (Run, error) {
	if err := checkCall(now, req.Op); err != nil {
		return Run{}, err
	}
	if req.Run == 0 {
		return Run{}, fmt.Errorf("%w: zero run id", ErrInvalidArgument)
	}
	if err := req.Config.Validate(); err != nil {
		return Run{}, err
	}
	return Run{
		Tenant: req.Tenant, ID: req.Run, State: RunInitializing, Config: req.Config,
		CreatedAt: now, UpdatedAt: now,
		Ops: []OpRecord{{ID: req.Op, Hash: req.PayloadHash()}},
	}, nil
}

// ApplyCreateRun answers a CreateRun for a run id that already exists: a
// replay of the creating op succeeds, anything else is an error.
func (r Run) ApplyCreateRun(req CreateRunRequest, now Time) (Run, error) {
	if err := checkCall(now, req.Op); err != nil {
		return r, err
	}
	if err := r.checkTenant(req.Tenant); err != nil {
		return r, err
	}
	if _, ok, err := findOp(r.Ops, req.Op, req.PayloadHash()); err != nil || ok {
		return r, err
	}
	return r, fmt.Errorf("%w: run %d", ErrRunExists, r.ID)
}

func (r *Run) begin(t TenantID, op OpID, h Digest, now Time) (replayed bool, err error) {
	if err := checkCall(now, op); err != nil {
		return false, err
	}
	if err := r.checkTenant(t); err != nil {
		return false, err
	}
	if _, ok, err := findOp(r.Ops, op, h); err != nil || ok {
		return ok, err
	}
	if r.State.Terminal() {
		return false, fmt.Errorf("%w: run %d is %v", ErrRunTerminal, r.ID, r.State)
	}
	return false, nil
}

func (r *Run) next(now Time, op OpID, h Digest) Run {
	n := r.Clone()
	n.UpdatedAt = r.clock(now)
	n.Ops = appendOp(n.Ops, OpRecord{ID: op, Hash: h}, MaxRunOps)
	return n
}

// ApplyRegisterShards validates the manifest and returns the Active run and
// the root shard records, in manifest order. The backend must also check
// the shard caps for len(shards) new records and write everything at once.
func (r Run) ApplyRegisterShards(req RegisterShardsRequest, now Time, lim Limits) (RunTransition, error) {
	h := req.PayloadHash()
	if ok, err := r.begin(req.Tenant, req.Op, h, now); err != nil || ok {
		return RunTransition{Run: r}, err
	}
	if r.State != RunInitializing {
		return RunTransition{Run: r}, fmt.Errorf("%w: run %d is %v", ErrRunNotInitializing, r.ID, r.State)
	}
	if err := ValidateManifest(req.Shards, lim); err != nil {
		return RunTransition{Run: r}, err
	}
	shards := make([]Shard, len(req.Shards))
	for i, sp := range req.Shards {
		shards[i] = Shard{
			Tenant: r.Tenant, Run: r.ID, ID: sp.ID,
			Start: cloneBytes(sp.Start), End: cloneBytes(sp.End), Metadata: cloneBytes(sp.Metadata),
			State: ShardActive, Cursor: sp.Cursor.Clone(), Fence: 1, CreatedAt: now, UpdatedAt: now,
		}
	}
	n := r.next(now, req.Op, h)
	n.State, n.RootShards = RunActive, uint32(len(shards))
	return RunTransition{Run: n, Created: shards, Changed: true}, nil
}

// ApplyCompleteRun marks an Active run Done. sum counts the run's shards;
// none may be Active or Parked. Once that holds it keeps holding (new
// shards only come from splits of Active shards, and only Parked shards can
// be unparked), so an etcd backend need not guard the shard records it
// counted. Like every terminal transition it records sum as the run's
// Summary: the backend deletes the shard records and releases them from the
// caps in the same atomic write (docs/adr/0023-atomic-shard-caps.md).
func (r Run) ApplyCompleteRun(req CompleteRunRequest, now Time, sum RunSummary) (RunTransition, error) {
	h := req.PayloadHash()
	if ok, err := r.begin(req.Tenant, req.Op, h, now); err != nil || ok {
		return RunTransition{Run: r}, err
	}
	if r.State != RunActive {
		return RunTransition{Run: r}, fmt.Errorf("%w: run %d is %v", ErrRunNotActive, r.ID, r.State)
	}
	if unfinished := sum.Active + sum.Parked; unfinished > 0 {
		return RunTransition{Run: r}, fmt.Errorf("%w: run %d has %d", ErrRunIncomplete, r.ID, unfinished)
	}
	n := r.next(now, req.Op, h)
	n.State, n.CompletedAt, n.Summary = RunDone, n.UpdatedAt, sum
	return RunTransition{Run: n, Changed: true}, nil
}

// ApplyFailRun marks an Active run Failed, recording sum as its Summary
// (see ApplyCompleteRun).
func (r Run) ApplyFailRun(req FailRunRequest, now Time, lim Limits, sum RunSummary) (RunTransition, error) {
	h := req.PayloadHash()
	if ok, err := r.begin(req.Tenant, req.Op, h, now); err != nil || ok {
		return RunTransition{Run: r}, err
	}
	if r.State != RunActive {
		return RunTransition{Run: r}, fmt.Errorf("%w: run %d is %v", ErrRunNotActive, r.ID, r.State)
	}
	if req.Reason == "" {
		return RunTransition{Run: r}, fmt.Errorf("%w: empty failure reason", ErrInvalidArgument)
	}
	if err := lim.check(LimitReasonSize, len(req.Reason), lim.MaxReasonSize); err != nil {
		return RunTransition{Run: r}, err
	}
	n := r.next(now, req.Op, h)
	n.State, n.CompletedAt, n.FailReason, n.Summary = RunFailed, n.UpdatedAt, req.Reason, sum
	return RunTransition{Run: n, Changed: true}, nil
}

// ApplyCancelRun marks an Initializing or Active run Cancelled, recording
// sum as its Summary (see ApplyCompleteRun). An Initializing run may hold
// the shards of a registration in progress (see RegisterShards in etcd).
func (r Run) ApplyCancelRun(req CancelRunRequest, now Time, sum RunSummary) (RunTransition, error) {
	h := req.PayloadHash()
	if ok, err := r.begin(req.Tenant, req.Op, h, now); err != nil || ok {
		return RunTransition{Run: r}, err
	}
	n := r.next(now, req.Op, h)
	n.State, n.CompletedAt, n.Summary = RunCancelled, n.UpdatedAt, sum
	return RunTransition{Run: n, Changed: true}, nil
}
