package etcdcoord_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
)

// The contention test races 64 goroutines creating shards (RegisterShards,
// SplitReplace, SplitResidual) and removing them (CancelRun, which releases
// a run's shards, then GC of the ended runs, several GCs at once) under a per-tenant cap C and a global cap G, and after every
// round checks the stored state directly in etcd, independently of the
// backend's own code: no tenant above C, no more than G in total, every
// counter equal to the number of shard records, and every refusal a
// *coord.ShardLimitError.
const (
	contWorkers = 64
	contTenants = 4
	contCapC    = 24
	contCapG    = 72 // below contTenants*contCapC, so both caps bind
	keyBytes    = 16 // keys are 128-bit integers, so 100 rounds of halving fit
)

func contRounds() int {
	if testing.Short() {
		return 20
	}
	return 100
}

func bigKey(n *big.Int) []byte {
	b := make([]byte, keyBytes)
	return n.FillBytes(b)
}

func keyInt(k []byte, unbounded *big.Int) *big.Int {
	if len(k) == 0 {
		return unbounded
	}
	return new(big.Int).SetBytes(k)
}

var keySpace = new(big.Int).Lsh(big.NewInt(1), 8*keyBytes)

type contWorker struct {
	id     int
	tenant coord.TenantID
	b      *etcdcoord.Backend
	runs   []coord.RunID // runs this worker created and has not cancelled
	lease  *coord.Lease  // a shard of one of them, leased for the whole test
	nextOp coord.OpID
	stats  map[string]int
}

func (w *contWorker) op() coord.OpID {
	w.nextOp++
	return coord.OpID(uint64(w.id+1)<<40 | uint64(w.nextOp))
}

// call retries f on transient errors with the same op id, as a real caller
// would, and returns its final error.
func call(f func() error) error {
	for {
		err := f()
		if errors.Is(err, etcdcoord.ErrContention) || errors.Is(err, etcdcoord.ErrUnavailable) {
			continue
		}
		return err
	}
}

// refused classifies a creation's error: nil, a typed shard-limit refusal,
// or a test failure.
func (w *contWorker) refused(what string, err error) (bool, error) {
	if err == nil {
		w.stats[what]++
		return false, nil
	}
	var sle *coord.ShardLimitError
	if errors.As(err, &sle) && errors.Is(err, coord.ErrShardLimitExceeded) && sle.Delta > 0 &&
		sle.Current+sle.Delta > sle.Cap && (sle.Scope == coord.ScopeTenant && sle.Cap == contCapC || sle.Scope == coord.ScopeGlobal && sle.Cap == contCapG) {
		w.stats[what+" refused ("+sle.Scope+")"]++
		return true, nil
	}
	return false, fmt.Errorf("worker %d %s: want nil or a *coord.ShardLimitError, got %w", w.id, what, err)
}

func (w *contWorker) register(ctx context.Context, now coord.Time, run coord.RunID, n int) error {
	_, err := w.b.CreateRun(ctx, now, coord.CreateRunRequest{Tenant: w.tenant, Run: run, Op: w.op(),
		Config: coord.RunConfig{LeaseDuration: time.Hour, Cursor: coord.CursorNonDecreasing}})
	if err != nil {
		return err
	}
	w.runs = append(w.runs, run)
	specs := make([]coord.ShardSpec, n)
	step := new(big.Int).Div(keySpace, big.NewInt(int64(n)))
	for i := range specs {
		specs[i] = coord.ShardSpec{ID: coord.ShardID(i + 1), Start: bigKey(new(big.Int).Mul(step, big.NewInt(int64(i))))}
		if i < n-1 {
			specs[i].End = bigKey(new(big.Int).Mul(step, big.NewInt(int64(i+1))))
		}
	}
	req := coord.RegisterShardsRequest{Tenant: w.tenant, Run: run, Op: w.op(), Shards: specs}
	err = call(func() error { _, err := w.b.RegisterShards(ctx, now, req); return err })
	if refused, err := w.refused("register", err); err != nil || refused {
		return err
	}
	if w.lease == nil {
		return w.acquire(ctx, now, run, 1)
	}
	return nil
}

