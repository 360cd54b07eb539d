package coordtest

// Splits: SplitReplace and SplitResidual, their coverage of the parent's
// range, the progress children inherit, and their limits.

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/ghost-scm/ghost/internal/coord"
)

func children(kv ...string) []coord.ChildSpec {
	var out []coord.ChildSpec
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, coord.ChildSpec{Start: key(kv[i]), End: key(kv[i+1])})
	}
	return out
}

func testSplitReplace(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun()
	l := x.acquire(run, 3, 10) // [p, +inf)
	req := coord.SplitReplaceRequest{Lease: l, Op: x.nextOp(), Children: []coord.ChildSpec{
		{Start: key("p"), End: key("s"), Metadata: []byte("m1")}, {Start: key("s"), End: key("v")}, {Start: key("v")},
	}}
	parent, kids, err := x.b.SplitReplace(x.ctx, x.now, req)
	noErr(t, "SplitReplace", err)
	ids := coord.ReplaceChildIDs(req)
	if parent.State != coord.ShardSplit || parent.Owner != 0 || len(parent.Children) != 3 || len(kids) != 3 {
		t.Fatalf("parent %+v, %d children", parent, len(kids))
	}
	for i, k := range kids {
		if k.ID != ids[i] || !k.ID.IsDerived() || k.Parent != 3 || k.State != coord.ShardActive || k.Fence != 1 || k.Owner != 0 ||
			!bytes.Equal(k.Start, req.Children[i].Start) || !bytes.Equal(k.End, req.Children[i].End) || parent.Children[i] != k.ID {
			t.Fatalf("child %d: %+v", i, k)
		}
		if got := x.shard(run, k.ID); got.Parent != 3 {
			t.Fatalf("stored child %d: %+v", i, got)
		}
	}
	if string(kids[0].Metadata) != "m1" {
		t.Fatalf("child metadata %q, want m1", kids[0].Metadata)
	}
	before := x.shardCount(run)
	_, kids2, err := x.b.SplitReplace(x.ctx, x.now+1, req)
	noErr(t, "SplitReplace replay", err)
	if len(kids2) != 3 || kids2[0].ID != kids[0].ID || x.shardCount(run) != before {
		t.Fatalf("replay returned %d children / created shards", len(kids2))
	}
	req2 := req
	req2.Children = children("p", "t", "t", "")
	_, _, err = x.b.SplitReplace(x.ctx, x.now, req2)
	wantErr(t, "SplitReplace same op, other children", err, coord.ErrOpConflict)
	req2.Op = x.nextOp()
	_, _, err = x.b.SplitReplace(x.ctx, x.now, req2)
	wantErr(t, "SplitReplace of a split shard", err, coord.ErrShardTerminal)
	// Children are ordinary shards.
	cl := x.acquire(run, kids[1].ID, 12)
	x.checkpoint(cl, "t")
	x.complete(cl)
}

