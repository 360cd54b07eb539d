// Package cli implements ghost's command line: one binary whose
// subcommands run the server, the scan workers and the admin tasks.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
)

// command is one subcommand. run receives the arguments after its name.
type command struct {
	summary string
	run     func(ctx context.Context, env *Env, args []string) error
}

// Env carries the process's output streams to commands, so tests can run
// the CLI in-process.
type Env struct {
	Stdout, Stderr io.Writer
}

// errUsage marks an error whose message is the usage text: exit code 2.
var errUsage = errors.New("usage")

func commands() map[string]command {
	return map[string]command{
		"serve":  {"run the git server (smart HTTP + REST API)", runServe},
		"tenant": {"manage tenants: create, list, add-member", runTenant},
		"token":  {"manage access tokens: create, list, revoke", runToken},
		"repo":   {"manage repositories: create, list, delete, fork, visibility", runRepo},
		"coord":  {"coordination store admin: repair-counters, gc", runCoord},
		"scan":   {"scan a repository's history (or a directory) for secrets", runScan},
	}
}

// Main runs ghost with args (without the program name) and returns the
// process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	env := &Env{Stdout: stdout, Stderr: stderr}
	cmds := commands()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "ghost: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	if err := c.run(ctx, env, args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "ghost %s: %v\n", args[0], err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: ghost <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'ghost <command> -h' for a command's flags.")
}
