package etcdcoord

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ghost-scm/ghost/internal/coord"
)

// MaxRegisterChunk bounds the shards one transaction of RegisterShards
// writes, whatever the server's limits allow: a transaction of megabytes is
// one raft entry fsynced at once, and on a slow disk it outlives etcd's
// request timeout (issue 9; docs/adr/0022-etcd-coordination-backend.md).
const MaxRegisterChunk = 256

// RegisterShards implements coord.Admin.
//
// A manifest that fits in one bounded transaction (at most
// MaxRegisterChunk shards within Config.MaxTxnOps and MaxTxnBytes) is
// written at once: the run turns Active together with its shards, index
// entries and counters. A larger one is written in chunks while the run
// stays Initializing, so no worker can acquire or claim any of its shards
// (both need an Active run) until the last transaction turns the run
// Active. Each chunk checks and moves the counters for its own shards, and
// compares the run record and the registration key
// <ns>/registrations/<run>, which records the op, the manifest's hash and
// how many shards are written. A chunk refused by a cap rolls back what the
// registration wrote, in one transaction, and reports the cap for the whole
// manifest. A registration interrupted by a crash or a timeout resumes
// where it stopped when the caller retries with the same op id; a
// RegisterShards with another op id is refused with
// coord.ErrRunNotInitializing until then, and CancelRun removes the
// partial registration like any other shards of the run.
func (b *Backend) RegisterShards(ctx context.Context, now coord.Time, req coord.RegisterShardsRequest) (coord.Run, error) {
	var out coord.Run
	for {
		finished := false
		err := b.mutate(ctx, "register shards", func(ctx context.Context) (*txn, error) {
			t, run, done, err := b.registerStep(ctx, now, req)
			out, finished = run, done
			return t, err
		})
		if err != nil {
			return coord.Run{}, err
		}
		if finished {
			return out, nil
		}
	}
}

// registration is the value of a registration key: the op, the payload
// hash, and how many shards of the manifest are written.
type registration struct {
	op      coord.OpID
	hash    coord.Digest
	written uint64
}

func (r registration) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(r.op))
	b = append(b, r.hash[:]...)
	return binary.BigEndian.AppendUint64(b, r.written)
}

func decodeRegistration(key string, v []byte) (registration, error) {
	var r registration
	if len(v) != 8+len(r.hash)+8 {
		return r, fmt.Errorf("%w: %s: bad value %x", coord.ErrCorrupt, key, v)
	}
	r.op = coord.OpID(binary.BigEndian.Uint64(v))
	copy(r.hash[:], v[8:])
	r.written = binary.BigEndian.Uint64(v[8+len(r.hash):])
	return r, nil
}

// registerStep reads the run, the counters and the registration key and
// returns the next transaction: the whole registration, the next chunk, the
// final switch to Active, or a rollback. last reports that the committed
// transaction ends the registration (or that there is nothing to write).
func (b *Backend) registerStep(ctx context.Context, now coord.Time, req coord.RegisterShardsRequest) (t *txn, out coord.Run, last bool, err error) {
	rs, err := b.read(ctx, append([]string{b.k.run(req.Run), b.k.registration(req.Run)}, b.counterKeys(req.Tenant)...)...)
	if err != nil {
		return nil, coord.Run{}, true, err
	}
	runRec, regRec, ctrs := rs[0], rs[1], rs[2:]
	run, err := decodeRun(runRec, req.Tenant, req.Run)
	if err != nil {
		return nil, coord.Run{}, true, err
	}
	tr, err := run.ApplyRegisterShards(req, now, b.lim)
	if err != nil || !tr.Changed {
		return nil, tr.Run, true, err
	}
	n, shards := tr.Run, tr.Created
	var reg registration
	if regRec.exists() {
		if reg, err = decodeRegistration(regRec.key, regRec.val); err != nil {
			return nil, run, true, err
		}
		switch {
		case reg.op != req.Op:
			return nil, run, true, fmt.Errorf("%w: run %d: a registration by op %d is in progress; retry it or cancel the run",
				coord.ErrRunNotInitializing, req.Run, reg.op)
		case reg.hash != req.PayloadHash():
			return nil, run, true, fmt.Errorf("%w: op %d", coord.ErrOpConflict, req.Op)
		case reg.written > uint64(len(shards)):
			return nil, run, true, fmt.Errorf("%w: %s: %d shards written of %d", coord.ErrCorrupt, regRec.key, reg.written, len(shards))
		}
	}
	chunk, err := b.chunk(shards[reg.written:])
	if err != nil {
		return nil, run, true, err
	}
	t = &txn{}
	if !regRec.exists() && chunk == len(shards) {
		// Small enough for one transaction.
		if err := b.reserve(ctx, t, ctrs, int64(len(shards))); err != nil {
			return nil, run, true, err
		}
		if err := b.putRun(t, runRec, &run, &n); err != nil {
			return nil, run, true, err
		}
		t.guard(regRec)
		return t, n, true, b.putRoots(t, req.Run, shards)
	}
	if reg.written == uint64(len(shards)) {
		// Every chunk is in: the run turns Active and claimable.
		if err := b.putRun(t, runRec, &run, &n); err != nil {
			return nil, run, true, err
		}
		t.guard(regRec)
		t.del(regRec.key)
		return t, n, true, nil
	}
	// The caps are checked for the whole rest of the manifest first, so
	// that a registration that cannot fit fails before writing more, and
	// reports the cap for the whole manifest.
	part := shards[reg.written : reg.written+uint64(chunk)]
	err = b.checkRest(ctx, ctrs, int64(reg.written), int64(len(shards)))
	if err == nil {
		err = b.reserve(ctx, t, ctrs, int64(len(part)))
	}
	switch {
	case errors.Is(err, coord.ErrShardLimitExceeded):
		return b.rollback(&txn{}, runRec, regRec, ctrs, req.Run, reg.written, err)
	case err != nil:
		return nil, run, true, err
	}
	t.guard(runRec)
	t.guard(regRec)
	reg = registration{op: req.Op, hash: req.PayloadHash(), written: reg.written + uint64(len(part))}
	t.put(regRec.key, reg.encode())
	return t, run, false, b.putRoots(t, req.Run, part)
}

