package etcdcoord_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver"
	"github.com/ghost-scm/ghost/internal/etcdserver/etcdtest"
)

// benchClient starts an embedded etcd for one benchmark with fsync on, as
// ghost runs it, rather than the test binary's shared fsync-less one.
func benchClient(b *testing.B) *clientv3.Client {
	b.Helper()
	srv := etcdtest.StartServer(b, etcdserver.Options{Dir: b.TempDir(), Logger: zap.NewNop()})
	c, err := srv.Client()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkCycle measures the worker cycle of the core issue (acquire,
// checkpoint ten times, complete: 12 mutations) against embedded etcd, and
// in the same run etcd's raw single-key transaction (compare the mod
// revision, put), which bounds what any mutation can achieve, and the
// cycle with the record cache turned off (a read before every
// transaction, as before docs/adr/0026-coordination-round-trips.md). The
// three alternate in rounds within each benchmark iteration, so that the
// load of a shared machine falls on all of them alike, and in each round
// every worker does the same share (k cycles, or 12k raw transactions),
// so that all three end their rounds alike too. "ratio" is mutations/s
// over raw txn/s, "ratio-nocache" the same without the cache.
// "ratio-shaped" is over a fourth loop, also alternating, that sends the
// very transactions a cycle sends, by shape (compares, puts of the same
// bytes, deletes, Else reads; recorded from one cycle first), with no
// decision between them: what is left between it and the cycle is the
// backend's own work; what is left between it and the raw loop is the
// shape of the transactions.
//
//	go test -run '^$' -bench 'Cycle' -benchtime 160x -count 6 ./internal/coord/etcdcoord/
func BenchmarkCycle(b *testing.B) {
	c := benchClient(b)
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("workers=%d", par), func(b *testing.B) {
			// Each invocation (b.N grows, -count repeats) starts in fresh namespaces.
			ns := fmt.Sprintf("/bench/cycle%d/i%d", par, benchRuns.Add(1))
			cached := newBenchBackend(b, c, ns+"/cached", 0)
			uncached := newBenchBackend(b, c, ns+"/uncached", -1)
			shape := cycleShape(b, c, ns+"/probe")
			const rounds = 4
			k := max(1, b.N/(rounds*par)) // cycles per worker and round
			cw, uw := newCycleWork(b, cached, par, rounds*k), newCycleWork(b, uncached, par, rounds*k)
			var tc, tu, tr, ts time.Duration
			b.ResetTimer()
			for r := 0; r < rounds; r++ {
				tc += cw.run(b, k)
				tr += benchRawTxn(b, c, par, 12*k, fmt.Sprintf("%s/raw/r%d", ns, r))
				tu += uw.run(b, k)
				ts += benchShapedTxn(b, c, par, k, shape, fmt.Sprintf("%s/shaped/r%d", ns, r))
			}
			n := float64(rounds * k * par) // cycles of each kind
			b.ReportMetric(n/tc.Seconds(), "cycles/s")
			b.ReportMetric(12*n/tc.Seconds(), "mutations/s")
			b.ReportMetric(12*n/tu.Seconds(), "mutations-nocache/s")
			b.ReportMetric(12*n/tr.Seconds(), "txn/s")
			b.ReportMetric(tr.Seconds()/tc.Seconds(), "ratio")
			b.ReportMetric(tr.Seconds()/tu.Seconds(), "ratio-nocache")
			b.ReportMetric(ts.Seconds()/tc.Seconds(), "ratio-shaped")
		})
	}
}

// benchRuns numbers benchmark invocations, for their namespaces.
var benchRuns atomic.Int64

func newBenchBackend(b *testing.B, c *clientv3.Client, ns string, cache int) *etcdcoord.Backend {
	be, err := etcdcoord.New(etcdcoord.Config{Client: c, Namespace: ns, RecordCache: cache,
		MaxTxnOps: etcdserver.MaxTxnOps, MaxTxnBytes: etcdserver.MaxRequestBytes})
	if err != nil {
		b.Fatal(err)
	}
	return be
}

