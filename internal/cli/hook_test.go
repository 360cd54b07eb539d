package cli

import (
	"strings"
	"testing"
)

// TestHookCommands: add (secret from stdin), list, test, deliveries and
// remove on the store, for a repository and for a tenant; the secret is
// never printed.
func TestHookCommands(t *testing.T) {
	t.Setenv("GHOST_S3_BUCKET", "")
	dir := newStore(t)
	mustGhost(t, dir, "tenant", "create", "alice")
	mustGhost(t, dir, "repo", "create", "alice/web")

	const secret = "cli-hook-secret"
	r := ghostStdin(t, dir, secret+"\n", "hook", "add", "alice/web", "--url", "https://ci.example.com/hook", "--secret-file", "-", "--events", "push,create")
	if r.code != 0 {
		t.Fatalf("hook add: %d %s %s", r.code, r.stdout, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	if id == "" || !strings.Contains(r.stderr, "queued; a running ghost serve on this store delivers it") {
		t.Errorf("hook add printed %q / %q", r.stdout, r.stderr)
	}
	out := mustGhost(t, dir, "hook", "list", "alice/web")
	if !strings.Contains(out, id) || !strings.Contains(out, "create,push") || !strings.Contains(out, "set") || !strings.Contains(out, "https://ci.example.com/hook") {
		t.Errorf("hook list:\n%s", out)
	}
	mustGhost(t, dir, "hook", "add", "alice", "--url", "https://chat.example.com/x", "--events", "*")
	if out := mustGhost(t, dir, "hook", "list", "alice"); !strings.Contains(out, "https://chat.example.com/x") || !strings.Contains(out, "*") {
		t.Errorf("tenant hook list:\n%s", out)
	}
	if out := mustGhost(t, dir, "hook", "test", "alice/web", id); !strings.Contains(out, "ping for hook "+id+" queued") {
		t.Errorf("hook test: %s", out)
	}
	mustGhost(t, dir, "hook", "test", "alice/web", id, "--push") // no push yet: nothing, and no error
	mustGhost(t, dir, "hook", "deliveries", "alice/web", id)
	for _, bad := range [][]string{
		{"hook", "add", "alice/web"},                                          // no --url
		{"hook", "add", "alice/web", "--url", "ftp://x/"},                     // not http
		{"hook", "add", "alice/web", "--url", "https://x/", "--events", "no"}, // unknown event
		{"hook", "remove", "alice/web", "abc"},                                // not an id
		{"hook", "remove", "alice/web", "12345"},                              // no such hook
		{"hook", "list", "alice/"},                                            // bad target
		{"hook", "list", "nobody/web"},                                        // no such repository
	} {
		if r := ghost(t, dir, bad...); r.code == 0 {
			t.Errorf("ghost %v: exit 0, want an error", bad)
		}
	}
	if out := mustGhost(t, dir, "hook", "remove", "alice/web", id); !strings.Contains(out, "removed hook "+id) {
		t.Errorf("hook remove: %s", out)
	}
	if out := mustGhost(t, dir, "hook", "list", "alice/web"); strings.Contains(out, id) {
		t.Errorf("removed hook still listed:\n%s", out)
	}
	for _, args := range [][]string{{"hook", "list", "alice/web"}, {"hook", "list", "alice"}} {
		if r := ghost(t, dir, args...); strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("ghost %v printed the secret", args)
		}
	}
}
