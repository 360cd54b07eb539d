package coordtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
)

// The simulation drives several runs to completion with a few workers through
// crashes, lease expiries, duplicate deliveries and delays, in logical time,
// and checks the invariants after every step by reading the backend. A
// failure names its seed; reproduce it with Run(t, f, FirstSeed(s), Seeds(1)).

const (
	simFaultSteps    = 250  // default steps with faults enabled
	simLivenessSteps = 2500 // bound on steps to finish once faults stop
	simLease         = 1000 * time.Millisecond
	simLeaseMS       = coord.Time(1000)
	simKeySpace      = 1 << 16 // keys are 2-byte big-endian integers
	simMaxShards     = 24      // workers stop splitting a run beyond this
)

func runSimulation(t *testing.T, f Factory, o options) {
	for i := 0; i < o.seeds; i++ {
		seed := o.firstSeed + int64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			if o.parallel {
				t.Parallel()
			}
			s := newSim(t, f, seed)
			s.faultSteps = o.faultSteps
			s.run()
		})
	}
}

func simKey(i int) []byte { return []byte{byte(i >> 8), byte(i)} }

func simInt(k []byte, unbounded int) int {
	if len(k) == 0 {
		return unbounded
	}
	if len(k) != 2 {
		panic(fmt.Sprintf("simulation key %x is not 2 bytes", k))
	}
	return int(k[0])<<8 | int(k[1])
}

type simWorker struct {
	id    coord.WorkerID
	lease *coord.Lease
	cur   int // last key processed, -1 for none
	end   int // exclusive end of the leased range as the worker knows it
	// last is the worker's last successful mutation, resent to simulate a
	// duplicate delivery; lastShard is the shard whose op log holds it.
	last      func() error
	lastOp    coord.OpID
	lastShard shardRef
}

type shardRef struct {
	run   coord.RunID
	shard coord.ShardID
}

// grant is the simulation's own ledger of the newest lease of a shard.
type grant struct {
	fence    uint64
	deadline coord.Time
	released bool
}

type sim struct {
	t          *testing.T
	seed       int64
	rng        *rand.Rand
	b          coord.Backend
	ctx        context.Context
	tenant     coord.TenantID
	now        coord.Time
	op         coord.OpID
	step       int
	faults     bool
	faultSteps int

	runs    []coord.RunID
	roots   map[coord.RunID][]coord.ShardSpec
	workers []*simWorker
	ledger  map[shardRef]*grant

	// Last observed records, for monotonicity checks.
	seenRuns   map[coord.RunID]coord.Run
	seenShards map[shardRef]coord.Shard

	stats map[string]int // what happened, logged at the end for -v
	lim   coord.Limits
}

func newSim(t *testing.T, f Factory, seed int64) *sim {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b9))
	lim := coord.DefaultLimits()
	if rng.IntN(4) == 0 {
		// A tight tenant cap, so that splits run into it.
		lim.MaxShardsPerTenant = int64(12 + rng.IntN(12))
	}
	s := &sim{
		t: t, seed: seed, rng: rng, lim: lim,
		b: f(t, lim), ctx: context.Background(),
		tenant: coord.TenantID{byte(seed), 0xAA}, now: 1000, faults: true,
		roots: map[coord.RunID][]coord.ShardSpec{}, ledger: map[shardRef]*grant{},
		seenRuns: map[coord.RunID]coord.Run{}, seenShards: map[shardRef]coord.Shard{},
		stats: map[string]int{},
	}
	nruns := 2 + s.rng.IntN(2)
	for r := 0; r < nruns; r++ {
		s.addRun(coord.RunID(r + 1))
	}
	nw := 3 + s.rng.IntN(4)
	for w := 0; w < nw; w++ {
		s.workers = append(s.workers, &simWorker{id: coord.WorkerID(w + 1)})
	}
	return s
}

func (s *sim) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("seed=%d step=%d now=%d: %s", s.seed, s.step, s.now, fmt.Sprintf(format, args...))
}

func (s *sim) nextOp() coord.OpID { s.op++; return s.op }

