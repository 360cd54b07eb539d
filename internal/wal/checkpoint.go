package wal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// ErrAlreadyCompacted means another compaction changed the checkpoints
// this one was built on: it folded the log through the seq this one
// meant to cover, or further, or it replaced a checkpoint this one keeps
// (docs/adr/0051-geometric-checkpoints.md). Nothing is wrong and nothing
// was written to the index; the caller's checkpoint object, if it
// differs from the ones the index names, is garbage for GC, and the next
// compaction starts from the new index.
var ErrAlreadyCompacted = errors.New("log already compacted through that seq")

// MaxCheckpointWait bounds how long after its pack was stored a
// compaction may still send the index write that references it. Garbage
// collection deletes a checkpoint no index names once it has seen it
// unreferenced for its grace period, at least an hour
// (docs/adr/0040-garbage-collection.md); a compaction slower than that
// between its PUT and its CAS could otherwise land a reference to a
// deleted object. The margin to an hour covers the PUT's response and
// the index write's own request.
const MaxCheckpointWait = 30 * time.Minute

// ErrCheckpointStale means a compaction gave up because more than
// MaxCheckpointWait passed since its checkpoint was stored: nothing was
// written to the index, and the checkpoint is garbage for GC.
var ErrCheckpointStale = errors.New("checkpoint stored too long ago to be referenced")

// errFolded is the cause reported when a pending index write's seq was
// folded into a checkpoint before its outcome could be read
// (docs/adr/0050-compaction.md).
var errFolded = errors.New("the seq of an unanswered write was folded into a checkpoint before it could be read back")

func checkpointsPrefix(repo string) string { return "repos/" + repo + "/checkpoints/" }

// checkpointBase names a checkpoint by what it covers and what it holds:
// the seq, zero-padded so keys list in seq order, and the pack's sha256.
// Two compactors that build the same pack at the same seq write the same
// key with the same bytes.
func checkpointBase(repo string, c Checkpoint) string {
	return fmt.Sprintf("%s%020d-%s", checkpointsPrefix(repo), c.Seq, hex.EncodeToString(c.SHA256[:]))
}

// CheckpointKey is the key of a checkpoint's pack: a plain git pack, no
// header (the index holds its seq, size and sha256).
func CheckpointKey(repo string, c Checkpoint) string { return checkpointBase(repo, c) + ".pack" }

// CheckpointIndexKey is the key of git's .idx for a checkpoint's pack. Like
// an entry's stored pack index (docs/design.md §3.4) it is derived and
// optional: readers check it against the pack and fall back to indexing.
func CheckpointIndexKey(repo string, c Checkpoint) string { return checkpointBase(repo, c) + ".idx" }

// CheckpointKeys returns the keys of the objects the index's checkpoints
// need, oldest first (none when it has none). Garbage collection must
// count them as referenced (docs/adr/0050-compaction.md).
func (x *Index) CheckpointKeys(repo string) []string {
	if x == nil || x.Deleted {
		return nil
	}
	keys := make([]string, 0, 2*len(x.Checkpoints))
	for _, c := range x.Checkpoints {
		keys = append(keys, CheckpointKey(repo, c), CheckpointIndexKey(repo, c))
	}
	return keys
}

// CheckpointPack is what a compactor built, and its git .idx: a pack
// that replaces At's checkpoints after the first Keep, and every layer
// of At (docs/adr/0051-geometric-checkpoints.md).
type CheckpointPack struct {
	// At is the index the pack was built from; the checkpoint covers
	// through At.Seq.
	At *Index
	// Keep is how many of At's checkpoints, oldest first, stay in front
	// of the new one, which covers the seqs after the last of them. 0 is
	// a full repack: the new checkpoint stands for the whole log through
	// At.Seq. With Keep > 0 the pack must hold every object of At's
	// checkpoints after the first Keep and of At's layers.
	Keep int
	// Pack is streamed into the store once; Size and SHA256 must describe
	// it exactly (they name the object, and are checked while it streams).
	Pack   io.Reader
	Size   int64
	SHA256 [32]byte
	// PackIndex, when set, is git's .idx for Pack (PackIndexSize bytes).
	PackIndex     io.Reader
	PackIndexSize int64
}

// CompactResult describes a compaction that landed.
type CompactResult struct {
	Checkpoint Checkpoint
	// Folded is how many layers the checkpoint replaced in the index.
	Folded int
	// Replaced is how many checkpoints it replaced (rolled up, or
	// superseded by a full repack).
	Replaced int
	// Seq is the index's seq when the compaction landed (pushes may have
	// appended layers after At.Seq meanwhile).
	Seq      uint64
	Attempts int
}

