package coord

import (
	"errors"
	"fmt"
)

// Sentinel errors. Backends wrap them with context using %w; callers test them
// with errors.Is. Each maps to exactly one outcome for API clients.
var (
	// ErrInvalidArgument reports a malformed request (zero ids, now < 1, a
	// lease duration that is not a positive number of milliseconds, ...).
	ErrInvalidArgument = errors.New("coord: invalid argument")
	// ErrNotFound reports a run or shard that does not exist.
	ErrNotFound = errors.New("coord: not found")
	// ErrRunExists reports a CreateRun for an id already in use by a
	// different operation.
	ErrRunExists = errors.New("coord: run already exists")
	// ErrTenantMismatch reports a request whose tenant does not own the record.
	ErrTenantMismatch = errors.New("coord: tenant mismatch")
	// ErrOpConflict reports an op id replayed with a different payload.
	ErrOpConflict = errors.New("coord: op id reused with a different payload")

	// ErrRunTerminal reports a mutation of a run that is Done, Failed or
	// Cancelled, or of one of its shards.
	ErrRunTerminal = errors.New("coord: run is terminal")
	// ErrRunNotActive reports an operation that needs an Active run while the
	// run is still Initializing.
	ErrRunNotActive = errors.New("coord: run is not active")
	// ErrRunNotInitializing reports a RegisterShards on a run whose shards are
	// already registered.
	ErrRunNotInitializing = errors.New("coord: run is not initializing")
	// ErrRunIncomplete reports a CompleteRun while some shard is still Active
	// or Parked.
	ErrRunIncomplete = errors.New("coord: run has unfinished shards")

	// ErrShardTerminal reports a worker mutation of a Done or Split shard.
	ErrShardTerminal = errors.New("coord: shard is terminal")
	// ErrShardParked reports a worker mutation of a Parked shard.
	ErrShardParked = errors.New("coord: shard is parked")
	// ErrShardNotParked reports an Unpark of a shard that is not Parked.
	ErrShardNotParked = errors.New("coord: shard is not parked")
	// ErrStaleFence reports a lease whose fence is not the shard's current
	// fence: the caller is a zombie and must stop working on the shard.
	ErrStaleFence = errors.New("coord: stale fence")
	// ErrLeaseExpired reports a lease that is absent or whose deadline has
	// passed (now >= deadline).
	ErrLeaseExpired = errors.New("coord: lease expired")
	// ErrNotOwner reports a lease presented by a worker that does not own it.
	ErrNotOwner = errors.New("coord: not the lease owner")
	// ErrLeaseHeld reports an Acquire while another live lease holds the shard.
	ErrLeaseHeld = errors.New("coord: shard is leased")
	// ErrNoShardAvailable reports a ClaimNext that found nothing to claim.
	ErrNoShardAvailable = errors.New("coord: no shard available")
	// ErrRetriesExhausted reports an acquisition that exceeded
	// RunConfig.MaxRetries; the shard has been parked.
	ErrRetriesExhausted = errors.New("coord: retries exhausted, shard parked")

	// ErrUnavailable reports a backend that could not be reached or did
	// not answer in time. It is transient: a mutation may or may not have
	// applied, and retrying it with the same op id is safe. Backends wrap
	// it, so a consumer tells a passing outage from a refusal without
	// knowing which backend it has.
	ErrUnavailable = errors.New("coord: backend unavailable")
	// ErrContention reports a mutation that lost to concurrent writers on
	// every attempt. It is transient: nothing applied, and retrying with
	// the same op id is safe.
	ErrContention = errors.New("coord: too much contention")

	// ErrCursorRegression reports a checkpoint that moves the cursor back.
	ErrCursorRegression = errors.New("coord: cursor moves backwards")
	// ErrCursorOutOfRange reports a cursor key outside the shard's range.
	ErrCursorOutOfRange = errors.New("coord: cursor outside shard range")

	// ErrInvalidRange reports a range with start >= end or keys out of order.
	ErrInvalidRange = errors.New("coord: invalid range")
	// ErrDuplicateShard reports a manifest naming the same shard id twice.
	ErrDuplicateShard = errors.New("coord: duplicate shard id")
	// ErrOverlap reports manifest shards whose ranges overlap.
	ErrOverlap = errors.New("coord: overlapping shard ranges")
	// ErrIDCollision reports a derived shard id that already exists; it is
	// astronomically unlikely unless an op id is reused after log eviction.
	ErrIDCollision = errors.New("coord: derived shard id already exists")

	// ErrInvalidSplit is matched by every *SplitError.
	ErrInvalidSplit = errors.New("coord: invalid split")
	// Reasons carried by a *SplitError.
	ErrSplitSingleChild = errors.New("split needs at least two children")
	ErrSplitWrongStart  = errors.New("first child does not start at the parent's start")
	ErrSplitWrongEnd    = errors.New("last child does not end at the parent's end")
	ErrSplitGap         = errors.New("gap between children")
	ErrSplitOverlap     = errors.New("children overlap")
	ErrSplitEmptyChild  = errors.New("child range is empty")
	ErrSplitKey         = errors.New("split key not strictly inside the shard range")
	ErrSplitCursor      = errors.New("cursor would leave the shard's lower part")

	// ErrLimitExceeded is matched by every *LimitError and *ShardLimitError.
	ErrLimitExceeded = errors.New("coord: limit exceeded")
	// ErrShardLimitExceeded is matched by every *ShardLimitError.
	ErrShardLimitExceeded = errors.New("coord: shard limit exceeded")

	// ErrCorrupt reports an encoded record that cannot be decoded or violates
	// the record invariants.
	ErrCorrupt = errors.New("coord: corrupt record")
)