func testSplitReplaceCoverage(t *testing.T, f Factory) {
	x := newFixture(t, f, smallLimits())
	run := x.newRun(spec(1, "b", "m"), spec(2, "m", ""))
	l := x.acquire(run, 1, 10)
	l2 := x.acquire(run, 2, 10)
	cases := []struct {
		name  string
		lease coord.Lease
		kids  []coord.ChildSpec
		want  error
	}{
		{"no children", l, nil, coord.ErrSplitSingleChild},
		{"single child", l, children("b", "m"), coord.ErrSplitSingleChild},
		{"gap", l, children("b", "d", "e", "m"), coord.ErrSplitGap},
		{"overlap", l, children("b", "e", "d", "m"), coord.ErrSplitOverlap},
		{"wrong start (inside)", l, children("c", "e", "e", "m"), coord.ErrSplitWrongStart},
		{"wrong start (outside)", l, children("a", "e", "e", "m"), coord.ErrSplitWrongStart},
		{"wrong end (short)", l, children("b", "e", "e", "l"), coord.ErrSplitWrongEnd},
		{"wrong end (long)", l, children("b", "e", "e", "n"), coord.ErrSplitWrongEnd},
		{"wrong end (unbounded)", l, children("b", "e", "e", ""), coord.ErrSplitWrongEnd},
		{"unbounded in the middle", l, children("b", "", "e", "m"), coord.ErrSplitOverlap},
		{"empty child", l, children("b", "e", "e", "e", "e", "m"), coord.ErrSplitEmptyChild},
		{"inverted child", l, children("b", "e", "e", "d", "d", "m"), coord.ErrSplitEmptyChild},
		{"bounded end of unbounded parent", l2, children("m", "p", "p", "z"), coord.ErrSplitWrongEnd},
	}
	for _, tc := range cases {
		_, _, err := x.b.SplitReplace(x.ctx, x.now, coord.SplitReplaceRequest{Lease: tc.lease, Op: x.nextOp(), Children: tc.kids})
		wantErr(t, tc.name, err, tc.want)
		wantErr(t, tc.name+" (class)", err, coord.ErrInvalidSplit)
		var se *coord.SplitError
		if !errors.As(err, &se) {
			t.Fatalf("%s: want *SplitError, got %T", tc.name, err)
		}
	}
	if n := x.shardCount(run); n != 2 {
		t.Fatalf("refused splits created shards: %d", n)
	}
	if s := x.shard(run, 1); s.State != coord.ShardActive || len(s.Children) != 0 {
		t.Fatalf("refused splits changed the parent: %+v", s)
	}
}

func testSplitReplaceCursor(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun(spec(1, "b", "z"))
	l := x.acquire(run, 1, 10)
	x.checkpoint(l, "h")
	_, kids, err := x.b.SplitReplace(x.ctx, x.now, coord.SplitReplaceRequest{Lease: l, Op: x.nextOp(), Children: children("b", "e", "e", "h", "h", "m", "m", "z")})
	noErr(t, "SplitReplace", err)
	want := []struct {
		state  coord.ShardState
		cursor string
	}{{coord.ShardDone, ""}, {coord.ShardDone, ""}, {coord.ShardActive, "h"}, {coord.ShardActive, ""}}
	for i, w := range want {
		if kids[i].State != w.state || string(kids[i].Cursor.Key) != w.cursor || kids[i].Cursor.HasKey != (w.cursor != "") {
			t.Fatalf("child %d [%s,%s): state %v cursor %+v, want %v %q", i, kids[i].Start, kids[i].End, kids[i].State, kids[i].Cursor, w.state, w.cursor)
		}
	}
}

