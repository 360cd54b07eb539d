package coordtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
)

// The concurrent simulation races several actors, each a goroutine, against
// one backend: workers claim, checkpoint, renew, split, park, complete and
// crash; admins create and register runs (large manifests too), unpark,
// complete, fail and cancel runs, and run the backend's maintenance. Each
// actor has its own clock, skewed from the others', so callers' times go
// backwards against records (the clock rule of
// docs/adr/0005-coord-pure-transitions.md). A checker reads consistent
// snapshots of the whole store while they run and once they are done, and
// checks the invariants on each (see checkSnapshot); the actors check lease
// exclusivity against a shared ledger of grants.
//
// Unlike the sequential simulation, interleavings come from the scheduler,
// so a failure is not reproducible from its seed: the seeded sequential
// mode is the one to reproduce a logic bug, this one finds atomicity bugs.

// Snapshot is the whole store of a backend at one instant (in etcd: one
// revision). Counters are the per-tenant and global shard counters, if the
// backend keeps any; Open, if non-nil, is the backend's index of shards
// that are Active or Parked.
type Snapshot struct {
	Revision int64
	Runs     []coord.Run
	Shards   []coord.Shard
	Counters *Counters
	Open     map[ShardKey]bool
}

// Counters are a backend's stored shard counters.
type Counters struct {
	Tenants map[coord.TenantID]int64
	Global  int64
	// GlobalKept is false when the backend does not maintain Global (the
	// advisory global cap).
	GlobalKept bool
}

// ShardKey names a shard of a run.
type ShardKey struct {
	Run   coord.RunID
	Shard coord.ShardID
}

// SnapshotFunc reads a Snapshot.
type SnapshotFunc func(ctx context.Context) (Snapshot, error)

// Maintenance is what an admin actor may run besides the coord.Backend
// operations, such as GC and counter repair; errors it returns fail the
// simulation unless transient.
type Maintenance func(ctx context.Context, now coord.Time) error

// ConcurrentConfig configures RunConcurrent.
type ConcurrentConfig struct {
	Seed    int64
	Workers int // worker actors
	Admins  int // admin actors
	Steps   int // steps per actor
	// Limits are those the backend enforces; the checker holds the store
	// to the shard caps.
	Limits coord.Limits
	// Transient reports errors after which an actor retries the same
	// request (etcd: contention, unavailability).
	Transient func(error) bool
	// Maintenance, if set, is run now and then by admins.
	Maintenance Maintenance
	// Tenants is how many tenants share the backend (default 2).
	Tenants int
}

// RunConcurrent runs the concurrent simulation on b.
func RunConcurrent(t *testing.T, b coord.Backend, snap SnapshotFunc, cfg ConcurrentConfig) {
	if cfg.Tenants == 0 {
		cfg.Tenants = 2
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	c := &csim{t: t, b: b, snap: snap, cfg: cfg, ctx: context.Background(), grants: map[ShardKey]*grantLog{}, stats: map[string]int{}}
	c.clock.Store(1000)
	c.seen = map[ShardKey]coord.Shard{}
	c.seenRuns = map[coord.RunID]coord.Run{}
	for i := 0; i < cfg.Tenants; i++ {
		c.newRun(c.rng(int64(1000+i)), coord.TenantID{byte(i + 1), 0xCC, byte(cfg.Seed)}, 1+i)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for i := 0; i < cfg.Workers+cfg.Admins; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := &actor{c: c, id: coord.WorkerID(i + 1), rng: c.rng(int64(i)), admin: i >= cfg.Workers,
				skew: coord.Time(0)}
			a.skew = coord.Time(a.rng.IntN(401) - 200)
			for step := 0; step < cfg.Steps && !c.failed.Load(); step++ {
				a.step()
			}
		}()
	}
	checks := 0
	var checker sync.WaitGroup
	checker.Add(1)
	go func() {
		defer checker.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if c.failed.Load() {
				return
			}
			c.check()
			checks++
			time.Sleep(2 * time.Millisecond) // leave the actors most of the machine
		}
	}()
	wg.Wait()
	close(done)
	checker.Wait()
	if c.failed.Load() {
		t.FailNow()
	}
	c.check()
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Logf("seed=%d: %d snapshots checked during the run; %v", cfg.Seed, checks, c.stats)
	for _, what := range []string{"claim", "Complete", "register", "register large", "SplitResidual"} {
		if c.stats[what] == 0 {
			t.Errorf("seed=%d: no %s happened: the simulation did not exercise it", cfg.Seed, what)
		}
	}
}