func (w *contWorker) acquire(ctx context.Context, now coord.Time, run coord.RunID, id coord.ShardID) error {
	l, err := w.b.Acquire(ctx, now, coord.AcquireRequest{Tenant: w.tenant, Run: run, Shard: id, Worker: coord.WorkerID(w.id + 1), Op: w.op()})
	if err != nil {
		return fmt.Errorf("worker %d: acquire: %w", w.id, err)
	}
	w.lease = &l
	return nil
}

// middle returns the midpoint of the leased shard's range.
func (w *contWorker) middle(ctx context.Context) ([]byte, coord.Shard, error) {
	s, err := w.b.GetShard(ctx, w.tenant, w.lease.Run, w.lease.Shard)
	if err != nil {
		return nil, s, err
	}
	lo, hi := keyInt(s.Start, nil), keyInt(s.End, keySpace)
	mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	if mid.Cmp(lo) <= 0 {
		return nil, s, fmt.Errorf("worker %d: range %x..%x too small to split", w.id, s.Start, s.End)
	}
	return bigKey(mid), s, nil
}

func (w *contWorker) splitResidual(ctx context.Context, now coord.Time) error {
	mid, _, err := w.middle(ctx)
	if err != nil {
		return err
	}
	req := coord.SplitResidualRequest{Lease: *w.lease, Op: w.op(), Key: mid}
	err = call(func() error { _, _, err := w.b.SplitResidual(ctx, now, req); return err })
	_, err = w.refused("split residual", err)
	return err
}

func (w *contWorker) splitReplace(ctx context.Context, now coord.Time) error {
	mid, s, err := w.middle(ctx)
	if err != nil {
		return err
	}
	req := coord.SplitReplaceRequest{Lease: *w.lease, Op: w.op(), Children: []coord.ChildSpec{{Start: s.Start, End: mid}, {Start: mid, End: s.End}}}
	var kids []coord.Shard
	err = call(func() error { _, k, err := w.b.SplitReplace(ctx, now, req); kids = k; return err })
	if refused, err := w.refused("split replace", err); err != nil || refused {
		return err
	}
	return w.acquire(ctx, now, w.lease.Run, kids[0].ID)
}

// remove cancels the worker's runs and, if gc is set, collects every run
// cancelled before now, racing the other workers' collections.
func (w *contWorker) remove(ctx context.Context, now coord.Time, gc bool) error {
	for _, run := range w.runs {
		// Ending a run releases its shards, so it races the creators for
		// the counters: retry contention like any caller.
		req := coord.CancelRunRequest{Tenant: w.tenant, Run: run, Op: w.op()}
		if err := call(func() error { _, err := w.b.CancelRun(ctx, now, req); return err }); err != nil {
			return fmt.Errorf("worker %d: cancel: %w", w.id, err)
		}
		w.stats["cancel"]++
	}
	w.runs, w.lease = nil, nil
	if !gc {
		return nil
	}
	n, err := w.b.GC(ctx, now, 0)
	if errors.Is(err, etcdcoord.ErrContention) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("worker %d: gc: %w", w.id, err)
	}
	w.stats["gc removed"] += n
	return nil
}

