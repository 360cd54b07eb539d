package wal

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

func oid(n int) string { return fmt.Sprintf("%040x", n) }

func sampleIndex() *Index {
	return &Index{
		Seq: 2,
		Refs: []Ref{
			{Name: "refs/heads/main", ID: oid(1)},
			{Name: "refs/tags/v1", ID: oid(2)},
		},
		Layers: []Layer{
			{ULID: ulid.MustParse("01J0000000000000000000000A"), SHA256: [32]byte{1}, Size: 10},
			{ULID: ulid.MustParse("01J0000000000000000000000B"), SHA256: [32]byte{2}, Size: 20},
		},
	}
}

// sampleCompacted is sampleIndex after a checkpoint folded seq 1..5.
func sampleCompacted() *Index {
	x := sampleIndex()
	x.Seq, x.CompactedThroughSeq = 7, 5
	x.Checkpoints = []Checkpoint{{Seq: 5, SHA256: [32]byte{9, 8, 7}, Size: 1234, Newest: 1_700_000_000_123}}
	return x
}

// sampleGeometric is sampleIndex after three checkpoints folded seq 1..9
// (docs/adr/0051-geometric-checkpoints.md).
func sampleGeometric() *Index {
	x := sampleIndex()
	x.Seq, x.CompactedThroughSeq = 11, 9
	x.Checkpoints = []Checkpoint{
		{Seq: 5, SHA256: [32]byte{9, 8, 7}, Size: 4000, Newest: 1_700_000_000_123},
		{Seq: 8, SHA256: [32]byte{6}, Size: 1500, Newest: 1_700_000_000_456},
		{Seq: 9, SHA256: [32]byte{5}, Size: 300, Newest: 1_700_000_000_789},
	}
	return x
}

// singleCheckpointGolden is sampleCompacted as the builds before
// geometric checkpoints encoded it: an index with one checkpoint must
// still read in them.
const singleCheckpointGolden = "47484f5354494458000102000000000000000700000000000000050000000000000005090807000000000000000000000000000000000000000000000000000000000000000000000004d20000018bcfe5687b00000002000f726566732f68656164732f6d61696e140000000000000000000000000000000000000001000c726566732f746167732f7631140000000000000000000000000000000000000002000000020190000000000000000000000000000a0100000000000000000000000000000000000000000000000000000000000000000000000000000a0190000000000000000000000000000b020000000000000000000000000000000000000000000000000000000000000000000000000000142d68edb9"

// TestSingleCheckpointEncodesAsBefore: one checkpoint is written under
// flag bit 1 exactly as before the list existed, and only a list of two
// or more sets bit 2.
func TestSingleCheckpointEncodesAsBefore(t *testing.T) {
	b, err := sampleCompacted().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(b); got != singleCheckpointGolden {
		t.Fatalf("one checkpoint encodes as\n%s\nwant\n%s", got, singleCheckpointGolden)
	}
	g, err := sampleGeometric().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if g[10] != flagCheckpoints {
		t.Fatalf("a list of checkpoints has flags %#x, want %#x", g[10], flagCheckpoints)
	}
}

func sampleHeader() *EntryHeader {
	return &EntryHeader{
		ULID:      ulid.MustParse("01J0000000000000000000000A"),
		CreatedAt: time.UnixMilli(1_700_000_000_123).UTC(),
		PushedBy:  "alice",
		Transitions: []Transition{
			{Ref: "refs/heads/main", Old: ZeroID, New: oid(1)},
			{Ref: "refs/tags/v1", Old: oid(3), New: ZeroID},
		},
	}
}

