package hooks

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v68/github"

	"github.com/ghost-scm/ghost/internal/wal"
)

// TestDeliversPingAndPushesInOrder: a hook gets its ping, then each push
// of the log in seq order (a branch's creation as create and push), every
// body signed and parsed by go-github.
func TestDeliversPingAndPushesInOrder(t *testing.T) {
	e := newEnv(t, nil)
	rc := newReceiver(t, "s3cret")
	d := NewDispatcher(e.hooks, e.dispatchOptions(e.board(nil, 5*time.Second)))
	e.hooks.SetWake(d.Notify)
	run(t, d)
	ctx := context.Background()

	e.push(wal.Transition{Ref: "refs/heads/old", Old: wal.ZeroID, New: oid(9)}) // before the hook: not delivered
	time.Sleep(5 * time.Millisecond)
	e.addHook(t, e.scope(), rc.srv.URL, "s3cret", "push", "create")
	time.Sleep(5 * time.Millisecond)
	e.push(wal.Transition{Ref: "refs/heads/main", Old: wal.ZeroID, New: oid(1)})
	e.push(wal.Transition{Ref: "refs/heads/main", Old: oid(1), New: oid(2)})
	e.push(wal.Transition{Ref: "refs/heads/main", Old: oid(2), New: oid(3)}, wal.Transition{Ref: "refs/tags/v1", Old: wal.ZeroID, New: oid(3)})
	d.AfterPush(ctx, "alice", e.repo.ID, "web")

	g := rc.waitFor(t, 7, 10*time.Second)
	want := []string{"ping", "create", "push", "push", "push", "create", "push"}
	for i, w := range want {
		if g[i].event != w {
			t.Fatalf("delivery %d is %s, want %s (all: %v)", i, g[i].event, w, events(g))
		}
	}
	if p := g[2].parsed.(*github.PushEvent); p.GetRef() != "refs/heads/main" || !p.GetCreated() || p.GetAfter() != oid(1) || p.GetPusher().GetName() != "alice" || p.GetRepo().GetFullName() != "alice/web" {
		t.Errorf("first push: %+v", p)
	}
	if p := g[4].parsed.(*github.PushEvent); p.GetBefore() != oid(2) || p.GetAfter() != oid(3) {
		t.Errorf("third push: before %s after %s", p.GetBefore(), p.GetAfter())
	}
	if c := g[5].parsed.(*github.CreateEvent); c.GetRefType() != "tag" || c.GetRef() != "v1" {
		t.Errorf("tag create: %+v", c)
	}
	ids := map[string]bool{}
	for _, x := range g {
		if ids[x.guid] {
			t.Errorf("delivery id %s used for two events", x.guid)
		}
		ids[x.guid] = true
		if bytes.Contains(x.body, []byte("s3cret")) {
			t.Errorf("the secret is in a %s payload", x.event)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(rc.requests()); n != 7 {
		t.Errorf("%d requests, want 7: nothing more, nothing twice", n)
	}
}

func events(g []got) []string {
	var out []string
	for _, x := range g {
		out = append(out, x.event)
	}
	return out
}

// TestReceiverDownThenUp: the receiver answers 503 to the first three
// attempts; every event still arrives, in order, and each retry carried
// the same delivery id as the attempt that got through. The deliveries
// are in the log: three retrying, then delivered.
func TestReceiverDownThenUp(t *testing.T) {
	e := newEnv(t, nil)
	rc := newReceiver(t, "k")
	d := NewDispatcher(e.hooks, e.dispatchOptions(e.board(nil, 5*time.Second)))
	e.hooks.SetWake(d.Notify)
	h := e.addHook(t, e.scope(), rc.srv.URL, "k", "push")
	rc.mu.Lock()
	rc.fail = 3
	rc.mu.Unlock()
	old := wal.ZeroID
	for i := 1; i <= 5; i++ {
		e.push(wal.Transition{Ref: "refs/heads/main", Old: old, New: oid(i)})
		old = oid(i)
	}
	run(t, d)
	d.AfterPush(context.Background(), "alice", e.repo.ID, "web")
	g := rc.waitFor(t, 6, 10*time.Second)
	if g[0].event != "ping" {
		t.Fatalf("first delivery %s, want the ping", g[0].event)
	}
	for i := 1; i <= 5; i++ {
		if p := g[i].parsed.(*github.PushEvent); p.GetAfter() != oid(i) {
			t.Errorf("push %d delivered as after=%s: out of order", i, p.GetAfter())
		}
	}
	all := rc.requests()
	if len(all) != 9 {
		t.Fatalf("%d requests, want 9 (3 refused, then 6)", len(all))
	}
	for i := 0; i < 3; i++ {
		if all[i].guid != all[3].guid || all[i].status != 503 {
			t.Errorf("attempt %d: id %s status %d, want the id of the attempt that got through (%s)", i, all[i].guid, all[i].status, all[3].guid)
		}
	}
	var ds []Delivery
	for deadline := time.Now().Add(5 * time.Second); len(ds) < 9 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var err error
		if ds, err = e.hooks.Deliveries(context.Background(), e.scope(), h.ID, 0); err != nil {
			t.Fatal(err)
		}
	}
	retrying := 0
	for _, x := range ds {
		if x.Outcome == "retrying" {
			retrying++
			if x.StatusCode != 503 || x.GUID != all[0].guid {
				t.Errorf("retrying delivery %+v", x)
			}
		}
	}
	if len(ds) != 9 || retrying != 3 {
		t.Errorf("%d deliveries logged (%d retrying), want 9 (3)", len(ds), retrying)
	}
}

// TestGivesUpAndDisables: an event the receiver refuses for the whole
// retry window is marked failed and the next goes; after DisableAfter
// events in a row the hook is turned off, with the reason shown.
func TestGivesUpAndDisables(t *testing.T) {
	e := newEnv(t, nil)
	rc := newReceiver(t, "k")
	rc.fail = 1 << 30
	o := e.dispatchOptions(e.board(nil, 5*time.Second))
	o.RetryFor, o.DisableAfter = 150*time.Millisecond, 3
	d := NewDispatcher(e.hooks, o)
	e.hooks.SetWake(d.Notify)
	h := e.addHook(t, e.scope(), rc.srv.URL, "k", "push")
	old := wal.ZeroID
	for i := 1; i <= 5; i++ {
		e.push(wal.Transition{Ref: "refs/heads/main", Old: old, New: oid(i)})
		old = oid(i)
	}
	run(t, d)
	d.AfterPush(context.Background(), "alice", e.repo.ID, "web")
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := e.hooks.Get(context.Background(), e.scope(), h.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Active {
			if got.Failures != 3 || !strings.Contains(got.DisabledReason, "3 events in a row failed") || !strings.Contains(got.DisabledReason, "503") {
				t.Errorf("disabled with %d failures, reason %q", got.Failures, got.DisabledReason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hook is still on: %+v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The ping was retried for the window; the next two events got one
	// attempt each (the hook was failing); nothing after the hook went off.
	time.Sleep(200 * time.Millisecond)
	reqs := rc.requests()
	seen := map[string]int{}
	for _, r := range reqs {
		seen[r.guid]++
	}
	if len(seen) != 3 {
		t.Errorf("%d distinct events attempted, want 3 (then the hook was off)", len(seen))
	}
	if reqs[len(reqs)-1].guid == reqs[0].guid || seen[reqs[len(reqs)-1].guid] != 1 {
		t.Errorf("while failing, an event gets one attempt: %v", seen)
	}
}

// TestRedeliver: a delivery sent again carries the same body and
// delivery id, and the log marks it as a redelivery.
func TestRedeliver(t *testing.T) {
	e := newEnv(t, nil)
	rc := newReceiver(t, "k")
	d := NewDispatcher(e.hooks, e.dispatchOptions(e.board(nil, 5*time.Second)))
	e.hooks.SetWake(d.Notify)
	run(t, d)
	h := e.addHook(t, e.scope(), rc.srv.URL, "k", "push")
	first := rc.waitFor(t, 1, 5*time.Second)[0]
	ctx := context.Background()
	var ds []Delivery
	for deadline := time.Now().Add(5 * time.Second); len(ds) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ds, _ = e.hooks.Deliveries(ctx, e.scope(), h.ID, 0)
	}
	if len(ds) != 1 {
		t.Fatalf("%d deliveries logged", len(ds))
	}
	if err := e.hooks.Redeliver(ctx, e.scope(), h.ID, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	again := rc.waitFor(t, 2, 5*time.Second)[1]
	if again.guid != first.guid || !bytes.Equal(again.body, first.body) {
		t.Errorf("redelivered %s %q, want %s and the same body", again.guid, again.body, first.guid)
	}
	for deadline := time.Now().Add(5 * time.Second); len(ds) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ds, _ = e.hooks.Deliveries(ctx, e.scope(), h.ID, 0)
	}
	if len(ds) != 2 || !ds[0].Redelivery || ds[1].Redelivery {
		t.Errorf("log: %+v", ds)
	}
	if err := e.hooks.Redeliver(ctx, e.scope(), h.ID, "not-an-id"); !errors.Is(err, ErrNotFound) {
		t.Errorf("redeliver of no delivery: %v", err)
	}
}

// TestMoreHooksThanRoom: a node delivers for at most MaxHeld hooks at
// once, and takes the others as room frees: every hook gets the push.
func TestMoreHooksThanRoom(t *testing.T) {
	e := newEnv(t, nil)
	rc := newReceiver(t, "k")
	o := e.dispatchOptions(e.board(nil, 5*time.Second))
	o.MaxHeld = 2
	d := NewDispatcher(e.hooks, o)
	e.hooks.SetWake(d.Notify)
	run(t, d)
	const n = 7
	for i := 0; i < n; i++ {
		e.addHook(t, e.scope(), rc.srv.URL, "k", "push")
	}
	e.push(wal.Transition{Ref: "refs/heads/main", Old: wal.ZeroID, New: oid(1)})
	d.AfterPush(context.Background(), "alice", e.repo.ID, "web")
	g := rc.waitFor(t, 2*n, 10*time.Second)
	pushes := 0
	for _, x := range g {
		if x.event == "push" {
			pushes++
		}
	}
	if pushes != n {
		t.Errorf("%d hooks got the push, want %d", pushes, n)
	}
}
