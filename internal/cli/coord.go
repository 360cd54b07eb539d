package cli

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"sort"
	"time"

	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver"
)

// defaultCoordNamespace is where ghost keeps its coordination keys in etcd.
const defaultCoordNamespace = "/ghost/coord"

// Coordination GC defaults: runs release their shards when they end, so GC
// only removes run summaries, kept a week for history.
const (
	defaultCoordGCInterval = 10 * time.Minute
	defaultCoordRetention  = 7 * 24 * time.Hour
)

// runCoord dispatches the coordination-store admin subcommands:
//
//	ghost coord repair-counters   recount the shard counters from the records
//	ghost coord gc -retention D   remove runs terminal for longer than D
//
// Both work on the embedded etcd under --data-dir unless --etcd-endpoints
// names a cluster. Embedded etcd is single-process: stop "ghost serve"
// first, or it holds the data directory.
func runCoord(ctx context.Context, env *Env, args []string) error {
	const usage = "ghost coord repair-counters|gc [flags]"
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, usage)
	}
	fs := flag.NewFlagSet("coord "+args[0], flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	var cfg config.Config
	cfg.Register(fs)
	ns := fs.String("namespace", config.Env("GHOST_COORD_NAMESPACE", defaultCoordNamespace), "etcd key prefix of the coordination records (env GHOST_COORD_NAMESPACE)")
	var retention *time.Duration
	switch args[0] {
	case "repair-counters":
	case "gc":
		retention = fs.Duration("retention", defaultCoordRetention, "keep the summaries of ended runs this long")
	default:
		return fmt.Errorf("%w: unknown subcommand %q: %s", errUsage, args[0], usage)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: %s takes no arguments", errUsage, usage)
	}
	if err := etcdcoord.ValidateNamespace(*ns); err != nil {
		return fmt.Errorf("%w: --namespace: %v", errUsage, err)
	}
	client, closer, err := etcdserver.Open(ctx, cfg.DataDir, cfg.EtcdEndpoints)
	if err != nil {
		return err
	}
	defer closer.Close()
	b, err := etcdcoord.New(etcdcoord.Config{Client: client, Namespace: *ns, MaxTxnOps: txnOps(cfg), MaxTxnBytes: txnBytes(cfg)})
	if err != nil {
		return err
	}
	if retention != nil {
		n, err := b.GC(ctx, coord.TimeOf(time.Now()), *retention)
		fmt.Fprintf(env.Stdout, "removed %d runs\n", n)
		return err
	}
	counts, err := b.RepairCounters(ctx)
	if err != nil {
		return err
	}
	printCounts(env, *ns, counts)
	return nil
}

// txnOps and txnBytes are the transaction limits to assume: the embedded
// server's raised ones, or etcd's defaults for an external cluster.
func txnOps(cfg config.Config) int {
	if len(cfg.EtcdEndpoints) == 0 {
		return etcdserver.MaxTxnOps
	}
	return etcdcoord.DefaultMaxTxnOps
}

func txnBytes(cfg config.Config) int {
	if len(cfg.EtcdEndpoints) == 0 {
		return etcdserver.MaxRequestBytes
	}
	return etcdcoord.DefaultMaxTxnBytes
}

func printCounts(env *Env, ns string, c etcdcoord.Counts) {
	tenants := make([]coord.TenantID, 0, len(c.Tenants))
	for t := range c.Tenants {
		tenants = append(tenants, t)
	}
	sort.Slice(tenants, func(i, j int) bool { return string(tenants[i][:]) < string(tenants[j][:]) })
	for _, t := range tenants {
		fmt.Fprintf(env.Stdout, "tenant %s %d\n", hex.EncodeToString(t[:]), c.Tenants[t])
	}
	fmt.Fprintf(env.Stdout, "global %d\n", c.Global)
	keys := make([]string, 0, len(c.Fixed))
	for k := range c.Fixed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		was := "absent"
		if v := c.Fixed[k]; v >= 0 {
			was = fmt.Sprint(v)
		}
		fmt.Fprintf(env.Stdout, "fixed %s (was %s)\n", k, was)
	}
	if len(keys) == 0 {
		fmt.Fprintf(env.Stdout, "counters under %s are correct\n", ns)
	}
}