// Compact stores a checkpoint and then replaces the layers and the
// checkpoints it covers in the index (docs/design.md §3.8):
//
//  1. PUT the pack, then the .idx, under names derived from the seq and
//     the pack's sha256. They are immutable and unreferenced until step 2,
//     so the PUTs need no condition; a failed or ambiguous PUT ends the
//     compaction, and whatever landed is garbage for GC.
//  2. Run the index CAS loop: on the current index, drop the layers with
//     seq <= At.Seq and the checkpoints after the first p.Keep, append
//     the new checkpoint and set CompactedThroughSeq. Pushes only append,
//     so when one lands in between, the retry keeps its layers (they are
//     above At.Seq) and the result stays valid.
//
// It never deletes anything: the checkpoint's name may be shared with a
// racing compactor that built the same bytes, and the folded entries and
// replaced checkpoints are left to GC. Errors: ErrAlreadyCompacted when
// the log is already compacted through At.Seq, or a checkpoint this one
// keeps was replaced (another compactor won; harmless),
// ErrCheckpointStale when the index write would be sent more than
// MaxCheckpointWait after the pack was stored (GC may take it by then),
// ErrRepoDeleted, ErrContention, a *CorruptError when At's layers are not
// the log's, and ErrOutcomeUnknown when the index
// write's outcome could not be learned; a re-read of the index tells
// (docs/adr/0006-write-outcomes.md). Compact never blocks a push: it holds
// no lock, and a push that races it only makes its CAS retry.
func (l *Log) Compact(ctx context.Context, repo string, p CheckpointPack) (CompactResult, error) {
	if err := CheckRepoID(repo); err != nil {
		return CompactResult{}, err
	}
	at := p.At
	switch {
	case at == nil || at.Deleted:
		return CompactResult{}, invalid("compact %s: no live index to compact", repo)
	case at.Seq <= at.CompactedThroughSeq:
		return CompactResult{}, fmt.Errorf("%s at seq %d: %w", repo, at.Seq, ErrAlreadyCompacted)
	case p.Size < 0:
		return CompactResult{}, invalid("negative checkpoint size %d", p.Size)
	case p.Keep < 0 || p.Keep > len(at.Checkpoints) || p.Keep >= MaxCheckpoints:
		return CompactResult{}, invalid("keep %d of %d checkpoints (at most %d in all)", p.Keep, len(at.Checkpoints), MaxCheckpoints)
	}
	ck := Checkpoint{Seq: at.Seq, SHA256: p.SHA256, Size: p.Size, Newest: newest(at, p.Keep)}
	key := CheckpointKey(repo, ck)
	v := &verifyReader{rc: io.NopCloser(p.Pack), key: key, want: p.SHA256, size: p.Size, sum: sha256.New()}
	if _, err := l.store.Put(ctx, key, v, p.Size); err != nil {
		return CompactResult{}, fmt.Errorf("put checkpoint %s: %w", key, err)
	}
	// Measured from the PUT's return, on this node's clock alone: GC can
	// see the object only once it is stored.
	stored := l.opts.Now()
	if v.n != p.Size || !bytes.Equal(v.sum.Sum(nil), p.SHA256[:]) {
		// The bytes sent are not the ones named; never reference them.
		return CompactResult{}, invalid("checkpoint %s: pack changed while it was stored (%d bytes sent)", key, v.n)
	}
	if p.PackIndex != nil {
		if _, err := l.store.Put(ctx, CheckpointIndexKey(repo, ck), p.PackIndex, p.PackIndexSize); err != nil {
			return CompactResult{}, fmt.Errorf("put checkpoint index of %s: %w", key, err)
		}
	}
	var folded, replaced int
	next := func(cur *Index) (*Index, error) {
		// Every index write is built here just before it is sent.
		if waited := l.opts.Now().Sub(stored); waited > MaxCheckpointWait {
			return nil, fmt.Errorf("%s stored %v ago: %w", key, waited, ErrCheckpointStale)
		}
		nx, n, err := fold(repo, cur, at, ck, p.Keep)
		if err == nil {
			folded, replaced = n, len(cur.Checkpoints)-p.Keep
		}
		return nx, err
	}
	landed := func(x *Index) bool { return slices.Contains(x.Checkpoints, ck) }
	res, _, err := l.casLoopFunc(ctx, repo, next, ulid.ULID{}, landed)
	out := CompactResult{Checkpoint: ck, Folded: folded, Replaced: replaced, Seq: res.Seq, Attempts: res.Attempts}
	if err != nil {
		return out, fmt.Errorf("compact %s through seq %d: %w", repo, ck.Seq, err)
	}
	return out, nil
}

// newest is the Newest of a checkpoint built from at that keeps at's
// first keep checkpoints.
func newest(at *Index, keep int) int64 {
	var n int64
	for _, c := range at.Checkpoints[keep:] {
		n = max(n, c.Newest)
	}
	for _, l := range at.Layers {
		n = max(n, int64(l.ULID.Time()))
	}
	return n
}

