package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/lfs"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// The store commands (repo compact, repo reindex, gc) are server
// operations with no API: they work on the object store directly, like
// serve, through admin.runE. Each names the store it used (on stderr; gc
// on stdout, before it starts), so that one run in the wrong place does
// not go unnoticed, and none creates a store (config.Config.OpenStore).

// admin is the shared part of a store command: the object store's flags.
type admin struct {
	env *Env
	cfg config.Config
}

// newAdmin registers the store flags on cmd.
func newAdmin(env *Env, cmd *cobra.Command) *admin {
	a := &admin{env: env}
	a.cfg.RegisterStore(cmd.Flags())
	return a
}

// wrote tells the operator which store a command changed, on stderr:
// stdout stays for what scripts capture.
func (a *admin) wrote() { fmt.Fprintf(a.env.Stderr, "wrote to %s\n", a.cfg.Location()) }

// runE makes a store command's RunE from fn: it opens the stores, runs fn
// on them and, when fn succeeds and writes is set, says on stderr which
// store the command wrote to.
func (a *admin) runE(writes bool, fn func(ctx context.Context, s stores, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		s, err := openStores(cmd.Context(), &a.cfg)
		if err != nil {
			return err
		}
		if err := fn(cmd.Context(), s, args); err != nil {
			return err
		}
		if writes {
			a.wrote()
		}
		return nil
	}
}

// stores is what a command on the object store works on: the store, the
// log and the metadata over it. Every such command, the API served over
// the store included (docs/adr/0100-cli-modes.md), opens them through
// openStores.
type stores struct {
	objects objstore.Store
	log     *wal.Log
	meta    *meta.Store
}

// openStores opens the configured object store, which must exist, with
// the log and the metadata store over it.
func openStores(ctx context.Context, cfg *config.Config) (stores, error) {
	objects, err := cfg.OpenStore(ctx)
	if err != nil {
		return stores{}, err
	}
	log := wal.New(objects, wal.Options{})
	// A fork on the store copies its source's LFS references as the
	// server's does; the operator is under no quota (docs/adr/0132-lfs-forks.md).
	m := meta.New(objects, log, meta.WithForkCopier(lfs.NewForks(objects, lfs.ForkOptions{})))
	return stores{objects: objects, log: log, meta: m}, nil
}

// splitRepo parses "owner/name".
func splitRepo(s string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(s, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", usageErrorf("%q: want <owner>/<name>", s)
	}
	return owner, name, nil
}
