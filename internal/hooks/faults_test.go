package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v68/github"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// These are fault injections (faultstore): each object-store write of
// delivery fails once, in each of the ways a write can fail, and in
// particular as a write that landed and then reported an error. What
// each write path does then is said at the code that writes
// (docs/adr/0105-webhook-delivery.md, "Unknown outcomes"); here every
// event must still be delivered, in order, and any duplicate must carry
// the delivery id of the first.

// once returns a plan that fails the first call of op on a key with
// prefix the way out says, and every later call passes; then, when
// andReads, reads of the same key fail for a while too, so that the
// writer cannot settle the outcome by reading it back.
func once(op faultstore.Op, prefix string, out faultstore.Outcome, andReads bool) faultstore.Plan {
	var mu sync.Mutex
	fired, reads := false, 0
	return func(c faultstore.Call) faultstore.Fault {
		mu.Lock()
		defer mu.Unlock()
		if !strings.HasPrefix(c.Key, prefix) {
			return faultstore.Fault{}
		}
		if !fired && c.Op == op {
			fired = true
			return faultstore.Fault{Outcome: out}
		}
		if fired && andReads && (c.Op == faultstore.OpGet || c.Op == faultstore.OpPutIfMatch || c.Op == faultstore.OpPutIfAbsent) && reads < 12 {
			reads++
			return faultstore.Fault{Outcome: faultstore.Lost}
		}
		return faultstore.Fault{}
	}
}

// deliverAll runs one hook, three pushes and a queued event through a
// dispatcher over fs with plan installed after the hook exists, and
// checks what the receiver got.
func deliverAll(t *testing.T, fs *faultstore.Store, plan faultstore.Plan) {
	t.Helper()
	e := newEnv(t, fs)
	rc := newReceiver(t, "k")
	o := e.dispatchOptions(e.board(nil, 5*time.Second))
	d := NewDispatcher(e.hooks, o)
	e.hooks.SetWake(d.Notify)
	e.addHook(t, e.scope(), rc.srv.URL, "k", "push", "repository")
	rc.waitFor(t, 0, time.Second)
	old := wal.ZeroID
	for i := 1; i <= 3; i++ {
		e.push(wal.Transition{Ref: "refs/heads/main", Old: old, New: oid(i)})
		old = oid(i)
	}
	fs.SetPlan(plan)
	run(t, d)
	ctx := context.Background()
	d.AfterPush(ctx, "alice", e.repo.ID, "web")
	payload, _ := json.Marshal(map[string]string{"action": "publicized"})
	ev := Event{Name: EventRepository, Repo: RepoRef{Tenant: "alice", ID: e.repo.ID, Name: "web"}, Payload: payload, ID: "vis-1", At: time.Now().Add(time.Second)}
	if err := e.hooks.Enqueue(ctx, ev); err != nil {
		// The outcome of a copy is unknown: enqueueing the same event
		// again stores it once.
		if err := e.hooks.Enqueue(ctx, ev); err != nil {
			t.Fatalf("enqueue again: %v", err)
		}
	}
	// The board is told of everything; a stream that stopped on an
	// unknown outcome is taken up again by the next notice.
	deadline := time.Now().Add(15 * time.Second)
	for len(distinct(rc.accepted())) < 5 && time.Now().Before(deadline) {
		d.AfterPush(ctx, "alice", e.repo.ID, "web")
		time.Sleep(50 * time.Millisecond)
	}
	g := rc.accepted()
	u := distinct(g)
	want := []string{"ping", "push:" + oid(1), "push:" + oid(2), "push:" + oid(3), "repository"}
	if strings.Join(u, " ") != strings.Join(want, " ") {
		t.Fatalf("delivered %v, want each of %v once, in order", u, want)
	}
	byGUID := map[string]string{}
	for _, x := range g {
		k := label(x)
		if prev, ok := byGUID[x.guid]; ok && prev != k {
			t.Errorf("delivery id %s carried %s and %s", x.guid, prev, k)
		}
		byGUID[x.guid] = k
	}
	if len(byGUID) != len(want) {
		t.Errorf("%d delivery ids for %d events: a duplicate carried a new id", len(byGUID), len(want))
	}
}

func label(x got) string {
	if p, ok := x.parsed.(*github.PushEvent); ok {
		return "push:" + p.GetAfter()
	}
	return x.event
}

