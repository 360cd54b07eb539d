package cli

import (
	"bytes"
	"context"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ghost-scm/ghost/internal/config"
)

// options are the flags that are per-call arguments, not settings, and so
// have no GHOST_* variable. Every other flag has one.
var options = []string{"help", "org", "force", "public", "scope", "description", "dry-run", "title", "file", "state", "rule", "format", "push-protection", "allow-replace-refs", "default-branch",
	// ghost scan: per-call options, as in gitleaks
	"no-git", "config", "report-format", "report-path", "exit-code", "workers", "max-blob-size", "gitleaks-ignore-path", "fingerprint-key-file", "no-progress", "max-decode-depth", "skip-binary", "rev",
	// ghost repo scan, scans
	"wait", "poll", "limit",
	// ghost repo compact
	"full",
	// confirmations, alert changes, settings
	"yes", "reason", "comment",
	// ghost repo list, tenant list
	"after",
	// ghost hook
	"url", "secret-file", "events", "insecure-ssl", "inactive", "push",
	// ghost pr, and the merge settings of ghost repo set
	"head", "base", "body", "body-file", "method", "sha", "message", "delete-branch", "commits", "files",
	"approve", "request-changes", "comments",
	"allow-merge-commit", "allow-squash-merge", "allow-rebase-merge", "allow-missing-lfs", "lfs-scan-after-push",
	// ghost repo protect
	"require-pull-request", "allow-force-push", "allow-deletion", "pushers", "remove", "required-approvals", "dismiss-stale-approvals", "require-last-push-approval"}

// TestEveryFlagHasItsVariable walks the command tree: every setting has a
// GHOST_* variable its help names, and each command has only the flags it
// uses.
func TestEveryFlagHasItsVariable(t *testing.T) {
	root := newRootCmd(&Env{Stdout: io.Discard, Stderr: io.Discard})
	seen := 0
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		cmd.InitDefaultHelpFlag()
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			seen++
			if f.Deprecated != "" {
				return // an old name bound to a setting's variable, hidden from help
			}
			env := config.EnvOf(f)
			if slices.Contains(options, f.Name) {
				if env != "" {
					t.Errorf("%s --%s: option with variable %s", cmd.CommandPath(), f.Name, env)
				}
				return
			}
			if !strings.HasPrefix(env, "GHOST_") || !strings.Contains(f.Usage, "(env "+env+")") {
				t.Errorf("%s --%s: variable %q, help %q", cmd.CommandPath(), f.Name, env, f.Usage)
			}
		})
		has := func(name string) bool { return cmd.Flags().Lookup(name) != nil }
		path := cmd.CommandPath()
		switch {
		case path == "ghost serve":
			for _, name := range []string{"data-dir", "s3-bucket", "cache-dir", "etcd-endpoints", "listen", "max-push-bytes"} {
				if !has(name) {
					t.Errorf("%s lacks --%s", path, name)
				}
			}
		case strings.HasPrefix(path, "ghost coord "):
			if !has("data-dir") || !has("etcd-endpoints") || has("s3-bucket") || has("cache-dir") {
				t.Errorf("%s: want --data-dir and --etcd-endpoints only of the shared flags", path)
			}
		case path == "ghost repo compact":
			// It builds the checkpoint in the cache's scratch space.
			if !has("data-dir") || !has("s3-bucket") || !has("cache-dir") || has("etcd-endpoints") {
				t.Errorf("%s: want the store flags and --cache-dir", path)
			}
		case path == "ghost worker":
			if !has("data-dir") || !has("s3-bucket") || !has("cache-dir") || !has("etcd-endpoints") {
				t.Errorf("%s: want the store, cache and etcd flags", path)
			}
		case path == "ghost repo scan" || path == "ghost repo scans":
			// The object store, and etcd for the runs' progress.
			if !has("data-dir") || !has("s3-bucket") || !has("server") || has("cache-dir") || !has("etcd-endpoints") {
				t.Errorf("%s: want the server, store and etcd flags, no cache", path)
			}
		case path == "ghost login" || path == "ghost logout":
			// The server comes as an argument; no store.
			if has("data-dir") || has("s3-bucket") || has("server") {
				t.Errorf("%s: want no store or server flag", path)
			}
		case path == "ghost init":
			if !has("data-dir") || !has("s3-bucket") || has("server") {
				t.Errorf("%s: want the store flags, no --server", path)
			}
		case path == "ghost scan":
			// A local scan opens no store, cache or etcd.
			if has("data-dir") || has("s3-bucket") || has("cache-dir") || has("etcd-endpoints") {
				t.Errorf("%s: want none of the shared flags", path)
			}
		case path == "ghost gc", path == "ghost repo reindex":
			// Store operations with no API.
			if !has("data-dir") || !has("s3-bucket") || has("server") || has("cache-dir") || has("etcd-endpoints") {
				t.Errorf("%s: want the store flags only", path)
			}
		case cmd.Runnable() && cmd.Annotations[groupAnnotation] == "" && path != "ghost version":
			// tenant, token, key and repo verbs: a server or the store
			// (issue 21 §1).
			if !has("data-dir") || !has("s3-bucket") || !has("server") || has("cache-dir") || has("etcd-endpoints") {
				t.Errorf("%s: want --server and the store flags only of the shared flags", path)
			}
		}
		for _, c := range cmd.Commands() {
			walk(c)
		}
	}
	walk(root)
	if seen < 50 {
		t.Fatalf("saw only %d flags", seen)
	}
}

