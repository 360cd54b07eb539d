package coord

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"
)

// TenantID identifies the owner of runs. It is opaque to coord; ghost derives
// it from the tenant's stable identity.
type TenantID [32]byte

// String returns the hexadecimal form of the tenant id.
func (t TenantID) String() string { return hex.EncodeToString(t[:]) }

// RunID identifies a run. Run ids are allocated by the caller and are unique
// across all tenants; a request naming a run of another tenant fails with
// ErrTenantMismatch.
type RunID uint64

// ShardID identifies a shard within its run. Ids chosen by the caller for
// root shards must be non-zero and have the high bit clear; ids with the high
// bit set are derived by splits (see DeriveShardID).
type ShardID uint64

// DerivedBit is set in every ShardID produced by DeriveShardID, so derived
// ids can never collide with caller-chosen root ids.
const DerivedBit ShardID = 1 << 63

// IsDerived reports whether id was produced by a split.
func (id ShardID) IsDerived() bool { return id&DerivedBit != 0 }

// String formats the id in hexadecimal, which keeps derived ids readable.
func (id ShardID) String() string { return "0x" + strconv.FormatUint(uint64(id), 16) }

// OpID identifies one logical mutation for idempotency. It is chosen by the
// caller, must be non-zero, and must be reused verbatim when the mutation is
// retried.
type OpID uint64

// WorkerID identifies a worker holding leases. Zero means "no owner".
type WorkerID uint64

// Time is a logical timestamp in milliseconds supplied by the caller. Zero
// means "unset"; every call must pass now >= 1.
type Time int64

// MaxTime bounds the logical time a caller may pass, so that now plus a
// lease duration can never overflow.
const MaxTime Time = 1 << 62

// MaxLeaseDuration bounds RunConfig.LeaseDuration. A lease longer than a
// week would keep a crashed worker's shard unavailable for too long to be
// useful, and the bound keeps deadline arithmetic far from overflow.
const MaxLeaseDuration = 7 * 24 * time.Hour

// TimeOf converts a wall-clock time to a Time, truncating to milliseconds.
func TimeOf(t time.Time) Time { return Time(t.UnixMilli()) }

// Std converts t to a wall-clock time in UTC.
func (t Time) Std() time.Time { return time.UnixMilli(int64(t)).UTC() }

// Add returns t+d, truncating d to whole milliseconds.
func (t Time) Add(d time.Duration) Time { return t + Time(d.Milliseconds()) }

// RunState is the lifecycle state of a run.
type RunState uint8

// Run states. Initializing runs have no shards yet; Done, Failed and Cancelled
// are terminal and never revert.
const (
	RunInitializing RunState = 1 + iota
	RunActive
	RunDone
	RunFailed
	RunCancelled
)

// Terminal reports whether s can never change again.
func (s RunState) Terminal() bool { return s == RunDone || s == RunFailed || s == RunCancelled }

func (s RunState) valid() bool { return s >= RunInitializing && s <= RunCancelled }

// String returns the lower-case name of the state.
func (s RunState) String() string {
	switch s {
	case RunInitializing:
		return "initializing"
	case RunActive:
		return "active"
	case RunDone:
		return "done"
	case RunFailed:
		return "failed"
	case RunCancelled:
		return "cancelled"
	}
	return "RunState(" + strconv.Itoa(int(s)) + ")"
}

// ShardState is the lifecycle state of a shard.
type ShardState uint8

// Shard states. Done and Split are terminal. Parked is not terminal, but only
// an administrator can make a parked shard Active again (Unpark).
const (
	ShardActive ShardState = 1 + iota
	ShardDone
	ShardSplit
	ShardParked
)

// Terminal reports whether the shard can never change state again.
func (s ShardState) Terminal() bool { return s == ShardDone || s == ShardSplit }

func (s ShardState) valid() bool { return s >= ShardActive && s <= ShardParked }

// String returns the lower-case name of the state.
func (s ShardState) String() string {
	switch s {
	case ShardActive:
		return "active"
	case ShardDone:
		return "done"
	case ShardSplit:
		return "split"
	case ShardParked:
		return "parked"
	}
	return "ShardState(" + strconv.Itoa(int(s)) + ")"
}

// CursorMode says how a checkpoint may move a shard's cursor key. In every
// mode the key never moves backwards and never leaves the shard's range.
type CursorMode uint8

