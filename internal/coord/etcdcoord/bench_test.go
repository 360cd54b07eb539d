package etcdcoord_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
// revision, put), which bounds what any mutation can achieve. Each
// mutation is one read and one transaction, so a ratio near 0.5 of
// mutations/s to raw txn/s is the best this design can do.
//
//	go test -run '^$' -bench 'Cycle' -benchtime 3s ./internal/coord/etcdcoord/
func BenchmarkCycle(b *testing.B) {
	c := benchClient(b)
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("coord/workers=%d", par), func(b *testing.B) {
			// b.N grows between invocations: each starts in a fresh namespace.
			be, err := etcdcoord.New(etcdcoord.Config{Client: c, Namespace: fmt.Sprintf("/bench/cycle%d/n%d", par, b.N),
				MaxTxnOps: etcdserver.MaxTxnOps, MaxTxnBytes: etcdserver.MaxRequestBytes})
			if err != nil {
				b.Fatal(err)
			}
			benchCycles(b, be, par)
		})
		b.Run(fmt.Sprintf("raw-txn/workers=%d", par), func(b *testing.B) { benchRawTxn(b, c, par) })
	}
}

func benchCycles(b *testing.B, be *etcdcoord.Backend, par int) {
	ctx := context.Background()
	tenant := coord.TenantID{0xBE}
	// One run per worker with enough shards for its share of b.N.
	per := b.N/par + 1
	for w := 0; w < par; w++ {
		run := coord.RunID(w + 1)
		if _, err := be.CreateRun(ctx, 1, coord.CreateRunRequest{Tenant: tenant, Run: run, Op: 1,
			Config: coord.RunConfig{LeaseDuration: time.Hour, Cursor: coord.CursorStrictlyIncreasing}}); err != nil {
			b.Fatal(err)
		}
		for lo, op := 0, coord.OpID(2); lo < per; lo, op = lo+coord.DefaultMaxInitialShards, op+1 {
			if lo > 0 {
				b.Fatalf("benchtime too long: more than %d cycles per worker", coord.DefaultMaxInitialShards)
			}
			n := min(per, coord.DefaultMaxInitialShards)
			specs := make([]coord.ShardSpec, n)
			for i := range specs {
				specs[i] = coord.ShardSpec{ID: coord.ShardID(i + 1), Start: binary.BigEndian.AppendUint32(nil, uint32(i)),
					End: binary.BigEndian.AppendUint32(nil, uint32(i+1))}
			}
			if _, err := be.RegisterShards(ctx, 1, coord.RegisterShardsRequest{Tenant: tenant, Run: run, Op: op, Shards: specs}); err != nil {
				b.Fatal(err)
			}
		}
	}
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func(run coord.RunID) {
			defer wg.Done()
			op := coord.OpID(1000)
			nextOp := func() coord.OpID { op++; return op }
			for i := 1; next.Add(1) <= int64(b.N); i++ {
				l, err := be.Acquire(ctx, 2, coord.AcquireRequest{Tenant: tenant, Run: run, Shard: coord.ShardID(i), Worker: 1, Op: nextOp()})
				if err != nil {
					b.Error(err)
					return
				}
				for k := 0; k < 10; k++ {
					key := append(binary.BigEndian.AppendUint32(nil, uint32(i-1)), byte(k))
					if _, err := be.Checkpoint(ctx, 2, coord.CheckpointRequest{Lease: l, Op: nextOp(), Cursor: coord.Cursor{HasKey: true, Key: key}}); err != nil {
						b.Error(err)
						return
					}
				}
				if _, err := be.Complete(ctx, 2, coord.CompleteRequest{Lease: l, Op: nextOp()}); err != nil {
					b.Error(err)
					return
				}
			}
		}(coord.RunID(w + 1))
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	b.ReportMetric(float64(b.N)/secs, "cycles/s")
	b.ReportMetric(float64(12*b.N)/secs, "mutations/s")
}

func benchRawTxn(b *testing.B, c *clientv3.Client, par int) {
	ctx := context.Background()
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func(key string) {
			defer wg.Done()
			rev := int64(0)
			for next.Add(1) <= int64(b.N) {
				cmp := clientv3.Compare(clientv3.ModRevision(key), "=", rev)
				resp, err := c.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, "v")).Commit()
				if err != nil || !resp.Succeeded {
					b.Errorf("raw txn: %v (succeeded %v)", err, err == nil && resp.Succeeded)
					return
				}
				rev = resp.Header.Revision
			}
		}(fmt.Sprintf("/bench/raw%d/n%d/%d", par, b.N, w))
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "txn/s")
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
