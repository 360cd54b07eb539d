package memstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestKeyIndexMatchesASortedSlice drives the chunked index and a plain
// sorted slice with the same random inserts and deletes, across many
// chunk splits and merges, and compares every listing.
func TestKeyIndexMatchesASortedSlice(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var x keyIndex
	var ref []string
	have := map[string]bool{}
	key := func() string { return fmt.Sprintf("k/%03d/%d", r.IntN(40), r.IntN(200)) }
	for step := range 20000 {
		k := key()
		if have[k] {
			x.remove(k)
			i, _ := slices.BinarySearch(ref, k)
			ref = slices.Delete(ref, i, i+1)
		} else {
			x.insert(k)
			i, _ := slices.BinarySearch(ref, k)
			ref = slices.Insert(ref, i, k)
		}
		have[k] = !have[k]
		if step%997 != 0 {
			continue
		}
		for _, from := range []string{"", "k/", "k/010", "k/010/5", key(), "z"} {
			for _, inclusive := range []bool{false, true} {
				var got []string
				x.ascend(from, inclusive, func(k string) bool { got = append(got, k); return true })
				var want []string
				for _, k := range ref {
					if k > from || inclusive && k == from {
						want = append(want, k)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("step %d: ascend(%q, %v): %d keys, want %d", step, from, inclusive, len(got), len(want))
				}
			}
		}
	}
	for _, c := range x.chunks {
		if len(c) == 0 || len(c) > maxChunk || !slices.IsSorted(c) {
			t.Fatalf("chunk of %d keys, sorted %v", len(c), slices.IsSorted(c))
		}
	}
	if n := len(x.chunks); n < 2 {
		t.Fatalf("%d chunks: the test never split one", n)
	}
}
