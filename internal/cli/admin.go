package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/config"
)

// The store commands (repo compact, gc) are server operations with no
// API: they work on the object store directly, like serve. Each says on
// stderr which store it used, so that one run in the wrong place does not
// go unnoticed, and none creates a store (config.Config.OpenStore).

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

// splitRepo parses "owner/name".
func splitRepo(s string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(s, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", usageErrorf("%q: want <owner>/<name>", s)
	}
	return owner, name, nil
}