func testSplitResidual(t *testing.T, f Factory) {
	x := newFixture(t, f, coord.Limits{})
	run := x.newRun(spec(1, "b", "z"), spec(2, "z", ""))
	l := x.acquire(run, 1, 10)
	x.checkpoint(l, "d")
	req := coord.SplitResidualRequest{Lease: l, Op: x.nextOp(), Key: key("m")}
	p, res, err := x.b.SplitResidual(x.ctx, x.now, req)
	noErr(t, "SplitResidual", err)
	if string(p.End) != "m" || p.State != coord.ShardActive || p.Owner != 10 || p.Fence != l.Fence || string(p.Cursor.Key) != "d" || len(p.Children) != 1 {
		t.Fatalf("shrunk shard %+v", p)
	}
	if res.ID != coord.ResidualID(req) || res.Parent != 1 || string(res.Start) != "m" || string(res.End) != "z" || res.State != coord.ShardActive || res.Owner != 0 || res.Cursor.HasKey {
		t.Fatalf("residual %+v", res)
	}
	before := x.shardCount(run)
	_, res2, err := x.b.SplitResidual(x.ctx, x.now, req)
	noErr(t, "SplitResidual replay", err)
	if res2.ID != res.ID || x.shardCount(run) != before {
		t.Fatalf("replay returned %v / created shards", res2.ID)
	}
	cases := []struct {
		name string
		k    string
		want error
	}{
		{"key at start", "b", coord.ErrSplitKey},
		{"key below start", "a", coord.ErrSplitKey},
		{"key at end", "m", coord.ErrSplitKey},
		{"key beyond end", "n", coord.ErrSplitKey},
		{"cursor at key", "d", coord.ErrSplitCursor},
		{"cursor above key", "c", coord.ErrSplitCursor},
	}
	for _, tc := range cases {
		_, _, err := x.b.SplitResidual(x.ctx, x.now, coord.SplitResidualRequest{Lease: l, Op: x.nextOp(), Key: key(tc.k)})
		wantErr(t, tc.name, err, tc.want)
		wantErr(t, tc.name, err, coord.ErrInvalidSplit)
	}
	// The cursor can no longer move past the new end.
	_, err = x.b.Checkpoint(x.ctx, x.now, coord.CheckpointRequest{Lease: l, Op: x.nextOp(), Cursor: coord.Cursor{HasKey: true, Key: key("n")}})
	wantErr(t, "Checkpoint past the new end", err, coord.ErrCursorOutOfRange)
	// Unbounded shards split too; the residual stays unbounded.
	l2 := x.acquire(run, 2, 10)
	_, res3, err := x.b.SplitResidual(x.ctx, x.now, coord.SplitResidualRequest{Lease: l2, Op: x.nextOp(), Key: key("zz"), Metadata: []byte("md")})
	noErr(t, "SplitResidual of an unbounded shard", err)
	if len(res3.End) != 0 || string(res3.Metadata) != "md" {
		t.Fatalf("residual of unbounded shard: %+v", res3)
	}
	// The residual is an ordinary shard.
	rl := x.acquire(run, res.ID, 11)
	x.checkpoint(rl, "y")
	x.complete(rl)
}

func testSplitLimits(t *testing.T, f Factory) {
	x := newFixture(t, f, smallLimits()) // 4 children per split, 5 spawned per shard, keys <= 8
	run := x.newRun(spec(1, "a", "z"))
	l := x.acquire(run, 1, 10)
	_, _, err := x.b.SplitReplace(x.ctx, x.now, coord.SplitReplaceRequest{Lease: l, Op: x.nextOp(), Children: children("a", "b", "b", "c", "c", "d", "d", "e", "e", "z")})
	wantErr(t, "too many children", err, coord.ErrLimitExceeded)
	var le *coord.LimitError
	if !errors.As(err, &le) || le.Limit != coord.LimitChildrenPerSplit || le.Value != 5 || le.Max != 4 {
		t.Fatalf("want LimitError children_per_split 5 > 4, got %v", err)
	}
	_, _, err = x.b.SplitResidual(x.ctx, x.now, coord.SplitResidualRequest{Lease: l, Op: x.nextOp(), Key: key("k12345678")})
	wantErr(t, "residual key too long", err, coord.ErrLimitExceeded)
	for i, k := range []string{"y", "x", "w", "v", "u"} {
		_, _, err := x.b.SplitResidual(x.ctx, x.now, coord.SplitResidualRequest{Lease: l, Op: x.nextOp(), Key: key(k)})
		noErr(t, fmt.Sprintf("residual %d", i), err)
	}
	_, _, err = x.b.SplitResidual(x.ctx, x.now, coord.SplitResidualRequest{Lease: l, Op: x.nextOp(), Key: key("t")})
	if !errors.As(err, &le) || le.Limit != coord.LimitSpawnedPerShard || le.Value != 6 || le.Max != 5 {
		t.Fatalf("want LimitError spawned_per_shard 6 > 5, got %v", err)
	}
	_, _, err = x.b.SplitReplace(x.ctx, x.now, coord.SplitReplaceRequest{Lease: l, Op: x.nextOp(), Children: children("a", "m", "m", "u")})
	if !errors.As(err, &le) || le.Limit != coord.LimitSpawnedPerShard {
		t.Fatalf("want LimitError spawned_per_shard for replace, got %v", err)
	}
}
