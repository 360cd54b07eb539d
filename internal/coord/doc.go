// Package coord defines the model of ghost's distributed work coordination:
// runs split into shards, shard leases with fencing, idempotent operations,
// the invariants every stored record must satisfy, and the Backend interface
// that storage implementations (memcoord, etcdcoord) provide.
//
// Consumers do not take a Backend but the role they play: a Worker leases
// and processes shards, an Admin creates, registers and ends runs and
// unparks shards, and a Reader only observes. Worker and Admin include
// Reader; Backend is all three.
//
// The package is deliberately storage-free. Every state transition is a pure
// function from the current records and a request to the next records (see
// the Shard and Run methods named Apply*), so that an in-memory backend and an
// etcd backend using optimistic transactions make identical decisions: read
// the records, apply the transition, write the result if the records did not
// change in the meantime, otherwise retry.
//
// # Key ranges
//
// A shard covers the half-open byte-string range [Start, End). Keys compare
// lexicographically (bytes.Compare). An empty End means +infinity; an empty
// Start is the smallest key. A range is never empty: Start < End unless End
// is unbounded.
//
// # Time
//
// Time is logical and supplied by the caller on every call, in milliseconds
// (see Time). Zero means "unset", so valid calls use now >= 1. Supplying time
// keeps tests deterministic and lets an etcd backend use a clock that all its
// nodes agree on.
//
// # Idempotency
//
// Every mutation carries an OpID chosen by the caller. Records keep a bounded
// FIFO log of recent (OpID, payload hash) pairs: MaxShardOps per shard and
// MaxRunOps per run. Replaying an op id with the same payload is a successful
// no-op; replaying it with a different payload is ErrOpConflict. The check
// runs before lease validation, so a retry after the lease expired or the
// shard completed still succeeds.
//
// # Implementing a Backend
//
// A backend stores Run and Shard records (MarshalBinary/UnmarshalBinary give
// a compact, validated encoding) and applies each operation atomically:
//
//   - Read the run record and, for shard operations, the shard record.
//   - Call the matching Apply* method. It returns a ShardTransition or
//     RunTransition and an error. If the error is set and Changed is not,
//     return the error: nothing is written. If neither is set, the request
//     was a replay: answer from the current records (for SplitReplace read
//     the children by ReplaceChildIDs, for SplitResidual the residual by
//     ResidualID).
//   - Otherwise (Changed) write the transition's record and its Created
//     shards in one atomic step, guarded by what was read (in etcd: compare
//     the mod revisions of the records read), then return the error, if any
//     (ErrRetriesExhausted is the one refusal that writes). When shards are
//     created (RegisterShards, SplitReplace, SplitResidual), check
//     Limits.CheckShardCaps against the tenant and global counters and
//     update the counters in the same step; a derived id that already exists
//     is ErrIDCollision. On a lost compare, start again from the read.
//   - ClaimNext first offers the request to Shard.ClaimReplay on every shard
//     of the run, then (if the run is Active) tries the Claimable shards in
//     ascending id order starting at ClaimOffset, moving on when a candidate
//     is refused with ErrLeaseHeld, ErrShardParked, ErrShardTerminal or
//     ErrRetriesExhausted, or when its write loses a race.
//   - CompleteRun, FailRun and CancelRun count the run's shards by state
//     (RunSummary) and pass the count to the Apply method; when it changes
//     the run, the same atomic step deletes the run's shards and takes them
//     off the tenant and global counters. Shard reads and mutations of an
//     ended run report Run.ShardsReleased.
//   - Transitions run at max(now, the record's UpdatedAt): a caller whose
//     clock is behind another node's is served, never refused (see
//     docs/adr/0005-coord-pure-transitions.md).
//
// Every backend runs coordtest.Run, the conformance suite and the seeded
// simulation; a backend shared by processes also runs RunConcurrent.
package coord
