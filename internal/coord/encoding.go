package coord

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Encoding: a record is a 2-byte magic ("gR" for runs, "gS" for shards), a
// version byte (1), then its fields in a fixed order. Integers are varints
// (unsigned for ids and counters, signed for times); byte strings are a
// uvarint length followed by the bytes; the tenant is 32 raw bytes. Decoding
// rejects unknown versions, truncation, trailing bytes and records that fail
// Validate, and never allocates more than the input could describe.

const encodingVersion = 1

// runSummaryVersion is the run encoding that appends Run.Summary (five
// uvarints) after the op log. Runs without a summary are still written as
// version 1, so a reader that predates summaries reads every run that is
// not terminal.
const runSummaryVersion = 2

var (
	runMagic   = [2]byte{'g', 'R'}
	shardMagic = [2]byte{'g', 'S'}
)

type encoder struct{ b []byte }

func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) byte1(v byte)     { e.b = append(e.b, v) }
func (e *encoder) bytes(v []byte)   { e.uvarint(uint64(len(v))); e.b = append(e.b, v...) }
func (e *encoder) ops(ops []OpRecord) {
	e.uvarint(uint64(len(ops)))
	for _, op := range ops {
		e.uvarint(uint64(op.ID))
		e.b = append(e.b, op.Hash[:]...)
		e.uvarint(op.Result)
	}
}

var errTruncated = errors.New("truncated")

// decoder reads fields with a sticky error, so callers check once at the end.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errTruncated)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errTruncated)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) raw(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail(errTruncated)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte1() byte {
	if b := d.raw(1); b != nil {
		return b[0]
	}
	return 0
}

// bytes returns a copy of a length-prefixed string, nil when empty.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail(errTruncated)
		return nil
	}
	return cloneBytes(nilIfEmpty(d.raw(int(n))))
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

func (d *decoder) ops(max int) []OpRecord {
	n := d.uvarint()
	if n > uint64(max) {
		d.fail(fmt.Errorf("op log has %d entries, max %d", n, max))
		return nil
	}
	if n == 0 {
		return nil
	}
	ops := make([]OpRecord, n)
	for i := range ops {
		ops[i].ID = OpID(d.uvarint())
		copy(ops[i].Hash[:], d.raw(len(ops[i].Hash)))
		ops[i].Result = d.uvarint()
	}
	return ops
}

// header checks the magic and returns the version, which must be at most
// maxVersion.
func (d *decoder) header(magic [2]byte, maxVersion byte) byte {
	h := d.raw(3)
	if d.err != nil {
		return 0
	}
	if h[0] != magic[0] || h[1] != magic[1] {
		d.fail(errors.New("bad magic"))
	} else if h[2] < encodingVersion || h[2] > maxVersion {
		d.fail(fmt.Errorf("unsupported version %d", h[2]))
	}
	return h[2]
}

func (d *decoder) uint32(what string) uint32 {
	v := d.uvarint()
	if v > 1<<32-1 {
		d.fail(fmt.Errorf("%s overflows", what))
	}
	return uint32(v)
}

func (d *decoder) finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Errorf("%d trailing bytes", len(d.b)))
	}
	if d.err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, d.err)
	}
	return nil
}

// MarshalBinary encodes the run. It fails if the record is invalid, so that an
// invalid record is never stored.
func (r *Run) MarshalBinary() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	e := encoder{b: make([]byte, 0, 96+len(r.FailReason)+len(r.Ops)*44)}
	version := byte(encodingVersion)
	if r.Summary != (RunSummary{}) {
		version = runSummaryVersion
	}
	e.b = append(e.b, runMagic[0], runMagic[1], version)
	e.b = append(e.b, r.Tenant[:]...)
	e.uvarint(uint64(r.ID))
	e.byte1(byte(r.State))
	e.uvarint(uint64(r.Config.LeaseDuration))
	e.byte1(byte(r.Config.Cursor))
	e.uvarint(uint64(r.Config.MaxRetries))
	e.varint(int64(r.CreatedAt))
	e.varint(int64(r.UpdatedAt))
	e.varint(int64(r.CompletedAt))
	e.uvarint(uint64(r.RootShards))
	e.bytes([]byte(r.FailReason))
	e.ops(r.Ops)
	if version == runSummaryVersion {
		m := r.Summary
		for _, v := range []uint32{m.Total, m.Active, m.Done, m.Split, m.Parked} {
			e.uvarint(uint64(v))
		}
	}
	return e.b, nil
}

