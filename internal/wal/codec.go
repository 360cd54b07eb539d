package wal

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/ids"
)

// Wire-format constants. Both records are big-endian, length-prefixed and
// end in a CRC-32C of everything before it, so a torn or bit-flipped object
// is reported as corrupt rather than misread.
const (
	indexMagic = "GHOSTIDX"
	entryMagic = "GHOSTENT"
	formatV1   = 1
	// Index flags. flagCheckpoint was added with compaction
	// (docs/adr/0050-compaction.md): an index without it encodes exactly
	// as before, and a reader that predates it refuses one with it as
	// corrupt rather than misread it. flagCheckpoints was added with
	// geometric checkpoints (docs/adr/0051-geometric-checkpoints.md) the
	// same way: an index with exactly one checkpoint still encodes under
	// flagCheckpoint, byte for byte as before, and only a list of two or
	// more sets the new bit.
	flagDeleted     = 1 << 0
	flagCheckpoint  = 1 << 1
	flagCheckpoints = 1 << 2
	// checkpointSize is the encoded size of one checkpoint record.
	checkpointSize = 8 + 32 + 8 + 8
	maxRefName     = ids.MaxRefNameLen
	maxRefs        = 1 << 20
	maxLayers      = 1 << 22
	maxPushedBy    = 256
	// MaxEntryHeader bounds an entry header; larger ones are corrupt.
	MaxEntryHeader = 64 << 20
	// MaxIndexSize bounds what ReadIndex will load.
	MaxIndexSize = 512 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ZeroID is git's all-zero object id, meaning "absent" in a transition.
const ZeroID = "0000000000000000000000000000000000000000"

// Ref is one entry of a ref snapshot.
type Ref struct {
	Name string
	ID   string // lowercase hex object id (40 or 64 digits)
}

// Layer is one committed entry, in log order.
type Layer struct {
	ULID   ulid.ULID
	SHA256 [32]byte // of the pack that follows the entry header
	Size   int64    // pack size in bytes
}

// Checkpoint is one self-contained pack that stands for the layers of a
// contiguous range of seqs, which ends at Seq and starts after the
// previous checkpoint of the index (at seq 1 for the first one)
// (docs/design.md §3.8). The first checkpoint of an index holds every
// object reachable from the refs at its Seq and the objects compaction's
// keep rules keep; every later one holds every object of every layer in
// its range (docs/adr/0051-geometric-checkpoints.md). It is immutable and
// named after what it covers (CheckpointKey), so two compactors that
// build the same bytes write the same object.
type Checkpoint struct {
	Seq    uint64   // the last seq it covers
	SHA256 [32]byte // of the pack
	Size   int64    // pack size in bytes
	// Newest is the newest ULID time (Unix milliseconds) of the layers the
	// checkpoint folded, those of the checkpoints it rolled up included. A
	// compactor keeps the unreachable objects of layers younger than a
	// grace period; Newest tells a later compactor whether this
	// checkpoint may still hold some (docs/adr/0050-compaction.md).
	Newest int64
}

// MaxCheckpoints bounds the checkpoints of one index. Compaction keeps
// them in a geometric progression by size, each at least twice the next
// (docs/adr/0051-geometric-checkpoints.md), so a log holds about log2 of
// its size over its smallest checkpoint's; 64 is far beyond that, and
// bounds what a decoder accepts.
const MaxCheckpoints = 64

// Index is the one mutable record of a repository: the head of its log.
// Layer i has seq CompactedThroughSeq + i + 1. A live index with
// CompactedThroughSeq > 0 carries the Checkpoints that replaced the
// layers through that seq, oldest first, each covering the seqs after
// its predecessor's through its own; the last one's Seq is
// CompactedThroughSeq. The folded layers are no longer listed, which
// keeps the index bounded however many pushes a repository has seen.
type Index struct {
	Seq                 uint64
	CompactedThroughSeq uint64
	Deleted             bool
	Checkpoints         []Checkpoint // non-empty exactly when live and CompactedThroughSeq > 0
	Refs                []Ref        // sorted by name, unique
	Layers              []Layer
}

// LastCheckpoint returns the newest checkpoint, or nil when the index has
// none.
func (x *Index) LastCheckpoint() *Checkpoint {
	if x == nil || len(x.Checkpoints) == 0 {
		return nil
	}
	return &x.Checkpoints[len(x.Checkpoints)-1]
}

// CheckpointStart returns the first seq that checkpoint i of the index
// covers: one past its predecessor's Seq, or 1.
func (x *Index) CheckpointStart(i int) uint64 {
	if i == 0 {
		return 1
	}
	return x.Checkpoints[i-1].Seq + 1
}

// Ref returns the id a ref points at, or "" when absent.
func (x *Index) Ref(name string) string {
	i, ok := slices.BinarySearchFunc(x.Refs, name, func(r Ref, n string) int { return strings.Compare(r.Name, n) })
	if !ok {
		return ""
	}
	return x.Refs[i].ID
}

// HasLayer reports whether the entry id is already in the log.
func (x *Index) HasLayer(id ulid.ULID) bool {
	for i := len(x.Layers) - 1; i >= 0; i-- {
		if x.Layers[i].ULID == id {
			return true
		}
	}
	return false
}

// Transition moves one ref from Old to New; ZeroID on either side means
// create or delete.
type Transition struct {
	Ref string
	Old string
	New string
}

// EntryHeader precedes the pack in an entry object.
type EntryHeader struct {
	ULID        ulid.ULID
	CreatedAt   time.Time // millisecond precision
	PushedBy    string
	Transitions []Transition
	// Len is the encoded header length: the pack starts at this offset.
	Len int64
}

type encoder struct{ bytes.Buffer }

func (e *encoder) u8(v uint8)   { e.WriteByte(v) }
func (e *encoder) u16(v uint16) { e.Write(binary.BigEndian.AppendUint16(nil, v)) }
func (e *encoder) u32(v uint32) { e.Write(binary.BigEndian.AppendUint32(nil, v)) }
func (e *encoder) u64(v uint64) { e.Write(binary.BigEndian.AppendUint64(nil, v)) }
func (e *encoder) str16(s string) {
	e.u16(uint16(len(s)))
	e.WriteString(s)
}
func (e *encoder) oid(id string) {
	raw, _ := hex.DecodeString(id) // validated by callers
	e.u8(uint8(len(raw)))
	e.Write(raw)
}
func (e *encoder) crc() { e.u32(crc32.Checksum(e.Bytes(), castagnoli)) }

// MarshalBinary encodes the index. Refs are written sorted so that equal
// states encode to equal bytes.
func (x *Index) MarshalBinary() ([]byte, error) {
	if err := x.validate(); err != nil {
		return nil, err
	}
	var e encoder
	e.WriteString(indexMagic)
	e.u16(formatV1)
	var flags uint8
	if x.Deleted {
		flags |= flagDeleted
	}
	switch n := len(x.Checkpoints); {
	case n == 1:
		flags |= flagCheckpoint
	case n > 1:
		flags |= flagCheckpoints
	}
	e.u8(flags)
	e.u64(x.Seq)
	e.u64(x.CompactedThroughSeq)
	if len(x.Checkpoints) > 1 {
		e.u32(uint32(len(x.Checkpoints)))
	}
	for _, c := range x.Checkpoints {
		e.u64(c.Seq)
		e.Write(c.SHA256[:])
		e.u64(uint64(c.Size))
		e.u64(uint64(c.Newest))
	}
	e.u32(uint32(len(x.Refs)))
	for _, r := range x.Refs {
		e.str16(r.Name)
		e.oid(r.ID)
	}
	e.u32(uint32(len(x.Layers)))
	for _, l := range x.Layers {
		e.Write(l.ULID[:])
		e.Write(l.SHA256[:])
		e.u64(uint64(l.Size))
	}
	e.crc()
	return e.Bytes(), nil
}

func (x *Index) validate() error {
	if len(x.Refs) > maxRefs || len(x.Layers) > maxLayers {
		return invalid("index too large: %d refs, %d layers", len(x.Refs), len(x.Layers))
	}
	for i, r := range x.Refs {
		if err := checkRefName(r.Name); err != nil {
			return err
		}
		if err := checkOID(r.ID); err != nil || r.ID == zeroOf(r.ID) {
			return invalid("ref %s: bad id %q", r.Name, r.ID)
		}
		if i > 0 && x.Refs[i-1].Name >= r.Name {
			return invalid("refs not sorted and unique at %s", r.Name)
		}
	}
	for _, l := range x.Layers {
		if l.Size < 0 {
			return invalid("layer %s: negative size", l.ULID)
		}
	}
	if x.Deleted && (len(x.Refs) > 0 || len(x.Layers) > 0 || len(x.Checkpoints) > 0) {
		return invalid("a tombstone carries no refs, layers or checkpoint")
	}
	if len(x.Checkpoints) > MaxCheckpoints {
		return invalid("%d checkpoints exceed %d", len(x.Checkpoints), MaxCheckpoints)
	}
	var prev uint64
	for _, c := range x.Checkpoints {
		// Each covers the seqs after its predecessor's through its own.
		if c.Seq <= prev || c.Size < 0 || c.Newest < 0 {
			return invalid("checkpoint at seq %d (size %d) after one at seq %d", c.Seq, c.Size, prev)
		}
		prev = c.Seq
	}
	if len(x.Checkpoints) > 0 && prev != x.CompactedThroughSeq {
		return invalid("last checkpoint at seq %d in an index compacted through %d", prev, x.CompactedThroughSeq)
	}
	if !x.Deleted && x.CompactedThroughSeq > 0 && len(x.Checkpoints) == 0 {
		// The layers through CompactedThroughSeq are gone from the index:
		// without a checkpoint nothing could materialize them.
		return invalid("compacted through seq %d without a checkpoint", x.CompactedThroughSeq)
	}
	return nil
}

type decoder struct {
	b    []byte
	what string
	err  error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = corrupt(d.what, format, args...)
	}
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("truncated: need %d bytes, have %d", n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() uint8 {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if v := d.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) str16(max int) string {
	n := int(d.u16())
	if n > max {
		d.fail("string of %d bytes exceeds %d", n, max)
		return ""
	}
	return string(d.take(n))
}

func (d *decoder) oid() string {
	n := int(d.u8())
	if n != 20 && n != 32 {
		d.fail("object id of %d bytes", n)
		return ""
	}
	return hex.EncodeToString(d.take(n))
}

// count reads a u32 element count and checks that the remaining bytes can
// hold that many elements of at least minSize bytes, so a lying count can
// never make the decoder allocate more than the input justifies.
func (d *decoder) count(max, minSize int) int {
	n := int(d.u32())
	if n > max || n*minSize > len(d.b) {
		d.fail("count %d exceeds what %d remaining bytes can hold", n, len(d.b))
		return 0
	}
	return n
}

// checkCRC verifies and strips the trailing CRC-32C.
func checkCRC(b []byte, what string) ([]byte, error) {
	if len(b) < 4 {
		return nil, corrupt(what, "too short for a checksum")
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, corrupt(what, "checksum mismatch")
	}
	return body, nil
}

// DecodeIndex parses an index. Every malformed input yields a
// *CorruptError; it never panics.
func DecodeIndex(b []byte, what string) (*Index, error) {
	body, err := checkCRC(b, what)
	if err != nil {
		return nil, err
	}
	d := &decoder{b: body, what: what}
	if string(d.take(len(indexMagic))) != indexMagic {
		return nil, corrupt(what, "bad magic")
	}
	if v := d.u16(); d.err == nil && v != formatV1 {
		return nil, corrupt(what, "unknown index version %d", v)
	}
	flags := d.u8()
	if flags&^(flagDeleted|flagCheckpoint|flagCheckpoints) != 0 {
		d.fail("unknown flags %#x", flags)
	}
	x := &Index{Deleted: flags&flagDeleted != 0, Seq: d.u64(), CompactedThroughSeq: d.u64()}
	nck := 0
	switch flags & (flagCheckpoint | flagCheckpoints) {
	case flagCheckpoint:
		nck = 1
	case flagCheckpoints:
		// One checkpoint is always written under flagCheckpoint, so that
		// equal states encode to equal bytes.
		if nck = d.count(MaxCheckpoints, checkpointSize); nck < 2 && d.err == nil {
			d.fail("a list of %d checkpoints", nck)
		}
	case flagCheckpoint | flagCheckpoints:
		d.fail("both checkpoint flags set")
	}
	for range nck {
		c := Checkpoint{Seq: d.u64()}
		copy(c.SHA256[:], d.take(32))
		c.Size = int64(d.u64())
		c.Newest = int64(d.u64())
		x.Checkpoints = append(x.Checkpoints, c)
	}
	nrefs := d.count(maxRefs, 2+1+20)
	for range nrefs {
		x.Refs = append(x.Refs, Ref{Name: d.str16(maxRefName), ID: d.oid()})
	}
	nlayers := d.count(maxLayers, 16+32+8)
	for range nlayers {
		var l Layer
		copy(l.ULID[:], d.take(16))
		copy(l.SHA256[:], d.take(32))
		l.Size = int64(d.u64())
		x.Layers = append(x.Layers, l)
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, corrupt(what, "%d trailing bytes", len(d.b))
	}
	if x.Seq < x.CompactedThroughSeq || x.Seq-x.CompactedThroughSeq != uint64(len(x.Layers)) && !x.Deleted {
		return nil, corrupt(what, "seq %d does not equal compacted %d + %d layers", x.Seq, x.CompactedThroughSeq, len(x.Layers))
	}
	if err := x.validate(); err != nil {
		return nil, corrupt(what, "%v", err)
	}
	return x, nil
}

// MarshalBinary encodes the entry header; Len is set to the encoded length.
func (h *EntryHeader) MarshalBinary() ([]byte, error) {
	if len(h.PushedBy) > maxPushedBy {
		return nil, invalid("pushed-by of %d bytes exceeds %d", len(h.PushedBy), maxPushedBy)
	}
	if err := checkTransitions(h.Transitions); err != nil {
		return nil, err
	}
	var e encoder
	e.WriteString(entryMagic)
	e.u16(formatV1)
	e.u32(0) // header length, patched below
	e.Write(h.ULID[:])
	e.u64(uint64(h.CreatedAt.UnixMilli()))
	e.str16(h.PushedBy)
	e.u32(uint32(len(h.Transitions)))
	for _, t := range h.Transitions {
		e.str16(t.Ref)
		e.oid(t.Old)
		e.oid(t.New)
	}
	b := e.Bytes()
	n := len(b) + 4
	if n > MaxEntryHeader {
		return nil, invalid("entry header of %d bytes exceeds %d", n, MaxEntryHeader)
	}
	binary.BigEndian.PutUint32(b[len(entryMagic)+2:], uint32(n))
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	h.Len = int64(n)
	return b, nil
}

// entryHeaderLen reads the header length from the fixed prefix; it needs
// the first 14 bytes.
func entryHeaderLen(prefix []byte, what string) (int64, error) {
	const fixed = len(entryMagic) + 2 + 4
	if len(prefix) < fixed {
		return 0, corrupt(what, "entry shorter than its fixed header")
	}
	if string(prefix[:len(entryMagic)]) != entryMagic {
		return 0, corrupt(what, "bad entry magic")
	}
	if v := binary.BigEndian.Uint16(prefix[len(entryMagic):]); v != formatV1 {
		return 0, corrupt(what, "unknown entry version %d", v)
	}
	n := int64(binary.BigEndian.Uint32(prefix[len(entryMagic)+2:]))
	if n < int64(fixed)+16+8+2+4+4 || n > MaxEntryHeader {
		return 0, corrupt(what, "entry header length %d out of range", n)
	}
	return n, nil
}

// DecodeEntryHeader parses a whole entry header (exactly Len bytes).
func DecodeEntryHeader(b []byte, what string) (*EntryHeader, error) {
	n, err := entryHeaderLen(b, what)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != n {
		return nil, corrupt(what, "header is %d bytes, says %d", len(b), n)
	}
	body, err := checkCRC(b, what)
	if err != nil {
		return nil, err
	}
	d := &decoder{b: body[len(entryMagic)+2+4:], what: what}
	h := &EntryHeader{Len: n}
	copy(h.ULID[:], d.take(16))
	h.CreatedAt = time.UnixMilli(int64(d.u64())).UTC()
	h.PushedBy = d.str16(maxPushedBy)
	nt := d.count(maxRefs, 2+1+20+1+20)
	for range nt {
		h.Transitions = append(h.Transitions, Transition{Ref: d.str16(maxRefName), Old: d.oid(), New: d.oid()})
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, corrupt(what, "%d trailing header bytes", len(d.b))
	}
	if err := checkTransitions(h.Transitions); err != nil {
		return nil, corrupt(what, "%v", err)
	}
	return h, nil
}

// checkTransitions validates a push's ref transitions: at least one, ref
// names well formed and unique, ids well formed, and no no-op.
func checkTransitions(ts []Transition) error {
	if len(ts) == 0 {
		return invalid("no ref transitions")
	}
	if len(ts) > maxRefs {
		return invalid("%d transitions exceed %d", len(ts), maxRefs)
	}
	seen := make(map[string]bool, len(ts))
	for _, t := range ts {
		if err := checkRefName(t.Ref); err != nil {
			return err
		}
		if seen[t.Ref] {
			return invalid("ref %s updated twice", t.Ref)
		}
		seen[t.Ref] = true
		if err := checkOID(t.Old); err != nil {
			return fmt.Errorf("ref %s old: %w", t.Ref, err)
		}
		if err := checkOID(t.New); err != nil {
			return fmt.Errorf("ref %s new: %w", t.Ref, err)
		}
		if len(t.Old) != len(t.New) {
			return invalid("ref %s mixes object id lengths", t.Ref)
		}
		if t.Old == t.New {
			return invalid("ref %s: old and new are both %s", t.Ref, t.New)
		}
	}
	return nil
}

func zeroOf(id string) string { return strings.Repeat("0", len(id)) }

// IsZero reports whether id is the all-zero id.
func IsZero(id string) bool { return id != "" && strings.Trim(id, "0") == "" }

// IsObjectID reports whether id is a git object id (ids.IsObjectID).
func IsObjectID(id string) bool { return ids.IsObjectID(id) }

// checkOID is ids.CheckObjectID as the log's ErrInvalid.
func checkOID(id string) error { return asInvalid(ids.CheckObjectID(id)) }

// CheckRefName applies git's check-ref-format rules (ids.CheckRefName)
// and answers the log's ErrInvalid, so the log refuses a bad name before
// anything becomes real.
func CheckRefName(name string) error { return checkRefName(name) }

func checkRefName(name string) error { return asInvalid(ids.CheckRefName(name)) }

// asInvalid turns an ids error into the log's InvalidError.
func asInvalid(err error) error {
	if err == nil {
		return nil
	}
	return invalid("%s", err.Error())
}