// fold builds the index that replaces cur's layers through ck.Seq, and
// its checkpoints after the first keep, by ck. at is the index the
// checkpoint was built from: every layer both list must be the same
// entry, or the log is not the one the checkpoint was built from (which
// append-only logs rule out; the check keeps a bug from folding layers
// the checkpoint does not hold). The checkpoints ck follows must still
// be cur's first ones; those after them in cur end at or before ck.Seq
// and cover only seqs whose layers ck was built from, or checkpoints it
// rolled up, so ck stands for them too.
func fold(repo string, cur, at *Index, ck Checkpoint, keep int) (*Index, int, error) {
	if cur.CompactedThroughSeq >= ck.Seq {
		return nil, 0, fmt.Errorf("compacted through %d, at or past %d: %w", cur.CompactedThroughSeq, ck.Seq, ErrAlreadyCompacted)
	}
	if cur.Seq < ck.Seq {
		return nil, 0, corrupt(IndexKey(repo), "index at seq %d is behind the checkpoint's seq %d", cur.Seq, ck.Seq)
	}
	if len(cur.Checkpoints) < keep || !slices.Equal(cur.Checkpoints[:keep], at.Checkpoints[:keep]) {
		return nil, 0, fmt.Errorf("a checkpoint this one follows was replaced meanwhile: %w", ErrAlreadyCompacted)
	}
	for seq := max(cur.CompactedThroughSeq, at.CompactedThroughSeq) + 1; seq <= ck.Seq; seq++ {
		a := at.Layers[seq-at.CompactedThroughSeq-1].ULID
		c := cur.Layers[seq-cur.CompactedThroughSeq-1].ULID
		if a != c {
			return nil, 0, corrupt(IndexKey(repo), "layer at seq %d is %s, the checkpoint was built with %s", seq, c, a)
		}
	}
	n := int(ck.Seq - cur.CompactedThroughSeq)
	nx := &Index{
		Seq:                 cur.Seq,
		CompactedThroughSeq: ck.Seq,
		Checkpoints:         append(slices.Clone(cur.Checkpoints[:keep]), ck),
		Refs:                cur.Refs,
		Layers:              slices.Clone(cur.Layers[n:]),
	}
	return nx, n, nil
}

// OpenCheckpoint streams a checkpoint's pack. The reader verifies the
// pack's size and sha256 against the index's record and fails with a
// *CorruptError at the end if they differ; a missing checkpoint is
// corrupt too, since the index references it.
func (l *Log) OpenCheckpoint(ctx context.Context, repo string, c Checkpoint) (io.ReadCloser, error) {
	key := CheckpointKey(repo, c)
	rc, _, err := l.store.Get(ctx, key)
	if err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return nil, corrupt(key, "checkpoint referenced by the index is missing")
		}
		return nil, fmt.Errorf("open checkpoint %s: %w", key, err)
	}
	return &verifyReader{rc: rc, key: key, want: c.SHA256, size: c.Size, sum: sha256.New()}, nil
}

// CheckpointObjects returns how many objects a checkpoint's pack holds:
// the last entry of the fanout table of the .idx stored beside it, read
// with one ranged GET of its first 1,032 bytes. Compaction weighs
// checkpoints by object count, as `git repack --geometric` weighs packs
// (docs/adr/0121-checkpoints-weighed-by-objects.md). An error matching
// objstore.ErrNotFound when the checkpoint has no .idx; a *CorruptError
// when what is stored is no version 2 pack index.
func (l *Log) CheckpointObjects(ctx context.Context, repo string, c Checkpoint) (int64, error) {
	key := CheckpointIndexKey(repo, c)
	rc, err := l.store.GetRange(ctx, key, 0, idxHeaderLen)
	if err != nil {
		return 0, fmt.Errorf("checkpoint index %d: %w", c.Seq, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, idxHeaderLen))
	if err != nil {
		return 0, fmt.Errorf("checkpoint index %d: %w", c.Seq, err)
	}
	return idxObjects(key, b)
}

// idxHeaderLen is the length of a version 2 pack index's header and
// fanout table: the magic, the version and 256 big-endian counts.
const idxHeaderLen = 8 + 256*4

// idxObjects reads the object count from the start of a version 2 pack
// index: the fanout's last entry, the number of objects whose first byte
// is at most 0xff.
func idxObjects(key string, b []byte) (int64, error) {
	if len(b) < idxHeaderLen || !bytes.Equal(b[:8], []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}) {
		return 0, corrupt(key, "not a version 2 pack index")
	}
	var prev uint32
	for i := range 256 {
		n := binary.BigEndian.Uint32(b[8+4*i:])
		if n < prev {
			return 0, corrupt(key, "pack index fanout decreases")
		}
		prev = n
	}
	return int64(prev), nil
}

// OpenCheckpointIndex opens the .idx stored beside a checkpoint; an error
// matching objstore.ErrNotFound when there is none.
func (l *Log) OpenCheckpointIndex(ctx context.Context, repo string, c Checkpoint) (io.ReadCloser, error) {
	rc, _, err := l.store.Get(ctx, CheckpointIndexKey(repo, c))
	if err != nil {
		return nil, fmt.Errorf("checkpoint index %d: %w", c.Seq, err)
	}
	return rc, nil
}