// UnmarshalBinary decodes a run encoded by MarshalBinary and validates it.
func (r *Run) UnmarshalBinary(data []byte) error {
	d := decoder{b: data}
	var n Run
	version := d.header(runMagic, runSummaryVersion)
	copy(n.Tenant[:], d.raw(len(n.Tenant)))
	n.ID = RunID(d.uvarint())
	n.State = RunState(d.byte1())
	lease := d.uvarint()
	if lease > uint64(1<<62) {
		d.fail(errors.New("lease duration overflows"))
	}
	n.Config.LeaseDuration = time.Duration(lease)
	n.Config.Cursor = CursorMode(d.byte1())
	retries := d.uvarint()
	if retries > 1<<32-1 {
		d.fail(errors.New("max retries overflows"))
	}
	n.Config.MaxRetries = uint32(retries)
	n.CreatedAt = Time(d.varint())
	n.UpdatedAt = Time(d.varint())
	n.CompletedAt = Time(d.varint())
	roots := d.uvarint()
	if roots > 1<<32-1 {
		d.fail(errors.New("root shard count overflows"))
	}
	n.RootShards = uint32(roots)
	n.FailReason = string(d.bytes())
	n.Ops = d.ops(MaxRunOps)
	if version == runSummaryVersion {
		m := &n.Summary
		m.Total, m.Active, m.Done = d.uint32("summary"), d.uint32("summary"), d.uint32("summary")
		m.Split, m.Parked = d.uint32("summary"), d.uint32("summary")
		if *m == (RunSummary{}) {
			d.fail(errors.New("version 2 run without a summary"))
		}
	}
	if err := d.finish(); err != nil {
		return err
	}
	if err := n.Validate(); err != nil {
		return err
	}
	*r = n
	return nil
}

// MarshalBinary encodes the shard. It fails if the record is invalid, so that
// an invalid record is never stored.
func (s *Shard) MarshalBinary() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	size := 128 + len(s.Start) + len(s.End) + len(s.Metadata) + len(s.Cursor.Key) +
		len(s.Cursor.Token) + len(s.ParkReason) + len(s.Children)*10 + len(s.Ops)*44
	e := encoder{b: make([]byte, 0, size)}
	e.b = append(e.b, shardMagic[0], shardMagic[1], encodingVersion)
	e.b = append(e.b, s.Tenant[:]...)
	e.uvarint(uint64(s.Run))
	e.uvarint(uint64(s.ID))
	e.uvarint(uint64(s.Parent))
	e.bytes(s.Start)
	e.bytes(s.End)
	e.bytes(s.Metadata)
	e.byte1(byte(s.State))
	hasKey := byte(0)
	if s.Cursor.HasKey {
		hasKey = 1
	}
	e.byte1(hasKey)
	e.bytes(s.Cursor.Key)
	e.bytes(s.Cursor.Token)
	e.uvarint(s.Fence)
	e.uvarint(uint64(s.Owner))
	e.varint(int64(s.Deadline))
	e.uvarint(uint64(s.Attempts))
	e.bytes([]byte(s.ParkReason))
	e.uvarint(uint64(len(s.Children)))
	for _, c := range s.Children {
		e.uvarint(uint64(c))
	}
	e.varint(int64(s.CreatedAt))
	e.varint(int64(s.UpdatedAt))
	e.ops(s.Ops)
	return e.b, nil
}

// UnmarshalBinary decodes a shard encoded by MarshalBinary and validates it.
func (s *Shard) UnmarshalBinary(data []byte) error {
	d := decoder{b: data}
	var n Shard
	d.header(shardMagic, encodingVersion)
	copy(n.Tenant[:], d.raw(len(n.Tenant)))
	n.Run = RunID(d.uvarint())
	n.ID = ShardID(d.uvarint())
	n.Parent = ShardID(d.uvarint())
	n.Start = d.bytes()
	n.End = d.bytes()
	n.Metadata = d.bytes()
	n.State = ShardState(d.byte1())
	switch d.byte1() {
	case 0:
	case 1:
		n.Cursor.HasKey = true
	default:
		d.fail(errors.New("bad cursor flag"))
	}
	n.Cursor.Key = d.bytes()
	n.Cursor.Token = d.bytes()
	n.Fence = d.uvarint()
	n.Owner = WorkerID(d.uvarint())
	n.Deadline = Time(d.varint())
	attempts := d.uvarint()
	if attempts > 1<<32-1 {
		d.fail(errors.New("attempts overflow"))
	}
	n.Attempts = uint32(attempts)
	n.ParkReason = string(d.bytes())
	// Each child id takes at least one byte, which bounds the allocation.
	if nc := d.uvarint(); nc > uint64(len(d.b)) {
		d.fail(errTruncated)
	} else if nc > 0 {
		n.Children = make([]ShardID, nc)
		for i := range n.Children {
			n.Children[i] = ShardID(d.uvarint())
		}
	}
	n.CreatedAt = Time(d.varint())
	n.UpdatedAt = Time(d.varint())
	n.Ops = d.ops(MaxShardOps)
	if err := d.finish(); err != nil {
		return err
	}
	if err := n.Validate(); err != nil {
		return err
	}
	*s = n
	return nil
}