func (s *sim) addRun(id coord.RunID) {
	cfg := coord.RunConfig{LeaseDuration: simLease, Cursor: coord.CursorNonDecreasing}
	if s.rng.IntN(2) == 0 {
		cfg.Cursor = coord.CursorStrictlyIncreasing
	}
	if s.rng.IntN(3) == 0 {
		cfg.MaxRetries = 3
	}
	if _, err := s.b.CreateRun(s.ctx, s.now, coord.CreateRunRequest{Tenant: s.tenant, Run: id, Op: s.nextOp(), Config: cfg}); err != nil {
		s.fatalf("CreateRun: %v", err)
	}
	// Roots tile [0x0000, +inf).
	k := 1 + s.rng.IntN(4)
	points := s.points(0, simKeySpace, k-1)
	bounds := append(append([]int{0}, points...), -1)
	var specs []coord.ShardSpec
	for i := 0; i < k; i++ {
		sp := coord.ShardSpec{ID: coord.ShardID(i + 1), Start: simKey(bounds[i])}
		if bounds[i+1] >= 0 {
			sp.End = simKey(bounds[i+1])
		}
		specs = append(specs, sp)
	}
	if _, err := s.b.RegisterShards(s.ctx, s.now, coord.RegisterShardsRequest{Tenant: s.tenant, Run: id, Op: s.nextOp(), Shards: specs}); err != nil {
		s.fatalf("RegisterShards: %v", err)
	}
	s.runs = append(s.runs, id)
	s.roots[id] = specs
}

