package gitexec

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnvironment: a server runner ignores the host's git configuration
// and replace refs; a HostConfig runner (ghost scan) reads the user's
// configuration but still ignores replace refs; and inherited GIT_*
// variables never reach either.
func TestEnvironment(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("GIT_DIR", "/nonexistent") // would break every command below
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = Host User\n\temail = host@example.invalid\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	repo := filepath.Join(t.TempDir(), "r.git")
	host := &Runner{HostConfig: true}
	run := func(r *Runner, stdin string, args ...string) (string, error) {
		out, err := r.Run(ctx, repo, nil, strings.NewReader(stdin), args...)
		return strings.TrimSpace(string(out)), err
	}
	if _, err := host.Run(ctx, "", nil, nil, "init", "-q", "--bare", repo); err != nil {
		t.Fatal(err)
	}
	real, err := run(host, "the real content\n", "hash-object", "-w", "--stdin")
	if err != nil {
		t.Fatal(err)
	}
	fake, err := run(host, "a replacement\n", "hash-object", "-w", "--stdin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run(host, "", "update-ref", "refs/replace/"+real, fake); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*Runner{"server": {}, "host config": host} {
		if out, err := run(r, "", "cat-file", "-p", real); err != nil || out != "the real content" {
			t.Errorf("%s: cat-file through a replace ref = %q, %v", name, out, err)
		}
	}
	if out, err := run(host, "", "config", "user.name"); err != nil || out != "Host User" {
		t.Errorf("host config: user.name = %q, %v", out, err)
	}
	if out, err := run(&Runner{}, "", "config", "user.name"); err == nil {
		t.Errorf("server: the host's user.name %q leaked in", out)
	}
}

// TestExitCode: a git that ran and failed reports its status through Run's
// wrapped error and through a Cmd's; nil and errors that are no exit are -1.
func TestExitCode(t *testing.T) {
	ctx := context.Background()
	r := &Runner{}
	repo := filepath.Join(t.TempDir(), "r.git")
	if _, err := r.Run(ctx, "", nil, nil, "init", "-q", "--bare", repo); err != nil {
		t.Fatal(err)
	}
	// merge-base --is-ancestor exits 128 for an unknown object; rev-parse
	// --verify -q exits 1 for a missing ref.
	_, err := r.Run(ctx, repo, nil, nil, "rev-parse", "--verify", "-q", "refs/heads/none")
	if got := ExitCode(err); got != 1 {
		t.Errorf("Run: ExitCode(%v) = %d, want 1", err, got)
	}
	c := r.Command(ctx, repo, nil, "cat-file", "-e", "0000000000000000000000000000000000000001")
	err = c.Run()
	if got := ExitCode(c.Wrap(err)); got != 128 && got != 1 {
		t.Errorf("Cmd: ExitCode(%v) = %d, want git's failure status", err, got)
	}
	for _, err := range []error{nil, context.Canceled, os.ErrNotExist} {
		if got := ExitCode(err); got != -1 {
			t.Errorf("ExitCode(%v) = %d, want -1", err, got)
		}
	}
}
