package wal

import (
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"
)

func TestParseKey(t *testing.T) {
	repo := "01M8SWZZSZTSFZXDYCDY3M6KEX"
	id := ulid.MustParse("01M8SX2CNKZZAVG4BVB5SYHHE6")
	ck := Checkpoint{Seq: 65}
	ck.SHA256[0], ck.SHA256[31] = 0xf4, 0x5a
	good := []Key{
		{Kind: KeyIndex, Repo: repo},
		{Kind: KeyEntry, Repo: repo, Entry: id},
		{Kind: KeyPackIndex, Repo: repo, Entry: id},
		{Kind: KeyCheckpoint, Repo: repo, Checkpoint: ck},
		{Kind: KeyCheckpointIndex, Repo: repo, Checkpoint: ck},
	}
	for _, want := range good {
		key := want.String()
		got, ok := ParseKey(key)
		if !ok || got != want {
			t.Errorf("ParseKey(%q) = %+v, %v; want %+v", key, got, ok, want)
		}
	}
	ckKey := CheckpointKey(repo, ck)
	bad := []string{
		"", "repos/", "repos/" + repo, "repos/" + repo + "/", "repos/" + repo + "/index.tmp",
		"repos/" + repo + "/entries/" + id.String(),
		"repos/" + repo + "/entries/" + id.String() + ".pack.tmp",
		"repos/" + repo + "/entries/" + strings.ToLower(id.String()) + ".pack", // not as wal writes it
		"repos/" + repo + "/entries/" + id.String() + ".rev",
		"repos/" + repo + "/entries/x/" + id.String() + ".pack",
		"repos/" + repo + "/checkpoints/65-" + strings.Repeat("0", 64) + ".pack", // seq not zero-padded
		strings.Replace(ckKey, ".pack", ".bitmap", 1),
		strings.TrimSuffix(ckKey, "a.pack") + ".pack", // short sha256
		"repos/not a repo/index", "scans/" + repo + "/index", "meta/repos/" + repo + "/index",
	}
	for _, key := range bad {
		if k, ok := ParseKey(key); ok {
			t.Errorf("ParseKey(%q) = %+v, true; want false", key, k)
		}
	}
}

// FuzzParseKey: an accepted key is exactly the key its parse names, so
// nothing wal did not write passes for the log's.
func FuzzParseKey(f *testing.F) {
	id := ulid.MustParse("01M8SX2CNKZZAVG4BVB5SYHHE6")
	repo := "01M8SWZZSZTSFZXDYCDY3M6KEX"
	for _, s := range []string{IndexKey(repo), EntryKey(repo, id), PackIndexKey(repo, id),
		CheckpointKey(repo, Checkpoint{Seq: 7}), CheckpointIndexKey(repo, Checkpoint{Seq: 1 << 60}), "repos/x/entries/.pack"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		k, ok := ParseKey(key)
		if !ok {
			return
		}
		if k.String() != key {
			t.Fatalf("ParseKey(%q) accepted %+v, which names %q", key, k, k.String())
		}
		if CheckRepoID(k.Repo) != nil {
			t.Fatalf("ParseKey(%q) accepted the repository id %q", key, k.Repo)
		}
	})
}