type csim struct {
	t      *testing.T
	b      coord.Backend
	snap   SnapshotFunc
	cfg    ConcurrentConfig
	ctx    context.Context
	clock  atomic.Int64 // the shared clock actors skew from
	ops    atomic.Uint64
	runIDs atomic.Uint64
	failed atomic.Bool
	// largeMade is set once an admin made a run with a large manifest.
	largeMade atomic.Bool

	mu       sync.Mutex
	runs     []runInfo                // every run created
	grants   map[ShardKey]*grantLog   // fences granted per shard
	seen     map[ShardKey]coord.Shard // last snapshot's shards
	seenRuns map[coord.RunID]coord.Run
	stats    map[string]int
}

type runInfo struct {
	id     coord.RunID
	tenant coord.TenantID
}

func (c *csim) rng(i int64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(c.cfg.Seed), uint64(i)+0x51ed))
}

func (c *csim) fatalf(format string, args ...any) {
	c.t.Helper()
	if c.failed.CompareAndSwap(false, true) {
		c.t.Errorf("seed=%d: %s", c.cfg.Seed, fmt.Sprintf(format, args...))
	}
}

func (c *csim) count(what string) {
	c.mu.Lock()
	c.stats[what]++
	c.mu.Unlock()
}

func (c *csim) op() coord.OpID { return coord.OpID(c.ops.Add(1)) }

// retry calls f until it returns an error that is not transient.
func (c *csim) retry(f func() error) error {
	for {
		err := f()
		if err == nil || c.cfg.Transient == nil || !c.cfg.Transient(err) {
			return err
		}
		c.count("transient")
	}
}

// largeManifest is the size from which a manifest no longer fits in one
// transaction with etcd's default limits, so etcdcoord registers it in
// chunks (ADR 0022).
const largeManifest = 62

// newRun creates and registers a run of n roots tiling [0x0000, +inf).
func (c *csim) newRun(rng *rand.Rand, tenant coord.TenantID, n int) {
	id := coord.RunID(c.runIDs.Add(1))
	now := coord.Time(c.clock.Load())
	cfg := coord.RunConfig{LeaseDuration: simLease, Cursor: coord.CursorNonDecreasing, MaxRetries: uint32(rng.IntN(2) * 4)}
	req := coord.CreateRunRequest{Tenant: tenant, Run: id, Op: c.op(), Config: cfg}
	if err := c.retry(func() error { _, err := c.b.CreateRun(c.ctx, now, req); return err }); err != nil {
		c.fatalf("CreateRun: %v", err)
		return
	}
	c.mu.Lock()
	c.runs = append(c.runs, runInfo{id, tenant})
	c.mu.Unlock()
	step := simKeySpace / (n + 1)
	specs := make([]coord.ShardSpec, n)
	for i := range specs {
		specs[i] = coord.ShardSpec{ID: coord.ShardID(i + 1), Start: simKey(i * step)}
		if i < n-1 {
			specs[i].End = simKey((i + 1) * step)
		}
	}
	specs[0].Start = simKey(0)
	reg := coord.RegisterShardsRequest{Tenant: tenant, Run: id, Op: c.op(), Shards: specs}
	err := c.retry(func() error { _, err := c.b.RegisterShards(c.ctx, now, reg); return err })
	if n >= largeManifest {
		c.count("register large")
	}
	switch {
	case err == nil:
		c.count("register")
	case errors.Is(err, coord.ErrShardLimitExceeded):
		c.count("register over cap")
	case errors.Is(err, coord.ErrRunTerminal):
		c.count("register of a cancelled run")
	default:
		c.fatalf("RegisterShards of %d shards: %v", n, err)
	}
}

