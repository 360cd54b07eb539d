package wal_test

import (
	"slices"
	"testing"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/wal"
)

// TestReferencedKeys: every layer's entry and pack index, nothing for a
// tombstone (docs/adr/0040-garbage-collection.md).
func TestReferencedKeys(t *testing.T) {
	a, b := ulid.Make(), ulid.Make()
	x := &wal.Index{Seq: 2, Layers: []wal.Layer{{ULID: a}, {ULID: b}}}
	got := x.ReferencedKeys("r")
	want := []string{wal.EntryKey("r", a), wal.PackIndexKey("r", a), wal.EntryKey("r", b), wal.PackIndexKey("r", b)}
	if !slices.Equal(got, want) {
		t.Fatalf("ReferencedKeys = %v, want %v", got, want)
	}
	ck := wal.Checkpoint{Seq: 5, SHA256: [32]byte{1}, Size: 9}
	got = (&wal.Index{Seq: 6, CompactedThroughSeq: 5, Checkpoints: []wal.Checkpoint{ck}, Layers: []wal.Layer{{ULID: b}}}).ReferencedKeys("r")
	want = []string{wal.CheckpointKey("r", ck), wal.CheckpointIndexKey("r", ck), wal.EntryKey("r", b), wal.PackIndexKey("r", b)}
	if !slices.Equal(got, want) {
		t.Fatalf("ReferencedKeys of a compacted index = %v, want %v", got, want)
	}
	// Every checkpoint of a geometric list is referenced
	// (docs/adr/0051-geometric-checkpoints.md).
	ck2 := wal.Checkpoint{Seq: 8, SHA256: [32]byte{2}, Size: 3}
	got = (&wal.Index{Seq: 9, CompactedThroughSeq: 8, Checkpoints: []wal.Checkpoint{ck, ck2}, Layers: []wal.Layer{{ULID: b}}}).ReferencedKeys("r")
	want = []string{wal.CheckpointKey("r", ck), wal.CheckpointIndexKey("r", ck), wal.CheckpointKey("r", ck2), wal.CheckpointIndexKey("r", ck2), wal.EntryKey("r", b), wal.PackIndexKey("r", b)}
	if !slices.Equal(got, want) {
		t.Fatalf("ReferencedKeys of an index with two checkpoints = %v, want %v", got, want)
	}
	if k := (&wal.Index{Seq: 3, CompactedThroughSeq: 3, Deleted: true}).ReferencedKeys("r"); len(k) != 0 {
		t.Fatalf("a tombstone references %v", k)
	}
}
