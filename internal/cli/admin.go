package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/wal"
)

// The admin commands (tenant, token, repo) operate on the object store
// directly, not through a running server: they are how an installation is
// bootstrapped (the first admin token comes from "ghost token create
// <tenant> --scope admin") and how an operator recovers when the server is
// down. They see exactly what the servers see because metadata lives in
// the same store as the logs. Each says on stderr which store it used, so
// one run in the wrong directory does not go unnoticed.

// admin is the shared part of one admin verb: the object store's flags
// and the metadata store they open.
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

// open returns the metadata store on the configured object store.
func (a *admin) open(ctx context.Context) (*meta.Store, error) {
	objects, err := a.cfg.OpenStore(ctx)
	if err != nil {
		return nil, err
	}
	return meta.New(objects, wal.New(objects, wal.Options{})), nil
}

// wrote and read tell the operator which store a command changed or
// read, on stderr: stdout stays for what scripts capture.
func (a *admin) wrote() { fmt.Fprintf(a.env.Stderr, "wrote to %s\n", a.cfg.Location()) }

func (a *admin) read() { fmt.Fprintf(a.env.Stderr, "read from %s\n", a.cfg.Location()) }

// runE makes a command's RunE from fn: it opens the metadata store, runs
// fn on it and, when fn succeeds, says on stderr which store the command
// wrote to (writes) or read from.
func (a *admin) runE(writes bool, fn func(ctx context.Context, s *meta.Store, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		s, err := a.open(cmd.Context())
		if err != nil {
			return err
		}
		if err := fn(cmd.Context(), s, args); err != nil {
			return err
		}
		if writes {
			a.wrote()
		} else {
			a.read()
		}
		return nil
	}
}

// splitRepo parses "owner/name".
func splitRepo(s string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(s, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", usageErrorf("%q: want <owner>/<name>", s)
	}
	return owner, name, nil
}
