package hooks

import (
	"bytes"
	"context"
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
