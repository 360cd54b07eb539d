package etcdcoord_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/coordtest"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
)

// The concurrent simulation's size. CI runs more of it than go test's
// defaults (see .ci/run):
//
//	go test -run TestConcurrentSimulation ./internal/coord/etcdcoord/ -args -conc-seeds=4 -conc-steps=600
var (
	concSeeds = flag.Int("conc-seeds", 0, "concurrent simulation seeds against etcd (default 2)")
	concSteps = flag.Int("conc-steps", 0, "steps per actor of the concurrent simulation (default 250, 100 with -race or -short)")
)

func TestConcurrentSimulation(t *testing.T) {
	t.Parallel()
	seeds, steps := *concSeeds, *concSteps
	if seeds == 0 {
		seeds = 2
	}
	if steps == 0 {
		steps = 250
		if raceEnabled || testing.Short() {
			steps = 100
		}
	}
	for i := 0; i < seeds; i++ {
		seed := int64(i + 1)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			ns := fmt.Sprintf("/test/conc%d", namespaces.Add(1))
			// Caps low enough that creations run into them.
			lim := coord.Limits{MaxShardsPerTenant: 200, MaxShardsGlobal: 320}
			b := newBackend(t, etcdcoord.Config{Namespace: ns, Limits: lim})
			ctx := context.Background()
			coordtest.RunConcurrent(t, b, snapshotter(ns, true), coordtest.ConcurrentConfig{
				Seed: seed, Workers: 6, Admins: 2, Steps: steps, Limits: lim,
				Transient: func(err error) bool {
					return errors.Is(err, etcdcoord.ErrContention) || errors.Is(err, etcdcoord.ErrUnavailable)
				},
				Maintenance: func(ctx context.Context, now coord.Time) error {
					if _, err := b.GC(ctx, now, 200*time.Millisecond); err != nil {
						return err
					}
					c, err := b.RepairCounters(ctx)
					if err == nil && len(c.Fixed) != 0 {
						err = fmt.Errorf("repair found wrong counters: %v", c.Fixed)
					}
					return err
				},
			})
			if c, err := b.RepairCounters(ctx); err != nil || len(c.Fixed) != 0 {
				t.Fatalf("counters at the end: %+v %v", c, err)
			}
		})
	}
}

// snapshotter reads the namespace ns at one revision, straight from etcd.
func snapshotter(ns string, globalKept bool) coordtest.SnapshotFunc {
	return func(ctx context.Context) (coordtest.Snapshot, error) {
		resp, err := client.Get(ctx, ns+"/", clientv3.WithPrefix())
		if err != nil {
			return coordtest.Snapshot{}, err
		}
		s := coordtest.Snapshot{
			Revision: resp.Header.Revision,
			Counters: &coordtest.Counters{Tenants: map[coord.TenantID]int64{}, GlobalKept: globalKept},
			Open:     map[coordtest.ShardKey]bool{},
		}
		for _, kv := range resp.Kvs {
			key := strings.TrimPrefix(string(kv.Key), ns)
			switch {
			case strings.HasPrefix(key, "/runs/"):
				var r coord.Run
				if err := r.UnmarshalBinary(kv.Value); err != nil {
					return s, fmt.Errorf("%s: %w", kv.Key, err)
				}
				s.Runs = append(s.Runs, r)
			case strings.HasPrefix(key, "/shards/"):
				var sh coord.Shard
				if err := sh.UnmarshalBinary(kv.Value); err != nil {
					return s, fmt.Errorf("%s: %w", kv.Key, err)
				}
				s.Shards = append(s.Shards, sh)
			case strings.HasPrefix(key, "/open/"):
				var run, id uint64
				if _, err := fmt.Sscanf(strings.TrimPrefix(key, "/open/"), "%016x/%016x", &run, &id); err != nil {
					return s, fmt.Errorf("%s: %w", kv.Key, err)
				}
				s.Open[coordtest.ShardKey{Run: coord.RunID(run), Shard: coord.ShardID(id)}] = true
			case strings.HasPrefix(key, "/tenants/"):
				var tenant coord.TenantID
				h := strings.TrimSuffix(strings.TrimPrefix(key, "/tenants/"), "/shard_count")
				if _, err := hex.Decode(tenant[:], []byte(h)); err != nil || len(kv.Value) != 8 {
					return s, fmt.Errorf("bad counter %s", kv.Key)
				}
				s.Counters.Tenants[tenant] = int64(binary.LittleEndian.Uint64(kv.Value))
			case key == "/global/shard_count":
				s.Counters.Global = int64(binary.LittleEndian.Uint64(kv.Value))
			}
		}
		return s, nil
	}
}