const (
	// CursorNonDecreasing lets a checkpoint repeat the current key, for
	// example to update only the token while a large item is in progress.
	CursorNonDecreasing CursorMode = 1 + iota
	// CursorStrictlyIncreasing requires every checkpoint that carries a key to
	// move strictly past the previous key; workers whose keys are one item each
	// use it to detect a lost update early.
	CursorStrictlyIncreasing
)

func (m CursorMode) valid() bool { return m == CursorNonDecreasing || m == CursorStrictlyIncreasing }

// RunConfig holds the per-run settings fixed at creation.
type RunConfig struct {
	// LeaseDuration is how long an acquisition or renewal lasts. It must be a
	// positive whole number of milliseconds.
	LeaseDuration time.Duration
	// Cursor selects how checkpoints may move cursors.
	Cursor CursorMode
	// MaxRetries bounds how many times a shard may be re-acquired after its
	// first acquisition before it is parked with ReasonRetriesExhausted, so
	// that a poison shard does not cycle forever. Zero means unlimited.
	// An Unpark resets the count.
	MaxRetries uint32
}

// ReasonRetriesExhausted is the park reason recorded when an acquisition would
// exceed RunConfig.MaxRetries.
const ReasonRetriesExhausted = "max retries exhausted"

// Cursor is the progress of a shard: the last key processed (if any) plus an
// opaque token the worker needs to resume. HasKey distinguishes "nothing
// processed yet" from having processed the empty key.
type Cursor struct {
	HasKey bool
	Key    []byte
	Token  []byte
}

// Clone returns a deep copy of c.
func (c Cursor) Clone() Cursor {
	return Cursor{HasKey: c.HasKey, Key: cloneBytes(c.Key), Token: cloneBytes(c.Token)}
}

// Equal reports whether two cursors are identical.
func (c Cursor) Equal(o Cursor) bool {
	return c.HasKey == o.HasKey && bytes.Equal(c.Key, o.Key) && bytes.Equal(c.Token, o.Token)
}

// ShardSpec describes a root shard in a registration manifest.
type ShardSpec struct {
	ID       ShardID
	Start    []byte
	End      []byte // empty: +infinity
	Metadata []byte
	Cursor   Cursor // optional initial cursor, e.g. when resuming older work
}

// ChildSpec describes one child of a SplitReplace. Children must tile the
// parent's range exactly, in order.
type ChildSpec struct {
	Start    []byte
	End      []byte // empty: +infinity (only for the last child of an unbounded parent)
	Metadata []byte // nil: inherit the parent's metadata
}

// OpRecord is one entry of a record's idempotency log.
type OpRecord struct {
	ID   OpID
	Hash Digest
	// Result is an operation-specific value needed to answer a replay; for
	// acquisitions it is the fence that was granted.
	Result uint64
}

// Lease is what a worker presents with every mutation of a shard it holds.
type Lease struct {
	Tenant TenantID
	Run    RunID
	Shard  ShardID
	Worker WorkerID
	Fence  uint64
	// Deadline is informational: the backend checks its own record. The
	// lease is live while now < Deadline.
	Deadline Time
}

// Run is the stored record of a run.
type Run struct {
	Tenant      TenantID
	ID          RunID
	State       RunState
	Config      RunConfig
	CreatedAt   Time
	UpdatedAt   Time
	CompletedAt Time   // set exactly when State is terminal
	RootShards  uint32 // number of shards registered; non-zero once Active
	FailReason  string // set only when State is RunFailed
	// Summary is set by the transition that makes the run terminal: the
	// transition also deletes the run's shard records and releases them
	// from the shard caps (docs/adr/0023-atomic-shard-caps.md), so the
	// summary is what remains of them for history and Progress.
	Summary RunSummary
	Ops     []OpRecord
}

// RunSummary counts a run's shards by state at the moment it turned
// terminal. For a cancelled or failed run whose workers were still busy, a
// shard that finished concurrently may be counted as it was an instant
// before; a Done run's summary is exact, as its shards can no longer change.
type RunSummary struct {
	Total  uint32
	Active uint32
	Done   uint32
	Split  uint32
	Parked uint32
}

// Add counts s into the summary.
func (m *RunSummary) Add(s *Shard) {
	m.Total++
	switch s.State {
	case ShardActive:
		m.Active++
	case ShardDone:
		m.Done++
	case ShardSplit:
		m.Split++
	case ShardParked:
		m.Parked++
	}
}

