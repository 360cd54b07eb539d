package scanner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ghost-scm/ghost/internal/compact"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/etcdserver"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// forcePushedSecret pushes, to branch tmp of remote, a commit adding a
// secret and then force-pushes tmp to a commit without it: two pushes,
// after which nothing reachable holds the secret. It returns the
// secret's blob id.
func forcePushedSecret(t *testing.T, remote string, i int) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "tmp")
	content := fmt.Sprintf("key = \"%s\"\n", secret(i))
	if err := os.WriteFile(filepath.Join(dir, "leak.txt"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "oops")
	blob := git(t, dir, "rev-parse", "HEAD:leak.txt")
	git(t, dir, "push", "-q", remote, "tmp")
	if err := os.WriteFile(filepath.Join(dir, "leak.txt"), []byte("nothing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "commit", "-q", "-a", "--amend", "-m", "clean")
	git(t, dir, "push", "-q", "--force", remote, "tmp")
	return blob
}

func listKeys(t *testing.T, st objstore.Store, prefix string) []string {
	t.Helper()
	var keys []string
	if err := objstore.Walk(context.Background(), st, prefix, func(o objstore.Info) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestFoldedPushRunsScanEveryObject: every push's run is started, then a
// compaction folds every layer before any worker ran, with nothing kept
// for being recent. The compaction preserves each unscanned layer's
// object list and keeps its objects, so each push run still scans
// exactly its push's blobs, including a secret force-pushed away before
// the scan; the watermark reaches the head and the preserved lists go.
func TestFoldedPushRunsScanEveryObject(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	repo := f.repo("alice", "demo")
	ctx := context.Background()
	want := history(t, f.remote("alice", "demo"), 0) // seqs 1..7
	forced := forcePushedSecret(t, f.remote("alice", "demo"), 9)
	s := f.scanner(scanner.Options{})
	if n, err := s.Reconcile(ctx, "alice", repo.ID); err != nil || n != 9 {
		t.Fatalf("reconcile started %d runs (%v), want 9", n, err)
	}

	c := compact.New(f.srv.Log(), f.srv.Cache(), compact.Options{KeepRecent: -1, Coverage: scanner.NewCoverage(f.srv.Store())})
	res, err := c.Compact(ctx, repo.ID)
	if err != nil || res.Folded != 9 {
		t.Fatalf("compaction folded %d layers (%v), want 9", res.Folded, err)
	}
	if got := listKeys(t, f.srv.Store(), "scans/"+repo.ID+"/layers/"); len(got) != 9 {
		t.Fatalf("%d preserved object lists, want one per unscanned layer (9): %v", len(got), got)
	}

	var mu sync.Mutex
	scanned := map[string]scanner.Spec{}
	w := f.worker(s, scanner.WorkerOptions{OnBatch: func(sp scanner.Spec, _ coord.Lease, ids []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			scanned[id] = sp
		}
	}})
	drain(t, s, w)
	if sp, ok := scanned[forced]; !ok || sp.Kind != scanner.KindPush || sp.Seq != 8 {
		t.Fatalf("the force-pushed secret's blob was scanned by %v (%v), want the push run of seq 8", sp, ok)
	}
	if wm, err := s.Watermark(ctx, repo.ID); err != nil || wm != 9 {
		t.Fatalf("watermark %d (%v), want 9", wm, err)
	}
	if got := listKeys(t, f.srv.Store(), "scans/"+repo.ID+"/layers/"); len(got) != 0 {
		t.Fatalf("preserved lists left after the watermark passed them: %v", got)
	}
	if got := view(t, f.srv.Alerts(), "alice", repo.ID); len(got) < len(want) {
		t.Fatalf("%d alerts, want at least %d: %+v", len(got), len(want), got)
	}
	for seq := uint64(1); seq <= 9; seq++ {
		r := mustGet(t, s, scanner.Spec{Tenant: "alice", RepoID: repo.ID, Kind: scanner.KindPush, Seq: seq})
		if !r.Done || r.SupersededBy != 0 {
			t.Errorf("push run %d: done %v, superseded by %d; want done by itself", seq, r.Done, r.SupersededBy)
		}
	}
}

// TestFoldedWithoutListsIsCaughtUpByOneFullRun: a compaction that did not
// know about scans (no Coverage: a log compacted before scans left their
// mark on compaction, or a fork's copied history) folded every layer.
// The reconciler covers the folded seqs with one catch-up full run at the
// checkpoint's seq rather than push runs that could never complete; when
// it is done the watermark passes the folded seqs, and a push run queued
// before the fold is superseded by it rather than failing.
func TestFoldedWithoutListsIsCaughtUpByOneFullRun(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	repo := f.repo("alice", "demo")
	ctx := context.Background()
	want := history(t, f.remote("alice", "demo"), 0) // seqs 1..7
	s := f.scanner(scanner.Options{InitialShards: 2})
	queued := scanner.Spec{Tenant: "alice", RepoID: repo.ID, Kind: scanner.KindPush, Seq: 3}
	if _, err := s.Start(ctx, queued); err != nil {
		t.Fatal(err)
	}
	c := compact.New(f.srv.Log(), f.srv.Cache(), compact.Options{KeepRecent: -1})
	if _, err := c.Compact(ctx, repo.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Reconcile(ctx, "alice", repo.ID); err != nil || n != 1 {
		t.Fatalf("reconcile started %d runs (%v), want 1 catch-up full run", n, err)
	}
	full := scanner.Spec{Tenant: "alice", RepoID: repo.ID, Kind: scanner.KindFull, Seq: 7}
	mustGet(t, s, full)
	w := f.worker(s, scanner.WorkerOptions{})
	drain(t, s, w)
	if r := mustGet(t, s, queued); !r.Done {
		t.Fatalf("the queued push run is not done: %+v", r)
	}
	if st := status(t, s, full); st.State != "done" {
		t.Fatalf("catch-up run %+v, want done", st)
	}
	if wm, err := s.Watermark(ctx, repo.ID); err != nil || wm != 7 {
		t.Fatalf("watermark %d (%v), want 7", wm, err)
	}
	if got := view(t, f.srv.Alerts(), "alice", repo.ID); len(got) != len(want) {
		t.Fatalf("%d alerts, want %d", len(got), len(want))
	}
	// Nothing left for the reconciler.
	if n, err := s.Reconcile(ctx, "alice", repo.ID); err != nil || n != 0 {
		t.Fatalf("a second reconcile started %d runs (%v)", n, err)
	}
}

// TestAlertsAfterEtcdOutageAndCompaction is the acceptance test,
// with the default compaction thresholds: a secret pushed while etcd is
// down, then 60 more pushes (the default compaction, at 50 layers, folds
// the secret's layer before any scan can run), then etcd back. The
// server's push hook and compaction trigger and a worker polling as
// serve's do alert the secret within two minutes of etcd's return; the
// test logs how long it took.
func TestAlertsAfterEtcdOutageAndCompaction(t *testing.T) {
	if testing.Short() {
		t.Skip("61 pushes")
	}
	etcdDir := t.TempDir()
	e1, err := etcdserver.Start(context.Background(), etcdserver.Options{Dir: etcdDir, UnsafeNoFsync: true, Logger: zap.NewNop()})
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
	compacted := make(chan compact.Result, 8)
	f := newFixture(t, fixtureOpts{
		client: client,
		scan:   &scanner.Options{StartTimeout: 200 * time.Millisecond},
		compaction: compact.TriggerOptions{Done: func(_ string, res compact.Result, err error) {
			if err == nil {
				compacted <- res
			}
		}},
	})
	f.tenant("alice")
	repo := f.repo("alice", "demo")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := f.srv.Scanner()
	w := f.worker(s, scanner.WorkerOptions{Idle: 100 * time.Millisecond})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.Run(ctx) }()
	defer wg.Wait()
	defer cancel()

	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	commit := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		git(t, dir, "add", "-A")
		git(t, dir, "commit", "-q", "-m", name)
		git(t, dir, "push", "-q", f.remote("alice", "demo"), "main")
	}
	commit("README", "hello\n")
	e1.Close() // etcd goes down
	commit("leak.env", fmt.Sprintf("TOKEN=%s\n", secret(42)))
	for i := range 60 {
		commit(fmt.Sprintf("f%02d.txt", i), fmt.Sprintf("file %d\n", i))
	}
	select {
	case res := <-compacted:
		if res.Checkpoint.Seq < 2 {
			t.Fatalf("the compaction covered seq %d, not the secret's layer (2)", res.Checkpoint.Seq)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("no compaction after 61 pushes at the default threshold")
	}
	x, err := f.srv.Log().Head(context.Background(), repo.ID)
	if err != nil || x.CompactedThroughSeq < 2 {
		t.Fatalf("index %+v (%v): the secret's layer is not folded", x, err)
	}

	// The reconcile pass sees the lag; etcd being down, the runs' state
	// is unknown.
	if _, err := s.ReconcileAll(context.Background(), []scanner.RepoRef{{Tenant: "alice", RepoID: repo.ID}}); err != nil {
		t.Fatal(err)
	}
	if got := gauge(t, f.srv.Registry(), "ghost_scan_lag_seqs"); got < 61 {
		t.Fatalf("ghost_scan_lag_seqs = %v during the outage, want the 61 pushes made during it", got)
	}
	if got := gauge(t, f.srv.Registry(), "ghost_scan_runs"); got < 61 {
		t.Fatalf("ghost_scan_runs = %v during the outage, want the 61 waiting runs", got)
	}
	if got := gauge(t, f.srv.Registry(), "ghost_scan_oldest_unscanned_push_timestamp_seconds"); got <= 0 {
		t.Fatalf("no time for the oldest unscanned push: %v", got)
	}

	e2, err := etcdserver.Start(context.Background(), etcdserver.Options{Dir: etcdDir, ClientAddr: addr, UnsafeNoFsync: true, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e2.Close() })
	back := time.Now()
	deadline := back.Add(2 * time.Minute)
	for {
		got := view(t, f.srv.Alerts(), "alice", repo.ID)
		if len(got) == 1 {
			t.Logf("the secret was alerted %v after etcd came back", time.Since(back).Round(time.Millisecond))
			break
		}
		if len(got) > 1 {
			t.Fatalf("%d alerts, want 1: %+v", len(got), got)
		}
		if time.Now().After(deadline) {
			runs, _ := s.Runs(context.Background(), repo.ID, 5)
			t.Fatalf("no alert 2 minutes after etcd came back; newest runs: %+v", runs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for {
		wm, err := s.Watermark(context.Background(), repo.ID)
		if err != nil {
			t.Fatal(err)
		}
		if wm == x.Seq {
			t.Logf("every push was scanned %v after etcd came back", time.Since(back).Round(time.Millisecond))
			break
		}
		// The issue asks for the alert within two minutes; the other 60
		// pushes follow at the machine's pace (one worker here).
		if time.Since(back) > 5*time.Minute {
			t.Fatalf("watermark %d of %d five minutes after etcd came back", wm, x.Seq)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := s.ReconcileAll(context.Background(), []scanner.RepoRef{{Tenant: "alice", RepoID: repo.ID}}); err != nil {
		t.Fatal(err)
	}
	if got := gauge(t, f.srv.Registry(), "ghost_scan_lag_seqs"); got != 0 {
		t.Fatalf("ghost_scan_lag_seqs = %v after the scans, want no series", got)
	}
}

// gauge sums the samples of the named metric in reg (0 when it has none).
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetGauge().GetValue()
		}
	}
	return sum
}