func TestShardCapsUnderContention(t *testing.T) {
	t.Parallel()
	ns := fmt.Sprintf("/test/contention%d", namespaces.Add(1))
	b := newBackend(t, etcdcoord.Config{Namespace: ns, Limits: coord.Limits{MaxShardsPerTenant: contCapC, MaxShardsGlobal: contCapG}})
	ctx := context.Background()
	workers := make([]*contWorker, contWorkers)
	for i := range workers {
		workers[i] = &contWorker{id: i, tenant: coord.TenantID{byte(i % contTenants), 0xC0}, b: b, stats: map[string]int{}}
	}
	owner := map[coord.RunID]coord.TenantID{}
	nextRun := coord.RunID(0)
	for round := 0; round < contRounds(); round++ {
		now := coord.Time(1000 + 10*round)
		runs := make([]coord.RunID, len(workers))
		for i, w := range workers {
			nextRun++
			runs[i] = nextRun
			owner[nextRun] = w.tenant
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(workers))
		for i, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				switch (i + round) % 4 {
				case 1:
					if w.lease != nil {
						err = w.splitReplace(ctx, now)
						break
					}
					fallthrough
				case 0:
					err = w.register(ctx, now, runs[i], 1+(i+round)%3)
				case 2:
					if w.lease != nil {
						err = w.splitResidual(ctx, now)
					} else {
						err = w.register(ctx, now, runs[i], 1)
					}
				case 3:
					// Four of the sixteen removers collect: four GCs race each round.
					err = w.remove(ctx, now, i < 16)
				}
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		checkCounters(t, fmt.Sprintf("round %d", round), ns, owner)
	}
	total := map[string]int{}
	for _, w := range workers {
		for k, v := range w.stats {
			total[k] += v
		}
	}
	t.Logf("%d rounds: %v", contRounds(), total)
	for _, k := range []string{"register", "split replace", "split residual", "cancel", "gc removed",
		"register refused (tenant)", "register refused (global)", "split residual refused (global)", "split replace refused (global)"} {
		if total[k] == 0 {
			t.Errorf("no %q happened: the test did not exercise it", k)
		}
	}
}

// checkCounters reads the namespace straight from etcd and checks the caps
// and that every counter equals the number of shard records it counts.
func checkCounters(t *testing.T, when, ns string, owner map[coord.RunID]coord.TenantID) {
	t.Helper()
	checkCountersCaps(t, when, ns, owner, contCapC, contCapG)
}

// checkCountersCaps is checkCounters with the caps capC and capG.
func checkCountersCaps(t *testing.T, when, ns string, owner map[coord.RunID]coord.TenantID, capC, capG int64) {
	t.Helper()
	ctx := context.Background()
	resp, err := client.Get(ctx, ns+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	records := map[coord.TenantID]int64{}
	var global int64
	for _, kv := range resp.Kvs {
		rest, ok := strings.CutPrefix(string(kv.Key), ns+"/shards/")
		if !ok {
			continue
		}
		run, err := strconv.ParseUint(rest[:16], 16, 64)
		if err != nil || len(rest) != 33 {
			t.Fatalf("%s: bad shard key %q", when, kv.Key)
		}
		records[owner[coord.RunID(run)]]++
		global++
	}
	counters, err := client.Get(ctx, ns+"/tenants/", clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[coord.TenantID]bool{}
	for _, kv := range counters.Kvs {
		var tenant coord.TenantID
		h := strings.TrimSuffix(strings.TrimPrefix(string(kv.Key), ns+"/tenants/"), "/shard_count")
		if _, err := hex.Decode(tenant[:], []byte(h)); err != nil || len(kv.Value) != 8 {
			t.Fatalf("%s: bad counter %q = %x", when, kv.Key, kv.Value)
		}
		n := binary.LittleEndian.Uint64(kv.Value)
		if n != uint64(records[tenant]) {
			t.Fatalf("%s: tenant %x counter %d, records %d", when, tenant[:2], n, records[tenant])
		}
		if n > uint64(capC) {
			t.Fatalf("%s: tenant %x holds %d shards, cap %d", when, tenant[:2], n, capC)
		}
		seen[tenant] = true
	}
	for tenant, n := range records {
		if !seen[tenant] && n != 0 {
			t.Fatalf("%s: tenant %x has %d records and no counter", when, tenant[:2], n)
		}
	}
	g, err := client.Get(ctx, ns+"/global/shard_count", clientv3.WithRev(rev))
	if err != nil {
		t.Fatal(err)
	}
	var gn uint64
	if len(g.Kvs) == 1 {
		gn = binary.LittleEndian.Uint64(g.Kvs[0].Value)
	}
	if gn != uint64(global) {
		t.Fatalf("%s: global counter %d, records %d", when, gn, global)
	}
	if global > capG {
		t.Fatalf("%s: %d shards in total, cap %d", when, global, capG)
	}
}