// openRuns returns the runs not known to be terminal.
func (c *csim) openRuns() []runInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []runInfo
	for _, r := range c.runs {
		if !c.seenRuns[r.id].State.Terminal() {
			out = append(out, r)
		}
	}
	return out
}

// granted records a lease the backend granted and checks that no other
// grant of the shard had the same fence. (Grants are recorded when their
// calls return, so two grants may be recorded out of fence order.)
func (c *csim) granted(l coord.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := ShardKey{l.Run, l.Shard}
	g := c.grants[k]
	if g == nil {
		g = &grantLog{fences: map[uint64]bool{}}
		c.grants[k] = g
	}
	if g.fences[l.Fence] {
		c.fatalf("run %d shard %v: fence %d granted twice", l.Run, l.Shard, l.Fence)
	}
	g.fences[l.Fence] = true
	g.newest = max(g.newest, l.Fence)
}

// newest returns the newest fence granted for the shard of l so far.
func (c *csim) newest(l coord.Lease) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.grants[ShardKey{l.Run, l.Shard}]; g != nil {
		return g.newest
	}
	return 0
}

// grantLog is the ledger of one shard's grants.
type grantLog struct {
	fences map[uint64]bool
	newest uint64
}

type actor struct {
	c     *csim
	id    coord.WorkerID
	rng   *rand.Rand
	admin bool
	skew  coord.Time
	lease *coord.Lease
	cur   int // last key processed, -1 for none
	end   int
}

// now advances the shared clock a little (now and then a lot, so that
// leases expire) and returns this actor's skewed view of it.
func (a *actor) now() coord.Time {
	d := int64(a.rng.IntN(20))
	if a.rng.IntN(200) == 0 {
		d = 1500
	}
	return max(1, coord.Time(a.c.clock.Add(d))+a.skew)
}

