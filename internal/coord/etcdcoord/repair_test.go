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

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
)

// TestCounterLostRefusesCreation deletes counters by hand: creation is
// refused, naming the repair command, instead of reading the counter as
// zero and lifting the cap. A tenant that never had a counter still starts.
func TestCounterLostRefusesCreation(t *testing.T) {
	ctx := context.Background()
	ns := fmt.Sprintf("/test/lost%d", namespaces.Add(1))
	b := newBackend(t, etcdcoord.Config{Namespace: ns})
	ta, tb := coord.TenantID{0xA}, coord.TenantID{0xB}
	mustRun(t, b, ta, 1, 3)
	tkey := fmt.Sprintf("%s/tenants/0a%062d/shard_count", ns, 0)
	if _, err := client.Delete(ctx, tkey); err != nil {
		t.Fatal(err)
	}
	lost := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, etcdcoord.ErrCounterLost) || !errors.Is(err, coord.ErrCorrupt) || !strings.Contains(err.Error(), "ghost coord repair-counters") {
			t.Fatalf("%s with a deleted counter: %v", what, err)
		}
	}
	if _, err := b.CreateRun(ctx, 10, coord.CreateRunRequest{Tenant: ta, Run: 2, Op: 1, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	_, err := b.RegisterShards(ctx, 10, coord.RegisterShardsRequest{Tenant: ta, Run: 2, Op: 2, Shards: manifest(2)})
	lost("RegisterShards", err)
	l, err := b.Acquire(ctx, 10, coord.AcquireRequest{Tenant: ta, Run: 1, Shard: 1, Worker: 1, Op: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = b.SplitResidual(ctx, 10, coord.SplitResidualRequest{Lease: l, Op: 4, Key: []byte{0, 0, 0, 0, 1}})
	lost("SplitResidual", err)

	// A tenant that never created shards has no marker: it starts at zero.
	mustRun(t, b, tb, 3, 2)
	if _, err := client.Delete(ctx, ns+"/global/shard_count"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateRun(ctx, 10, coord.CreateRunRequest{Tenant: tb, Run: 4, Op: 1, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	_, err = b.RegisterShards(ctx, 10, coord.RegisterShardsRequest{Tenant: tb, Run: 4, Op: 2, Shards: manifest(1)})
	lost("RegisterShards with the global counter deleted", err)

	counts, err := b.RepairCounters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts.Fixed[tkey] != -1 || counts.Fixed[ns+"/global/shard_count"] != -1 || len(counts.Fixed) != 2 || counts.Global != 5 {
		t.Fatalf("repair: %+v", counts)
	}
	if _, err := b.RegisterShards(ctx, 10, coord.RegisterShardsRequest{Tenant: ta, Run: 2, Op: 2, Shards: manifest(2)}); err != nil {
		t.Fatalf("RegisterShards after repair: %v", err)
	}
	// A namespace from before markers gets them from a repair.
	if _, err := client.Delete(ctx, ns+"/markers/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if c, err := b.RepairCounters(ctx); err != nil || len(c.Fixed) != 0 || c.Global != 7 {
		t.Fatalf("repair: %+v %v", c, err)
	}
	if resp, err := client.Get(ctx, ns+"/markers/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 3 {
		t.Fatalf("markers after repair: %v %v", resp, err)
	}
}

// TestRepairConvergesUnderLoad runs RepairCounters on sabotaged counters
// while 48 goroutines create and remove shards of four tenants: it succeeds
// without the caller retrying, and once the load stops every counter equals
// its records.
func TestRepairConvergesUnderLoad(t *testing.T) {
	t.Parallel()
	const workers, tenants = 48, 4
	ctx := context.Background()
	ns := fmt.Sprintf("/test/repairload%d", namespaces.Add(1))
	b := newBackend(t, etcdcoord.Config{Namespace: ns})
	var mu sync.Mutex
	owner := map[coord.RunID]coord.TenantID{}
	var nextRun atomic.Uint64
	var stop atomic.Bool
	var created atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tenant := coord.TenantID{byte(w % tenants), 0xDD}
			for i := 0; !stop.Load() || i < 3; i++ {
				run := coord.RunID(nextRun.Add(1))
				mu.Lock()
				owner[run] = tenant
				mu.Unlock()
				if err := call(func() error {
					_, err := b.CreateRun(ctx, 10, coord.CreateRunRequest{Tenant: tenant, Run: run, Op: 1, Config: cfg})
					return err
				}); err != nil {
					errs <- err
					return
				}
				if err := call(func() error {
					_, err := b.RegisterShards(ctx, 10, coord.RegisterShardsRequest{Tenant: tenant, Run: run, Op: 2, Shards: manifest(1 + i%3)})
					return err
				}); err != nil {
					errs <- err
					return
				}
				created.Add(1)
				if i%2 == 1 {
					if err := call(func() error {
						_, err := b.CancelRun(ctx, 20, coord.CancelRunRequest{Tenant: tenant, Run: run, Op: 3})
						return err
					}); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	// Inflate two counters once the load is under way (a counter below its
	// records would make removals refuse, which TestRepairCountersAndUnderflow
	// covers), then repair.
	for created.Load() < workers {
		time.Sleep(time.Millisecond)
	}
	tkey := fmt.Sprintf("%s/tenants/01dd%060d/shard_count", ns, 0)
	if _, err := client.Put(ctx, tkey, string(binary.LittleEndian.AppendUint64(nil, 1000))); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Put(ctx, ns+"/global/shard_count", string(binary.LittleEndian.AppendUint64(nil, 1<<20))); err != nil {
		t.Fatal(err)
	}
	counts, err := b.RepairCounters(ctx)
	before := created.Load()
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("repair under load: %v", err)
	}
	_, tfixed := counts.Fixed[tkey]
	if _, gfixed := counts.Fixed[ns+"/global/shard_count"]; !tfixed || !gfixed {
		t.Fatalf("repair did not see the sabotage: %+v", counts.Fixed)
	}
	t.Logf("%d runs registered before the repair returned, %d in all", before, created.Load())
	mu.Lock()
	defer mu.Unlock()
	checkCountersCaps(t, "after the load", ns, owner, coord.DefaultMaxShardsPerTenant, coord.DefaultMaxShardsGlobal)
}

// TestConcurrentRepairsCorrectOnce runs a second repair between the first
// one's count and its correction: the first must notice and count again,
// not apply the same correction on top of the second's.
func TestConcurrentRepairsCorrectOnce(t *testing.T) {
	ctx := context.Background()
	ns := fmt.Sprintf("/test/tworepairs%d", namespaces.Add(1))
	f := &faultKV{maxOps: 1 << 20}
	first := faultBackend(t, f, etcdcoord.Config{Namespace: ns})
	second := newBackend(t, etcdcoord.Config{Namespace: ns})
	tenant := coord.TenantID{8}
	mustRun(t, second, tenant, 1, 4)
	tkey := fmt.Sprintf("%s/tenants/08%062d/shard_count", ns, 0)
	if _, err := client.Put(ctx, tkey, string(binary.LittleEndian.AppendUint64(nil, 10))); err != nil {
		t.Fatal(err)
	}
	var once atomic.Bool
	var hookErr error
	f.before = func() {
		if once.CompareAndSwap(false, true) {
			_, hookErr = second.RepairCounters(ctx)
		}
	}
	if _, err := first.RepairCounters(ctx); err != nil {
		t.Fatal(err)
	}
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	if c, err := second.RepairCounters(ctx); err != nil || len(c.Fixed) != 0 || c.Tenants[tenant] != 4 {
		t.Fatalf("counters after two repairs: %+v %v", c, err)
	}
}
