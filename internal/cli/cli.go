// Package cli implements ghost's command line: one binary whose
// subcommands run the server and the admin tasks. It is built on cobra;
// every command is made afresh for each call of Main, so tests run the
// CLI in-process.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/config"
)

// Env carries the process's output streams to commands, so tests can run
// the CLI in-process.
type Env struct {
	Stdout, Stderr io.Writer
	// LowerPriority lowers the whole process's CPU priority by n, for
	// the commands whose process is background work (--nice); nil leaves
	// it alone (tests run commands inside the test process). The ghost
	// binary passes gitexec.LowerProcess.
	LowerPriority func(n int) error
}

// newRootCmd builds ghost's command tree, the one list of its commands.
//
// To add a command "ghost xxx":
//
//  1. In xxx.go, write newXxxCmd(env *Env) *cobra.Command: Use, Short,
//     Args (exactArgs(n), or usageArgs(cobra.RangeArgs(min, max))), and
//     RunE, which reads cmd.Context() and writes to env.Stdout and
//     env.Stderr.
//  2. Define its flags on cmd.Flags() in newXxxCmd: the shared settings
//     with config's Register* methods (RegisterStore to open the object
//     store), its own settings with config.StringVar and friends (each
//     gets a GHOST_* variable), and per-call options with plain pflag
//     (list those in cli_test.go's options, the flags with no variable).
//  3. Return usageErrorf for a command-line mistake (exit code 2); any
//     other error exits 1.
//  4. Add newXxxCmd(env) to the list below. A group of subcommands is
//     newGroupCmd(use, short, subcommands...).
func newRootCmd(env *Env) *cobra.Command {
	root := newGroupCmd("ghost", "a git server whose repositories live in object storage",
		newServeCmd(env),
		newInitCmd(env),
		newLoginCmd(env),
		newLogoutCmd(env),
		newTenantCmd(env),
		newTokenCmd(env),
		newKeyCmd(env),
		newRepoCmd(env),
		newHookCmd(env),
		newPRCmd(env),
		newCoordCmd(env),
		newGCCmd(env),
		newScanCmd(env),
		newWorkerCmd(env),
		newVersionCmd(env),
	)
	root.Long = `ghost is a git server whose repositories live in object storage.

"ghost serve" runs it; with no flags, everything lives under ./ghost-data.
The tenant, token, key and repo commands work through a running server's
API (ghost login URL, or --server URL with GHOST_TOKEN), or, for bootstrap
and recovery, on the store directly (--data-dir, the --s3-* flags, or
./ghost-data when nothing else is said). Every setting can also be given
through the GHOST_* environment variable its help names.`
	v := versionOf(buildInfo())
	root.Version = fmt.Sprintf("%s (commit %s, %s)", v.version, v.commit, v.goVersion)
	root.SetVersionTemplate(`{{printf "ghost %s\n" .Version}}`)
	root.SilenceErrors = true
	root.SilenceUsage = true
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetUsageTemplate(usageTemplate)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &usageError{err.Error()}
	})
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := config.CheckEnv(cmd.Flags()); err != nil {
			return &usageError{err.Error()}
		}
		return nil
	}
	return root
}

// Main runs ghost with args (without the program name) and returns the
// process exit code: 0 on success (and for help), 2 for a usage error, 1
// for any other failure.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return Run(ctx, args, &Env{Stdout: stdout, Stderr: stderr})
}

// Run is Main with the whole environment given.
func Run(ctx context.Context, args []string, env *Env) int {
	stderr := env.Stderr
	root := newRootCmd(env)
	root.SetArgs(singleDashLongFlags(root, args))
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if cmd == nil {
		cmd = root
	}
	fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
	if errors.Is(err, config.ErrNoStore) {
		hintNoStore(stderr)
	}
	var ue *usageError
	if errors.As(err, &ue) {
		if cmd.HasAvailableSubCommands() {
			fmt.Fprint(stderr, "\n"+cmd.UsageString())
		} else {
			fmt.Fprintf(stderr, "usage: %s\nRun '%s --help' for more information.\n", cmd.UseLine(), cmd.CommandPath())
		}
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

// exitError makes Main exit with a chosen code, as "ghost scan
// --exit-code N" does when it finds secrets.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// errUsage makes Main exit with code 2. usageError wraps it; an error
// that is not a command-line mistake but should exit 2 too (as gitleaks
// does for a failed scan) wraps it with %w and gets no usage line.
var errUsage = errors.New("usage")

// usageError is a mistake on the command line: Main prints it with the
// command's usage and exits with code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == errUsage }

// usageErrorf returns a usage error.
func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// exactArgs checks a command takes n positional arguments, making a wrong
// count a usage error.
func exactArgs(n int) cobra.PositionalArgs { return usageArgs(cobra.ExactArgs(n)) }

// usageArgs makes the errors of any of cobra's argument checks usage
// errors: usageArgs(cobra.RangeArgs(0, 1)) for an optional argument.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &usageError{err.Error()}
		}
		return nil
	}
}

// newGroupCmd returns a command that holds subcommands. Run alone, it is
// a usage error (exit code 2) that lists them; "ghost <group> help"
// prints its help. It ignores flags it does not know, which belong to the
// subcommand the user meant: "ghost tenant frobnicate --data-dir d" is an
// unknown command.
func newGroupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:                        use,
		Short:                      short,
		Annotations:                map[string]string{groupAnnotation: "yes"},
		SuggestionsMinimumDistance: 2,
		FParseErrWhitelist:         cobra.FParseErrWhitelist{UnknownFlags: true},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || args[0] == "help" {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q", args[0])
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf("; did you mean %s?", strings.Join(s, " or "))
			}
			return &usageError{msg}
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmd.Help()
			}
			return usageErrorf("missing command")
		},
	}
	cmd.AddCommand(subs...)
	return cmd
}

// singleDashLongFlags rewrites "-name" and "-name=value" to "--name..."
// for the long flags of the command args select. ghost's commands used
// Go's flag package before cobra, which accepts both forms, and scripts
// may still use one dash.
func singleDashLongFlags(root *cobra.Command, args []string) []string {
	out := make([]string, 0, len(args)) // never nil: cobra reads os.Args then
	cmd, _, err := root.Find(args)
	if err != nil {
		return append(out, args...)
	}
	fs := cmd.Flags()
	takesValue := false
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if takesValue { // the value of the flag before: never rewrite it
			takesValue = false
			out = append(out, a)
			continue
		}
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(a) > 2 {
			name, _, _ := strings.Cut(a[1:], "=")
			if name == "help" || fs.Lookup(name) != nil {
				a = "-" + a
			}
		}
		if name, ok := strings.CutPrefix(a, "--"); ok && !strings.Contains(name, "=") {
			if f := fs.Lookup(name); f != nil && f.NoOptDefVal == "" {
				takesValue = true
			}
		}
		out = append(out, a)
	}
	return out
}

// groupAnnotation marks a command that only holds subcommands
// (newGroupCmd), as opposed to one that also runs on its own ("ghost repo
// alerts <owner>/<name>" lists, "ghost repo alerts resolve ..." acts).
const groupAnnotation = "ghost_group"

// usageTemplate is cobra's default without aliases and command groups,
// which ghost does not use, and with "<command>" for a group: a group's
// usage line is "ghost tenant <command>", not its own run.
const usageTemplate = `Usage:{{if not (eq (index .Annotations "ghost_group") "yes")}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} <command>{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} <command> --help" for more information about a command.{{end}}
`