// distinct lists the events in the order they first arrived.
func distinct(g []got) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range g {
		if k := label(x); !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

func TestWriteOutcomesDuringDelivery(t *testing.T) {
	for _, c := range []struct {
		name     string
		op       faultstore.Op
		prefix   string
		andReads bool
	}{
		// The watermark's compare-and-swap: settled by reading it back,
		// or, when the reads fail too, the stream stops and the next
		// dispatch goes on from what is stored.
		{"state write", faultstore.OpPutIfMatch, statePrefix, false},
		{"first state write", faultstore.OpPutIfAbsent, statePrefix, false},
		{"state write, unsettled", faultstore.OpPutIfMatch, statePrefix, true},
		// A delivered queued event's delete: it may stay and go again.
		{"queue delete", faultstore.OpDelete, queuePrefix, false},
		// A queued copy's put: the enqueuer is told, and enqueues again.
		{"queue put", faultstore.OpPut, queuePrefix, false},
		// The pending mark of an enqueue: nothing is queued, the enqueuer
		// is told and enqueues again.
		{"mark put", faultstore.OpPut, pendingPrefix, false},
		// The delivery log: a record of what happened, never a reason to
		// deliver again.
		{"delivery log put", faultstore.OpPut, deliveriesPrefix, false},
	} {
		for _, out := range faultstore.Faults() {
			t.Run(c.name+"/"+out.String(), func(t *testing.T) {
				fs := faultstore.New(memstore.New())
				deliverAll(t, fs, once(c.op, c.prefix, out, c.andReads))
			})
		}
	}
}

// TestHookChangeOutcomes: a hook's creation, change and deletion whose
// compare-and-swap landed and reported an error are settled by reading
// the set back: the caller is told they applied, and each applied once.
func TestHookChangeOutcomes(t *testing.T) {
	for _, out := range faultstore.Faults() {
		t.Run(out.String(), func(t *testing.T) {
			fs := faultstore.New(memstore.New())
			e := newEnv(t, fs)
			ctx := context.Background()
			u := "https://example.com/h"
			fs.SetPlan(once(faultstore.OpPutIfAbsent, setsPrefix, out, false))
			h, err := e.hooks.Create(ctx, e.scope(), Input{URL: &u}, "alice")
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			fs.SetPlan(once(faultstore.OpPutIfMatch, setsPrefix, out, false))
			off := false
			if h, err = e.hooks.Update(ctx, e.scope(), h.ID, Input{Active: &off}); err != nil || h.Active {
				t.Fatalf("update: %v %+v", err, h)
			}
			fs.SetPlan(once(faultstore.OpPutIfMatch, setsPrefix, out, false))
			if err := e.hooks.Delete(ctx, e.scope(), h.ID); err != nil {
				t.Fatalf("delete: %v", err)
			}
			fs.SetPlan(nil)
			if hs, err := e.hooks.List(ctx, e.scope()); err != nil || len(hs) != 0 {
				t.Fatalf("after: %v %+v", err, hs)
			}
			// Unsettled: the set cannot be read back either. The caller is
			// told the outcome is unknown, never that it failed.
			fs.SetPlan(once(faultstore.OpPutIfMatch, setsPrefix, out, true))
			if _, err := e.hooks.Create(ctx, e.scope(), Input{URL: &u}, "alice"); err != nil && !errors.Is(err, objstore.ErrOutcomeUnknown) {
				if out != faultstore.Refused {
					t.Errorf("unsettled create: %v, want an unknown outcome", err)
				}
			}
		})
	}
}

// TestMarkOutcomeRefusesThePush: the push path's mark is written before
// the commit point; a mark whose outcome is unknown refuses the push
// (BeforePush's error), which changes nothing: a stray mark costs the
// reconciler one look.
func TestMarkOutcomeRefusesThePush(t *testing.T) {
	fs := faultstore.New(memstore.New())
	e := newEnv(t, fs)
	u := "https://example.com/h"
	if _, err := e.hooks.Create(context.Background(), e.scope(), Input{URL: &u}, "alice"); err != nil {
		t.Fatal(err)
	}
	fs.SetPlan(once(faultstore.OpPut, pendingPrefix, faultstore.LandedThenError, false))
	if err := e.hooks.BeforePush(context.Background(), "alice", e.repo.ID, "web"); !errors.Is(err, objstore.ErrOutcomeUnknown) {
		t.Errorf("BeforePush: %v, want the unknown outcome", err)
	}
}

// TestPreserveOutcomeFailsTheCompaction: the kept header's put whose
// outcome is unknown is an error, and compaction folds nothing.
func TestPreserveOutcomeFailsTheCompaction(t *testing.T) {
	fs := faultstore.New(memstore.New())
	e := newEnv(t, fs)
	e.push(wal.Transition{Ref: "refs/heads/main", Old: wal.ZeroID, New: oid(1)})
	x, err := e.log.Head(context.Background(), e.repo.ID)
	if err != nil {
		t.Fatal(err)
	}
	fs.SetPlan(once(faultstore.OpPut, layersPrefix, faultstore.LandedThenError, false))
	if err := e.hooks.PreserveEvents(context.Background(), e.repo.ID, 1, x.Layers[0]); !errors.Is(err, objstore.ErrOutcomeUnknown) {
		t.Errorf("PreserveEvents: %v, want the unknown outcome", err)
	}
}
