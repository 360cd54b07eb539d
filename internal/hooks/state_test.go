package hooks

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/testkit"
	"github.com/ghost-scm/ghost/internal/wal"
)

// TestStaleDispatcherChangesNothing: a dispatcher whose hold is older
// than the one that last wrote a hook's state (it lost its hold without
// knowing) cannot move the watermark, whether it knows the state's ETag
// or not.
func TestStaleDispatcherChangesNothing(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	st := &streamState{V: stateVersion, Hook: "r.x.1", Stream: e.repo.ID, Tenant: "alice", Epoch: 1, Fence: 5, Seq: 10}
	if _, err := e.hooks.writeState(ctx, st, ""); err != nil {
		t.Fatal(err)
	}
	_, etag, err := e.hooks.readStateTag(ctx, st.Stream, st.Hook)
	if err != nil {
		t.Fatal(err)
	}
	newer := *st
	newer.Fence, newer.Seq = 7, 11
	if _, err := e.hooks.writeState(ctx, &newer, etag); err != nil {
		t.Fatal(err)
	}
	stale := *st
	stale.Seq = 12
	for _, tag := range []string{"", etag} {
		if _, err := e.hooks.writeState(ctx, &stale, tag); !errors.Is(err, errStale) {
			t.Errorf("a write with fence 5 over fence 7 (etag %q): %v, want errStale", tag, err)
		}
	}
	got, err := e.hooks.readState(ctx, st.Stream, st.Hook)
	if err != nil || got.Fence != 7 || got.Seq != 11 {
		t.Errorf("stored %+v %v, want the newer dispatcher's", got, err)
	}
}

// TestYoungMarkStays: a mark written before a push's commit point is not
// removed by a reconcile pass that finds its stream done, until it is
// older than the grace: the push it stands for may be about to land.
// An old mark of a done stream goes.
func TestYoungMarkStays(t *testing.T) {
	e := newEnv(t, nil)
	clock := testkit.NewClock(time.Now())
	e.hooks.now = clock.Now
	d := NewDispatcher(e.hooks, e.dispatchOptions(e.board(nil, 5*time.Second)))
	ctx := context.Background()
	u := "https://example.com/h"
	if _, err := e.hooks.Create(ctx, e.scope(), Input{URL: &u}, "alice"); err != nil {
		t.Fatal(err)
	}
	// The ping is queued: the stream is not done until it is delivered;
	// drop it, as if it were.
	e.hooks.removeStream(ctx, e.repo.ID, hookKey(e.scope(), mustOnly(t, e).ID))
	if err := e.hooks.BeforePush(ctx, "alice", e.repo.ID, "web"); err != nil {
		t.Fatal(err)
	}
	// The state of the hook says it is at the head (seq 0: no push yet).
	h := mustOnly(t, e)
	st := &streamState{V: stateVersion, Hook: hookKey(e.scope(), h.ID), Stream: e.repo.ID, Tenant: "alice", Epoch: 1}
	if _, err := e.hooks.writeState(ctx, st, ""); err != nil {
		t.Fatal(err)
	}
	r := &reconciler{every: time.Millisecond, grace: time.Minute, backoff: map[string]markBackoff{}}
	if err := d.reconcilePending(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := e.hooks.readMark(ctx, e.repo.ID); !ok {
		t.Fatal("a young mark was removed: the push it stands for may not have landed yet")
	}
	// The push lands; the stream is behind until its hook delivers it.
	e.push(wal.Transition{Ref: "refs/heads/main", Old: wal.ZeroID, New: oid(1)})
	clock.Advance(2 * time.Minute)
	r.backoff = map[string]markBackoff{}
	if err := d.reconcilePending(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := e.hooks.readMark(ctx, e.repo.ID); !ok {
		t.Fatal("the mark of a stream behind its log was removed")
	}
	st.Seq = 1
	if _, err := e.hooks.writeState(ctx, st, ""); err != nil {
		t.Fatal(err)
	}
	r.backoff = map[string]markBackoff{}
	if err := d.reconcilePending(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := e.hooks.readMark(ctx, e.repo.ID); ok {
		t.Fatal("an old mark of a done stream stays")
	}
}

func mustOnly(t *testing.T, e *env) Hook {
	t.Helper()
	hs, err := e.hooks.List(context.Background(), e.scope())
	if err != nil || len(hs) != 1 {
		t.Fatalf("hooks: %v %v", hs, err)
	}
	return hs[0]
}
