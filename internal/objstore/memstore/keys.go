package memstore

import (
	"slices"
	"strings"
)

// keyIndex keeps the keys in byte order, so that a List costs what it
// returns rather than a pass over every object: the scale benchmark holds
// millions of objects in one store (issue 22). The keys live in sorted
// chunks of at most maxChunk; a key is found by binary search over the
// chunks' last keys, then within its chunk, and an insert or delete moves
// at most one chunk's keys (and, when a chunk splits or empties, the
// chunk list, which is the key count over maxChunk/2 long).
type keyIndex struct {
	chunks [][]string
}

const maxChunk = 512

// chunkOf returns the index of the first chunk whose last key is at or
// after key (len(chunks) when there is none).
func (x *keyIndex) chunkOf(key string) int {
	i, _ := slices.BinarySearchFunc(x.chunks, key, func(c []string, k string) int { return strings.Compare(c[len(c)-1], k) })
	return i
}

// insert adds key, which must not be present.
func (x *keyIndex) insert(key string) {
	i := x.chunkOf(key)
	if i == len(x.chunks) {
		if i == 0 || len(x.chunks[i-1]) >= maxChunk {
			x.chunks = append(x.chunks, []string{key})
			return
		}
		i-- // append to the last chunk
	}
	c := x.chunks[i]
	j, _ := slices.BinarySearch(c, key)
	c = slices.Insert(c, j, key)
	if len(c) <= maxChunk {
		x.chunks[i] = c
		return
	}
	half := len(c) / 2
	lo := slices.Clone(c[:half])
	hi := slices.Clone(c[half:])
	x.chunks[i] = lo
	x.chunks = slices.Insert(x.chunks, i+1, hi)
}

// remove deletes key, which must be present.
func (x *keyIndex) remove(key string) {
	i := x.chunkOf(key)
	if i == len(x.chunks) {
		return
	}
	c := x.chunks[i]
	j, ok := slices.BinarySearch(c, key)
	if !ok {
		return
	}
	c = slices.Delete(c, j, j+1)
	if len(c) == 0 {
		x.chunks = slices.Delete(x.chunks, i, i+1)
		return
	}
	x.chunks[i] = c
}

// ascend calls fn for each key from from on (from itself only when
// inclusive), in order, until fn returns false.
func (x *keyIndex) ascend(from string, inclusive bool, fn func(string) bool) {
	i := x.chunkOf(from)
	if i == len(x.chunks) {
		return
	}
	c := x.chunks[i]
	j, found := slices.BinarySearch(c, from)
	if found && !inclusive {
		j++
	}
	for {
		for _, k := range c[j:] {
			if !fn(k) {
				return
			}
		}
		if i++; i == len(x.chunks) {
			return
		}
		c, j = x.chunks[i], 0
	}
}
