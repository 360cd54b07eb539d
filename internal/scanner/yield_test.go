package scanner_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// TestWorkerYieldsToServing: a worker with the node's Background does
// not scan a batch while a git request is served, scans it once the
// request is done, and, yielding (its git in the background budget, its
// scanning on threads of lower priority), finds every planted secret as
// a worker without one does (docs/adr/0051-geometric-checkpoints.md).
func TestWorkerYieldsToServing(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	repo := f.repo("alice", "demo")
	want := history(t, f.remote("alice", "demo"), 0)
	ctx := context.Background()
	s := f.scanner(scanner.Options{})
	bg := gitexec.NewBackground(gitexec.BackgroundOptions{MaxPause: time.Hour, Processes: 1})
	var mu sync.Mutex
	batches := 0
	w := f.worker(s, scanner.WorkerOptions{Background: bg, OnBatch: func(scanner.Spec, coord.Lease, []string) {
		mu.Lock()
		batches++
		mu.Unlock()
	}})
	if _, err := s.Reconcile(ctx, "alice", repo.ID); err != nil {
		t.Fatal(err)
	}

	served := bg.Serving() // a clone in progress
	stepped := make(chan error, 1)
	go func() {
		_, err := w.Step(ctx)
		stepped <- err
	}()
	for bg.Stats().Pausing == 0 {
		select {
		case err := <-stepped:
			t.Fatalf("the worker finished a step while a request was served (%v)", err)
		case <-time.After(time.Millisecond): // polling for the pause, not a timed assertion
		}
	}
	mu.Lock()
	n := batches
	mu.Unlock()
	if n != 0 {
		t.Fatalf("%d batches scanned while a request was served", n)
	}
	served()
	if err := <-stepped; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n = batches
	mu.Unlock()
	if n == 0 {
		t.Fatal("no batch scanned after the request was done")
	}
	drain(t, s, w)
	if got := view(t, f.srv.Alerts(), "alice", repo.ID); len(got) != len(want) {
		t.Fatalf("%d alerts, want %d: %+v", len(got), len(want), got)
	}
	if st := bg.Stats(); st.Running != 0 || st.Pauses == 0 {
		t.Fatalf("background stats after the scans: %+v", st)
	}
}
