package wal

import (
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
