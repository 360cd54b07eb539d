package wal_test

import (
	"context"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// PushedBy names the newest push that set a ref to a commit, among the
// log's PushedByLookback newest entries.
func TestPushedBy(t *testing.T) {
	ctx := context.Background()
	l := newLog(memstore.New())
	if err := l.Init(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	commit := func(by, ref, old, new string) {
		t.Helper()
		p := push(ref, old, new, "pack")
		p.PushedBy = by
		if _, err := l.Commit(ctx, "r", p); err != nil {
			t.Fatal(err)
		}
	}
	commit("alice", "refs/heads/topic", wal.ZeroID, oid(1))
	commit("bob", "refs/heads/topic", oid(1), oid(2))
	commit("carol", "refs/heads/other", wal.ZeroID, oid(2))
	commit("dave", "refs/heads/topic", oid(2), oid(1)) // back to alice's commit
	for i := range wal.PushedByLookback {
		commit("eve", "refs/heads/busy", oidOr(i), oid(100+i))
	}
	commit("frank", "refs/heads/topic", oid(1), oid(3))

	for _, tc := range []struct{ ref, commit, want string }{
		{"refs/heads/topic", oid(3), "frank"},
		{"refs/heads/busy", oid(100 + wal.PushedByLookback - 1), "eve"},
		{"refs/heads/topic", oid(1), ""}, // dave's push is past the lookback
		{"refs/heads/other", oid(2), ""},
		{"refs/heads/topic", oid(9), ""},
	} {
		got, err := l.PushedBy(ctx, "r", tc.ref, tc.commit)
		if err != nil || got != tc.want {
			t.Errorf("PushedBy(%s, %s) = %q, %v; want %q", tc.ref, tc.commit, got, err, tc.want)
		}
	}

	// Within the lookback, the newest push of the commit answers.
	l2 := newLog(memstore.New())
	if err := l2.Init(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	l = l2
	commit("alice", "refs/heads/topic", wal.ZeroID, oid(1))
	commit("bob", "refs/heads/topic", oid(1), oid(2))
	commit("dave", "refs/heads/topic", oid(2), oid(1))
	if got, err := l.PushedBy(ctx, "r", "refs/heads/topic", oid(1)); err != nil || got != "dave" {
		t.Fatalf("commit pushed twice: %q, %v; want dave", got, err)
	}
	if got, err := l.PushedBy(ctx, "missing", "refs/heads/topic", oid(1)); got != "" || err != nil {
		t.Fatalf("a repository without a log: %q, %v", got, err)
	}
	if _, err := l.PushedBy(ctx, "../x", "refs/heads/topic", oid(1)); err == nil {
		t.Fatal("an invalid repository id: no error")
	}
}

func oidOr(i int) string {
	if i == 0 {
		return wal.ZeroID
	}
	return oid(100 + i - 1)
}
