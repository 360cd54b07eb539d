// Package etcdcoord is the coord.Backend on etcd, used when ghost's
// coordinator must survive the loss of a process or run as more than one.
//
// Every mutation reads the records it needs, applies the pure transition
// from package coord (the Apply* methods, so decisions match memcoord's
// exactly), and commits the result in one etcd transaction that compares
// the mod revision of every key it read, or its absence. A lost compare
// means another writer got there first: the mutation backs off with jitter
// and starts again from the read, at most Config.MaxRetries times. The key
// layout is described in keys.go, the decisions behind it in
// docs/adr/0022-etcd-coordination-backend.md and 0023-atomic-shard-caps.md.
//
// Shard caps are enforced inside the transaction that creates the shards:
// it compares and rewrites the tenant's and the namespace's shard counters,
// so two creators racing for the last slot cannot both commit.
package etcdcoord

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ghost-scm/ghost/internal/coord"
)

// Errors specific to the etcd backend. Domain errors are package coord's.
var (
	// ErrInvalidConfig reports a Config that New refuses.
	ErrInvalidConfig = errors.New("etcdcoord: invalid config")
	// ErrContention reports a mutation that lost its transaction's compare
	// on every attempt. It is transient: nothing was written, and the caller
	// may retry with the same op id.
	ErrContention = fmt.Errorf("etcdcoord: too much contention, retries exhausted: %w", coord.ErrContention)
	// ErrUnavailable wraps an error from etcd itself (unreachable, no
	// leader, timeout). It is transient, but a mutation may or may not have
	// been applied: retry it with the same op id, which is idempotent.
	ErrUnavailable = fmt.Errorf("etcdcoord: etcd unavailable: %w", coord.ErrUnavailable)
	// ErrCounterUnderflow reports a removal that would take a shard counter
	// below zero: the counter no longer matches the records. Nothing was
	// written; RepairCounters recounts.
	ErrCounterUnderflow = fmt.Errorf("%w: shard counter would underflow", coord.ErrCorrupt)
	// ErrCounterLost reports a creation refused because a shard counter is
	// missing although its marker records that it existed: someone deleted
	// it, and reading it as zero would silently lift the cap. Nothing was
	// written; "ghost coord repair-counters" recounts and restores it.
	ErrCounterLost = fmt.Errorf("%w: shard counter missing", coord.ErrCorrupt)
)

// Names of the etcd resource limits reported in coord.LimitError.Limit.
const (
	// LimitTxnOps is the number of operations in one transaction branch
	// (etcd's --max-txn-ops).
	LimitTxnOps = "etcd_txn_ops"
	// LimitTxnBytes is the size of one transaction (etcd's --max-request-bytes).
	LimitTxnBytes = "etcd_txn_bytes"
)

// GlobalCapMode selects how the global shard cap is enforced.
type GlobalCapMode uint8

const (
	// GlobalCapStrict compares and rewrites <ns>/global/shard_count in every
	// transaction that creates or removes shards: the cap holds exactly, and
	// every creator in the namespace serializes on that one key.
	GlobalCapStrict GlobalCapMode = iota
	// GlobalCapAdvisory leaves the global key alone and checks the cap
	// against the sum of the tenant counters read at most
	// Config.AdvisoryRefresh ago. Creators of different tenants no longer
	// conflict, and the cap can be overshot by what other processes create
	// within one refresh interval. <ns>/global/shard_count is stale in this
	// mode: run RepairCounters before switching back to strict.
	GlobalCapAdvisory
)

// String returns "strict" or "advisory".
func (m GlobalCapMode) String() string {
	switch m {
	case GlobalCapStrict:
		return "strict"
	case GlobalCapAdvisory:
		return "advisory"
	}
	return fmt.Sprintf("GlobalCapMode(%d)", m)
}

// Defaults and bounds of Config.
const (
	DefaultMaxRetries      = 8
	MaxMaxRetries          = 64
	DefaultMaxTxnOps       = 128         // etcd's default --max-txn-ops
	DefaultMaxTxnBytes     = 1536 << 10  // etcd's default --max-request-bytes
	DefaultAdvisoryRefresh = time.Second // see GlobalCapAdvisory
	backoffMin             = 5 * time.Millisecond
	backoffMax             = 200 * time.Millisecond
	scanPage               = 512
)

