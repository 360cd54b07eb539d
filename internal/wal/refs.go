package wal

// ReferencedKeys returns the keys of every immutable object this index
// needs for repository repo: each layer's entry and its stored pack index
// (docs/design.md §3.2, §3.4). The .idx is listed whether or not it was
// stored, since it is optional and its absence is not corruption.
//
// It is the one definition of "referenced" that garbage collection uses
// (docs/adr/0040-garbage-collection.md): an object is kept when any index
// lists it here. That includes every checkpoint's pack and .idx
// (CheckpointKeys, docs/adr/0050-compaction.md); the entries a checkpoint
// folded are no longer referenced. A tombstone references nothing.
func (x *Index) ReferencedKeys(repo string) []string {
	if x == nil || x.Deleted {
		return nil
	}
	keys := make([]string, 0, 2*len(x.Layers)+2*len(x.Checkpoints))
	keys = append(keys, x.CheckpointKeys(repo)...)
	for _, l := range x.Layers {
		keys = append(keys, EntryKey(repo, l.ULID), PackIndexKey(repo, l.ULID))
	}
	return keys
}
