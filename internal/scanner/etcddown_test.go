package scanner_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ghost-scm/ghost/internal/etcdserver"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// TestEtcdDownPushesLandAndRunsCatchUp runs the server's own push hook
// against an etcd that is stopped during the pushes: the pushes land (git
// push succeeds), their runs are queued in the object store, and once
// etcd is back the workers create the missing coord runs and finish them;
// the watermark reaches the head.
func TestEtcdDownPushesLandAndRunsCatchUp(t *testing.T) {
	dir := t.TempDir()
	e1, err := etcdserver.Start(context.Background(), etcdserver.Options{Dir: dir, UnsafeNoFsync: true, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	addr := e1.ClientAddr()
	client, err := etcdserver.NewClient([]string{e1.Endpoint()})
	if err != nil {
		e1.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	e1.Close() // down for every push

	f := newFixture(t, fixtureOpts{client: client, scan: &scanner.Options{StartTimeout: 200 * time.Millisecond}})
	f.tenant("alice")
	repo := f.repo("alice", "demo")
	want := history(t, f.remote("alice", "demo"), 0) // every push succeeds
	f.closeServer()                                  // waits for the hook's starts

	ctx := context.Background()
	s := f.srv.Scanner()
	runs, err := s.Runs(ctx, repo.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 7 {
		t.Fatalf("%d runs recorded while etcd was down, want 7", len(runs))
	}
	for _, r := range runs {
		if r.State != "unknown" || r.Note == "" {
			t.Fatalf("run %d-%s is %q while etcd is down, want unknown with a note", r.Seq, r.Kind, r.State)
		}
	}

	e2, err := etcdserver.Start(context.Background(), etcdserver.Options{Dir: dir, ClientAddr: addr, UnsafeNoFsync: true, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e2.Close() })
	w := f.worker(s, scanner.WorkerOptions{})
	if _, err := s.Reconcile(ctx, "alice", repo.ID); err != nil {
		t.Fatal(err)
	}
	drain(t, s, w)
	if wm, err := s.Watermark(ctx, repo.ID); err != nil || wm != 7 {
		t.Fatalf("watermark %d (%v), want 7", wm, err)
	}
	if got := view(t, f.srv.Alerts(), "alice", repo.ID); len(got) != len(want) {
		t.Fatalf("%d alerts, want %d", len(got), len(want))
	}
}