// cycleWork is one run per worker with a shard per cycle it will do.
type cycleWork struct {
	be     *etcdcoord.Backend
	par    int
	next   []int // per worker: its next shard
	tenant coord.TenantID
}

func newCycleWork(b *testing.B, be *etcdcoord.Backend, par, cycles int) *cycleWork {
	ctx := context.Background()
	w := &cycleWork{be: be, par: par, next: make([]int, par), tenant: coord.TenantID{0xBE}}
	if cycles > coord.DefaultMaxInitialShards {
		b.Fatalf("benchtime too long: more than %d cycles per worker", coord.DefaultMaxInitialShards)
	}
	for i := 0; i < par; i++ {
		run := coord.RunID(i + 1)
		if _, err := be.CreateRun(ctx, 1, coord.CreateRunRequest{Tenant: w.tenant, Run: run, Op: 1,
			Config: coord.RunConfig{LeaseDuration: time.Hour, Cursor: coord.CursorStrictlyIncreasing}}); err != nil {
			b.Fatal(err)
		}
		specs := make([]coord.ShardSpec, cycles)
		for j := range specs {
			specs[j] = coord.ShardSpec{ID: coord.ShardID(j + 1), Start: binary.BigEndian.AppendUint32(nil, uint32(j)),
				End: binary.BigEndian.AppendUint32(nil, uint32(j+1))}
		}
		if _, err := be.RegisterShards(ctx, 1, coord.RegisterShardsRequest{Tenant: w.tenant, Run: run, Op: 2, Shards: specs}); err != nil {
			b.Fatal(err)
		}
		w.next[i] = 1
	}
	return w
}

// run has every worker do k cycles and returns how long they took.
func (w *cycleWork) run(b *testing.B, k int) time.Duration {
	ctx := context.Background()
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < w.par; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			run := coord.RunID(i + 1)
			for range k {
				sh := w.next[i]
				w.next[i]++
				op := coord.OpID(1000 + 16*sh)
				l, err := w.be.Acquire(ctx, 2, coord.AcquireRequest{Tenant: w.tenant, Run: run, Shard: coord.ShardID(sh), Worker: 1, Op: op})
				if err != nil {
					b.Error(err)
					return
				}
				for c := 0; c < 10; c++ {
					op++
					key := append(binary.BigEndian.AppendUint32(nil, uint32(sh-1)), byte(c))
					if _, err := w.be.Checkpoint(ctx, 2, coord.CheckpointRequest{Lease: l, Op: op, Cursor: coord.Cursor{HasKey: true, Key: key}}); err != nil {
						b.Error(err)
						return
					}
				}
				op++
				if _, err := w.be.Complete(ctx, 2, coord.CompleteRequest{Lease: l, Op: op}); err != nil {
					b.Error(err)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	return time.Since(start)
}

// benchRawTxn has each of par workers run n single-key transactions and
// returns how long they took.
func benchRawTxn(b *testing.B, c *clientv3.Client, par, n int, prefix string) time.Duration {
	ctx := context.Background()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func(key string) {
			defer wg.Done()
			rev := int64(0)
			for range n {
				cmp := clientv3.Compare(clientv3.ModRevision(key), "=", rev)
				resp, err := c.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, "v")).Commit()
				if err != nil || !resp.Succeeded {
					b.Errorf("raw txn: %v (succeeded %v)", err, err == nil && resp.Succeeded)
					return
				}
				rev = resp.Header.Revision
			}
		}(fmt.Sprintf("%s/%d", prefix, w))
	}
	wg.Wait()
	return time.Since(start)
}

// cycleShape records the transactions one worker cycle sends (with the
// record cache, as a worker runs), by shape.
func cycleShape(b *testing.B, c *clientv3.Client, ns string) []txnShape {
	probe, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer probe.Close()
	rec := &shapeKV{KV: probe.KV}
	probe.KV = rec
	be := newBenchBackend(b, probe, ns, 0)
	w := newCycleWork(b, be, 1, 2)
	w.run(b, 1) // the first cycle of a process fills the cache
	rec.take()
	w.run(b, 1)
	shape := rec.take()
	if len(shape) != 12 {
		b.Fatalf("a cycle sent %d transactions, want 12", len(shape))
	}
	return shape
}