// points returns n distinct sorted integers in (lo, hi), fewer if the range is small.
func (s *sim) points(lo, hi, n int) []int {
	if hi-lo-1 < n {
		n = hi - lo - 1
	}
	set := map[int]bool{}
	for len(set) < n {
		set[lo+1+s.rng.IntN(hi-lo-1)] = true
	}
	out := make([]int, 0, n)
	for p := range set {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func (s *sim) run() {
	for s.step = 0; s.step < s.faultSteps; s.step++ {
		s.tick()
		s.check()
	}
	s.faults = false
	for i := 0; i < simLivenessSteps; i++ {
		if s.allTerminal() {
			for _, id := range s.runs {
				s.stats["run "+s.seenRuns[id].State.String()]++
			}
			s.stats["shards"] = len(s.seenShards)
			s.stats["liveness steps"] = i
			s.t.Logf("seed=%d: %v", s.seed, s.stats)
			return
		}
		s.step++
		s.tick()
		s.check()
	}
	for _, id := range s.runs {
		p, _ := s.b.Progress(s.ctx, s.now, s.tenant, id)
		s.t.Logf("run %d: %+v", id, p)
	}
	s.fatalf("liveness: runs not terminal %d steps after faults stopped", simLivenessSteps)
}

func (s *sim) allTerminal() bool {
	for _, id := range s.runs {
		if !s.seenRuns[id].State.Terminal() {
			return false
		}
	}
	return true
}

// tick advances logical time and lets one actor act.
func (s *sim) tick() {
	switch {
	case s.faults && s.rng.IntN(20) == 0: // a long delay: leases expire
		s.now += coord.Time(500 + s.rng.IntN(2500))
	case s.faults:
		s.now += coord.Time(s.rng.IntN(60))
	default:
		s.now += coord.Time(1 + s.rng.IntN(40))
	}
	switch n := s.rng.IntN(100); {
	case n < 6 || !s.faults && n < 30:
		s.admin()
	default:
		s.workerAct(s.workers[s.rng.IntN(len(s.workers))])
	}
}

// admin unparks parked shards, completes finished runs and, rarely, fails or
// cancels a run.
func (s *sim) admin() {
	for _, id := range s.runs {
		r := s.seenRuns[id]
		if r.State.Terminal() {
			continue
		}
		if s.faults && s.rng.IntN(400) == 0 {
			if s.rng.IntN(2) == 0 {
				_, err := s.b.CancelRun(s.ctx, s.now, coord.CancelRunRequest{Tenant: s.tenant, Run: id, Op: s.nextOp()})
				s.expect("CancelRun", err)
			} else {
				_, err := s.b.FailRun(s.ctx, s.now, coord.FailRunRequest{Tenant: s.tenant, Run: id, Op: s.nextOp(), Reason: "simulated"})
				s.expect("FailRun", err)
			}
			continue
		}
		parked, err := s.b.ListShards(s.ctx, s.now, s.tenant, id, coord.ShardFilter{States: []coord.ShardState{coord.ShardParked}})
		s.expect("ListShards", err)
		for _, sh := range parked {
			if s.faults && s.rng.IntN(2) == 0 {
				continue
			}
			n, err := s.b.Unpark(s.ctx, s.now, coord.UnparkRequest{Tenant: s.tenant, Run: id, Shard: sh.ID, Op: s.nextOp()})
			s.expect("Unpark", err)
			g := s.grant(shardRef{id, sh.ID})
			if n.Fence <= g.fence {
				s.fatalf("unpark of %v did not bump the fence past %d: %d", sh.ID, g.fence, n.Fence)
			}
			g.fence, g.released = n.Fence, true
		}
		p, err := s.b.Progress(s.ctx, s.now, s.tenant, id)
		s.expect("Progress", err)
		if p.Active == 0 && p.Parked == 0 {
			_, err := s.b.CompleteRun(s.ctx, s.now, coord.CompleteRunRequest{Tenant: s.tenant, Run: id, Op: s.nextOp()})
			s.expect("CompleteRun", err)
		}
	}
}

// expect fails the simulation on any error.
func (s *sim) expect(what string, err error) {
	if err != nil {
		s.fatalf("%s: %v", what, err)
	}
}

func (s *sim) grant(ref shardRef) *grant {
	g := s.ledger[ref]
	if g == nil {
		g = &grant{fence: 1, released: true}
		s.ledger[ref] = g
	}
	return g
}

// onGrant records a new lease and checks that no other lease was live.
func (s *sim) onGrant(l coord.Lease) {
	ref := shardRef{l.Run, l.Shard}
	g := s.grant(ref)
	if !g.released && s.now < g.deadline {
		s.fatalf("shard %v granted to worker %d (fence %d) while fence %d is live until %d", l.Shard, l.Worker, l.Fence, g.fence, g.deadline)
	}
	if l.Fence <= g.fence {
		s.fatalf("shard %v granted with fence %d, not above %d", l.Shard, l.Fence, g.fence)
	}
	if l.Deadline != s.now+simLeaseMS {
		s.fatalf("shard %v granted until %d, want %d", l.Shard, l.Deadline, s.now+simLeaseMS)
	}
	*g = grant{fence: l.Fence, deadline: l.Deadline}
}

// onAccepted checks that a mutation the backend accepted came from the newest,
// live lease.
func (s *sim) onAccepted(what string, l coord.Lease) *grant {
	g := s.grant(shardRef{l.Run, l.Shard})
	if l.Fence != g.fence || g.released || s.now >= g.deadline {
		s.fatalf("%s accepted from worker %d with fence %d; newest grant fence %d until %d (released %v)",
			what, l.Worker, l.Fence, g.fence, g.deadline, g.released)
	}
	return g
}

// benign reports errors a worker can legitimately meet: it lost its lease or
// the run ended under it.
func benign(err error) bool {
	for _, e := range []error{coord.ErrStaleFence, coord.ErrLeaseExpired, coord.ErrNotOwner, coord.ErrShardTerminal,
		coord.ErrShardParked, coord.ErrRunTerminal} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (s *sim) workerAct(w *simWorker) {
	if w.lease == nil {
		s.claim(w)
		return
	}
	n := s.rng.IntN(100)
	if s.faults {
		switch {
		case n < 6: // crash: forget the lease without releasing it
			s.stats["crash"]++
			w.lease, w.last = nil, nil
			return
		case n < 16:
			s.duplicate(w)
			return
		case n < 19:
			s.park(w)
			return
		case n < 25:
			s.splitResidual(w)
			return
		case n < 29:
			s.splitReplace(w)
			return
		}
	}
	if w.lease.Deadline-s.now < simLeaseMS/3 || (s.faults && n < 40) {
		s.renew(w)
		return
	}
	s.advance(w)
}

// result handles the error of a worker mutation and reports whether it succeeded.
func (s *sim) result(w *simWorker, what string, err error) bool {
	switch {
	case err == nil:
		s.stats[what]++
		return true
	case errors.Is(err, coord.ErrShardLimitExceeded):
		// The worker keeps its lease and goes on without splitting.
		s.stats[what+" over cap"]++
		return false
	case benign(err):
		s.stats[what+" refused"]++
		w.lease, w.last = nil, nil
		return false
	default:
		s.fatalf("worker %d %s: unexpected error %v", w.id, what, err)
		return false
	}
}

func (s *sim) remember(w *simWorker, op coord.OpID, ref shardRef, replay func() error) {
	w.last, w.lastOp, w.lastShard = replay, op, ref
}

func (s *sim) claim(w *simWorker) {
	var open []coord.RunID
	for _, id := range s.runs {
		if !s.seenRuns[id].State.Terminal() {
			open = append(open, id)
		}
	}
	if len(open) == 0 {
		return
	}
	run := open[s.rng.IntN(len(open))]
	if s.rng.IntN(3) == 0 {
		s.acquire(w, run)
		return
	}
	req := coord.ClaimRequest{Tenant: s.tenant, Run: run, Worker: w.id, Op: s.nextOp()}
	l, err := s.b.ClaimNext(s.ctx, s.now, req)
	if errors.Is(err, coord.ErrNoShardAvailable) || errors.Is(err, coord.ErrRunTerminal) {
		return
	}
	s.expect("ClaimNext", err)
	s.stats["claim"]++
	s.onGrant(l)
	s.adopt(w, l)
	s.remember(w, req.Op, shardRef{l.Run, l.Shard}, func() error {
		got, err := s.b.ClaimNext(s.ctx, s.now, req)
		if err == nil && got.Fence != l.Fence {
			return fmt.Errorf("replayed claim returned fence %d, first %d", got.Fence, l.Fence)
		}
		return err
	})
}

// acquire asks for a specific shard picked at random, leased or not, to check
// that a live lease is never granted twice.
func (s *sim) acquire(w *simWorker, run coord.RunID) {
	shards, err := s.b.ListShards(s.ctx, s.now, s.tenant, run, coord.ShardFilter{})
	s.expect("ListShards", err)
	if len(shards) == 0 {
		return
	}
	req := coord.AcquireRequest{Tenant: s.tenant, Run: run, Shard: shards[s.rng.IntN(len(shards))].ID, Worker: w.id, Op: s.nextOp()}
	l, err := s.b.Acquire(s.ctx, s.now, req)
	for _, e := range []error{coord.ErrLeaseHeld, coord.ErrShardTerminal, coord.ErrShardParked, coord.ErrRunTerminal, coord.ErrRetriesExhausted} {
		if errors.Is(err, e) {
			s.stats["Acquire refused"]++
			return
		}
	}
	s.expect("Acquire", err)
	s.stats["Acquire"]++
	s.onGrant(l)
	s.adopt(w, l)
	s.remember(w, req.Op, shardRef{l.Run, l.Shard}, func() error { _, err := s.b.Acquire(s.ctx, s.now, req); return err })
}

// adopt makes the worker start on a freshly leased shard from its checkpoint.
func (s *sim) adopt(w *simWorker, l coord.Lease) {
	sh, err := s.b.GetShard(s.ctx, s.tenant, l.Run, l.Shard)
	s.expect("GetShard", err)
	w.lease = &l
	w.cur, w.end = -1, simInt(sh.End, simKeySpace)
	if sh.Cursor.HasKey {
		w.cur = simInt(sh.Cursor.Key, 0)
	}
	if w.cur < simInt(sh.Start, 0) {
		w.cur = simInt(sh.Start, 0) - 1
	}
}

// duplicate resends the worker's last successful request, which must succeed
// unless its op id has meanwhile been evicted from the record's op log.
func (s *sim) duplicate(w *simWorker) {
	if w.last == nil {
		return
	}
	err := w.last()
	if err == nil {
		s.stats["duplicate"]++
		return
	}
	sh, gerr := s.b.GetShard(s.ctx, s.tenant, w.lastShard.run, w.lastShard.shard)
	if errors.Is(gerr, coord.ErrRunTerminal) {
		// The run ended: its shards, and their op logs, are gone.
		if !errors.Is(err, coord.ErrRunTerminal) {
			s.fatalf("duplicate of op %d in an ended run: %v", w.lastOp, err)
		}
		s.stats["duplicate in an ended run"]++
		w.last = nil
		return
	}
	s.stats["duplicate of evicted op"]++
	s.expect("GetShard", gerr)
	for _, op := range sh.Ops {
		if op.ID == w.lastOp {
			s.fatalf("duplicate of op %d failed although it is logged: %v", w.lastOp, err)
		}
	}
	if !benign(err) && !errors.Is(err, coord.ErrCursorRegression) && !errors.Is(err, coord.ErrInvalidSplit) && !errors.Is(err, coord.ErrLeaseHeld) && !errors.Is(err, coord.ErrNoShardAvailable) {
		s.fatalf("duplicate of evicted op %d: unexpected error %v", w.lastOp, err)
	}
}

func (s *sim) renew(w *simWorker) {
	req := coord.RenewRequest{Lease: *w.lease, Op: s.nextOp()}
	l, err := s.b.Renew(s.ctx, s.now, req)
	if !s.result(w, "Renew", err) {
		return
	}
	g := s.onAccepted("Renew", req.Lease)
	if l.Deadline != s.now+simLeaseMS || l.Fence != req.Lease.Fence {
		s.fatalf("Renew returned %+v", l)
	}
	g.deadline = l.Deadline
	w.lease = &l
	s.remember(w, req.Op, shardRef{l.Run, l.Shard}, func() error { _, err := s.b.Renew(s.ctx, s.now, req); return err })
}

// advance processes some keys and checkpoints, or completes at the end.
func (s *sim) advance(w *simWorker) {
	next := w.cur + 1 + s.rng.IntN(6000)
	ref := shardRef{w.lease.Run, w.lease.Shard}
	if next >= w.end {
		req := coord.CompleteRequest{Lease: *w.lease, Op: s.nextOp()}
		_, err := s.b.Complete(s.ctx, s.now, req)
		if !s.result(w, "Complete", err) {
			return
		}
		s.onAccepted("Complete", req.Lease).released = true
		w.lease = nil
		s.remember(w, req.Op, ref, func() error { _, err := s.b.Complete(s.ctx, s.now, req); return err })
		return
	}
	req := coord.CheckpointRequest{Lease: *w.lease, Op: s.nextOp(), Cursor: coord.Cursor{HasKey: true, Key: simKey(next), Token: []byte(fmt.Sprint(next))}}
	sh, err := s.b.Checkpoint(s.ctx, s.now, req)
	if !s.result(w, "Checkpoint", err) {
		return
	}
	s.onAccepted("Checkpoint", req.Lease)
	if !sh.Cursor.Equal(req.Cursor) {
		s.fatalf("Checkpoint stored cursor %+v, want %+v", sh.Cursor, req.Cursor)
	}
	w.cur = next
	s.remember(w, req.Op, ref, func() error { _, err := s.b.Checkpoint(s.ctx, s.now, req); return err })
}

func (s *sim) park(w *simWorker) {
	req := coord.ParkRequest{Lease: *w.lease, Op: s.nextOp(), Reason: "simulated poison"}
	_, err := s.b.Park(s.ctx, s.now, req)
	if !s.result(w, "Park", err) {
		return
	}
	s.onAccepted("Park", req.Lease).released = true
	w.lease = nil
	s.remember(w, req.Op, shardRef{req.Lease.Run, req.Lease.Shard}, func() error { _, err := s.b.Park(s.ctx, s.now, req); return err })
}

func (s *sim) crowded(run coord.RunID) bool {
	n := 0
	for ref := range s.seenShards {
		if ref.run == run {
			n++
		}
	}
	return n >= simMaxShards
}

func (s *sim) splitResidual(w *simWorker) {
	if s.crowded(w.lease.Run) || w.end-w.cur < 3 {
		return
	}
	k := w.cur + 2 + s.rng.IntN(w.end-w.cur-2)
	if k <= w.cur+1 || k >= w.end {
		return
	}
	req := coord.SplitResidualRequest{Lease: *w.lease, Op: s.nextOp(), Key: simKey(k)}
	sh, res, err := s.b.SplitResidual(s.ctx, s.now, req)
	if !s.result(w, "SplitResidual", err) {
		return
	}
	s.onAccepted("SplitResidual", req.Lease)
	if res.Parent != req.Lease.Shard || !bytes.Equal(res.Start, req.Key) || !bytes.Equal(sh.End, req.Key) {
		s.fatalf("SplitResidual returned %+v / %+v", sh, res)
	}
	w.end = k
	s.remember(w, req.Op, shardRef{req.Lease.Run, req.Lease.Shard}, func() error {
		_, _, err := s.b.SplitResidual(s.ctx, s.now, req)
		return err
	})
}

func (s *sim) splitReplace(w *simWorker) {
	if s.crowded(w.lease.Run) {
		return
	}
	sh, err := s.b.GetShard(s.ctx, s.tenant, w.lease.Run, w.lease.Shard)
	if errors.Is(err, coord.ErrRunTerminal) {
		s.result(w, "SplitReplace", err)
		return
	}
	s.expect("GetShard", err)
	lo, hi := simInt(sh.Start, 0), simInt(sh.End, simKeySpace)
	pts := s.points(lo, hi, 1+s.rng.IntN(3))
	if len(pts) == 0 {
		return
	}
	var kids []coord.ChildSpec
	prev := sh.Start
	for _, p := range pts {
		kids = append(kids, coord.ChildSpec{Start: prev, End: simKey(p)})
		prev = simKey(p)
	}
	kids = append(kids, coord.ChildSpec{Start: prev, End: sh.End})
	req := coord.SplitReplaceRequest{Lease: *w.lease, Op: s.nextOp(), Children: kids}
	_, children, err := s.b.SplitReplace(s.ctx, s.now, req)
	if !s.result(w, "SplitReplace", err) {
		return
	}
	s.onAccepted("SplitReplace", req.Lease).released = true
	if len(children) != len(kids) {
		s.fatalf("SplitReplace returned %d children, want %d", len(children), len(kids))
	}
	w.lease = nil
	s.remember(w, req.Op, shardRef{req.Lease.Run, req.Lease.Shard}, func() error {
		_, _, err := s.b.SplitReplace(s.ctx, s.now, req)
		return err
	})
}
