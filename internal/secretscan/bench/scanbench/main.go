// Command scanbench runs the secretscan engine on one local repository
// with the options a measurement needs (decoding depth, workers, a CPU
// profile) and prints its counters and the time the phases took. It is
// the engine's own bench entry, beside ghost scan, for the figures in
// docs/adr/0036-scanner-on-real-histories.md; it fetches nothing.
//
//	go run ./internal/secretscan/bench/scanbench -cpuprofile cpu.out /work/bench/gitleaks.git
//	go run ./internal/secretscan/bench/scanbench -rev main -cpuprofile cpu.out /work/bench/trufflehog.git
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/ghost-scm/ghost/internal/secretscan"
	"github.com/ghost-scm/ghost/internal/secretscan/report"
)

func main() {
	var (
		workers    = flag.Int("workers", 2, "blobs scanned in parallel")
		decode     = flag.Int("max-decode-depth", 5, "decoding passes, 0 for none")
		cpuprofile = flag.String("cpuprofile", "", "write a CPU profile here")
		out        = flag.String("report-path", "", "write the JSON report here")
		rev        = flag.String("rev", "", "scan only what this revision reaches (default: every ref)")
		whole      = flag.Bool("whole-blobs", false, "scan every blob whole, not only where it differs from its base")
	)
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: scanbench [flags] REPO")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *rev, *whole, *workers, *decode, *cpuprofile, *out); err != nil {
		fmt.Fprintln(os.Stderr, "scanbench:", err)
		os.Exit(1)
	}
}

func run(dir, rev string, whole bool, workers, decode int, cpuprofile, out string) error {
	debug.SetGCPercent(50) // as ghost scan
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cfg, err := secretscan.DefaultConfig()
	if err != nil {
		return err
	}
	e, err := secretscan.New(cfg, secretscan.Options{Workers: workers, MaxDecodeDepth: decode, MaxBlobSize: -1, WholeBlobs: whole})
	if err != nil {
		return err
	}
	ctx := context.Background()
	repo := secretscan.Repo{Dir: dir}
	t0 := time.Now()
	var revs []string // nil: every ref
	if rev != "" {
		revs = []string{rev}
	}
	bs, err := e.ScanRevs(ctx, repo, revs, nil)
	if err != nil {
		return err
	}
	defer bs.Close()
	t1 := time.Now()
	fs, err := bs.Attribute(ctx, repo, revs)
	if err != nil {
		return err
	}
	t2 := time.Now()
	st, _ := json.Marshal(bs.Stats)
	fmt.Printf("scan %.2fs attribute %.2fs findings %d\nstats %s\n", t1.Sub(t0).Seconds(), t2.Sub(t1).Seconds(), len(fs), st)
	if out == "" {
		return nil
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := report.WriteJSON(f, fs); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
