package coord

import (
	"bytes"
	"fmt"
	"slices"
	"time"
)

// Validate checks the structural invariants of a run record. Backends call it
// before writing and after decoding; it does not know the Limits in force.
func (r *Run) Validate() error {
	if r.ID == 0 {
		return fmt.Errorf("%w: run id is zero", ErrCorrupt)
	}
	if !r.State.valid() {
		return fmt.Errorf("%w: run %d: invalid state %d", ErrCorrupt, r.ID, r.State)
	}
	if err := r.Config.Validate(); err != nil {
		return fmt.Errorf("%w: run %d: %w", ErrCorrupt, r.ID, err)
	}
	if r.CreatedAt < 1 || r.UpdatedAt < r.CreatedAt {
		return fmt.Errorf("%w: run %d: bad timestamps", ErrCorrupt, r.ID)
	}
	if r.State.Terminal() != (r.CompletedAt != 0) {
		return fmt.Errorf("%w: run %d: completed_at must be set exactly when terminal", ErrCorrupt, r.ID)
	}
	if r.State == RunActive && r.RootShards == 0 {
		return fmt.Errorf("%w: run %d: active run has no root shards", ErrCorrupt, r.ID)
	}
	if r.State == RunInitializing && r.RootShards != 0 {
		return fmt.Errorf("%w: run %d: initializing run has root shards", ErrCorrupt, r.ID)
	}
	if !r.State.Terminal() && r.Summary != (RunSummary{}) {
		return fmt.Errorf("%w: run %d: summary of a run that is not terminal", ErrCorrupt, r.ID)
	}
	if m := r.Summary; m.Active+m.Done+m.Split+m.Parked != m.Total {
		return fmt.Errorf("%w: run %d: summary counts do not add up", ErrCorrupt, r.ID)
	}
	if (r.State == RunFailed) != (r.FailReason != "") {
		return fmt.Errorf("%w: run %d: fail reason must be set exactly when failed", ErrCorrupt, r.ID)
	}
	if err := validateOps(r.Ops, MaxRunOps); err != nil {
		return fmt.Errorf("%w: run %d: %w", ErrCorrupt, r.ID, err)
	}
	return nil
}

// Validate checks the structural invariants of a shard record. Backends call
// it before writing and after decoding; it does not know the Limits in force.
func (s *Shard) Validate() error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("%w: %v: %w", ErrCorrupt, s, err)
	}
	return nil
}

func (s *Shard) validate() error {
	switch {
	case s.Run == 0 || s.ID == 0:
		return fmt.Errorf("zero id")
	case !s.State.valid():
		return fmt.Errorf("invalid state %d", s.State)
	case s.ID.IsDerived() != (s.Parent != 0):
		return fmt.Errorf("parent must be set exactly for derived ids")
	case s.Parent == s.ID:
		return fmt.Errorf("shard is its own parent")
	case len(s.End) != 0 && bytes.Compare(s.Start, s.End) >= 0:
		return fmt.Errorf("%w: start >= end", ErrInvalidRange)
	case s.Fence < 1:
		return fmt.Errorf("fence is zero")
	case (s.Owner == 0) != (s.Deadline == 0):
		return fmt.Errorf("owner and deadline must be set together")
	case s.State != ShardActive && s.Owner != 0:
		return fmt.Errorf("%v shard holds a lease", s.State)
	case (s.State == ShardParked) != (s.ParkReason != ""):
		return fmt.Errorf("park reason must be set exactly when parked")
	case s.State == ShardSplit && len(s.Children) < 2:
		return fmt.Errorf("split shard has fewer than two children")
	case s.Cursor.HasKey && !s.Contains(s.Cursor.Key):
		return fmt.Errorf("%w", ErrCursorOutOfRange)
	case !s.Cursor.HasKey && len(s.Cursor.Key) != 0:
		return fmt.Errorf("cursor key without HasKey")
	case s.CreatedAt < 1 || s.UpdatedAt < s.CreatedAt:
		return fmt.Errorf("bad timestamps")
	case s.Owner != 0 && s.Deadline <= s.UpdatedAt:
		// The clock rule relies on it: see Shard.clock.
		return fmt.Errorf("lease deadline %d not after updated_at %d", s.Deadline, s.UpdatedAt)
	}
	seen := make(map[ShardID]bool, len(s.Children))
	for _, c := range s.Children {
		if !c.IsDerived() || c == s.ID || seen[c] {
			return fmt.Errorf("bad child id %v", c)
		}
		seen[c] = true
	}
	return validateOps(s.Ops, MaxShardOps)
}

