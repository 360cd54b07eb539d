package repocache_test

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// readAfterCommit is a read that starts after a commit returned. It is a
// named function so the test can find its goroutine in a stack dump.
func readAfterCommit(c *repocache.Cache, repo string, out chan<- *repocache.Snapshot, errs chan<- error) {
	snap, err := c.Materialize(context.Background(), repo)
	out <- snap
	errs <- err
}

// waitBlockedIn spins until some goroutine is blocked in a select inside
// Materialize, called from fn. It waits on a state, not on time: the
// goroutine can only get there, and stay there until the test releases it.
func waitBlockedIn(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "[select") && strings.Contains(g, "(*Cache).Materialize(") && strings.Contains(g, fn+"(") {
				return
			}
		}
		if n == len(buf) {
			buf = make([]byte, 2*len(buf))
		}
		runtime.Gosched()
	}
}

// TestMaterializeFreshDuringFlight: while one materialization of a
// repository is in flight (it has read the index and is indexing a
// layer), a commit lands and returns, and then a read starts. That read
// must see the commit: it may not join the flight in progress, whose
// index is older than the commit (docs/design.md §5.4; the slot
// comment in flight.go).
func TestMaterializeFreshDuringFlight(t *testing.T) {
	const repo = "fresh"
	inner := memstore.New()
	fs := faultstore.New(inner)
	writer := wal.New(inner, wal.Options{})
	cache, err := repocache.New(t.TempDir(), wal.New(fs, wal.Options{}), repocache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)

	src := newSource(t)
	c1 := src.commit("main")
	commit := func(pack []byte, ts ...wal.Transition) {
		t.Helper()
		if _, err := writer.Commit(context.Background(), repo, wal.Push{Transitions: ts, Pack: bytes.NewReader(pack), PackSize: int64(len(pack))}); err != nil {
			t.Fatal(err)
		}
	}
	commit(src.pack([]string{c1}, nil), wal.Transition{Ref: "refs/heads/main", Old: z(), New: c1})

	// The first read of a layer's objects holds the flight that made it,
	// after that flight has read the index.
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if (c.Op == faultstore.OpGet || c.Op == faultstore.OpGetRange) && strings.Contains(c.Key, "/entries/") {
			first := false
			once.Do(func() { first = true })
			if first {
				close(started)
				<-release
			}
		}
		return faultstore.Fault{}
	})

	firstErr := make(chan error, 1)
	go func() {
		_, err := cache.Materialize(context.Background(), repo)
		firstErr <- err
	}()
	<-started // the first flight read the index at seq 1

	c2 := src.commit("main")
	commit(src.pack([]string{c2}, []string{c1}), wal.Transition{Ref: "refs/heads/main", Old: c1, New: c2})

	snaps, errs := make(chan *repocache.Snapshot, 1), make(chan error, 1)
	go readAfterCommit(cache, repo, snaps, errs)
	waitBlockedIn(t, "repocache_test.readAfterCommit")
	close(release)

	if err := <-firstErr; err != nil {
		t.Fatalf("first materialization: %v", err)
	}
	snap, err := <-snaps, <-errs
	if err != nil {
		t.Fatal(err)
	}
	if snap.Index.Seq != 2 {
		t.Fatalf("a read that started after commit 2 returned got seq %d", snap.Index.Seq)
	}
	if got := gitT(t, snap.Dir, "rev-parse", "refs/heads/main"); got != c2 {
		t.Fatalf("main = %s, want %s (the commit that returned before the read)", got, c2)
	}
}