// benignRace reports the refusals concurrent actors legitimately cause
// each other.
func benignRace(err error) bool {
	for _, e := range []error{coord.ErrStaleFence, coord.ErrLeaseExpired, coord.ErrNotOwner, coord.ErrShardTerminal,
		coord.ErrShardParked, coord.ErrRunTerminal, coord.ErrRunNotActive, coord.ErrLeaseHeld, coord.ErrNoShardAvailable,
		coord.ErrRetriesExhausted, coord.ErrShardLimitExceeded, coord.ErrRunIncomplete, coord.ErrShardNotParked} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// runOutcome is outcome for a request naming a run from a list that may be
// stale: maintenance may have removed the run since.
func (a *actor) runOutcome(what string, err error) bool {
	if errors.Is(err, coord.ErrNotFound) && !errors.Is(err, coord.ErrRunTerminal) {
		a.c.count(what + " of a removed run")
		return false
	}
	return a.outcome(what, err)
}

// outcome classifies the error of a request and reports success.
func (a *actor) outcome(what string, err error) bool {
	switch {
	case err == nil:
		a.c.count(what)
		return true
	case benignRace(err):
		a.c.count(what + " refused")
		return false
	default:
		a.c.fatalf("actor %d %s: %v", a.id, what, err)
		return false
	}
}

func (a *actor) step() {
	if a.admin {
		a.adminStep()
		return
	}
	if a.lease == nil {
		a.claim()
		return
	}
	switch n := a.rng.IntN(100); {
	case n < 4:
		a.c.count("crash")
		a.lease = nil
	case n < 8:
		a.park()
	case n < 16:
		a.splitResidual()
	case n < 20:
		a.splitReplace()
	case n < 40:
		a.renew()
	default:
		a.advance()
	}
}

func (a *actor) claim() {
	runs := a.c.openRuns()
	if len(runs) == 0 {
		return
	}
	r := runs[a.rng.IntN(len(runs))]
	req := coord.ClaimRequest{Tenant: r.tenant, Run: r.id, Worker: a.id, Op: a.c.op()}
	var l coord.Lease
	err := a.c.retry(func() error { var err error; l, err = a.c.b.ClaimNext(a.c.ctx, a.now(), req); return err })
	if !a.runOutcome("claim", err) {
		return
	}
	a.c.granted(l)
	sh, err := a.c.b.GetShard(a.c.ctx, r.tenant, l.Run, l.Shard)
	if err != nil {
		a.runOutcome("GetShard", err)
		return
	}
	a.lease = &l
	a.cur, a.end = simInt(sh.Start, 0)-1, simInt(sh.End, simKeySpace)
	if sh.Cursor.HasKey {
		a.cur = simInt(sh.Cursor.Key, 0)
	}
}

// mutate runs a mutation under a.lease, dropping the lease when it is
// refused, and checks that a mutation the backend accepted was not
// overtaken by a newer grant made before it started.
func (a *actor) mutate(what string, f func(now coord.Time) error) bool {
	before := a.c.newest(*a.lease)
	err := a.c.retry(func() error { return f(a.now()) })
	if !a.runOutcome(what, err) {
		a.lease = nil
		return false
	}
	if before > a.lease.Fence {
		a.c.fatalf("%s accepted with fence %d after fence %d was granted", what, a.lease.Fence, before)
	}
	return true
}

func (a *actor) renew() {
	req := coord.RenewRequest{Lease: *a.lease, Op: a.c.op()}
	var l coord.Lease
	if a.mutate("Renew", func(now coord.Time) error { var err error; l, err = a.c.b.Renew(a.c.ctx, now, req); return err }) {
		a.lease = &l
	}
}

func (a *actor) advance() {
	next := a.cur + 1 + a.rng.IntN(4000)
	if next >= a.end {
		req := coord.CompleteRequest{Lease: *a.lease, Op: a.c.op()}
		if a.mutate("Complete", func(now coord.Time) error { _, err := a.c.b.Complete(a.c.ctx, now, req); return err }) {
			a.lease = nil
		}
		return
	}
	req := coord.CheckpointRequest{Lease: *a.lease, Op: a.c.op(), Cursor: coord.Cursor{HasKey: true, Key: simKey(next)}}
	if a.mutate("Checkpoint", func(now coord.Time) error { _, err := a.c.b.Checkpoint(a.c.ctx, now, req); return err }) {
		a.cur = next
	}
}

func (a *actor) park() {
	req := coord.ParkRequest{Lease: *a.lease, Op: a.c.op(), Reason: "simulated"}
	if a.mutate("Park", func(now coord.Time) error { _, err := a.c.b.Park(a.c.ctx, now, req); return err }) {
		a.lease = nil
	}
}

func (a *actor) splitResidual() {
	if a.end-a.cur < 3 {
		return
	}
	k := a.cur + 2 + a.rng.IntN(a.end-a.cur-2)
	if k >= a.end {
		return
	}
	req := coord.SplitResidualRequest{Lease: *a.lease, Op: a.c.op(), Key: simKey(k)}
	if a.mutate("SplitResidual", func(now coord.Time) error { _, _, err := a.c.b.SplitResidual(a.c.ctx, now, req); return err }) {
		a.end = k
	}
}

func (a *actor) splitReplace() {
	lo, hi := a.cur+1, a.end
	if hi-lo < 3 {
		return
	}
	mid := lo + 1 + a.rng.IntN(hi-lo-1)
	sh, err := a.c.b.GetShard(a.c.ctx, a.lease.Tenant, a.lease.Run, a.lease.Shard)
	if err != nil {
		a.runOutcome("GetShard", err)
		a.lease = nil
		return
	}
	if mid <= simInt(sh.Start, 0) || mid >= simInt(sh.End, simKeySpace) {
		return
	}
	req := coord.SplitReplaceRequest{Lease: *a.lease, Op: a.c.op(), Children: []coord.ChildSpec{{Start: sh.Start, End: simKey(mid)}, {Start: simKey(mid), End: sh.End}}}
	if a.mutate("SplitReplace", func(now coord.Time) error { _, _, err := a.c.b.SplitReplace(a.c.ctx, now, req); return err }) {
		a.lease = nil
	}
}

func (a *actor) adminStep() {
	c := a.c
	runs := c.openRuns()
	switch n := a.rng.IntN(100); {
	case n < 8 || len(runs) < 2:
		// Now and then a manifest large enough to be registered in chunks,
		// and always the first one an admin makes: the check at the end
		// asks for one, and chance alone misses it in a few percent of
		// runs.
		size := 1 + a.rng.IntN(6)
		if a.rng.IntN(5) == 0 || c.largeMade.CompareAndSwap(false, true) {
			size = largeManifest + a.rng.IntN(100)
		}
		c.newRun(a.rng, coord.TenantID{byte(1 + a.rng.IntN(c.cfg.Tenants)), 0xCC, byte(c.cfg.Seed)}, size)
	case n < 12 && c.cfg.Maintenance != nil:
		err := c.retry(func() error { return c.cfg.Maintenance(c.ctx, a.now()) })
		a.outcome("maintenance", err)
	case n < 15:
		r := runs[a.rng.IntN(len(runs))]
		if a.rng.IntN(2) == 0 {
			req := coord.CancelRunRequest{Tenant: r.tenant, Run: r.id, Op: c.op()}
			a.runOutcome("CancelRun", c.retry(func() error { _, err := c.b.CancelRun(c.ctx, a.now(), req); return err }))
		} else {
			req := coord.FailRunRequest{Tenant: r.tenant, Run: r.id, Op: c.op(), Reason: "simulated"}
			a.runOutcome("FailRun", c.retry(func() error { _, err := c.b.FailRun(c.ctx, a.now(), req); return err }))
		}
	default:
		r := runs[a.rng.IntN(len(runs))]
		parked, err := c.b.ListShards(c.ctx, a.now(), r.tenant, r.id, coord.ShardFilter{States: []coord.ShardState{coord.ShardParked}})
		if err != nil {
			a.runOutcome("ListShards", err)
			return
		}
		for _, sh := range parked {
			req := coord.UnparkRequest{Tenant: r.tenant, Run: r.id, Shard: sh.ID, Op: c.op()}
			a.runOutcome("Unpark", c.retry(func() error { _, err := c.b.Unpark(c.ctx, a.now(), req); return err }))
		}
		req := coord.CompleteRunRequest{Tenant: r.tenant, Run: r.id, Op: c.op()}
		a.runOutcome("CompleteRun", c.retry(func() error { _, err := c.b.CompleteRun(c.ctx, a.now(), req); return err }))
	}
}

// check reads a snapshot and checks it.
func (c *csim) check() {
	s, err := c.snapshot()
	if err != nil {
		c.fatalf("snapshot: %v", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := checkSnapshot(&s, c.cfg.Limits, c.seenRuns, c.seen); err != nil {
		c.fatalf("snapshot at revision %d: %v", s.Revision, err)
	}
}

func (c *csim) snapshot() (Snapshot, error) {
	return c.snap(c.ctx)
}

// checkSnapshot checks one snapshot, and against the previous one (seenRuns
// and seen, which it updates):
//   - every run and shard record is valid;
//   - an ended run holds no shards, and stays ended;
//   - in an Active run, parents and children point at each other and the
//     shards that are not Split tile [0x0000, +inf) exactly;
//   - the open index lists exactly the Active and Parked shards;
//   - every counter equals the number of records it counts, and none is
//     above its cap;
//   - fences never decrease and Done or Split shards never change state.
func checkSnapshot(s *Snapshot, lim coord.Limits, seenRuns map[coord.RunID]coord.Run, seen map[ShardKey]coord.Shard) error {
	runs := map[coord.RunID]*coord.Run{}
	for i := range s.Runs {
		r := &s.Runs[i]
		if err := r.Validate(); err != nil {
			return err
		}
		runs[r.ID] = r
		if prev, ok := seenRuns[r.ID]; ok && prev.State.Terminal() && (r.State != prev.State || r.Summary != prev.Summary) {
			return fmt.Errorf("run %d left %v for %v", r.ID, prev.State, r.State)
		}
		seenRuns[r.ID] = *r
	}
	byRun := map[coord.RunID][]*coord.Shard{}
	perTenant := map[coord.TenantID]int64{}
	for i := range s.Shards {
		sh := &s.Shards[i]
		if err := sh.Validate(); err != nil {
			return err
		}
		r := runs[sh.Run]
		if r == nil {
			return fmt.Errorf("%v of a run that does not exist", sh)
		}
		if r.State.Terminal() {
			return fmt.Errorf("%v of %v run %d was not released", sh, r.State, r.ID)
		}
		byRun[sh.Run] = append(byRun[sh.Run], sh)
		perTenant[sh.Tenant]++
		k := ShardKey{sh.Run, sh.ID}
		if prev, ok := seen[k]; ok {
			switch {
			case sh.Fence < prev.Fence:
				return fmt.Errorf("%v fence went from %d to %d", sh, prev.Fence, sh.Fence)
			case prev.State.Terminal() && sh.State != prev.State:
				return fmt.Errorf("%v left %v for %v", sh, prev.State, sh.State)
			}
		}
		seen[k] = *sh
		if s.Open != nil {
			open := sh.State == coord.ShardActive || sh.State == coord.ShardParked
			if s.Open[k] != open {
				return fmt.Errorf("%v is %v but its open index entry is %v", sh, sh.State, s.Open[k])
			}
		}
	}
	if s.Open != nil {
		for k := range s.Open {
			if _, ok := seen[k]; !ok || runs[k.Run] == nil || runs[k.Run].State.Terminal() {
				return fmt.Errorf("open index entry for run %d shard %v without an open shard", k.Run, k.Shard)
			}
		}
	}
	for id, shards := range byRun {
		if runs[id].State != coord.RunActive {
			continue // an initializing run may hold part of its manifest
		}
		if err := checkTree(shards); err != nil {
			return fmt.Errorf("run %d: %w", id, err)
		}
	}
	if ctr := s.Counters; ctr != nil {
		var total int64
		for t, n := range perTenant {
			total += n
			if ctr.Tenants[t] != n {
				return fmt.Errorf("tenant %x counter %d, records %d", t[:3], ctr.Tenants[t], n)
			}
		}
		for t, n := range ctr.Tenants {
			if n != perTenant[t] {
				return fmt.Errorf("tenant %x counter %d, records %d", t[:3], n, perTenant[t])
			}
			if n > lim.MaxShardsPerTenant {
				return fmt.Errorf("tenant %x holds %d shards, cap %d", t[:3], n, lim.MaxShardsPerTenant)
			}
		}
		if ctr.GlobalKept && ctr.Global != total {
			return fmt.Errorf("global counter %d, records %d", ctr.Global, total)
		}
		if ctr.GlobalKept && total > lim.MaxShardsGlobal {
			return fmt.Errorf("%d shards, global cap %d", total, lim.MaxShardsGlobal)
		}
	}
	return nil
}

// checkTree checks an Active run's shards: parents and children point at
// each other, and the leaves tile [0x0000, +inf).
func checkTree(shards []*coord.Shard) error {
	byID := map[coord.ShardID]*coord.Shard{}
	for _, sh := range shards {
		byID[sh.ID] = sh
	}
	var leaves []*coord.Shard
	for _, sh := range shards {
		for _, ch := range sh.Children {
			if c := byID[ch]; c == nil || c.Parent != sh.ID {
				return fmt.Errorf("child %v of %v missing or not pointing back", ch, sh.ID)
			}
		}
		if sh.Parent != 0 {
			if p := byID[sh.Parent]; p == nil || !slices.Contains(p.Children, sh.ID) {
				return fmt.Errorf("parent %v of %v missing or not listing it", sh.Parent, sh.ID)
			}
		}
		if sh.State != coord.ShardSplit {
			leaves = append(leaves, sh)
		}
	}
	slices.SortFunc(leaves, func(a, b *coord.Shard) int { return bytes.Compare(a.Start, b.Start) })
	want := simKey(0)
	for i, l := range leaves {
		if !bytes.Equal(l.Start, want) {
			return fmt.Errorf("leaf %v starts at %x, want %x", l.ID, l.Start, want)
		}
		if len(l.End) == 0 && i != len(leaves)-1 {
			return fmt.Errorf("unbounded leaf %v is not last", l.ID)
		}
		want = l.End
	}
	if len(want) != 0 {
		return fmt.Errorf("leaves end at %x, not +inf", want)
	}
	return nil
}