func validateOps(ops []OpRecord, max int) error {
	if len(ops) > max {
		return fmt.Errorf("op log has %d entries, max %d", len(ops), max)
	}
	for i, op := range ops {
		if op.ID == 0 {
			return fmt.Errorf("op log entry %d has zero id", i)
		}
		for _, prev := range ops[:i] {
			if prev.ID == op.ID {
				return fmt.Errorf("op log repeats op %d", op.ID)
			}
		}
	}
	return nil
}

// Validate checks a run configuration.
func (c RunConfig) Validate() error {
	if c.LeaseDuration < time.Millisecond || c.LeaseDuration%time.Millisecond != 0 {
		return fmt.Errorf("%w: lease duration %v is not a positive whole number of milliseconds",
			ErrInvalidArgument, c.LeaseDuration)
	}
	if c.LeaseDuration > MaxLeaseDuration {
		return fmt.Errorf("%w: lease duration %v exceeds %v", ErrInvalidArgument, c.LeaseDuration, MaxLeaseDuration)
	}
	if !c.Cursor.valid() {
		return fmt.Errorf("%w: unknown cursor mode %d", ErrInvalidArgument, c.Cursor)
	}
	return nil
}

// ValidateManifest checks a RegisterShards manifest against lim: non-empty,
// at most MaxInitialShards, valid unique root ids, non-empty ranges within the
// key size limit that do not overlap (gaps are allowed), metadata and cursor
// sizes, and initial cursors inside their ranges.
func ValidateManifest(specs []ShardSpec, lim Limits) error {
	if len(specs) == 0 {
		return fmt.Errorf("%w: empty manifest", ErrInvalidArgument)
	}
	if err := lim.check(LimitInitialShards, len(specs), lim.MaxInitialShards); err != nil {
		return err
	}
	seen := make(map[ShardID]struct{}, len(specs))
	for i := range specs {
		s := &specs[i]
		if s.ID == 0 || s.ID.IsDerived() {
			return fmt.Errorf("%w: shard %d: id %v is zero or has the derived bit", ErrInvalidArgument, i, s.ID)
		}
		if _, dup := seen[s.ID]; dup {
			return fmt.Errorf("%w: %v", ErrDuplicateShard, s.ID)
		}
		seen[s.ID] = struct{}{}
		if err := checkRange(s.Start, s.End, lim); err != nil {
			return fmt.Errorf("shard %v: %w", s.ID, err)
		}
		if err := lim.check(LimitMetadataSize, len(s.Metadata), lim.MaxMetadataSize); err != nil {
			return fmt.Errorf("shard %v: %w", s.ID, err)
		}
		if err := lim.checkCursor(s.Cursor); err != nil {
			return fmt.Errorf("shard %v: %w", s.ID, err)
		}
		if s.Cursor.HasKey && !inRange(s.Cursor.Key, s.Start, s.End) {
			return fmt.Errorf("shard %v: %w", s.ID, ErrCursorOutOfRange)
		}
		if !s.Cursor.HasKey && len(s.Cursor.Key) != 0 {
			return fmt.Errorf("%w: shard %v: cursor key without HasKey", ErrInvalidArgument, s.ID)
		}
	}
	order := make([]int, len(specs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(specs[a].Start, specs[b].Start) })
	for k := 1; k < len(order); k++ {
		prev, next := &specs[order[k-1]], &specs[order[k]]
		if len(prev.End) == 0 || bytes.Compare(prev.End, next.Start) > 0 {
			return fmt.Errorf("%w: shards %v and %v", ErrOverlap, prev.ID, next.ID)
		}
	}
	return nil
}

// checkRange checks the key sizes and that [start, end) is not empty.
func checkRange(start, end []byte, lim Limits) error {
	if err := lim.check(LimitKeySize, len(start), lim.MaxKeySize); err != nil {
		return err
	}
	if err := lim.check(LimitKeySize, len(end), lim.MaxKeySize); err != nil {
		return err
	}
	if len(end) != 0 && bytes.Compare(start, end) >= 0 {
		return fmt.Errorf("%w: start %q >= end %q", ErrInvalidRange, start, end)
	}
	return nil
}