// Progress returns the progress of a terminal run, which is its summary:
// its shards are gone, and none holds a lease.
func (r *Run) Progress() Progress {
	m := r.Summary
	return Progress{State: r.State, Total: int(m.Total), Active: int(m.Active), Done: int(m.Done), Split: int(m.Split), Parked: int(m.Parked)}
}

// ShardsReleased is the error every shard read or mutation of a terminal
// run reports: the run's shard records were deleted when it ended. It
// matches both ErrRunTerminal and ErrNotFound.
func (r *Run) ShardsReleased(id ShardID) error {
	return fmt.Errorf("%w: run %d is %v and its shards were released: shard %v %w", ErrRunTerminal, r.ID, r.State, id, ErrNotFound)
}

// Clone returns a deep copy of r.
func (r Run) Clone() Run {
	r.Ops = append([]OpRecord(nil), r.Ops...)
	return r
}

// Shard is the stored record of a shard.
type Shard struct {
	Tenant   TenantID
	Run      RunID
	ID       ShardID
	Parent   ShardID // zero for root shards; set exactly when ID is derived
	Start    []byte
	End      []byte // empty: +infinity
	Metadata []byte
	State    ShardState
	Cursor   Cursor
	// Fence starts at 1 and is incremented by every acquisition and unpark.
	// A worker mutation is accepted only when it presents exactly this value.
	Fence    uint64
	Owner    WorkerID // zero when no lease is held
	Deadline Time     // zero when no lease is held; the lease is live while now < Deadline
	// Attempts counts acquisitions since creation or the last unpark.
	Attempts   uint32
	ParkReason string    // set exactly when State is ShardParked
	Children   []ShardID // every shard derived from this one, in creation order
	CreatedAt  Time
	UpdatedAt  Time
	Ops        []OpRecord
}

// Clone returns a deep copy of s.
func (s Shard) Clone() Shard {
	s.Start = cloneBytes(s.Start)
	s.End = cloneBytes(s.End)
	s.Metadata = cloneBytes(s.Metadata)
	s.Cursor = s.Cursor.Clone()
	s.Children = append([]ShardID(nil), s.Children...)
	s.Ops = append([]OpRecord(nil), s.Ops...)
	return s
}

// LeaseLive reports whether the shard holds a lease that has not expired at now.
func (s *Shard) LeaseLive(now Time) bool { return s.Owner != 0 && now < s.Deadline }

// Contains reports whether key lies in the shard's range.
func (s *Shard) Contains(key []byte) bool { return inRange(key, s.Start, s.End) }

// String identifies the shard for logs and errors.
func (s *Shard) String() string {
	return fmt.Sprintf("run %d shard %v", s.Run, s.ID)
}

// Progress summarizes the shards of a run.
type Progress struct {
	State  RunState
	Total  int
	Active int
	Done   int
	Split  int
	Parked int
	// Leased counts Active shards whose lease is live at the time asked.
	Leased int
}

// LeaseFilter selects shards by lease liveness in ListShards.
type LeaseFilter uint8

// Lease filters.
const (
	AnyLease LeaseFilter = iota
	Leased
	Unleased
)

// ShardFilter selects shards in ListShards. The zero value selects all.
type ShardFilter struct {
	// States, when non-empty, keeps shards in any of the listed states.
	States []ShardState
	// Lease filters by lease liveness at the time of the call.
	Lease LeaseFilter
	// After, when non-zero, keeps shards with ID > After (for paging).
	After ShardID
	// Limit, when positive, bounds the number of shards returned.
	Limit int
}

// Match reports whether s passes the filter at time now, ignoring paging.
func (f *ShardFilter) Match(s *Shard, now Time) bool {
	if len(f.States) > 0 {
		ok := false
		for _, st := range f.States {
			if s.State == st {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	switch f.Lease {
	case Leased:
		return s.State == ShardActive && s.LeaseLive(now)
	case Unleased:
		return !(s.State == ShardActive && s.LeaseLive(now))
	}
	return true
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// inRange reports whether start <= key < end, with an empty end meaning +infinity.
func inRange(key, start, end []byte) bool {
	return bytes.Compare(key, start) >= 0 && (len(end) == 0 || bytes.Compare(key, end) < 0)
}

// Add counts s into the progress, judging lease liveness at now. It does not
// touch Total.
func (p *Progress) Add(s *Shard, now Time) {
	switch s.State {
	case ShardActive:
		p.Active++
		if s.LeaseLive(now) {
			p.Leased++
		}
	case ShardDone:
		p.Done++
	case ShardSplit:
		p.Split++
	case ShardParked:
		p.Parked++
	}
}
