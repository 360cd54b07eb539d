package cli

import (
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/server"
)

// defaultCoordNamespace is where ghost keeps its coordination keys in etcd.
const defaultCoordNamespace = "/ghost/coord"

// Coordination GC defaults: runs release their shards when they end, so GC
// only removes run summaries, kept a week for history.
const (
	defaultCoordGCInterval = 10 * time.Minute
	defaultCoordRetention  = 7 * 24 * time.Hour
)

// newCoordCmd returns "ghost coord", the coordination-store admin
// commands:
//
//	ghost coord repair-counters       recount the shard counters from the records
//	ghost coord gc [--retention D]    remove runs terminal for longer than D
//
// They work on the embedded etcd under --data-dir unless --etcd-endpoints
// names a cluster. Embedded etcd is single-process: stop "ghost serve"
// first, or it holds the data directory.
func newCoordCmd(env *Env) *cobra.Command {
	return newGroupCmd("coord", "coordination store admin: repair-counters, gc, unpark",
		newCoordRepairCountersCmd(env),
		newCoordGCCmd(env),
		newCoordUnparkCmd(env),
	)
}

// coordAdmin is the shared part of a coord subcommand: where the etcd is
// and the key prefix of the records.
type coordAdmin struct {
	cfg config.Config
	ns  string
}

// newCoordAdmin registers the coordination store's flags on cmd.
func newCoordAdmin(cmd *cobra.Command) *coordAdmin {
	c := &coordAdmin{}
	f := cmd.Flags()
	c.cfg.RegisterDataDir(f)
	c.cfg.RegisterEtcd(f)
	// --namespace was this command's name for what serve and repo scan
	// call --coord-namespace; it still works, with a warning. It is
	// registered first: registering sets the default, and
	// --coord-namespace's default comes from GHOST_COORD_NAMESPACE.
	f.StringVar(&c.ns, "namespace", defaultCoordNamespace, "etcd key prefix of the coordination records")
	_ = f.MarkDeprecated("namespace", "use --coord-namespace")
	config.StringVar(f, &c.ns, "coord-namespace", "GHOST_COORD_NAMESPACE", defaultCoordNamespace, "etcd key prefix of the coordination records")
	return c
}

// open connects to the coordination store; the caller closes the closer.
func (c *coordAdmin) open(cmd *cobra.Command) (*etcdcoord.Backend, func() error, error) {
	if err := etcdcoord.ValidateNamespace(c.ns); err != nil {
		return nil, nil, usageErrorf("--coord-namespace: %v", err)
	}
	client, closer, err := openCoordClient(cmd.Context(), c.cfg)
	if err != nil {
		return nil, nil, err
	}
	b, err := newCoordBackend(client, c.ns, c.cfg)
	if err != nil {
		closer.Close()
		return nil, nil, err
	}
	return b, closer.Close, nil
}

func newCoordRepairCountersCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "repair-counters",
		Short: "recount the shard counters from the records",
		Args:  exactArgs(0),
	}
	c := newCoordAdmin(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		b, closeStore, err := c.open(cmd)
		if err != nil {
			return err
		}
		defer closeStore()
		counts, err := b.RepairCounters(cmd.Context())
		if err != nil {
			return err
		}
		printCounts(env, c.ns, counts)
		return nil
	}
	return cmd
}

func newCoordGCCmd(env *Env) *cobra.Command {
	var retention time.Duration
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "remove runs terminal for longer than --retention",
		Args:  exactArgs(0),
	}
	c := newCoordAdmin(cmd)
	config.DurationVar(cmd.Flags(), &retention, "retention", "GHOST_COORD_GC_RETENTION", defaultCoordRetention, "keep the summaries of ended runs this long")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		b, closeStore, err := c.open(cmd)
		if err != nil {
			return err
		}
		defer closeStore()
		n, err := b.GC(cmd.Context(), coord.TimeOf(time.Now()), retention)
		fmt.Fprintf(env.Stdout, "removed %d runs\n", n)
		return err
	}
	return cmd
}

// newCoordBackend is the one way the commands build the coordination
// backend: with the embedded server's transaction bounds when no
// --etcd-endpoints are given (server.NewCoordBackend).
func newCoordBackend(client *clientv3.Client, ns string, cfg config.Config) (*etcdcoord.Backend, error) {
	return server.NewCoordBackend(client, ns, len(cfg.EtcdEndpoints) == 0)
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
