package scanner_test

import (
	"context"
	"testing"

	"github.com/ghost-scm/ghost/internal/scanner"
)

// TestPendingMarkSurvivesALostHook: the server marks a repository pending
// before each commit point. When the node dies after the commit, before
// the push's run was started (here: the run records the hook wrote are
// removed), the reconciler finds the repository through its mark alone,
// starts the runs, keeps the mark while they are not done, and drops it
// once every push is scanned.
func TestPendingMarkSurvivesALostHook(t *testing.T) {
	f := newFixture(t, fixtureOpts{scan: &scanner.Options{}})
	f.tenant("alice")
	repo := f.repo("alice", "demo")
	want := history(t, f.remote("alice", "demo"), 0)
	f.closeServer() // wait for the hook's starts
	ctx := context.Background()
	st := f.srv.Store()
	marks := listKeys(t, st, "scans/pending/")
	if len(marks) != 1 || marks[0] != "scans/pending/alice/"+repo.ID {
		t.Fatalf("pending marks %v, want one for alice's repository", marks)
	}
	// The hook's work is lost: no descriptor, no marker.
	for _, k := range append(listKeys(t, st, "scans/"+repo.ID+"/runs/"), listKeys(t, st, "scans/active/")...) {
		if err := st.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	s := f.srv.Scanner()
	n, err := s.ReconcilePending(ctx)
	if err != nil || n != 7 {
		t.Fatalf("reconcile of the pending marks started %d runs (%v), want 7", n, err)
	}
	if got := listKeys(t, st, "scans/pending/"); len(got) != 1 {
		t.Fatalf("the mark went before the runs were done: %v", got)
	}
	drain(t, s, f.worker(s, scanner.WorkerOptions{}))
	if n, err := s.ReconcilePending(ctx); err != nil || n != 0 {
		t.Fatalf("second pass started %d runs (%v)", n, err)
	}
	if got := listKeys(t, st, "scans/pending/"); len(got) != 0 {
		t.Fatalf("marks left after every push was scanned: %v", got)
	}
	if got := view(t, f.srv.Alerts(), "alice", repo.ID); len(got) != len(want) {
		t.Fatalf("%d alerts, want %d", len(got), len(want))
	}
}

// TestSweepFindsAGapWithoutAMark: a repository with pushes no run covers
// and no pending mark (the mark was lost too) is found by the sweep,
// which starts the runs and marks it pending again.
func TestSweepFindsAGapWithoutAMark(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	f.tenant("bob")
	ra := f.repo("alice", "a")
	f.repo("bob", "b")
	history(t, f.remote("alice", "a"), 0)
	ctx := context.Background()
	s := f.scanner(scanner.Options{})
	pages := func(ctx context.Context, after string, limit int) ([]scanner.RepoRef, string, error) {
		rs, next, err := f.srv.Meta().ReposPage(ctx, after, 1) // one a page: the sweep follows the cursor
		var out []scanner.RepoRef
		for _, r := range rs {
			out = append(out, scanner.RepoRef{Tenant: r.Owner, RepoID: r.ID})
		}
		return out, next, err
	}
	n, err := s.Sweep(ctx, pages, 1000)
	if err != nil || n != 7 {
		t.Fatalf("sweep started %d runs (%v), want alice's 7", n, err)
	}
	if got := listKeys(t, f.srv.Store(), "scans/pending/"); len(got) != 1 || got[0] != "scans/pending/alice/"+ra.ID {
		t.Fatalf("marks after the sweep: %v, want alice's repository", got)
	}
}