// SplitError describes why a split request was refused. It matches
// ErrInvalidSplit and its Reason with errors.Is.
type SplitError struct {
	Reason error // one of the ErrSplit* reasons
	Index  int   // child index the reason refers to, or -1
}

func (e *SplitError) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("coord: invalid split: child %d: %v", e.Index, e.Reason)
	}
	return fmt.Sprintf("coord: invalid split: %v", e.Reason)
}

// Unwrap exposes both the reason and ErrInvalidSplit to errors.Is.
func (e *SplitError) Unwrap() []error { return []error{e.Reason, ErrInvalidSplit} }

// Names of the limits reported in LimitError.Limit.
const (
	LimitChildrenPerSplit = "children_per_split"
	LimitSpawnedPerShard  = "spawned_per_shard"
	LimitKeySize          = "key_size"
	LimitTokenSize        = "token_size"
	LimitMetadataSize     = "metadata_size"
	LimitReasonSize       = "reason_size"
	LimitInitialShards    = "initial_shards"
)

// LimitError reports a request that exceeds one of the Limits.
type LimitError struct {
	Limit string // one of the Limit* names
	Value int64  // the value requested
	Max   int64  // the configured maximum
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("coord: limit %s exceeded: %d > %d", e.Limit, e.Value, e.Max)
}

// Is makes a *LimitError match ErrLimitExceeded.
func (e *LimitError) Is(target error) bool { return target == ErrLimitExceeded }

// Scopes reported in ShardLimitError.Scope.
const (
	ScopeTenant = "tenant"
	ScopeGlobal = "global"
)

// ShardLimitError reports that creating shards would exceed a shard cap.
type ShardLimitError struct {
	Scope   string // ScopeTenant or ScopeGlobal
	Current int64  // shard records existing in the scope
	Delta   int64  // shard records the request would create
	Cap     int64
}

func (e *ShardLimitError) Error() string {
	return fmt.Sprintf("coord: %s shard limit exceeded: %d existing + %d requested > cap %d",
		e.Scope, e.Current, e.Delta, e.Cap)
}

// Is makes a *ShardLimitError match ErrShardLimitExceeded and ErrLimitExceeded.
func (e *ShardLimitError) Is(target error) bool {
	return target == ErrShardLimitExceeded || target == ErrLimitExceeded
}