// Config configures a Backend.
type Config struct {
	// Client is the etcd client; the Backend does not close it.
	Client *clientv3.Client
	// Namespace prefixes every key (see ValidateNamespace), so that several
	// ghost installations, or tests, can share one etcd.
	Namespace string
	// Limits are the coord limits enforced (zero fields take defaults).
	Limits coord.Limits
	// MaxRetries bounds the attempts after a lost compare: 0 means
	// DefaultMaxRetries; at most MaxMaxRetries.
	MaxRetries int
	// GlobalCap selects strict (default) or advisory enforcement of
	// Limits.MaxShardsGlobal.
	GlobalCap GlobalCapMode
	// AdvisoryRefresh is how long a read of the tenant counters serves the
	// advisory global cap (0: DefaultAdvisoryRefresh).
	AdvisoryRefresh time.Duration
	// RecordCache is how many run and shard records the Backend remembers
	// as it last read or wrote them, so that a worker's next mutation of
	// its shard needs no read first (0: DefaultRecordCache; negative: none).
	// Decisions never rest on it: see docs/adr/0026-coordination-round-trips.md.
	RecordCache int
	// MaxTxnOps and MaxTxnBytes must not exceed the server's --max-txn-ops
	// and --max-request-bytes (0: etcd's defaults). A request that would
	// need a bigger transaction fails with a *coord.LimitError naming
	// LimitTxnOps or LimitTxnBytes before anything is sent. With the
	// defaults, RegisterShards carries at most 62 shards and SplitReplace
	// at most 62 children (two operations per shard: record and index);
	// the embedded server raises both limits (see package etcdserver).
	MaxTxnOps   int
	MaxTxnBytes int
}

// Backend is a coord.Backend on etcd, safe for concurrent use. Several
// Backends, in one process or many, may share a namespace.
type Backend struct {
	c          *clientv3.Client
	k          keys
	lim        coord.Limits
	maxRetries int
	mode       GlobalCapMode
	refresh    time.Duration
	maxOps     int
	maxBytes   int
	cache      *recCache

	// The advisory global count: the sum of the tenant counters as read at
	// advisoryAt, plus what this Backend created since.
	advisoryMu    sync.Mutex
	advisoryCount int64
	advisoryAt    time.Time
}

// Backend plays every role of package coord; consumers hold it as the one
// they need.
var (
	_ coord.Backend = (*Backend)(nil)
	_ coord.Worker  = (*Backend)(nil)
	_ coord.Admin   = (*Backend)(nil)
	_ coord.Reader  = (*Backend)(nil)
)

// New returns a Backend on cfg.Client under cfg.Namespace.
func New(cfg Config) (*Backend, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidConfig)
	}
	if err := ValidateNamespace(cfg.Namespace); err != nil {
		return nil, err
	}
	b := &Backend{
		c: cfg.Client, k: keys{cfg.Namespace}, lim: cfg.Limits.WithDefaults(),
		maxRetries: cfg.MaxRetries, mode: cfg.GlobalCap, refresh: cfg.AdvisoryRefresh,
		maxOps: cfg.MaxTxnOps, maxBytes: cfg.MaxTxnBytes,
	}
	switch {
	case b.maxRetries == 0:
		b.maxRetries = DefaultMaxRetries
	case b.maxRetries < 0 || b.maxRetries > MaxMaxRetries:
		return nil, fmt.Errorf("%w: MaxRetries %d not in [0, %d]", ErrInvalidConfig, cfg.MaxRetries, MaxMaxRetries)
	}
	if b.mode != GlobalCapStrict && b.mode != GlobalCapAdvisory {
		return nil, fmt.Errorf("%w: unknown global cap mode %d", ErrInvalidConfig, b.mode)
	}
	if b.refresh <= 0 {
		b.refresh = DefaultAdvisoryRefresh
	}
	if b.maxOps == 0 {
		b.maxOps = DefaultMaxTxnOps
	}
	if b.maxBytes == 0 {
		b.maxBytes = DefaultMaxTxnBytes
	}
	switch {
	case cfg.RecordCache == 0:
		b.cache = newRecCache(DefaultRecordCache)
	case cfg.RecordCache > 0:
		b.cache = newRecCache(cfg.RecordCache)
	}
	if b.maxOps < 16 || b.maxBytes < 64<<10 {
		return nil, fmt.Errorf("%w: MaxTxnOps %d < 16 or MaxTxnBytes %d < 64 KiB", ErrInvalidConfig, b.maxOps, b.maxBytes)
	}
	return b, nil
}

// Limits returns the coord limits the backend enforces.
func (b *Backend) Limits() coord.Limits { return b.lim }

// rec is a key as read: its mod revision (0 when absent) and value.
type rec struct {
	key string
	rev int64
	val []byte
}

