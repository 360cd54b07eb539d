package coordtest

import (
	"bytes"
	"slices"

	"github.com/ghost-scm/ghost/internal/coord"
)

// check reads every run and shard through the Backend and asserts the
// invariants against the records seen at the previous step.
func (s *sim) check() {
	total := 0
	defer func() {
		if int64(total) > s.lim.MaxShardsPerTenant {
			s.fatalf("%d shards exist, over the tenant cap %d", total, s.lim.MaxShardsPerTenant)
		}
	}()
	for _, id := range s.runs {
		r, err := s.b.GetRun(s.ctx, s.tenant, id)
		s.expect("GetRun", err)
		if err := r.Validate(); err != nil {
			s.fatalf("GetRun: %v", err)
		}
		if prev, ok := s.seenRuns[id]; ok && prev.State.Terminal() {
			if r.State != prev.State || r.CompletedAt != prev.CompletedAt {
				s.fatalf("run %d left terminal state %v for %v", id, prev.State, r.State)
			}
		}
		prevRun, seenBefore := s.seenRuns[id]
		s.seenRuns[id] = r
		if r.State.Terminal() {
			s.checkReleased(r, seenBefore && !prevRun.State.Terminal())
			continue
		}

		shards, err := s.b.ListShards(s.ctx, s.now, s.tenant, id, coord.ShardFilter{})
		s.expect("ListShards", err)
		total += len(shards)
		byID := make(map[coord.ShardID]*coord.Shard, len(shards))
		var progress coord.Progress
		for i := range shards {
			sh := &shards[i]
			byID[sh.ID] = sh
			progress.Add(sh, s.now)
			s.checkShard(sh)
		}
		for ref := range s.seenShards {
			if ref.run == id && byID[ref.shard] == nil {
				s.fatalf("shard %v disappeared", ref.shard)
			}
		}
		p, err := s.b.Progress(s.ctx, s.now, s.tenant, id)
		s.expect("Progress", err)
		progress.State, progress.Total = r.State, len(shards)
		if p != progress {
			s.fatalf("run %d: Progress %+v disagrees with ListShards %+v", id, p, progress)
		}
		s.checkTree(id, byID)
		s.checkTiling(id, shards)
		if r.State == coord.RunDone && (p.Active != 0 || p.Parked != 0) {
			s.fatalf("run %d is done with unfinished shards: %+v", id, p)
		}
	}
}

// checkReleased checks a terminal run: its shards are gone, Progress is
// its summary, and when the run ended during the last step the summary
// counts the shards seen at the previous check (docs/adr/0023-atomic-shard-caps.md).
func (s *sim) checkReleased(r coord.Run, justEnded bool) {
	shards, err := s.b.ListShards(s.ctx, s.now, s.tenant, r.ID, coord.ShardFilter{})
	s.expect("ListShards", err)
	if len(shards) != 0 {
		s.fatalf("run %d is %v but still lists %d shards", r.ID, r.State, len(shards))
	}
	p, err := s.b.Progress(s.ctx, s.now, s.tenant, r.ID)
	s.expect("Progress", err)
	if p != r.Progress() {
		s.fatalf("run %d: Progress %+v, summary %+v", r.ID, p, r.Summary)
	}
	if !justEnded {
		return
	}
	var want coord.RunSummary
	for ref, sh := range s.seenShards {
		if ref.run == r.ID {
			want.Add(&sh)
			delete(s.seenShards, ref)
		}
	}
	if r.Summary != want {
		s.fatalf("run %d ended with summary %+v, the shards seen last were %+v", r.ID, r.Summary, want)
	}
}

// checkShard compares a shard with its previous observation.
func (s *sim) checkShard(sh *coord.Shard) {
	if err := sh.Validate(); err != nil {
		s.fatalf("ListShards: %v", err)
	}
	ref := shardRef{sh.Run, sh.ID}
	g := s.grant(ref)
	if sh.Fence < g.fence {
		s.fatalf("shard %v fence %d below granted fence %d", sh.ID, sh.Fence, g.fence)
	}
	if sh.State == coord.ShardActive && sh.LeaseLive(s.now) && (sh.Fence != g.fence || sh.Deadline != g.deadline || g.released) {
		s.fatalf("shard %v holds a live lease (fence %d until %d) the simulation was not granted (fence %d until %d, released %v)",
			sh.ID, sh.Fence, sh.Deadline, g.fence, g.deadline, g.released)
	}
	prev, seen := s.seenShards[ref]
	s.seenShards[ref] = *sh
	if !seen {
		return
	}
	switch {
	case sh.Fence < prev.Fence:
		s.fatalf("shard %v fence decreased %d -> %d", sh.ID, prev.Fence, sh.Fence)
	case prev.State.Terminal() && sh.State != prev.State:
		s.fatalf("shard %v left terminal state %v for %v", sh.ID, prev.State, sh.State)
	case prev.State == coord.ShardParked && sh.State == coord.ShardActive && sh.Fence <= prev.Fence:
		s.fatalf("shard %v unparked without a fence bump", sh.ID)
	case !bytes.Equal(sh.Start, prev.Start) || sh.Parent != prev.Parent:
		s.fatalf("shard %v start or parent changed", sh.ID)
	case len(prev.End) != 0 && (len(sh.End) == 0 || bytes.Compare(sh.End, prev.End) > 0):
		s.fatalf("shard %v grew from end %x to %x", sh.ID, prev.End, sh.End)
	case prev.Cursor.HasKey && (!sh.Cursor.HasKey || bytes.Compare(sh.Cursor.Key, prev.Cursor.Key) < 0):
		s.fatalf("shard %v cursor moved back from %x to %x", sh.ID, prev.Cursor.Key, sh.Cursor.Key)
	case len(sh.Children) < len(prev.Children) || !slices.Equal(sh.Children[:len(prev.Children)], prev.Children):
		s.fatalf("shard %v lost children", sh.ID)
	}
}

// checkTree asserts that parents and children point at each other.
func (s *sim) checkTree(run coord.RunID, byID map[coord.ShardID]*coord.Shard) {
	for _, sh := range byID {
		for _, c := range sh.Children {
			child := byID[c]
			if child == nil || child.Parent != sh.ID {
				s.fatalf("run %d: child %v of %v missing or not pointing back", run, c, sh.ID)
			}
		}
		if sh.Parent != 0 {
			p := byID[sh.Parent]
			if p == nil || !slices.Contains(p.Children, sh.ID) {
				s.fatalf("run %d: parent %v of %v missing or not listing it", run, sh.Parent, sh.ID)
			}
		}
	}
}

// checkTiling asserts that the shards that are not Split tile the run's key
// space [0x0000, +inf) exactly: no key lost, none covered twice.
func (s *sim) checkTiling(run coord.RunID, shards []coord.Shard) {
	var leaves []*coord.Shard
	for i := range shards {
		if shards[i].State != coord.ShardSplit {
			leaves = append(leaves, &shards[i])
		}
	}
	slices.SortFunc(leaves, func(a, b *coord.Shard) int { return bytes.Compare(a.Start, b.Start) })
	want := s.roots[run][0].Start
	for i, l := range leaves {
		if !bytes.Equal(l.Start, want) {
			s.fatalf("run %d: leaf %v starts at %x, want %x", run, l.ID, l.Start, want)
		}
		if len(l.End) == 0 && i != len(leaves)-1 {
			s.fatalf("run %d: unbounded leaf %v is not last", run, l.ID)
		}
		want = l.End
	}
	if len(want) != 0 {
		s.fatalf("run %d: leaves end at %x, not +inf", run, want)
	}
}
