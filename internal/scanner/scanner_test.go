package scanner_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// TestPushRunsThenFullRun plants secrets over a multi-branch history
// pushed in many pushes. The reconciler starts one push run per pushed
// seq; each secret becomes exactly one alert with all its places; a full
// run afterwards changes nothing.
func TestPushRunsThenFullRun(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	repo := f.repo("alice", "demo")
	want := history(t, f.remote("alice", "demo"), 0)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	s := f.scanner(scanner.Options{InitialShards: 4, Metrics: scanner.NewMetrics(reg)})
	w := f.worker(s, scanner.WorkerOptions{})

	n, err := s.Reconcile(ctx, "alice", repo.ID)
	if err != nil {
		t.Fatal(err)
	}
	x, err := f.srv.Log().Head(ctx, repo.ID)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(n) != x.Seq {
		t.Fatalf("reconcile started %d runs for %d pushes", n, x.Seq)
	}
	drain(t, s, w)
	if wm, err := s.Watermark(ctx, repo.ID); err != nil || wm != x.Seq {
		t.Fatalf("watermark %d (%v), want %d", wm, err, x.Seq)
	}
	if n, err := s.Reconcile(ctx, "alice", repo.ID); err != nil || n != 0 {
		t.Fatalf("second reconcile started %d (%v)", n, err)
	}

	got := view(t, f.srv.Alerts(), "alice", repo.ID)
	if len(got) != len(want) {
		t.Fatalf("%d alerts, want %d: %+v", len(got), len(want), got)
	}
	// Each alert's places are exactly the planted ones of one secret.
	for i, places := range want {
		fp, err := f.srv.Alerts().Fingerprint(ctx, "alice", secret(i))
		if err != nil {
			t.Fatal(err)
		}
		a, err := f.srv.Alerts().Get(ctx, "alice", repo.ID, fp)
		if err != nil {
			t.Fatalf("secret %d has no alert: %v", i, err)
		}
		var gotPlaces []place
		for _, l := range a.Locations {
			gotPlaces = append(gotPlaces, place{l.Path, l.Line})
			if l.Commit == "" || l.Seq == 0 || l.RunID == "" {
				t.Errorf("secret %d: location without commit, seq or run: %+v", i, l)
			}
		}
		slices.SortFunc(gotPlaces, func(a, b place) int { return compare(a.Path, b.Path) })
		slices.SortFunc(places, func(a, b place) int { return compare(a.Path, b.Path) })
		if !reflect.DeepEqual(gotPlaces, places) {
			t.Errorf("secret %d at %v, want %v", i, gotPlaces, places)
		}
	}

	runs, err := s.Runs(ctx, repo.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var findings int64
	for _, r := range runs {
		if r.State != "done" || r.Kind != scanner.KindPush {
			t.Fatalf("run %+v", r)
		}
		findings += r.Findings
	}
	if findings == 0 {
		t.Fatal("runs report no findings")
	}

	// A full-history run afterwards adds no duplicate.
	run, created, err := s.StartFull(ctx, "alice", repo.ID)
	if err != nil || !created {
		t.Fatalf("start full: %v created=%v", err, created)
	}
	drain(t, s, w)
	if again := view(t, f.srv.Alerts(), "alice", repo.ID); !reflect.DeepEqual(again, got) {
		t.Fatalf("full run changed the alerts:\n%+v\nwant\n%+v", again, got)
	}
	st, err := s.Status(ctx, mustGet(t, s, run.Spec()))
	if err != nil || st.State != "done" || st.ShardsDone != 4 || st.Blobs == 0 || st.Findings == 0 {
		t.Fatalf("full run status %+v (%v)", st, err)
	}
	// Starting it again is the same run.
	if again, created, err := s.StartFull(ctx, "alice", repo.ID); err != nil || created || again.ID != run.ID {
		t.Fatalf("second start: %+v created=%v %v", again, created, err)
	}

	// The work is on /metrics (issue 21 §4): every run, the full run's
	// shards, what was scanned, and the push runs' push-to-done times.
	m := gather(t, reg)
	if m[`ghost_scan_runs_completed_total{kind="push"}`] != float64(x.Seq) || m[`ghost_scan_runs_completed_total{kind="full"}`] != 1 ||
		m["ghost_scan_shards_completed_total"] < float64(x.Seq)+4 || m[`ghost_scan_scanned_total{unit="blobs"}`] < float64(st.Blobs) ||
		m[`ghost_scan_scanned_total{unit="findings"}`] < float64(findings) || m[`ghost_scan_scanned_total{unit="bytes"}`] == 0 ||
		m["ghost_scan_push_to_done_seconds_count"] != float64(x.Seq) {
		t.Errorf("metrics %v", m)
	}
}

// gather reads a registry's counters, gauges and histogram counts by
// name{labels}.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[name] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[name] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[name+"_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func mustGet(t *testing.T, s *scanner.Scanner, spec scanner.Spec) scanner.Run {
	t.Helper()
	r, err := s.Get(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestKilledWorkerResumesFromCheckpoint cancels a worker mid-shard without
// releasing its lease (what a SIGKILL leaves behind: a live lease and a
// checkpoint). After the lease expires another worker resumes from the
// checkpoint: no blob at or before it is scanned again, every blob is
// scanned, and the alerts equal those of an uninterrupted run of the same
// history in another repository.
func TestKilledWorkerResumesFromCheckpoint(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.tenant("alice")
	r1 := f.repo("alice", "one")
	r2 := f.repo("alice", "two")
	history(t, f.remote("alice", "one"), 6)
	history(t, f.remote("alice", "two"), 6)
	ctx := context.Background()
	s := f.scanner(scanner.Options{InitialShards: 1})

	var mu sync.Mutex
	scannedA, scannedB := map[string]int{}, map[string]int{}
	actx, kill := context.WithCancel(ctx)
	batches := 0
	wa := f.worker(s, scanner.WorkerOptions{CheckpointBlobs: 5, OnBatch: func(_ scanner.Spec, _ coord.Lease, ids []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			scannedA[id]++
		}
		if batches++; batches == 3 {
			kill() // the next batch fails before it checkpoints
		}
	}})
	wb := f.worker(s, scanner.WorkerOptions{CheckpointBlobs: 5, OnBatch: func(_ scanner.Spec, _ coord.Lease, ids []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			scannedB[id]++
		}
	}})

	if _, _, err := s.StartFull(ctx, "alice", r1.ID); err != nil {
		t.Fatal(err)
	}
	if did, err := wa.Step(actx); !did || !errors.Is(err, context.Canceled) {
		t.Fatalf("killed worker: did=%v err=%v", did, err)
	}
	// The lease is still live: nobody can take the shard yet.
	if did, err := wb.Step(ctx); did || err != nil {
		t.Fatalf("shard claimable before its lease expired: did=%v err=%v", did, err)
	}
	f.clock.Advance(scanner.DefaultLeaseDuration + time.Second)
	drain(t, s, wb)

	if len(scannedA) != 15 {
		t.Fatalf("killed worker checkpointed %d blobs, want 15", len(scannedA))
	}
	for id, n := range scannedB {
		if scannedA[id] > 0 || n != 1 {
			t.Errorf("blob %s scanned again after its checkpoint (a=%d b=%d)", id, scannedA[id], n)
		}
	}
	total := len(scannedA) + len(scannedB)
	if all := countBlobs(t, f, r1.ID); total != all {
		t.Fatalf("scanned %d blobs, repository has %d", total, all)
	}

	// The uninterrupted run of the same history.
	wc := f.worker(s, scanner.WorkerOptions{CheckpointBlobs: 5})
	if _, _, err := s.StartFull(ctx, "alice", r2.ID); err != nil {
		t.Fatal(err)
	}
	drain(t, s, wc)
	a1, a2 := view(t, f.srv.Alerts(), "alice", r1.ID), view(t, f.srv.Alerts(), "alice", r2.ID)
	if len(a1) == 0 || !reflect.DeepEqual(a1, a2) {
		t.Fatalf("interrupted run's alerts\n%+v\ndiffer from the uninterrupted run's\n%+v", a1, a2)
	}
}

// countBlobs counts the objects a full run scans: blobs, and commits and
// tags (their messages).
func countBlobs(t *testing.T, f *fixture, repoID string) int {
	t.Helper()
	snap, err := f.srv.Cache().Materialize(context.Background(), repoID)
	if err != nil {
		t.Fatal(err)
	}
	out := git(t, snap.Dir, "cat-file", "--batch-all-objects", "--batch-check=%(objecttype)")
	n := 0
	for _, l := range splitLines(out) {
		if l == "blob" || l == "commit" || l == "tag" {
			n++
		}
	}
	return n
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}