func (r rec) exists() bool { return r.rev != 0 }

// txn is one optimistic commit: compares guarding what was read, and the
// writes. after is returned once the writes commit; it carries the one
// refusal that still writes (coord.ErrRetriesExhausted parks the shard).
type txn struct {
	cmps  []clientv3.Cmp
	ops   []clientv3.Op
	bytes int
	after error
	// committed, if set, runs once the transaction commits.
	committed func()
	// remember holds the run and shard records the transaction writes,
	// and forget the prefixes it deletes, for the record cache.
	remember []rec
	forget   []string
}

// guard makes the commit fail unless r is unchanged: same mod revision, or
// still absent.
func (t *txn) guard(r rec) {
	if r.exists() {
		t.cmps = append(t.cmps, clientv3.Compare(clientv3.ModRevision(r.key), "=", r.rev))
	} else {
		t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(r.key), "=", 0))
	}
	t.bytes += len(r.key) + 16
}

func (t *txn) put(key string, val []byte) {
	t.ops = append(t.ops, clientv3.OpPut(key, string(val)))
	t.bytes += len(key) + len(val) + 16
}

func (t *txn) del(key string) {
	t.ops = append(t.ops, clientv3.OpDelete(key))
	t.bytes += len(key) + 16
}

func (t *txn) delPrefix(prefix string) {
	t.ops = append(t.ops, clientv3.OpDelete(prefix, clientv3.WithPrefix()))
	t.bytes += 2*len(prefix) + 16
	t.forget = append(t.forget, prefix)
}

// putRecord writes a run or shard record, which the record cache learns
// once the transaction commits.
func (t *txn) putRecord(key string, val []byte) {
	t.put(key, val)
	t.remember = append(t.remember, rec{key: key, val: val})
}

// etcdErr classifies an error from the client: context errors pass through,
// etcd's request-size refusals become *coord.LimitError, the rest is
// ErrUnavailable.
func (b *Backend) etcdErr(err error, t *txn) error {
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, rpctypes.ErrTooManyOps) && t != nil:
		return &coord.LimitError{Limit: LimitTxnOps, Value: int64(max(len(t.ops), len(t.cmps))), Max: int64(b.maxOps)}
	case errors.Is(err, rpctypes.ErrRequestTooLarge) && t != nil:
		return &coord.LimitError{Limit: LimitTxnBytes, Value: int64(t.bytes), Max: int64(b.maxBytes)}
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// commit sends t and reports whether its compares held.
func (b *Backend) commit(ctx context.Context, t *txn, orElse ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if n := max(len(t.ops), len(t.cmps), len(orElse)); n > b.maxOps {
		return nil, &coord.LimitError{Limit: LimitTxnOps, Value: int64(n), Max: int64(b.maxOps)}
	}
	if t.bytes > b.maxBytes {
		return nil, &coord.LimitError{Limit: LimitTxnBytes, Value: int64(t.bytes), Max: int64(b.maxBytes)}
	}
	resp, err := b.c.Txn(ctx).If(t.cmps...).Then(t.ops...).Else(orElse...).Commit()
	if err != nil {
		return nil, b.etcdErr(err, t)
	}
	return resp, nil
}

// read fetches keys at one revision.
func (b *Backend) read(ctx context.Context, keys ...string) ([]rec, error) {
	rs, _, err := b.readRev(ctx, keys...)
	return rs, err
}

// readRev fetches keys at one revision and returns that revision.
func (b *Backend) readRev(ctx context.Context, keys ...string) ([]rec, int64, error) {
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpGet(k)
	}
	resp, err := b.c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, 0, b.etcdErr(err, nil)
	}
	out := make([]rec, len(keys))
	for i, r := range resp.Responses {
		out[i].key = keys[i]
		if kvs := r.GetResponseRange().GetKvs(); len(kvs) > 0 {
			out[i].rev, out[i].val = kvs[0].ModRevision, kvs[0].Value
		}
	}
	return out, resp.Header.Revision, nil
}

