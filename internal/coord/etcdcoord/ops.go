package etcdcoord

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ghost-scm/ghost/internal/coord"
)

// CreateRun implements coord.Admin.
func (b *Backend) CreateRun(ctx context.Context, now coord.Time, req coord.CreateRunRequest) (coord.Run, error) {
	var out coord.Run
	err := b.mutate(ctx, "create run", func(ctx context.Context) (*txn, error) {
		rs, err := b.read(ctx, b.k.run(req.Run))
		if err != nil {
			return nil, err
		}
		if rs[0].exists() {
			var cur coord.Run
			if err := cur.UnmarshalBinary(rs[0].val); err != nil {
				return nil, fmt.Errorf("etcdcoord: %s: %w", rs[0].key, err)
			}
			out, err = cur.ApplyCreateRun(req, now)
			return nil, err
		}
		if out, err = coord.NewRun(req, now); err != nil {
			return nil, err
		}
		t := &txn{}
		return t, b.putRun(t, rs[0], nil, &out)
	})
	if err != nil {
		return coord.Run{}, err
	}
	return out, nil
}

// readShard reads a run and one of its shards for a mutation of the shard.
func (b *Backend) readShard(ctx context.Context, tenant coord.TenantID, run coord.RunID, id coord.ShardID, extra ...string) (coord.Run, coord.Shard, []rec, error) {
	rs, err := b.read(ctx, append([]string{b.k.run(run), b.k.shard(run, id)}, extra...)...)
	if err != nil {
		return coord.Run{}, coord.Shard{}, nil, err
	}
	r, err := decodeRun(rs[0], tenant, run)
	if err != nil {
		return coord.Run{}, coord.Shard{}, nil, err
	}
	s, err := decodeShard(rs[1], &r, id)
	if err != nil {
		return coord.Run{}, coord.Shard{}, nil, err
	}
	return r, s, rs, nil
}

// writeShard returns the transaction that replaces the shard read in rs[1]
// by n, guarded by the run and the shard.
func (b *Backend) writeShard(rs []rec, prev, n *coord.Shard) (*txn, error) {
	t := &txn{}
	t.guard(rs[0])
	return t, b.putShard(t, rs[1], prev, n)
}

// decodeShardRecs decodes the run and shard records rs (as read for keys
// run, shard) for a mutation of the shard.
func decodeShardRecs(rs []rec, tenant coord.TenantID, run coord.RunID, id coord.ShardID) (coord.Run, coord.Shard, error) {
	r, err := decodeRun(rs[0], tenant, run)
	if err != nil {
		return coord.Run{}, coord.Shard{}, err
	}
	s, err := decodeShard(rs[1], &r, id)
	if err != nil {
		return coord.Run{}, coord.Shard{}, err
	}
	return r, s, nil
}

// Acquire implements coord.Worker.
func (b *Backend) Acquire(ctx context.Context, now coord.Time, req coord.AcquireRequest) (coord.Lease, error) {
	var out coord.Lease
	keys := []string{b.k.run(req.Run), b.k.shard(req.Run, req.Shard)}
	err := b.mutateRecs(ctx, "acquire", keys, func(rs []rec) (*txn, error) {
		run, s, err := decodeShardRecs(rs, req.Tenant, req.Run, req.Shard)
		if err != nil {
			return nil, err
		}
		tr, err := s.ApplyAcquire(&run, req, now)
		out = tr.Lease
		if !tr.Changed {
			return nil, err
		}
		t, werr := b.writeShard(rs, &s, &tr.Shard)
		if werr != nil {
			return nil, werr
		}
		t.after = err
		return t, nil
	})
	if err != nil {
		return coord.Lease{}, err
	}
	return out, nil
}

// ClaimNext implements coord.Worker. A replay is found through the claim
// key the original claim wrote (<ns>/claims/<run>/<op>) rather than by
// reading every shard's op log; the shard it names still decides, through
// Shard.ClaimReplay, whether the op is a replay, a conflict, or (evicted
// from the log) a new claim. Candidates come from the open index, in id
// order from coord.ClaimOffset; a candidate lost to a concurrent writer is
// skipped, and the scan starts over only when the run or the claim key
// changed or every candidate was lost.
func (b *Backend) ClaimNext(ctx context.Context, now coord.Time, req coord.ClaimRequest) (coord.Lease, error) {
	delay := backoffMin
	for attempt := 0; attempt <= b.maxRetries; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, jitter(delay)); err != nil {
				return coord.Lease{}, err
			}
			delay = min(2*delay, backoffMax)
		}
		lease, done, err := b.claimOnce(ctx, now, req)
		if done || err != nil {
			return lease, err
		}
	}
	return coord.Lease{}, fmt.Errorf("etcdcoord: claim next: %w (%d attempts)", ErrContention, b.maxRetries+1)
}

