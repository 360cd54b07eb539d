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