// benchShapedTxn has each of par workers send k cycles of the
// transactions in shape, each with its compares, puts of the same bytes,
// deletes and Else reads, on keys of its own, and returns how long they
// took. The first compare of each is on a key nobody writes (as a
// mutation compares its run), the others on the key it puts.
func benchShapedTxn(b *testing.B, c *clientv3.Client, par, k int, shape []txnShape, prefix string) time.Duration {
	ctx := context.Background()
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func(base string) {
			defer wg.Done()
			fixed, key := base+"/run", base+"/shard"
			rev := int64(0)
			for range k {
				for _, s := range shape {
					cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(fixed), "=", 0)}
					for range s.cmps - 1 {
						cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", rev))
					}
					var ops []clientv3.Op
					for j := range s.puts {
						kk := key
						if j > 0 {
							kk = fmt.Sprintf("%s/extra%d", base, j)
						}
						ops = append(ops, clientv3.OpPut(kk, strings.Repeat("v", max(1, s.putBytes/s.puts-len(kk)))))
					}
					for j := range s.dels {
						ops = append(ops, clientv3.OpDelete(fmt.Sprintf("%s/gone%d", base, j)))
					}
					var orElse []clientv3.Op
					for range s.elseOps {
						orElse = append(orElse, clientv3.OpGet(key))
					}
					resp, err := c.Txn(ctx).If(cmps...).Then(ops...).Else(orElse...).Commit()
					if err != nil || !resp.Succeeded {
						b.Errorf("shaped txn: %v (succeeded %v)", err, err == nil && resp.Succeeded)
						return
					}
					if s.puts > 0 {
						rev = resp.Header.Revision
					}
				}
			}
		}(fmt.Sprintf("%s/%d", prefix, w))
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkGlobalCap measures shard creation by 16 tenants at once (each
// operation creates a run and registers one shard) with the global cap
// strict, where every registration compares and rewrites the one global
// counter, and advisory, where tenants share no key.
//
//	go test -run '^$' -bench 'GlobalCap' -benchtime 2000x ./internal/coord/etcdcoord/
func BenchmarkGlobalCap(b *testing.B) {
	c := benchClient(b)
	for _, mode := range []etcdcoord.GlobalCapMode{etcdcoord.GlobalCapStrict, etcdcoord.GlobalCapAdvisory} {
		b.Run(mode.String(), func(b *testing.B) {
			be, err := etcdcoord.New(etcdcoord.Config{Client: c, Namespace: fmt.Sprintf("/bench/cap/%v/n%d", mode, b.N), GlobalCap: mode})
			if err != nil {
				b.Fatal(err)
			}
			benchCreators(b, be, 16)
		})
	}
}

func benchCreators(b *testing.B, be *etcdcoord.Backend, tenants int) {
	ctx := context.Background()
	var next, transient atomic.Int64
	cfg := coord.RunConfig{LeaseDuration: time.Second, Cursor: coord.CursorNonDecreasing}
	spec := []coord.ShardSpec{{ID: 1}}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < tenants; w++ {
		wg.Add(1)
		go func(tenant coord.TenantID) {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				run := coord.RunID(i)
				if _, err := be.CreateRun(ctx, 1, coord.CreateRunRequest{Tenant: tenant, Run: run, Op: 1, Config: cfg}); err != nil {
					b.Error(err)
					return
				}
				req := coord.RegisterShardsRequest{Tenant: tenant, Run: run, Op: 2, Shards: spec}
				for {
					_, err := be.RegisterShards(ctx, 1, req)
					if errors.Is(err, etcdcoord.ErrContention) {
						transient.Add(1)
						continue
					}
					if err != nil {
						b.Error(err)
						return
					}
					break
				}
			}
		}(coord.TenantID{byte(w), 0xCA})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "shards/s")
	b.ReportMetric(float64(transient.Load()), "contention-errs")
}