// claimOnce makes one pass over the candidates. done is false when every
// attempt to write lost a race and the pass should be repeated.
//
// The run, the claim key and the first page of the open index come in one
// read; a candidate's record comes from the record cache when it holds it
// (a transaction built on it compares its revision like any other, and a
// stale one only fails), else from one read.
func (b *Backend) claimOnce(ctx context.Context, now coord.Time, req coord.ClaimRequest) (coord.Lease, bool, error) {
	p := b.k.openPrefix(req.Run)
	runRec, claimRec, open, err := b.readClaim(ctx, req, p)
	if err != nil {
		return coord.Lease{}, true, err
	}
	b.cache.put(runRec)
	run, err := decodeRun(runRec, req.Tenant, req.Run)
	if err != nil {
		return coord.Lease{}, true, err
	}
	if claimRec.exists() {
		id, err := decodeShardID(claimRec.key, claimRec.val)
		if err != nil {
			return coord.Lease{}, true, err
		}
		srs, err := b.read(ctx, b.k.shard(req.Run, id))
		if err != nil {
			return coord.Lease{}, true, err
		}
		if srs[0].exists() {
			s, err := decodeShard(srs[0], &run, id)
			if err != nil {
				return coord.Lease{}, true, err
			}
			if lease, ok, err := s.ClaimReplay(req); err != nil || ok {
				return lease, true, err
			}
		}
	}
	switch {
	case run.State.Terminal():
		return coord.Lease{}, true, fmt.Errorf("%w: run %d is %v", coord.ErrRunTerminal, req.Run, run.State)
	case run.State != coord.RunActive:
		return coord.Lease{}, true, fmt.Errorf("%w: run %d is %v", coord.ErrRunNotActive, req.Run, run.State)
	}
	var candidates []coord.ShardID
	for _, kv := range open {
		e, err := decodeOpen(kv.key, kv.val)
		if err != nil {
			return coord.Lease{}, true, err
		}
		if e.claimable(now) {
			id, err := parseIDAfter(p, kv.key)
			if err != nil {
				return coord.Lease{}, true, err
			}
			candidates = append(candidates, coord.ShardID(id))
		}
	}
	lost := false
	// A candidate whose record cannot be read or written (ErrCorrupt) is
	// skipped, so one bad record does not stop a run's other shards from
	// being claimed; its error is reported only if nothing was claimable.
	var skipped error
	off := coord.ClaimOffset(req.Worker, len(candidates))
	for i := range candidates {
		id := candidates[(off+i)%len(candidates)]
		key := b.k.shard(req.Run, id)
		srs, cached := b.cache.get([]string{key})
		for {
			if srs == nil {
				if srs, err = b.read(ctx, key); err != nil {
					return coord.Lease{}, true, err
				}
				b.cache.put(srs...)
			}
			if !srs[0].exists() {
				break
			}
			s, err := decodeShard(srs[0], &run, id)
			if errors.Is(err, coord.ErrCorrupt) {
				skipped = cmp.Or(skipped, err)
				break
			}
			if err != nil {
				return coord.Lease{}, true, err
			}
			tr, err := s.ApplyClaim(&run, req, now)
			if !tr.Changed {
				if cached {
					srs, cached = nil, false // ask etcd before moving on
					continue
				}
				if movesOn(err) {
					break
				}
				return coord.Lease{}, true, err
			}
			t := &txn{}
			t.guard(runRec)
			t.guard(claimRec)
			if perr := b.putShard(t, srs[0], &s, &tr.Shard); perr != nil {
				if errors.Is(perr, coord.ErrCorrupt) {
					skipped = cmp.Or(skipped, perr)
					break
				}
				return coord.Lease{}, true, perr
			}
			if err == nil {
				t.put(claimRec.key, encodeShardID(id))
			}
			resp, cerr := b.commit(ctx, t, clientv3.OpGet(runRec.key), clientv3.OpGet(claimRec.key), clientv3.OpGet(key))
			if cerr != nil {
				b.forgetWrites(t)
				return coord.Lease{}, true, fmt.Errorf("etcdcoord: claim next: %w", cerr)
			}
			if !resp.Succeeded {
				if revOf(resp, 0) != runRec.rev || revOf(resp, 1) != claimRec.rev {
					return coord.Lease{}, false, nil // the run or the claim moved: start over
				}
				fresh := recsAt([]string{key}, resp, 2)
				b.cache.put(fresh...)
				if cached {
					// The cache was behind: decide again on the record as it is.
					srs, cached = fresh, false
					continue
				}
				lost = true
				break
			}
			b.committed(t, resp)
			if err == nil {
				return tr.Lease, true, nil
			}
			// The candidate exhausted its retries and is now parked: try the next.
			break
		}
	}
	if lost {
		return coord.Lease{}, false, nil
	}
	if skipped != nil {
		return coord.Lease{}, true, fmt.Errorf("etcdcoord: claim next: nothing claimable but a corrupt shard: %w", skipped)
	}
	return coord.Lease{}, true, fmt.Errorf("%w: run %d", coord.ErrNoShardAvailable, req.Run)
}

