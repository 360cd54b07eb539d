package cli

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ghost-scm/ghost/internal/client"
	"github.com/ghost-scm/ghost/internal/etcdserver"
	"github.com/ghost-scm/ghost/internal/etcdserver/etcdtest"
)

// TestRepoScanWithWorker starts a full scan with "ghost repo scan", runs
// "ghost worker" against the same store and etcd, and waits for the run
// with --wait; "ghost repo scans" lists it done.
func TestRepoScanWithWorker(t *testing.T) {
	e := etcdtest.StartServer(t, etcdserver.Options{Dir: t.TempDir(), UnsafeNoFsync: true, Logger: zap.NewNop()})
	dir := newStore(t)
	common := []string{"--data-dir", dir, "--etcd-endpoints", e.Endpoint()}
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := Main(context.Background(), append(args, common...), &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	for _, args := range [][]string{{"tenant", "create", "alice"}, {"repo", "create", "alice/app"}} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), append(args, "--data-dir", dir), &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
	}
	if out := run("repo", "scan", "alice/app"); !strings.Contains(out, "scan 0-full of alice/app started") {
		t.Fatalf("repo scan: %q", out)
	}
	if out := run("repo", "scan", "alice/app"); !strings.Contains(out, "already exists") {
		t.Fatalf("repo scan again: %q", out)
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	var werr bytes.Buffer
	code := -1
	go func() {
		defer wg.Done()
		code = Main(ctx, append([]string{"worker", "--log-level", "warn"}, common...), &bytes.Buffer{}, &werr)
	}()
	out := run("repo", "scan", "alice/app", "--wait", "--poll", "20ms")
	stop()
	wg.Wait()
	if !strings.Contains(out, "scan 0-full done: 0 blobs") {
		t.Fatalf("repo scan --wait: %q", out)
	}
	if code != 0 {
		t.Fatalf("worker exit %d: %s", code, werr.String())
	}
	if out := run("repo", "scans", "alice/app"); !strings.Contains(out, "every push scanned (through seq 0)") || !strings.Contains(out, "0-full") || !strings.Contains(out, " done  ") || !strings.Contains(out, "1/1 ") && !strings.Contains(out, "16/16") {
		t.Fatalf("repo scans: %q", out)
	}
}

// TestWriteScansTable: every column under its header, parked shards with
// their reasons.
func TestWriteScansTable(t *testing.T) {
	var out bytes.Buffer
	st := client.Scan{ID: "7-full", RunID: "42", Kind: "full", Seq: 7, State: "active", ShardsDone: 3, ShardsTotal: 16,
		Blobs: 100, Bytes: 24017962, Findings: 5, BytesPerSecond: 10, Parked: []client.ParkedShard{{Shard: "0x3", Reason: "boom"}}}
	if err := writeScans(&out, "table", []client.Scan{st}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("output:\n%s", out.String())
	}
	cols := regexp.MustCompile(`  +`)
	head, row := cols.Split(lines[0], -1), cols.Split(lines[1], -1)
	// Sizes as people read them (issue 21 §5), not raw byte counts.
	want := []string{"7-full", "42", "active", "3/16", "100", "22.9 MiB", "5", "10 B/s", "-", "0x3: boom"}
	if len(head) != 10 || !slices.Equal(row, want) {
		t.Fatalf("header %v\nrow %v\nwant %v", head, row, want)
	}
}

// TestWriteLag: the lag line says how many pushes wait and since when.
func TestWriteLag(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	oldest := now.Add(-90 * time.Second)
	writeLag(&b, client.ScanLag{Head: 70, ScannedThrough: 9, Pending: 61, OldestPendingPushAt: &oldest}, now)
	// Durations as people write them: 2h, not 2h0m0s.
	hours, fresh := now.Add(-2*time.Hour), now.Add(-100*time.Millisecond)
	writeLag(&b, client.ScanLag{Head: 70, ScannedThrough: 9, Pending: 61, OldestPendingPushAt: &hours}, now)
	writeLag(&b, client.ScanLag{Head: 70, ScannedThrough: 9, Pending: 61, OldestPendingPushAt: &fresh}, now)
	writeLag(&b, client.ScanLag{Head: 5, ScannedThrough: 4, Pending: 1}, now)
	writeLag(&b, client.ScanLag{Head: 5, ScannedThrough: 5}, now)
	want := "61 push(es) not scanned yet: scanned through seq 9 of 70, the oldest pushed 1m30s ago\n" +
		"61 push(es) not scanned yet: scanned through seq 9 of 70, the oldest pushed 2h ago\n" +
		"61 push(es) not scanned yet: scanned through seq 9 of 70, the oldest pushed just now\n" +
		"1 push(es) not scanned yet: scanned through seq 4 of 5\n" +
		"every push scanned (through seq 5)\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	for s, want := range map[float64]string{0: "ETA unknown", 59.6: "ETA 1m", 3720: "ETA 1h2m"} {
		if got := etaString(s); got != want {
			t.Errorf("etaString(%v) = %q, want %q", s, got, want)
		}
	}
}
