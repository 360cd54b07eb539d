package coord

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
)

// Digest is a SHA-256 payload hash kept in idempotency logs.
type Digest [32]byte

// String returns the hexadecimal form of the digest.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// hashPrefix is the domain-separation prefix of every hash coord computes.
// Changing anything hashed below is a storage format change: the golden
// vectors in hash_test.go pin it so every backend agrees.
const hashPrefix = "ghost/coord/v1/"

// payload builds a canonical, domain-separated SHA-256: the tag
// hashPrefix+kind followed by each field, each field written as its length
// (8 bytes, big endian) followed by its bytes. Integers are fields of 8
// big-endian bytes; booleans one byte; lists a count field then the elements.
type payload struct {
	h   hash.Hash
	buf [8]byte
}

func newPayload(kind string) *payload {
	p := &payload{h: sha256.New()}
	p.bytes([]byte(hashPrefix + kind))
	return p
}

func (p *payload) bytes(b []byte) *payload {
	binary.BigEndian.PutUint64(p.buf[:], uint64(len(b)))
	p.h.Write(p.buf[:])
	p.h.Write(b)
	return p
}

func (p *payload) str(s string) *payload { return p.bytes([]byte(s)) }

func (p *payload) u64(v uint64) *payload {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return p.bytes(b[:])
}

func (p *payload) boolean(v bool) *payload {
	b := []byte{0}
	if v {
		b[0] = 1
	}
	return p.bytes(b)
}

func (p *payload) lease(l Lease) *payload {
	return p.bytes(l.Tenant[:]).u64(uint64(l.Run)).u64(uint64(l.Shard)).u64(uint64(l.Worker)).u64(l.Fence)
}

func (p *payload) cursor(c Cursor) *payload {
	return p.boolean(c.HasKey).bytes(c.Key).bytes(c.Token)
}

func (p *payload) sum() Digest {
	var d Digest
	p.h.Sum(d[:0])
	return d
}

// SplitKind distinguishes the two ways of deriving shards in DeriveShardID.
type SplitKind uint8

// Split kinds.
const (
	SplitKindReplace  SplitKind = 1
	SplitKindResidual SplitKind = 2
)

// DeriveShardID returns the id of the index-th shard created from parent by
// the operation op of the given kind. Ids are a domain-separated SHA-256 of
// (run, parent, op, kind, index) truncated to 64 bits with DerivedBit set, so
// a retried split recreates the same ids and derived ids never collide with
// caller-chosen root ids.
func DeriveShardID(run RunID, parent ShardID, op OpID, kind SplitKind, index uint32) ShardID {
	d := newPayload("child-id").u64(uint64(run)).u64(uint64(parent)).u64(uint64(op)).
		u64(uint64(kind)).u64(uint64(index)).sum()
	return ShardID(binary.BigEndian.Uint64(d[:8])) | DerivedBit
}

// ClaimOffset returns the index at which worker starts scanning n candidates
// in ClaimNext, so that concurrent workers spread over a run's shards instead
// of all contending for the first one. Candidates are the run's claimable
// shards (see Shard.Claimable) in ascending id order; the scan wraps around.
// Backends must use it so that they agree on which shard a claim picks. It
// returns 0 when n <= 0.
func ClaimOffset(worker WorkerID, n int) int {
	if n <= 0 {
		return 0
	}
	// splitmix64 finalizer: cheap and well mixed for sequential worker ids.
	z := uint64(worker) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return int(z % uint64(n))
}

// PayloadHash returns the idempotency hash of the request.
func (r CreateRunRequest) PayloadHash() Digest {
	return newPayload("create-run").bytes(r.Tenant[:]).u64(uint64(r.Run)).
		u64(uint64(r.Config.LeaseDuration)).u64(uint64(r.Config.Cursor)).u64(uint64(r.Config.MaxRetries)).sum()
}

// PayloadHash returns the idempotency hash of the request.
func (r RegisterShardsRequest) PayloadHash() Digest {
	p := newPayload("register-shards").bytes(r.Tenant[:]).u64(uint64(r.Run)).u64(uint64(len(r.Shards)))
	for _, s := range r.Shards {
		p.u64(uint64(s.ID)).bytes(s.Start).bytes(s.End).bytes(s.Metadata).cursor(s.Cursor)
	}
	return p.sum()
}

// PayloadHash returns the idempotency hash of the request.
func (r AcquireRequest) PayloadHash() Digest {
	return newPayload("acquire").bytes(r.Tenant[:]).u64(uint64(r.Run)).u64(uint64(r.Shard)).u64(uint64(r.Worker)).sum()
}

// PayloadHash returns the idempotency hash of the request.
func (r ClaimRequest) PayloadHash() Digest {
	return newPayload("claim").bytes(r.Tenant[:]).u64(uint64(r.Run)).u64(uint64(r.Worker)).sum()
}

// PayloadHash returns the idempotency hash of the request.
func (r RenewRequest) PayloadHash() Digest { return newPayload("renew").lease(r.Lease).sum() }

// PayloadHash returns the idempotency hash of the request.
func (r CheckpointRequest) PayloadHash() Digest {
	return newPayload("checkpoint").lease(r.Lease).cursor(r.Cursor).sum()
}

// PayloadHash returns the idempotency hash of the request.
func (r CompleteRequest) PayloadHash() Digest { return newPayload("complete").lease(r.Lease).sum() }

// PayloadHash returns the idempotency hash of the request.
func (r ParkRequest) PayloadHash() Digest {
	return newPayload("park").lease(r.Lease).str(r.Reason).sum()
}

// PayloadHash returns the idempotency hash of the request.
func (r UnparkRequest) PayloadHash() Digest {
	return newPayload("unpark").bytes(r.Tenant[:]).u64(uint64(r.Run)).u64(uint64(r.Shard)).sum()
}

// PayloadHash returns the idempotency hash of the request.
func (r SplitReplaceRequest) PayloadHash() Digest {
	p := newPayload("split-replace").lease(r.Lease).u64(uint64(len(r.Children)))
	for _, c := range r.Children {
		p.bytes(c.Start).bytes(c.End).boolean(c.Metadata != nil).bytes(c.Metadata)
	}
	return p.sum()
}

// PayloadHash returns the idempotency hash of the request.
func (r SplitResidualRequest) PayloadHash() Digest {
	return newPayload("split-residual").lease(r.Lease).bytes(r.Key).boolean(r.Metadata != nil).bytes(r.Metadata).sum()
}

// PayloadHash returns the idempotency hash of the request.
func (r CompleteRunRequest) PayloadHash() Digest {
	return newPayload("complete-run").bytes(r.Tenant[:]).u64(uint64(r.Run)).sum()
}

// PayloadHash returns the idempotency hash of the request.
func (r FailRunRequest) PayloadHash() Digest {
	return newPayload("fail-run").bytes(r.Tenant[:]).u64(uint64(r.Run)).str(r.Reason).sum()
}

// PayloadHash returns the idempotency hash of the request.
func (r CancelRunRequest) PayloadHash() Digest {
	return newPayload("cancel-run").bytes(r.Tenant[:]).u64(uint64(r.Run)).sum()
}