// checkRest checks the caps for the manifest's total of shards, of which
// written are already counted.
func (b *Backend) checkRest(ctx context.Context, ctrs []rec, written, total int64) error {
	tc, err := count(ctrs[0])
	if err != nil {
		return err
	}
	var gc int64
	if b.mode == GlobalCapStrict {
		if gc, err = count(ctrs[1]); err != nil {
			return err
		}
	} else if gc, err = b.advisoryGlobal(ctx); err != nil {
		return err
	}
	return b.lim.CheckShardCaps(tc-written, gc-written, total)
}

// rollback returns the transaction that removes what a refused chunked
// registration wrote (its shards, their index entries and counts, and the
// registration key), and the refusal it reports once that commits.
func (b *Backend) rollback(t *txn, runRec, regRec rec, ctrs []rec, run coord.RunID, written uint64, refusal error) (*txn, coord.Run, bool, error) {
	if !regRec.exists() {
		return nil, coord.Run{}, true, refusal
	}
	if written > 0 {
		if err := b.release(t, ctrs, int64(written)); err != nil {
			return nil, coord.Run{}, true, err
		}
	}
	t.guard(runRec)
	t.guard(regRec)
	t.del(regRec.key)
	t.delPrefix(b.k.shardPrefix(run))
	t.delPrefix(b.k.openPrefix(run))
	t.after = refusal
	return t, coord.Run{}, true, nil
}

// chunk returns how many of shards, from the first, the next transaction
// carries: at most MaxRegisterChunk, within the transaction limits with
// room for the run, the registration key and the counters.
func (b *Backend) chunk(shards []coord.Shard) (int, error) {
	// Besides its shards (two operations each), a chunk writes the two
	// counters and the registration key and compares those and the run;
	// the last chunk of a one-transaction registration writes the run.
	const overhead = 6
	budget := b.maxBytes - 4<<10
	n := 0
	for n < len(shards) && n < MaxRegisterChunk && 2*(n+1)+overhead <= b.maxOps {
		v, err := shards[n].MarshalBinary()
		if err != nil {
			return 0, fmt.Errorf("etcdcoord: refusing to store: %w", err)
		}
		size := len(v) + 2*len(b.k.shard(shards[n].Run, shards[n].ID)) + 64
		if size > budget {
			break
		}
		budget -= size
		n++
	}
	if n == 0 && len(shards) > 0 {
		if 2+overhead > b.maxOps {
			return 0, &coord.LimitError{Limit: LimitTxnOps, Value: 2 + overhead, Max: int64(b.maxOps)}
		}
		v, _ := shards[0].MarshalBinary()
		return 0, &coord.LimitError{Limit: LimitTxnBytes, Value: int64(len(v)), Max: int64(b.maxBytes)}
	}
	return n, nil
}

// putRoots adds the records and open index entries of new root shards.
// Their keys need no compare: shards of a run exist only once its
// registration has begun, which the caller's transaction compares.
func (b *Backend) putRoots(t *txn, run coord.RunID, shards []coord.Shard) error {
	for i := range shards {
		v, err := shards[i].MarshalBinary()
		if err != nil {
			return fmt.Errorf("etcdcoord: refusing to store: %w", err)
		}
		t.putRecord(b.k.shard(run, shards[i].ID), v)
		t.put(b.k.open(run, shards[i].ID), openValue(&shards[i]))
	}
	return nil
}
