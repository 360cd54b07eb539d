package scanner_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// TestIdleWorkersWaitForWork: three idle workers of one process, on etcd,
// do not poll: in two idle seconds they list the runs not once. A new run
// wakes one of them, which scans it at once, and the wake-up costs a few
// listings, not one per worker per second.
func TestIdleWorkersWaitForWork(t *testing.T) {
	var lists atomic.Int64
	f := newFixture(t, fixtureOpts{store: func(st objstore.Store) objstore.Store {
		fs := faultstore.New(st)
		fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
			if c.Op == faultstore.OpList && strings.HasPrefix(c.Key, "scans/active/") {
				lists.Add(1)
			}
			return faultstore.Fault{}
		})
		return fs
	}})
	f.tenant("alice")
	repo := f.repo("alice", "demo")
	history(t, f.remote("alice", "demo"), 0)
	s := f.scanner(scanner.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for range 3 {
		w := f.worker(s, scanner.WorkerOptions{Idle: time.Hour, SafetyPoll: time.Hour})
		wg.Add(1)
		go func() { defer wg.Done(); w.Run(ctx) }()
	}
	time.Sleep(2 * time.Second) // every worker's first look, and the watch's
	before := lists.Load()
	time.Sleep(2 * time.Second)
	if n := lists.Load() - before; n != 0 {
		t.Fatalf("idle workers listed the runs %d times in 2 s, want 0", n)
	}
	spec := scanner.Spec{Tenant: "alice", RepoID: repo.ID, Kind: scanner.KindPush, Seq: 7}
	start := time.Now()
	if _, err := s.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	for status(t, s, spec).State != "done" {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the run is %+v 20 s after it started", status(t, s, spec))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("done %v after it started", time.Since(start).Round(time.Millisecond))
	time.Sleep(time.Second)
	if n := lists.Load() - before; n > 10 {
		t.Fatalf("one new run cost %d listings of the runs, want a few", n)
	}
}