// scan calls fn for every key in [from, end) in key order, in pages, all at
// revision rev, or when rev is 0 at the revision of the first page. It
// returns the revision read.
func (b *Backend) scan(ctx context.Context, rev int64, from, end string, opts []clientv3.OpOption, fn func(key string, val []byte) error) (int64, error) {
	for {
		o := append([]clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(scanPage)}, opts...)
		if rev != 0 {
			o = append(o, clientv3.WithRev(rev))
		}
		resp, err := b.c.Get(ctx, from, o...)
		if err != nil {
			return 0, b.etcdErr(err, nil)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if err := fn(string(kv.Key), kv.Value); err != nil {
				return 0, err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// step is one optimistic attempt of a mutation: it reads, applies the
// transition and returns the transaction to commit, or nil when there is
// nothing to write (a replay or a refusal, reported by its error).
type step func(ctx context.Context) (*txn, error)

// mutate runs s until its transaction commits. After MaxRetries lost
// compares it runs s once more without committing, so that a request which
// meanwhile became a replay or a refusal reports that, and only a request
// that still needs a write fails with ErrContention.
func (b *Backend) mutate(ctx context.Context, what string, s step) error {
	return b.mutateN(ctx, what, b.maxRetries, s)
}

// mutateN is mutate with maxRetries in place of Config.MaxRetries.
func (b *Backend) mutateN(ctx context.Context, what string, maxRetries int, s step) error {
	delay := backoffMin
	for attempt := 0; ; attempt++ {
		t, err := s(ctx)
		if err != nil || t == nil {
			return err
		}
		if attempt > maxRetries {
			return fmt.Errorf("etcdcoord: %s: %w (%d attempts)", what, ErrContention, attempt)
		}
		resp, err := b.commit(ctx, t)
		if err != nil {
			b.forgetWrites(t)
			return fmt.Errorf("etcdcoord: %s: %w", what, err)
		}
		if resp.Succeeded {
			b.committed(t, resp)
			return t.after
		}
		if attempt < maxRetries {
			if err := sleep(ctx, jitter(delay)); err != nil {
				return err
			}
			delay = min(2*delay, backoffMax)
		}
	}
}

// committed runs what follows a committed transaction: the record cache
// learns what it wrote, then t.committed runs.
func (b *Backend) committed(t *txn, resp *clientv3.TxnResponse) {
	b.cache.committed(t, resp.Header.Revision)
	if t.committed != nil {
		t.committed()
	}
}

// forgetWrites drops from the record cache what t would have written,
// after a commit whose outcome is unknown. (An entry left behind would
// only be stale, which a compare catches; dropping it saves the failed
// transaction.)
func (b *Backend) forgetWrites(t *txn) {
	for _, r := range t.remember {
		b.cache.drop(r.key)
	}
}

// decide is a mutation decided on given records: the transaction to
// commit, or nil with the answer when there is nothing to write.
type decide func(rs []rec) (*txn, error)

// mutateRecs is mutate for a mutation whose every read is the records at
// keys, which its transaction guards. When the record cache holds all of
// them, the first attempt is decided on those, with no read: one round
// trip instead of two. A transaction that fails its compares returns the
// records as they are, and if it was built on cached ones the mutation is
// decided again on those at once; a lost race on records freshly read
// backs off and reads again, as mutate does. An answer without a write is
// given only on records freshly read. The retry budget counts races lost
// on fresh records only, as mutate's does.
func (b *Backend) mutateRecs(ctx context.Context, what string, keys []string, d decide) error {
	rs, cached := b.cache.get(keys)
	delay := backoffMin
	for attempt := 0; ; {
		if rs == nil {
			var err error
			if rs, err = b.read(ctx, keys...); err != nil {
				return err
			}
			b.cache.put(rs...)
		}
		t, err := d(rs)
		if err != nil || t == nil {
			if cached {
				// Decided on what the cache says: ask etcd before answering.
				rs, cached = nil, false
				continue
			}
			return err
		}
		if attempt > b.maxRetries {
			return fmt.Errorf("etcdcoord: %s: %w (%d attempts)", what, ErrContention, attempt)
		}
		resp, err := b.commit(ctx, t, gets(keys)...)
		if err != nil {
			b.forgetWrites(t)
			return fmt.Errorf("etcdcoord: %s: %w", what, err)
		}
		if resp.Succeeded {
			b.committed(t, resp)
			return t.after
		}
		fresh := elseRecs(keys, resp)
		b.cache.put(fresh...)
		if cached {
			// The cache was behind: decide again on the records as they are.
			rs, cached = fresh, false
			continue
		}
		// A race lost on fresh records: back off and read again.
		attempt++
		rs = nil
		if attempt <= b.maxRetries {
			if err := sleep(ctx, jitter(delay)); err != nil {
				return err
			}
			delay = min(2*delay, backoffMax)
		}
	}
}

// jitter returns a duration in [d/2, d].
func jitter(d time.Duration) time.Duration { return d/2 + rand.N(d/2+1) }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
