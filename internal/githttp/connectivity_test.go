package githttp_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/wal"
)

// packOfObjects packs exactly the objects named (no walking), built in
// work tree dir.
func packOfObjects(t *testing.T, dir string, ids []string) []byte {
	t.Helper()
	return []byte(gittest.Input(t, gittest.Env(t.TempDir()), dir, strings.NewReader(strings.Join(ids, "\n")+"\n"), "pack-objects", "--stdout", "-q"))
}

func pushOf(ref, old, new string, pack []byte) wal.Push {
	return wal.Push{
		Transitions: []wal.Transition{{Ref: ref, Old: old, New: new}},
		PushedBy:    "test",
		Pack:        bytes.NewReader(pack),
		PackSize:    int64(len(pack)),
	}
}

// TestPushMissingReachableObjectRefused exercises the connectivity check
// of a push (git rev-list --objects <new> --not --all), which index-pack
// --strict cannot stand in for: index-pack only checks that each object in
// the pack links to objects that exist, one level deep.
//
// The server is given commit D whose parent P it lacks (committed straight
// to the log, bypassing the push checks, then unreferenced again). The
// crafted push carries a pack with a new commit N on top of D: every link
// of every object in the pack exists, so index-pack --strict accepts it,
// but P, reachable from the new tip N, is missing. The push must be
// refused with the log unchanged.
func TestPushMissingReachableObjectRefused(t *testing.T) {
	e, src, _ := seeded(t)
	ctx := context.Background()

	git(t, src, "checkout", "-q", "--orphan", "cut")
	p := commitFile(t, src, "p.txt", "p\n")
	d := commitFile(t, src, "d.txt", "d\n")
	// D with its whole tree, but not P.
	var dObjects []string
	for _, l := range strings.Split(gitOut(t, src, "rev-list", "--objects", "--no-walk", d), "\n") {
		id, _, _ := strings.Cut(l, " ")
		dObjects = append(dObjects, id)
	}
	if _, err := e.log.Commit(ctx, "pub", pushOf("refs/heads/tmp", wal.ZeroID, d, packOfObjects(t, src, dObjects))); err != nil {
		t.Fatal(err)
	}
	if _, err := e.log.Commit(ctx, "pub", pushOf("refs/heads/tmp", d, wal.ZeroID, emptyPack(t))); err != nil {
		t.Fatal(err)
	}
	n := commitFile(t, src, "n.txt", "n\n")
	packN := packOf(t, src, n, "^"+d) // N, its tree and n.txt: every link present on the server
	if bytes.Contains([]byte(gitOut(t, src, "rev-list", "--objects", n, "^"+d)), []byte(p)) {
		t.Fatal("test setup: the pack would carry P")
	}

	before, seq := e.logRefs("pub"), e.seq("pub")
	body := pkt(wal.ZeroID+" "+n+" refs/heads/new\x00report-status\n") + "0000" + string(packN)
	resp, b := e.post("alice/pub", "git-receive-pack", "rw", []byte(body), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	got := report(t, b, false)
	if want := []string{"unpack ok", "ng refs/heads/new missing necessary objects"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("report %q, want %q", got, want)
	}
	if got := e.logRefs("pub"); got != before {
		t.Fatalf("log refs changed:\n%s\nwant:\n%s", got, before)
	}
	if got := e.seq("pub"); got != seq {
		t.Fatalf("log seq moved from %d to %d", seq, got)
	}
}