func TestIndexRoundTrip(t *testing.T) {
	for _, x := range []*Index{
		{},
		sampleIndex(),
		sampleCompacted(),
		sampleGeometric(),
		{Seq: 9, CompactedThroughSeq: 9, Deleted: true},
		{Seq: 1, Refs: []Ref{{Name: "refs/heads/sha256", ID: strings.Repeat("ab", 32)}}, Layers: []Layer{{Size: 0}}},
	} {
		b, err := x.MarshalBinary()
		if err != nil {
			t.Fatalf("marshal %+v: %v", x, err)
		}
		got, err := DecodeIndex(b, "test")
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		b2, _ := got.MarshalBinary()
		if !bytes.Equal(b, b2) {
			t.Fatalf("round trip changed bytes:\n%x\n%x", b, b2)
		}
		if got.Seq != x.Seq || got.Deleted != x.Deleted || len(got.Refs) != len(x.Refs) || len(got.Layers) != len(x.Layers) ||
			!slices.Equal(got.Checkpoints, x.Checkpoints) {
			t.Fatalf("round trip = %+v, want %+v", got, x)
		}
	}
}

func TestIndexMarshalRejects(t *testing.T) {
	for name, x := range map[string]*Index{
		"unsorted refs":     {Refs: []Ref{{"refs/heads/b", oid(1)}, {"refs/heads/a", oid(2)}}},
		"duplicate refs":    {Refs: []Ref{{"refs/heads/a", oid(1)}, {"refs/heads/a", oid(2)}}},
		"bad ref name":      {Refs: []Ref{{"refs/heads/a..b", oid(1)}}},
		"zero id":           {Refs: []Ref{{"refs/heads/a", ZeroID}}},
		"short id":          {Refs: []Ref{{"refs/heads/a", "abc"}}},
		"tombstone w/ refs": {Deleted: true, Refs: []Ref{{"refs/heads/a", oid(1)}}},
		"negative size":     {Seq: 1, Layers: []Layer{{Size: -1}}},
		// A compacted index must say what replaced its folded layers.
		"compacted w/o checkpoint": {Seq: 3, CompactedThroughSeq: 3},
		"checkpoint seq":           {Seq: 3, CompactedThroughSeq: 3, Checkpoints: []Checkpoint{{Seq: 2}}},
		"checkpoint uncompacted":   {Seq: 0, Checkpoints: []Checkpoint{{}}},
		"checkpoint newest":        {Seq: 3, CompactedThroughSeq: 3, Checkpoints: []Checkpoint{{Seq: 3, Newest: -1}}},
		"tombstone w/ checkpoint":  {Seq: 3, CompactedThroughSeq: 3, Deleted: true, Checkpoints: []Checkpoint{{Seq: 3}}},
		"checkpoints unordered":    {Seq: 3, CompactedThroughSeq: 3, Checkpoints: []Checkpoint{{Seq: 2}, {Seq: 1}, {Seq: 3}}},
		"checkpoints same seq":     {Seq: 3, CompactedThroughSeq: 3, Checkpoints: []Checkpoint{{Seq: 3}, {Seq: 3}}},
		"last not compacted seq":   {Seq: 4, CompactedThroughSeq: 4, Checkpoints: []Checkpoint{{Seq: 2}, {Seq: 3}}, Layers: []Layer{{}}},
		"checkpoint size":          {Seq: 3, CompactedThroughSeq: 3, Checkpoints: []Checkpoint{{Seq: 1}, {Seq: 3, Size: -1}}},
		"too many checkpoints": func() *Index {
			x := &Index{Seq: MaxCheckpoints + 1, CompactedThroughSeq: MaxCheckpoints + 1}
			for i := range MaxCheckpoints + 1 {
				x.Checkpoints = append(x.Checkpoints, Checkpoint{Seq: uint64(i + 1)})
			}
			return x
		}(),
	} {
		if _, err := x.MarshalBinary(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

// reCRC rewrites the trailing checksum so a test can reach the checks
// behind it.
func reCRC(b []byte) []byte {
	b = bytes.Clone(b)
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	return b
}

// withCRC returns b with its last four bytes replaced by the checksum of
// the rest (b unchanged when too short).
func withCRC(b []byte) []byte {
	if len(b) < 4 {
		return b
	}
	return reCRC(b)
}

func TestDecodeIndexRejects(t *testing.T) {
	good, _ := sampleIndex().MarshalBinary()
	cases := map[string][]byte{
		"empty":      nil,
		"bit flip":   func() []byte { b := bytes.Clone(good); b[20] ^= 1; return b }(),
		"bad magic":  reCRC(append([]byte("GHOSTIDY"), good[8:]...)),
		"version 2":  reCRC(func() []byte { b := bytes.Clone(good); b[9] = 2; return b }()),
		"flags":      reCRC(func() []byte { b := bytes.Clone(good); b[10] = 0x80; return b }()),
		"trailing":   reCRC(append(append(bytes.Clone(good[:len(good)-4]), 0), 0, 0, 0, 0)),
		"huge count": reCRC(func() []byte { b := bytes.Clone(good); binary.BigEndian.PutUint32(b[27:], 1<<30); return b }()),
		"seq mismatch": reCRC(func() []byte {
			b := bytes.Clone(good)
			binary.BigEndian.PutUint64(b[11:], 7)
			return b
		}()),
	}
	for i := range len(good) {
		cases[fmt.Sprintf("truncated at %d", i)] = good[:i]
	}
	ck, _ := sampleCompacted().MarshalBinary()
	cases["checkpoint flag cleared"] = reCRC(func() []byte { b := bytes.Clone(ck); b[10] = 0; return b }())
	cases["both checkpoint flags"] = reCRC(func() []byte { b := bytes.Clone(ck); b[10] = flagCheckpoint | flagCheckpoints; return b }())
	for i := range len(ck) - 4 {
		cases[fmt.Sprintf("compacted body truncated at %d, crc fixed", i)] = reCRC(append(bytes.Clone(ck[:i]), 0, 0, 0, 0))
	}
	geo, _ := sampleGeometric().MarshalBinary()
	const countAt = 8 + 2 + 1 + 8 + 8 // magic, version, flags, seq, compacted
	setCount := func(n uint32) []byte {
		b := bytes.Clone(geo)
		binary.BigEndian.PutUint32(b[countAt:], n)
		return reCRC(b)
	}
	cases["checkpoint list of one"] = func() []byte {
		// A well-formed list of one: count 1, then sampleCompacted's
		// record, which must be written under bit 1 instead.
		b := append(bytes.Clone(ck[:countAt]), 0, 0, 0, 1)
		b[10] = flagCheckpoints
		return reCRC(append(append(b, ck[countAt:len(ck)-4]...), 0, 0, 0, 0))
	}()
	cases["checkpoint list of zero"] = setCount(0)
	cases["checkpoint list too long"] = setCount(MaxCheckpoints + 1)
	cases["checkpoint list count lies"] = setCount(1 << 30)
	cases["checkpoint list flag cleared"] = reCRC(func() []byte { b := bytes.Clone(geo); b[10] = flagCheckpoint; return b }())
	cases["checkpoints out of order"] = reCRC(func() []byte {
		b := bytes.Clone(geo)
		binary.BigEndian.PutUint64(b[countAt+4+checkpointSize:], 4) // the second one's seq, before the first's 5
		return b
	}())
	for i := range len(geo) - 4 {
		cases[fmt.Sprintf("geometric body truncated at %d, crc fixed", i)] = reCRC(append(bytes.Clone(geo[:i]), 0, 0, 0, 0))
	}
	for i := range len(good) - 4 { // a body cut short, with a checksum that matches it
		cases[fmt.Sprintf("body truncated at %d, crc fixed", i)] = reCRC(append(bytes.Clone(good[:i]), 0, 0, 0, 0))
	}
	for name, b := range cases {
		if _, err := DecodeIndex(b, "test"); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
}

func TestEntryHeaderRoundTrip(t *testing.T) {
	h := sampleHeader()
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if h.Len != int64(len(b)) {
		t.Fatalf("Len = %d, encoded %d bytes", h.Len, len(b))
	}
	got, err := DecodeEntryHeader(b, "test")
	if err != nil {
		t.Fatal(err)
	}
	if got.ULID != h.ULID || !got.CreatedAt.Equal(h.CreatedAt) || got.PushedBy != h.PushedBy || fmt.Sprint(got.Transitions) != fmt.Sprint(h.Transitions) || got.Len != h.Len {
		t.Fatalf("round trip = %+v, want %+v", got, h)
	}
}

func TestEntryHeaderRejects(t *testing.T) {
	for name, h := range map[string]*EntryHeader{
		"no transitions":  {},
		"no-op":           {Transitions: []Transition{{"refs/heads/a", oid(1), oid(1)}}},
		"duplicate ref":   {Transitions: []Transition{{"refs/heads/a", ZeroID, oid(1)}, {"refs/heads/a", ZeroID, oid(2)}}},
		"bad ref":         {Transitions: []Transition{{"HEAD", ZeroID, oid(1)}}},
		"mixed id length": {Transitions: []Transition{{"refs/heads/a", ZeroID, strings.Repeat("a", 64)}}},
		"long pushed-by":  {PushedBy: strings.Repeat("x", 300), Transitions: []Transition{{"refs/heads/a", ZeroID, oid(1)}}},
	} {
		if _, err := h.MarshalBinary(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	good, _ := sampleHeader().MarshalBinary()
	for i := range len(good) {
		if _, err := DecodeEntryHeader(good[:i], "test"); !errors.Is(err, ErrCorrupt) {
			t.Errorf("truncated at %d: err = %v, want ErrCorrupt", i, err)
		}
	}
	flipped := bytes.Clone(good)
	flipped[30] ^= 4
	if _, err := DecodeEntryHeader(flipped, "test"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("bit flip: err = %v, want ErrCorrupt", err)
	}
}

func TestCheckRefName(t *testing.T) {
	ok := []string{"refs/heads/main", "refs/tags/v1.0", "refs/heads/feature/x-y_z", "refs/notes/commits"}
	bad := []string{"", "main", "HEAD", "refs/heads/", "refs/heads//x", "refs/heads/a..b", "refs/heads/.hidden",
		"refs/heads/x.lock", "refs/heads/a b", "refs/heads/a~1", "refs/heads/a^", "refs/heads/a:b", "refs/heads/a?",
		"refs/heads/a*", "refs/heads/a[", `refs/heads/a\b`, "refs/heads/a@{1}", "refs/heads/end.", "refs/heads/\x01",
		"refs/heads", "refs/" + strings.Repeat("a", 1100)}
	for _, n := range ok {
		if err := CheckRefName(n); err != nil {
			t.Errorf("CheckRefName(%q) = %v, want nil", n, err)
		}
	}
	for _, n := range bad {
		if err := CheckRefName(n); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckRefName(%q) = %v, want ErrInvalid", n, err)
		}
	}
}

func FuzzDecodeIndex(f *testing.F) {
	for _, x := range []*Index{{}, sampleIndex(), sampleCompacted(), sampleGeometric(), {Seq: 4, CompactedThroughSeq: 4, Deleted: true}} {
		b, _ := x.MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Both as given and with the checksum made to match, so the
		// fuzzer explores the parser behind the CRC too.
		for _, in := range [][]byte{b, withCRC(b)} {
			x, err := DecodeIndex(in, "fuzz")
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error %v is not a corrupt-log error", err)
				}
				continue
			}
			// What decodes is canonical: it re-encodes to the same bytes.
			b2, err := x.MarshalBinary()
			if err != nil || !bytes.Equal(in, b2) {
				t.Fatalf("decoded index re-encodes differently (err %v)", err)
			}
		}
	})
}

func FuzzDecodeEntryHeader(f *testing.F) {
	b, _ := sampleHeader().MarshalBinary()
	f.Add(b)
	h := sampleHeader()
	h.Transitions = h.Transitions[:1]
	h.PushedBy = ""
	b, _ = h.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, in := range [][]byte{b, withCRC(b)} {
			h, err := DecodeEntryHeader(in, "fuzz")
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error %v is not a corrupt-log error", err)
				}
				continue
			}
			b2, err := h.MarshalBinary()
			if err != nil || !bytes.Equal(in, b2) {
				t.Fatalf("decoded header re-encodes differently (err %v)", err)
			}
		}
	})
}
