package etcdcoord_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
)

// boardOn returns the board "b" of namespace ns for a process of its own
// (its own client, hence its own session).
func boardOn(t *testing.T, ns string, c *clientv3.Client) *etcdcoord.Board {
	t.Helper()
	be, err := etcdcoord.New(etcdcoord.Config{Client: c, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	bd, err := be.Board("b", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bd.Close() })
	return bd
}

func ownClient(t *testing.T) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: client.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestBoardHolds: one process holds a name at a time; a later hold's
// fence is higher; releasing returns the work posted meanwhile; an item
// is finished only at the revision its finisher read; a process whose
// session ends loses its holds to the others.
func TestBoardHolds(t *testing.T) {
	ctx := context.Background()
	ns := fmt.Sprintf("/test/board%d", namespaces.Add(1))
	a, b := boardOn(t, ns, ownClient(t)), boardOn(t, ns, ownClient(t))

	if err := a.Post(ctx, []coord.BoardItem{{Key: "h1/s1", Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	ha, items, ok, err := a.TryHoldWork(ctx, "h1", "h1/")
	if err != nil || !ok || len(items) != 1 || items[0].Key != "h1/s1" || string(items[0].Value) != "v" {
		t.Fatalf("take: %v %v %+v", ok, err, items)
	}
	if _, ok, err := b.TryHold(ctx, "h1"); ok || err != nil {
		t.Fatalf("a second holder: %v %v", ok, err)
	}
	// Posted again while held: finishing at the old revision keeps it.
	if err := b.Post(ctx, []coord.BoardItem{{Key: "h1/s1", Value: []byte("w")}}); err != nil {
		t.Fatal(err)
	}
	if done, err := a.Done(ctx, items[0]); done || err != nil {
		t.Fatalf("done at a stale revision: %v %v", done, err)
	}
	left, err := a.ReleaseWork(ctx, ha, "h1/")
	if err != nil || len(left) != 1 || string(left[0].Value) != "w" {
		t.Fatalf("release: %v %+v", err, left)
	}
	select {
	case <-ha.Lost():
	case <-time.After(time.Second):
		t.Fatal("a released hold is not lost")
	}
	hb, items, ok, err := b.TryHoldWork(ctx, "h1", "h1/")
	if err != nil || !ok || hb.Fence() <= ha.Fence() || len(items) != 1 {
		t.Fatalf("the next holder: %v %v fence %d after %d, %+v", ok, err, hb.Fence(), ha.Fence(), items)
	}
	if done, err := b.Done(ctx, items[0]); !done || err != nil {
		t.Fatalf("done: %v %v", done, err)
	}
	// A stale release changes nothing.
	if _, err := a.ReleaseWork(ctx, ha, "h1/"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := a.TryHold(ctx, "h1"); ok {
		t.Fatal("a stale release freed the name")
	}
	// b's session ends: its holds go at once, and a takes the name.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hb.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("the hold outlived its session")
	}
	if _, ok, err := a.TryHold(ctx, "h1"); !ok || err != nil {
		t.Fatalf("after the holder's session ended: %v %v", ok, err)
	}
}

// TestBoardWatch: a watcher gets the board as a snapshot, then every post,
// finish, hold and release.
func TestBoardWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := fmt.Sprintf("/test/board%d", namespaces.Add(1))
	a := boardOn(t, ns, ownClient(t))
	if err := a.Post(ctx, []coord.BoardItem{{Key: "h0/s", Value: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Watch(ctx, func(ev coord.BoardEvent) {
			mu.Lock()
			defer mu.Unlock()
			switch ev.Kind {
			case coord.BoardSnapshot:
				got = append(got, fmt.Sprintf("snapshot %d items", len(ev.Items)))
			case coord.BoardPosted:
				got = append(got, "posted "+ev.Key)
			case coord.BoardDone:
				got = append(got, "done "+ev.Key)
			case coord.BoardHeld:
				got = append(got, "held "+ev.Key)
			case coord.BoardReleased:
				got = append(got, "released "+ev.Key)
			}
		})
	}()
	wait := func(n int) []string {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			g := append([]string(nil), got...)
			mu.Unlock()
			if len(g) >= n {
				return g
			}
		}
		t.Fatalf("events: %v", got)
		return nil
	}
	wait(1)
	if err := a.Post(ctx, []coord.BoardItem{{Key: "h1/s", Value: []byte("y")}}); err != nil {
		t.Fatal(err)
	}
	h, items, _, err := a.TryHoldWork(ctx, "h1", "h1/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Done(ctx, items[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReleaseWork(ctx, h, "h1/"); err != nil {
		t.Fatal(err)
	}
	g := wait(5)
	want := []string{"snapshot 1 items", "posted h1/s", "held h1", "done h1/s", "released h1"}
	if fmt.Sprint(g) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", g, want)
	}
	cancel()
	<-done
}
