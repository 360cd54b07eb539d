package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCluster is the cluster fault test of issue 26 (see the package
// comment for what it runs and checks). It runs only with GHOST_CLUSTER
// set:
//
//	# the short run .ci/run makes: 80 s of load, 6 clients, 12 faults,
//	# compaction every 5 layers (about 4 minutes in all)
//	GHOST_CLUSTER=short go test -count=1 -timeout 15m -run '^TestCluster$' -v ./internal/clustertest/
//
//	# the long run: 10 minutes of load, 15 clients, 65 faults, compaction
//	# every 10 layers (about 14 minutes in all)
//	GHOST_CLUSTER=long go test -count=1 -timeout 40m -run '^TestCluster$' -v ./internal/clustertest/
//
// The seed is printed first; GHOST_CLUSTER_SEED=<n> repeats its fault
// schedule and seeds its clients' choices and content alike (the
// processes' timing, and so what the clients meet, still varies). GHOST_CLUSTER_LOAD, _CLIENTS, _REPOS, _FAULTS, _COMPACT_LAYERS
// and _ALERT_WAIT override the preset; GHOST_CLUSTER_DIR=<dir> keeps the
// processes' logs, data, the report (report.txt) and every push, secret,
// clone and fault the run recorded (records.json) in dir.
func TestCluster(t *testing.T) {
	cfg, ok, err := loadConfig()
	if !ok {
		t.Skip("set GHOST_CLUSTER=short or GHOST_CLUSTER=long to run the cluster fault test (see the package comment)")
	}
	if err != nil {
		t.Fatal(err)
	}
	repro := fmt.Sprintf("GHOST_CLUSTER=%s GHOST_CLUSTER_SEED=%d go test -count=1 -timeout 40m -run '^TestCluster$' -v ./internal/clustertest/", cfg.Name, cfg.Seed)
	t.Logf("cluster fault test %q, seed %d: %d clients on %d repositories for %v, %d faults, compaction every %d layers; reproduce with\n  %s",
		cfg.Name, cfg.Seed, cfg.Clients, cfg.Repos, cfg.Load, cfg.Faults, cfg.CompactLayers, repro)
	began := time.Now()
	dir := cfg.Dir
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	c := startCluster(t, cfg, dir)
	if err := c.resolveRepoIDs(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster up in %v: gateway %s, etcd %s, nodes %s", time.Since(began).Round(time.Second), c.gwURL, strings.Join(c.etcdURLs, " "), strings.Join(c.nodeURLs, " "))
	rec := &recorder{attemptErrs: map[string]int{}}
	if err := seedMain(ctx, c, rec); err != nil {
		t.Fatal(err)
	}
	clients := make([]*client, cfg.Clients)
	for i := range clients {
		clients[i] = newClient(c, rec, i, cfg.Seed)
		if err := clients[i].init(ctx); err != nil {
			t.Fatal(err)
		}
	}

	faults := schedule(rand.New(rand.NewPCG(cfg.Seed, 0)), cfg.Faults, cfg.Load, len(c.nodes), len(c.etcd))
	loadStart := time.Now()
	until := loadStart.Add(cfg.Load)
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Go(func() { cl.run(ctx, until) })
	}
	wg.Go(func() { cloner(ctx, c, rec, rand.New(rand.NewPCG(cfg.Seed, 1<<20)), until) })
	ran := runFaults(ctx, c, faults, loadStart)
	t.Logf("faults done at +%v: %s", time.Since(loadStart).Round(time.Second), faultCounts(ran))
	wg.Wait()
	t.Logf("load done at +%v", time.Since(loadStart).Round(time.Second))

	// Healed: every process runs and the cluster answers.
	for _, p := range c.procs() {
		if !p.running() {
			t.Fatalf("%s is not running after the faults healed", p.name)
		}
	}
	if err := c.etcdHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()

	r := &report{cfg: cfg, repro: repro, faults: ran, rec: rec, load: healed.Sub(loadStart)}
	summarizeLoad(r)
	final := checkGitData(ctx, t, c, r)
	seqs := c.pushSeqs(ctx)
	checkClones(c, r, seqs)
	checkFailedPushes(c, r, seqs)
	checkAlerts(ctx, c, clients, r, final, seqs, healed)
	checkCounters(ctx, c, r)
	checkGC(ctx, c, r)
	summarizeLogs(c, r)
	checkProcesses(c, r)
	r.runtime = time.Since(began)

	records, err := json.MarshalIndent(struct {
		Acked, Failed  []pushRecord
		FailedAttempts []attemptRecord
		Secrets        []planted
		Clones         []cloneRecord
		Faults         []fault
	}{rec.acked, rec.failed, rec.attempts, rec.secrets, rec.clones, ran}, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "records.json"), records, 0o644)
	}
	if err != nil {
		t.Error(err)
	}
	text := r.String()
	if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte(text), 0o644); err != nil {
		t.Error(err)
	}
	t.Log("\n" + text)
	for _, f := range r.failures {
		t.Error(f)
	}
	if t.Failed() {
		t.Logf("reproduce with: %s", repro)
		if cfg.Dir != "" {
			t.Logf("logs, data and report kept in %s", dir)
		}
	}
}
