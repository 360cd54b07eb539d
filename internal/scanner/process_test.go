package scanner_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// TestKilledWorkerProcess runs a real "ghost worker" process (this test
// binary re-executed as ghost) on a full run, SIGKILLs it once it has
// checkpointed a few blobs, and lets an in-process worker take the shard
// over when the lease expires (real time: a 2 s lease). The successor
// scans only blobs after the last checkpoint, the two together scan every
// blob, and the alerts are the planted secrets.
func TestKilledWorkerProcess(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, fixtureOpts{dataDir: dir})
	f.tenant("alice")
	repo := f.repo("alice", "demo")
	want := history(t, f.remote("alice", "demo"), 12)
	ctx := context.Background()
	s := f.scanner(scanner.Options{InitialShards: 1, LeaseDuration: 2 * time.Second, Now: time.Now})
	run, _, err := s.StartFull(ctx, "alice", repo.ID)
	if err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], "worker", "--data-dir", dir, "--cache-dir", t.TempDir(),
		"--etcd-endpoints", strings.Join(etcdClient.Endpoints(), ","), "--coord-namespace", f.ns,
		"--checkpoint-blobs", "1", "--log-level", "error")
	cmd.Env = append(os.Environ(), "GHOST_SCANNER_TEST_GHOST=1")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	tenant := scanner.TenantID("alice")
	shard := func() coord.Shard {
		sh, err := f.b.GetShard(ctx, tenant, coord.RunID(run.ID), 1)
		if err != nil {
			t.Fatalf("shard: %v\nworker output:\n%s", err, out.String())
		}
		return sh
	}
	blobsOf := func(sh coord.Shard) int64 {
		var tk struct {
			Blobs int64 `json:"b"`
		}
		json.Unmarshal(sh.Cursor.Token, &tk)
		return tk.Blobs
	}
	for {
		sh := shard()
		if sh.State != coord.ShardActive {
			t.Fatalf("the worker finished the shard before it could be killed: %v", sh.State)
		}
		if blobsOf(sh) >= 5 {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling the worker's progress
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true
	sh := shard()
	if sh.State != coord.ShardActive || !sh.Cursor.HasKey {
		t.Fatalf("after the kill: %+v", sh)
	}
	before := blobsOf(sh)

	var after []string
	w := f.worker(s, scanner.WorkerOptions{CheckpointBlobs: 1, OnBatch: func(_ scanner.Spec, _ coord.Lease, ids []string) {
		after = append(after, ids...)
	}})
	for {
		did, err := w.Step(ctx) // claims once the dead worker's lease expired
		if err != nil {
			t.Fatal(err)
		}
		if did {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	drain(t, s, w)
	last := hex.EncodeToString(sh.Cursor.Key)
	for _, id := range after {
		if id <= last {
			t.Errorf("blob %s at or before the last checkpoint %s was scanned again", id, last)
		}
	}
	if all := countBlobs(t, f, repo.ID); int(before)+len(after) != all {
		t.Fatalf("killed worker checkpointed %d blobs, successor scanned %d, repository has %d", before, len(after), all)
	}
	if got := view(t, f.srv.Alerts(), "alice", repo.ID); len(got) != len(want) {
		t.Fatalf("%d alerts, want %d", len(got), len(want))
	}
	t.Logf("killed after %d blobs; the successor scanned %d", before, len(after))
}