func TestSingleDashLongFlags(t *testing.T) {
	root := newRootCmd(&Env{Stdout: io.Discard, Stderr: io.Discard})
	for _, tc := range []struct{ in, want string }{
		{"tenant create x -org -data-dir d", "tenant create x --org --data-dir d"},
		{"tenant create x -data-dir=d -help", "tenant create x --data-dir=d --help"},
		{"token create x --description -org -scope write", "token create x --description -org --scope write"},
		{"tenant create -h -- -org", "tenant create -h -- -org"},
		{"serve -listen :0 -bogus", "serve --listen :0 -bogus"},
	} {
		got := strings.Join(singleDashLongFlags(root, strings.Fields(tc.in)), " ")
		if got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := singleDashLongFlags(root, nil); got == nil {
		t.Error("nil args stay nil: cobra would read os.Args")
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if code := Main(context.Background(), []string{"version"}, &out, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "version: ") || !strings.HasPrefix(lines[1], "commit: ") || !strings.HasPrefix(lines[2], "go: go1.") {
		t.Fatalf("output %q", out.String())
	}
	bi := &debug.BuildInfo{
		GoVersion: "go1.99",
		Main:      debug.Module{Path: "github.com/ghost-scm/ghost", Version: "v1.2.3"},
		Settings:  []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}},
	}
	if v := versionOf(bi); v != (buildVersion{"v1.2.3", "abc123+dirty", "go1.99"}) {
		t.Errorf("versionOf = %+v", v)
	}
	if v := versionOf(nil); v.version != "unknown" || v.commit != "unknown" || !strings.HasPrefix(v.goVersion, "go") {
		t.Errorf("versionOf(nil) = %+v", v)
	}
}

func TestRootUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{nil, 2, "", "ghost: missing command"},
		{[]string{"help"}, 0, "Available Commands:", ""},
		{[]string{"--help"}, 0, "Available Commands:", ""},
		{[]string{"help", "coord"}, 0, "repair-counters", ""},
		{[]string{"serev"}, 2, "", `unknown command "serev"; did you mean serve?`},
		{[]string{"coord"}, 2, "", "ghost coord <command>"},
		{[]string{"coord", "-h"}, 0, "repair-counters", ""},
		{[]string{"version", "extra"}, 2, "", "usage: ghost version"},
		{[]string{"completion", "bash"}, 0, "bash completion", ""},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errb.String(), tc.stderr) {
			t.Errorf("ghost %v: exit %d\nstdout: %s\nstderr: %s\nwant exit %d, stdout %q, stderr %q", tc.args, code, out.String(), errb.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}
