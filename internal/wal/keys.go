package wal

import (
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/ghost-scm/ghost/internal/ids"
	"github.com/oklog/ulid/v2"
)

// CheckRepoID validates a repository id, which becomes a key segment
// (ids.CheckRepoID), and answers the log's ErrInvalid.
func CheckRepoID(repo string) error { return asInvalid(ids.CheckRepoID(repo)) }

// IndexKey is the key of a repository's index.
func IndexKey(repo string) string { return "repos/" + repo + "/index" }

// EntryKey is the key of one entry.
func EntryKey(repo string, id ulid.ULID) string {
	return "repos/" + repo + "/entries/" + id.String() + ".pack"
}

// PackIndexKey is the key of an entry's derived pack index: git's .idx for
// the entry's pack, stored beside it so a node can install the pack
// without running git index-pack. It is optional and never authoritative:
// readers verify it against the pack and fall back to indexing.
func PackIndexKey(repo string, id ulid.ULID) string {
	return "repos/" + repo + "/entries/" + id.String() + ".idx"
}

func entriesPrefix(repo string) string { return "repos/" + repo + "/entries/" }

// KeyKind is what a key of the log names (ParseKey).
type KeyKind int

// The kinds of keys the log writes under repos/<repo>/.
const (
	KeyIndex           KeyKind = iota + 1 // repos/<repo>/index
	KeyEntry                              // repos/<repo>/entries/<ULID>.pack
	KeyPackIndex                          // repos/<repo>/entries/<ULID>.idx
	KeyCheckpoint                         // repos/<repo>/checkpoints/<seq>-<sha256>.pack
	KeyCheckpointIndex                    // repos/<repo>/checkpoints/<seq>-<sha256>.idx
)

// Key is a parsed key of the log.
type Key struct {
	Kind KeyKind
	Repo string
	// Entry is the entry's id (KeyEntry, KeyPackIndex).
	Entry ulid.ULID
	// Checkpoint holds the seq and sha256 a checkpoint's key names
	// (KeyCheckpoint, KeyCheckpointIndex); its Size is not in the key.
	Checkpoint Checkpoint
}

// String is the key k names, as the log writes it.
func (k Key) String() string {
	switch k.Kind {
	case KeyIndex:
		return IndexKey(k.Repo)
	case KeyEntry:
		return EntryKey(k.Repo, k.Entry)
	case KeyPackIndex:
		return PackIndexKey(k.Repo, k.Entry)
	case KeyCheckpoint:
		return CheckpointKey(k.Repo, k.Checkpoint)
	case KeyCheckpointIndex:
		return CheckpointIndexKey(k.Repo, k.Checkpoint)
	}
	return ""
}

// ParseKey reads a key the log writes, and reports false for any other:
// it accepts exactly the keys that IndexKey, EntryKey, PackIndexKey,
// CheckpointKey and CheckpointIndexKey produce (it formats what it parsed
// and compares), so that garbage collection never judges an object that
// is not the log's by a name that merely looks like one.
func ParseKey(key string) (Key, bool) {
	rest, ok := strings.CutPrefix(key, "repos/")
	if !ok {
		return Key{}, false
	}
	repo, name, ok := strings.Cut(rest, "/")
	if !ok || CheckRepoID(repo) != nil {
		return Key{}, false
	}
	k := Key{Repo: repo}
	switch dir, file, _ := strings.Cut(name, "/"); {
	case name == "index":
		k.Kind = KeyIndex
	case dir == "entries":
		base, ext := splitExt(file)
		id, err := ulid.ParseStrict(base)
		if err != nil {
			return Key{}, false
		}
		k.Entry = id
		switch ext {
		case ".pack":
			k.Kind = KeyEntry
		case ".idx":
			k.Kind = KeyPackIndex
		}
	case dir == "checkpoints":
		base, ext := splitExt(file)
		seq, sum, ok := strings.Cut(base, "-")
		if !ok {
			return Key{}, false
		}
		n, err := strconv.ParseUint(seq, 10, 64)
		if err != nil {
			return Key{}, false
		}
		b, err := hex.DecodeString(sum)
		if err != nil || len(b) != len(k.Checkpoint.SHA256) {
			return Key{}, false
		}
		k.Checkpoint.Seq = n
		copy(k.Checkpoint.SHA256[:], b)
		switch ext {
		case ".pack":
			k.Kind = KeyCheckpoint
		case ".idx":
			k.Kind = KeyCheckpointIndex
		}
	}
	if k.Kind == 0 || k.String() != key {
		return Key{}, false
	}
	return k, true
}

// splitExt splits name at its last dot: "a.pack" is "a", ".pack".
func splitExt(name string) (base, ext string) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return name, ""
	}
	return name[:i], name[i:]
}
