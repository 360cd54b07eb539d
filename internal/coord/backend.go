package coord

import "context"

// Backend stores runs and shards and applies the coordination operations
// atomically. Implementations must be safe for concurrent use.
//
// Every mutation takes the caller's logical time now (>= 1) and a request
// carrying an OpID; see the package documentation for idempotency. Requests
// and results are plain values: a backend never retains or mutates caller
// slices, and callers may modify what they receive. The transitions
// themselves are the pure Apply* methods of Run and Shard, so a backend only
// has to read records, apply, and write atomically (in etcd: one transaction
// guarded by the revisions it read, retried on conflict).
//
// Backend is what a storage implementation provides and what the
// conformance suite (coordtest) checks. A consumer takes the role it plays
// instead: Worker, Admin or Reader. That keeps what a component may do
// visible in its signature (a worker cannot end a run; a status page cannot
// lease a shard) and lets a test give it a fake of a few methods.
type Backend interface {
	Reader
	Worker
	Admin
}

// Reader is what a component that only observes runs needs: a status page,
// a CLI listing progress, a checker. Reads change nothing and take no op id.
type Reader interface {
	// GetRun returns the run record.
	GetRun(ctx context.Context, tenant TenantID, run RunID) (Run, error)
	// GetShard returns one shard record.
	GetShard(ctx context.Context, tenant TenantID, run RunID, shard ShardID) (Shard, error)
	// Progress counts the run's shards by state; Leased is evaluated at now.
	Progress(ctx context.Context, now Time, tenant TenantID, run RunID) (Progress, error)
	// ListShards returns the run's shards that match filter at now, in
	// ascending id order.
	ListShards(ctx context.Context, now Time, tenant TenantID, run RunID, filter ShardFilter) ([]Shard, error)
}

// Worker is what a worker processing shards needs: lease a shard, keep the
// lease alive, record progress, split off work, and hand the shard back
// done or parked. Every mutation but the two that grant a lease presents
// the lease it holds, and is refused once the lease is stale (see the
// check order in docs/design.md §8.2). Worker includes Reader because a
// lease names a shard but not its range or cursor: a worker reads them
// with GetShard before it starts.
type Worker interface {
	Reader

	// Acquire leases a specific shard to a worker, incrementing its fence.
	Acquire(ctx context.Context, now Time, req AcquireRequest) (Lease, error)
	// ClaimNext leases any available shard of the run: an Active shard with no
	// live lease. It fails with ErrNoShardAvailable when there is none.
	ClaimNext(ctx context.Context, now Time, req ClaimRequest) (Lease, error)
	// Renew extends a live lease to now + the run's lease duration.
	Renew(ctx context.Context, now Time, req RenewRequest) (Lease, error)
	// Checkpoint records the shard's progress.
	Checkpoint(ctx context.Context, now Time, req CheckpointRequest) (Shard, error)
	// Complete marks the shard Done and releases its lease.
	Complete(ctx context.Context, now Time, req CompleteRequest) (Shard, error)
	// Park marks the shard Parked with a reason and releases its lease.
	Park(ctx context.Context, now Time, req ParkRequest) (Shard, error)
	// SplitReplace replaces the shard by children that exactly tile its range.
	// It returns the parent, now Split, and the children in order.
	SplitReplace(ctx context.Context, now Time, req SplitReplaceRequest) (Shard, []Shard, error)
	// SplitResidual shrinks the shard to [Start, Key) and creates a residual
	// shard for [Key, End). It returns the shrunk shard and the residual.
	SplitResidual(ctx context.Context, now Time, req SplitResidualRequest) (Shard, Shard, error)
}

// Admin is what the component that owns a run's lifecycle needs: create it,
// register its shards, end it, and resume shards that workers parked. None
// of it presents a lease. Admin includes Reader because deciding to end a
// run starts from its Progress.
//
// Removing ended runs and repairing the shard counters are not part of
// Admin: they maintain bookkeeping that only the etcd backend keeps (the
// gc index, the counter keys), so they are methods of etcdcoord.Backend.
type Admin interface {
	Reader

	// CreateRun creates a run in state Initializing.
	CreateRun(ctx context.Context, now Time, req CreateRunRequest) (Run, error)
	// RegisterShards registers the run's root shards, all or nothing, and
	// makes the run Active. The manifest is validated by ValidateManifest and
	// the shard caps are enforced.
	RegisterShards(ctx context.Context, now Time, req RegisterShardsRequest) (Run, error)
	// Unpark makes a Parked shard Active again and bumps its fence. It is
	// refused once the run is terminal.
	Unpark(ctx context.Context, now Time, req UnparkRequest) (Shard, error)
	// CompleteRun marks an Active run whose shards are all Done or Split as Done.
	CompleteRun(ctx context.Context, now Time, req CompleteRunRequest) (Run, error)
	// FailRun marks an Active run as Failed.
	FailRun(ctx context.Context, now Time, req FailRunRequest) (Run, error)
	// CancelRun marks an Initializing or Active run as Cancelled.
	CancelRun(ctx context.Context, now Time, req CancelRunRequest) (Run, error)
}

// CreateRunRequest asks for a new run. The caller allocates the run id.
type CreateRunRequest struct {
	Tenant TenantID
	Run    RunID
	Op     OpID
	Config RunConfig
}

// RegisterShardsRequest carries a run's manifest of root shards.
type RegisterShardsRequest struct {
	Tenant TenantID
	Run    RunID
	Op     OpID
	Shards []ShardSpec
}

// AcquireRequest asks to lease one shard.
type AcquireRequest struct {
	Tenant TenantID
	Run    RunID
	Shard  ShardID
	Worker WorkerID
	Op     OpID
}

// ClaimRequest asks to lease any available shard of a run.
type ClaimRequest struct {
	Tenant TenantID
	Run    RunID
	Worker WorkerID
	Op     OpID
}

// RenewRequest extends a lease.
type RenewRequest struct {
	Lease Lease
	Op    OpID
}

// CheckpointRequest records progress under a lease.
type CheckpointRequest struct {
	Lease  Lease
	Op     OpID
	Cursor Cursor
}

// CompleteRequest finishes a shard under a lease.
type CompleteRequest struct {
	Lease Lease
	Op    OpID
}

// ParkRequest parks a shard under a lease. Reason must be non-empty.
type ParkRequest struct {
	Lease  Lease
	Op     OpID
	Reason string
}

// UnparkRequest is an administrator's request to resume a parked shard.
type UnparkRequest struct {
	Tenant TenantID
	Run    RunID
	Shard  ShardID
	Op     OpID
}

// SplitReplaceRequest replaces a leased shard by children.
type SplitReplaceRequest struct {
	Lease    Lease
	Op       OpID
	Children []ChildSpec
}

// SplitResidualRequest splits off the part [Key, End) of a leased shard.
type SplitResidualRequest struct {
	Lease    Lease
	Op       OpID
	Key      []byte
	Metadata []byte // nil: inherit the shard's metadata
}

// CompleteRunRequest asks to mark a run Done.
type CompleteRunRequest struct {
	Tenant TenantID
	Run    RunID
	Op     OpID
}

// FailRunRequest asks to mark a run Failed. Reason must be non-empty.
type FailRunRequest struct {
	Tenant TenantID
	Run    RunID
	Op     OpID
	Reason string
}

// CancelRunRequest asks to mark a run Cancelled.
type CancelRunRequest struct {
	Tenant TenantID
	Run    RunID
	Op     OpID
}
