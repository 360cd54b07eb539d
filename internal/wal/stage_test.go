package wal_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// A staged entry is in the store but not in the log until CommitStaged;
// what CommitStaged commits is the entry Stage wrote, pack and .idx.
func TestStageThenCommit(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := newLog(s)
	st, err := l.Stage(ctx, "r1", push("refs/heads/main", wal.ZeroID, oid(1), "PACKDATA"))
	if err != nil {
		t.Fatal(err)
	}
	if got := entries(t, s, "r1"); len(got) != 1 || got[0] != wal.EntryKey("r1", st.ULID()) {
		t.Fatalf("entries after Stage = %v", got)
	}
	x, _, err := l.ReadIndex(ctx, "r1")
	if err != nil || x.Seq != 0 {
		t.Fatalf("index after Stage: seq %d, err %v; want untouched", x.Seq, err)
	}
	res, err := l.CommitStaged(ctx, st, strings.NewReader("IDX"), 3)
	if err != nil {
		t.Fatal(err)
	}
	if res.ULID != st.ULID() || res.Seq != 1 {
		t.Fatalf("result %+v, want the staged entry at seq 1", res)
	}
	x, _, err = l.ReadIndex(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	rc, h, err := l.OpenPack(ctx, "r1", x.Layers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil || string(b) != "PACKDATA" || h.PushedBy != "tester" {
		t.Fatalf("pack %q, header %+v, err %v", b, h, err)
	}
	if got := entries(t, s, "r1"); len(got) != 2 {
		t.Fatalf("entries = %v, want the entry and its .idx", got)
	}
}

// Discard deletes a staged entry; the log never saw it.
func TestStageThenDiscard(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := newLog(s)
	st, err := l.Stage(ctx, "r1", push("refs/heads/main", wal.ZeroID, oid(1), "PACKDATA"))
	if err != nil {
		t.Fatal(err)
	}
	l.Discard(st)
	if got := entries(t, s, "r1"); len(got) != 0 {
		t.Fatalf("entries after Discard = %v", got)
	}
}

// A staged PUT with an unknown outcome is an error, and Stage deletes
// what may have landed.
func TestStageLandedThenError(t *testing.T) {
	mem := memstore.New()
	fs := faultstore.New(mem)
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpPut {
			return faultstore.Fault{Outcome: faultstore.LandedThenError}
		}
		return faultstore.Fault{}
	})
	l := newLog(fs)
	_, err := l.Stage(context.Background(), "r1", push("refs/heads/main", wal.ZeroID, oid(1), "PACKDATA"))
	if !errors.Is(err, objstore.ErrOutcomeUnknown) {
		t.Fatalf("Stage: %v, want an unknown outcome", err)
	}
	if got := entries(t, mem, "r1"); len(got) != 0 {
		t.Fatalf("entries = %v, want the landed entry deleted", got)
	}
}