// readClaim reads, at one revision and in one request, what a claim pass
// starts from: the run, the claim key of the request's op, and the run's
// open index, whose pages after the first (more than scanPage open shards)
// are read at the same revision.
func (b *Backend) readClaim(ctx context.Context, req coord.ClaimRequest, p string) (runRec, claimRec rec, open []rec, err error) {
	end := prefixEnd(p)
	resp, err := b.c.Txn(ctx).Then(
		clientv3.OpGet(b.k.run(req.Run)),
		clientv3.OpGet(b.k.claim(req.Run, req.Op)),
		clientv3.OpGet(p, clientv3.WithRange(end), clientv3.WithLimit(scanPage)),
	).Commit()
	if err != nil {
		return rec{}, rec{}, nil, b.etcdErr(err, nil)
	}
	rs := elseRecs([]string{b.k.run(req.Run), b.k.claim(req.Run, req.Op)}, resp)
	rng := resp.Responses[2].GetResponseRange()
	for _, kv := range rng.GetKvs() {
		open = append(open, rec{key: string(kv.Key), rev: kv.ModRevision, val: kv.Value})
	}
	if rng.GetMore() && len(open) > 0 {
		from := open[len(open)-1].key + "\x00"
		if _, err := b.scan(ctx, resp.Header.Revision, from, end, nil, func(key string, val []byte) error {
			open = append(open, rec{key: key, val: val})
			return nil
		}); err != nil {
			return rec{}, rec{}, nil, err
		}
	}
	return rs[0], rs[1], open, nil
}

// revOf returns the mod revision of the key fetched by the i-th Else get.
func revOf(resp *clientv3.TxnResponse, i int) int64 {
	if kvs := resp.Responses[i].GetResponseRange().GetKvs(); len(kvs) > 0 {
		return kvs[0].ModRevision
	}
	return 0
}

