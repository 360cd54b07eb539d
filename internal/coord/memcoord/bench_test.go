package memcoord_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/memcoord"
)

var benchTenant = coord.TenantID{9}

func benchSpecs(n int) []coord.ShardSpec {
	specs := make([]coord.ShardSpec, n)
	for i := range specs {
		specs[i] = coord.ShardSpec{ID: coord.ShardID(i + 1), Start: binary.BigEndian.AppendUint32(nil, uint32(i)), End: binary.BigEndian.AppendUint32(nil, uint32(i+1))}
	}
	return specs
}

// benchWorker runs acquire -> checkpoint x10 -> complete cycles on shards of
// runs it creates itself, 10,000 shards per run.
type benchWorker struct {
	b      *memcoord.Backend
	id     coord.WorkerID
	run    coord.RunID
	next   int
	op     coord.OpID
	shards int
}

func (w *benchWorker) newRun(ctx context.Context, now coord.Time) error {
	w.run += 1 << 20
	cfg := coord.RunConfig{LeaseDuration: time.Minute, Cursor: coord.CursorStrictlyIncreasing}
	if _, err := w.b.CreateRun(ctx, now, coord.CreateRunRequest{Tenant: benchTenant, Run: w.run, Op: 1, Config: cfg}); err != nil {
		return err
	}
	_, err := w.b.RegisterShards(ctx, now, coord.RegisterShardsRequest{Tenant: benchTenant, Run: w.run, Op: 2, Shards: benchSpecs(w.shards)})
	w.next = 0
	return err
}

func (w *benchWorker) cycle(ctx context.Context, now coord.Time) error {
	if w.next == w.shards {
		if err := w.newRun(ctx, now); err != nil {
			return err
		}
	}
	w.next++
	w.op++
	l, err := w.b.Acquire(ctx, now, coord.AcquireRequest{Tenant: benchTenant, Run: w.run, Shard: coord.ShardID(w.next), Worker: w.id, Op: w.op})
	if err != nil {
		return err
	}
	start := uint32(w.next - 1)
	for i := 0; i < 10; i++ {
		w.op++
		key := binary.BigEndian.AppendUint32(nil, start)
		key = append(key, byte(i))
		if _, err := w.b.Checkpoint(ctx, now, coord.CheckpointRequest{Lease: l, Op: w.op, Cursor: coord.Cursor{HasKey: true, Key: key}}); err != nil {
			return err
		}
	}
	w.op++
	_, err = w.b.Complete(ctx, now, coord.CompleteRequest{Lease: l, Op: w.op})
	return err
}

// BenchmarkCycle measures acquire -> checkpoint x10 -> complete cycles per
// second with 1 and 16 concurrent workers sharing one backend.
func BenchmarkCycle(b *testing.B) {
	for _, workers := range []int{1, 16} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			ctx := context.Background()
			be := memcoord.New(coord.Limits{MaxShardsPerTenant: 1 << 40, MaxShardsGlobal: 1 << 40})
			ws := make([]*benchWorker, workers)
			for i := range ws {
				ws[i] = &benchWorker{b: be, id: coord.WorkerID(i + 1), run: coord.RunID(i + 1), shards: 10000}
				if err := ws[i].newRun(ctx, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for i, w := range ws {
				n := b.N / workers
				if i < b.N%workers {
					n++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := 0; j < n; j++ {
						if err := w.cycle(ctx, 1); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
			b.ReportMetric(12*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// BenchmarkRegisterShards measures registering a manifest of 10,000 shards.
func BenchmarkRegisterShards(b *testing.B) {
	ctx := context.Background()
	specs := benchSpecs(10000)
	cfg := coord.RunConfig{LeaseDuration: time.Minute, Cursor: coord.CursorNonDecreasing}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		be := memcoord.New(coord.Limits{})
		if _, err := be.CreateRun(ctx, 1, coord.CreateRunRequest{Tenant: benchTenant, Run: 1, Op: 1, Config: cfg}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := be.RegisterShards(ctx, 1, coord.RegisterShardsRequest{Tenant: benchTenant, Run: 1, Op: 2, Shards: specs}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "registrations/s")
}