// movesOn reports the refusals after which ClaimNext tries the next candidate.
func movesOn(err error) bool {
	for _, target := range []error{coord.ErrRetriesExhausted, coord.ErrLeaseHeld, coord.ErrShardParked, coord.ErrShardTerminal} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// shardOp runs a mutation of one shard that writes only that shard: the
// hot path of a worker (renew, checkpoint, complete), one round trip when
// the record cache holds the run and the shard (mutateRecs).
func (b *Backend) shardOp(ctx context.Context, what string, tenant coord.TenantID, runID coord.RunID, id coord.ShardID,
	apply func(run *coord.Run, s coord.Shard) (coord.ShardTransition, error)) (coord.ShardTransition, error) {
	var out coord.ShardTransition
	keys := []string{b.k.run(runID), b.k.shard(runID, id)}
	err := b.mutateRecs(ctx, what, keys, func(rs []rec) (*txn, error) {
		run, s, err := decodeShardRecs(rs, tenant, runID, id)
		if err != nil {
			return nil, err
		}
		tr, err := apply(&run, s)
		out = tr
		if err != nil || !tr.Changed {
			return nil, err
		}
		return b.writeShard(rs, &s, &tr.Shard)
	})
	if err != nil {
		return coord.ShardTransition{}, err
	}
	return out, nil
}

// Renew implements coord.Worker.
func (b *Backend) Renew(ctx context.Context, now coord.Time, req coord.RenewRequest) (coord.Lease, error) {
	l := req.Lease
	tr, err := b.shardOp(ctx, "renew", l.Tenant, l.Run, l.Shard, func(run *coord.Run, s coord.Shard) (coord.ShardTransition, error) {
		return s.ApplyRenew(run, req, now)
	})
	if err != nil {
		return coord.Lease{}, err
	}
	return tr.Lease, nil
}

// Checkpoint implements coord.Worker.
func (b *Backend) Checkpoint(ctx context.Context, now coord.Time, req coord.CheckpointRequest) (coord.Shard, error) {
	l := req.Lease
	tr, err := b.shardOp(ctx, "checkpoint", l.Tenant, l.Run, l.Shard, func(run *coord.Run, s coord.Shard) (coord.ShardTransition, error) {
		return s.ApplyCheckpoint(run, req, now, b.lim)
	})
	return tr.Shard, err
}

// Complete implements coord.Worker.
func (b *Backend) Complete(ctx context.Context, now coord.Time, req coord.CompleteRequest) (coord.Shard, error) {
	l := req.Lease
	tr, err := b.shardOp(ctx, "complete", l.Tenant, l.Run, l.Shard, func(run *coord.Run, s coord.Shard) (coord.ShardTransition, error) {
		return s.ApplyComplete(run, req, now)
	})
	return tr.Shard, err
}

// Park implements coord.Worker.
func (b *Backend) Park(ctx context.Context, now coord.Time, req coord.ParkRequest) (coord.Shard, error) {
	l := req.Lease
	tr, err := b.shardOp(ctx, "park", l.Tenant, l.Run, l.Shard, func(run *coord.Run, s coord.Shard) (coord.ShardTransition, error) {
		return s.ApplyPark(run, req, now, b.lim)
	})
	return tr.Shard, err
}

// Unpark implements coord.Admin.
func (b *Backend) Unpark(ctx context.Context, now coord.Time, req coord.UnparkRequest) (coord.Shard, error) {
	tr, err := b.shardOp(ctx, "unpark", req.Tenant, req.Run, req.Shard, func(run *coord.Run, s coord.Shard) (coord.ShardTransition, error) {
		return s.ApplyUnpark(run, req, now)
	})
	return tr.Shard, err
}

// addShards returns the transaction that rewrites the parent read in rs[1]
// and creates the shards whose keys were read in created, guarded by the
// run, the parent, the absence of every new key and the counters ctrs.
func (b *Backend) addShards(ctx context.Context, rs []rec, prev, parent *coord.Shard, created []coord.Shard, createdRecs, ctrs []rec) (*txn, error) {
	for i, r := range createdRecs {
		if r.exists() {
			return nil, fmt.Errorf("%w: run %d shard %v", coord.ErrIDCollision, parent.Run, created[i].ID)
		}
	}
	t := &txn{}
	if err := b.reserve(ctx, t, ctrs, int64(len(created))); err != nil {
		return nil, err
	}
	t.guard(rs[0])
	if err := b.putShard(t, rs[1], prev, parent); err != nil {
		return nil, err
	}
	for i := range created {
		if err := b.putShard(t, createdRecs[i], nil, &created[i]); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// SplitReplace implements coord.Worker.
func (b *Backend) SplitReplace(ctx context.Context, now coord.Time, req coord.SplitReplaceRequest) (coord.Shard, []coord.Shard, error) {
	var parent coord.Shard
	var children []coord.Shard
	l := req.Lease
	ids := coord.ReplaceChildIDs(req)
	extra := make([]string, 0, len(ids)+2)
	for _, id := range ids {
		extra = append(extra, b.k.shard(l.Run, id))
	}
	extra = append(extra, b.counterKeys(l.Tenant)...)
	err := b.mutate(ctx, "split replace", func(ctx context.Context) (*txn, error) {
		run, s, rs, err := b.readShard(ctx, l.Tenant, l.Run, l.Shard, extra...)
		if err != nil {
			return nil, err
		}
		childRecs, ctrs := rs[2:2+len(ids)], rs[2+len(ids):]
		tr, err := s.ApplySplitReplace(&run, req, now, b.lim)
		if err != nil {
			return nil, err
		}
		parent, children = tr.Shard, tr.Created
		if !tr.Changed {
			children = children[:0]
			for i, r := range childRecs {
				if r.exists() {
					c, err := decodeShard(r, &run, ids[i])
					if err != nil {
						return nil, err
					}
					children = append(children, c)
				}
			}
			return nil, nil
		}
		return b.addShards(ctx, rs, &s, &tr.Shard, tr.Created, childRecs, ctrs)
	})
	if err != nil {
		return coord.Shard{}, nil, err
	}
	return parent, children, nil
}

// SplitResidual implements coord.Worker.
func (b *Backend) SplitResidual(ctx context.Context, now coord.Time, req coord.SplitResidualRequest) (coord.Shard, coord.Shard, error) {
	var shard, residual coord.Shard
	l := req.Lease
	rid := coord.ResidualID(req)
	extra := append([]string{b.k.shard(l.Run, rid)}, b.counterKeys(l.Tenant)...)
	err := b.mutate(ctx, "split residual", func(ctx context.Context) (*txn, error) {
		run, s, rs, err := b.readShard(ctx, l.Tenant, l.Run, l.Shard, extra...)
		if err != nil {
			return nil, err
		}
		tr, err := s.ApplySplitResidual(&run, req, now, b.lim)
		if err != nil {
			return nil, err
		}
		shard = tr.Shard
		if !tr.Changed {
			residual = coord.Shard{}
			if rs[2].exists() {
				if residual, err = decodeShard(rs[2], &run, rid); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}
		residual = tr.Created[0]
		return b.addShards(ctx, rs, &s, &tr.Shard, tr.Created, rs[2:3], rs[3:])
	})
	if err != nil {
		return coord.Shard{}, coord.Shard{}, err
	}
	return shard, residual, nil
}

// endRun runs a transition that makes a run terminal. It counts the run's
// shards at the revision it read the run and counters at, and commits in
// one transaction the terminal run with that summary, the deletion of its
// shard records, open index entries, claim keys and any registration in
// progress (four prefix or key deletes, whatever the size of the run), and
// the release of the shards from the tenant and global counters
// (docs/adr/0023-atomic-shard-caps.md).
//
// The count stays exact until the commit: shards are created only by
// splits, which compare the run record this transaction rewrites, and by
// registration chunks, which advance the registration key it compares; a
// run with no shards leaves the counters alone. The states counted may lag
// a concurrent Complete or Park, which the summary documents.
func (b *Backend) endRun(ctx context.Context, what string, tenant coord.TenantID, id coord.RunID,
	apply func(run coord.Run, sum coord.RunSummary) (coord.RunTransition, error)) (coord.Run, error) {
	var out coord.Run
	err := b.mutate(ctx, what, func(ctx context.Context) (*txn, error) {
		rs, rev, err := b.readRev(ctx, append([]string{b.k.run(id), b.k.registration(id)}, b.counterKeys(tenant)...)...)
		if err != nil {
			return nil, err
		}
		run, err := decodeRun(rs[0], tenant, id)
		if err != nil {
			return nil, err
		}
		var sum coord.RunSummary
		if !run.State.Terminal() {
			if sum, err = b.summarize(ctx, &run, rev); err != nil {
				return nil, err
			}
		}
		tr, err := apply(run, sum)
		out = tr.Run
		if err != nil || !tr.Changed {
			return nil, err
		}
		t := &txn{}
		if err := b.putRun(t, rs[0], &run, &tr.Run); err != nil {
			return nil, err
		}
		if sum.Total > 0 {
			if err := b.release(t, rs[2:], int64(sum.Total)); err != nil {
				return nil, err
			}
		}
		// Shards are created by splits, which compare the run record, and
		// by registration chunks, which advance the registration key.
		t.guard(rs[1])
		t.delPrefix(b.k.shardPrefix(id))
		t.delPrefix(b.k.openPrefix(id))
		t.delPrefix(b.k.claimPrefix(id))
		if rs[1].exists() {
			t.del(rs[1].key)
		}
		return t, nil
	})
	if err != nil {
		return coord.Run{}, err
	}
	return out, nil
}

// summarize counts the run's shards by state at revision rev.
func (b *Backend) summarize(ctx context.Context, run *coord.Run, rev int64) (coord.RunSummary, error) {
	var sum coord.RunSummary
	p := b.k.shardPrefix(run.ID)
	_, err := b.scan(ctx, rev, p, prefixEnd(p), nil, func(key string, val []byte) error {
		_, sid, err := b.k.parseShardKey(key)
		if err != nil {
			return err
		}
		s, err := decodeShard(rec{key: key, rev: 1, val: val}, run, sid)
		if err != nil {
			return err
		}
		sum.Add(&s)
		return nil
	})
	return sum, err
}

// CompleteRun implements coord.Admin. See endRun.
func (b *Backend) CompleteRun(ctx context.Context, now coord.Time, req coord.CompleteRunRequest) (coord.Run, error) {
	return b.endRun(ctx, "complete run", req.Tenant, req.Run, func(run coord.Run, sum coord.RunSummary) (coord.RunTransition, error) {
		return run.ApplyCompleteRun(req, now, sum)
	})
}

// FailRun implements coord.Admin. See endRun.
func (b *Backend) FailRun(ctx context.Context, now coord.Time, req coord.FailRunRequest) (coord.Run, error) {
	return b.endRun(ctx, "fail run", req.Tenant, req.Run, func(run coord.Run, sum coord.RunSummary) (coord.RunTransition, error) {
		return run.ApplyFailRun(req, now, b.lim, sum)
	})
}

// CancelRun implements coord.Admin. See endRun.
func (b *Backend) CancelRun(ctx context.Context, now coord.Time, req coord.CancelRunRequest) (coord.Run, error) {
	return b.endRun(ctx, "cancel run", req.Tenant, req.Run, func(run coord.Run, sum coord.RunSummary) (coord.RunTransition, error) {
		return run.ApplyCancelRun(req, now, sum)
	})
}

// GetRun implements coord.Reader.
func (b *Backend) GetRun(ctx context.Context, tenant coord.TenantID, run coord.RunID) (coord.Run, error) {
	rs, err := b.read(ctx, b.k.run(run))
	if err != nil {
		return coord.Run{}, err
	}
	return decodeRun(rs[0], tenant, run)
}

// GetShard implements coord.Reader.
func (b *Backend) GetShard(ctx context.Context, tenant coord.TenantID, run coord.RunID, shard coord.ShardID) (coord.Shard, error) {
	_, s, _, err := b.readShard(ctx, tenant, run, shard)
	return s, err
}

// Progress implements coord.Reader.
func (b *Backend) Progress(ctx context.Context, now coord.Time, tenant coord.TenantID, run coord.RunID) (coord.Progress, error) {
	r, err := b.GetRun(ctx, tenant, run)
	if err != nil {
		return coord.Progress{}, err
	}
	if r.State.Terminal() {
		return r.Progress(), nil
	}
	p := coord.Progress{State: r.State}
	err = b.scanShards(ctx, &r, 0, func(s *coord.Shard) bool {
		p.Total++
		p.Add(s, now)
		return true
	})
	if err != nil {
		return coord.Progress{}, err
	}
	return p, nil
}

// ListShards implements coord.Reader.
func (b *Backend) ListShards(ctx context.Context, now coord.Time, tenant coord.TenantID, run coord.RunID, filter coord.ShardFilter) ([]coord.Shard, error) {
	r, err := b.GetRun(ctx, tenant, run)
	if err != nil {
		return nil, err
	}
	out := []coord.Shard{}
	err = b.scanShards(ctx, &r, filter.After, func(s *coord.Shard) bool {
		if filter.Match(s, now) {
			out = append(out, *s)
		}
		return filter.Limit <= 0 || len(out) < filter.Limit
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// errStopScan ends a scan early without an error.
var errStopScan = errors.New("stop scan")

// scanShards calls fn for the run's shards with ids above after, in id
// order, until fn returns false.
func (b *Backend) scanShards(ctx context.Context, run *coord.Run, after coord.ShardID, fn func(*coord.Shard) bool) error {
	p := b.k.shardPrefix(run.ID)
	from := p
	if after != 0 {
		from = b.k.shard(run.ID, after) + "\x00"
	}
	_, err := b.scan(ctx, 0, from, prefixEnd(p), nil, func(key string, val []byte) error {
		_, id, err := b.k.parseShardKey(key)
		if err != nil {
			return err
		}
		s, err := decodeShard(rec{key: key, rev: 1, val: val}, run, id)
		if err != nil {
			return err
		}
		if !fn(&s) {
			return errStopScan
		}
		return nil
	})
	if errors.Is(err, errStopScan) {
		return nil
	}
	return err
}
