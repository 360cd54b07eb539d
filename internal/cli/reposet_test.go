package cli

import (
	"context"
	"strings"
	"testing"
)

// TestRepoSetPushProtection: off by default, on and off by flag; a
// missing or bad value is a usage error that changes nothing.
func TestRepoSetPushProtection(t *testing.T) {
	t.Setenv("GHOST_S3_BUCKET", "")
	dir := newStore(t)
	ctx := context.Background()
	mustGhost(t, dir, "tenant", "create", "alice")
	mustGhost(t, dir, "repo", "create", "alice/proj")
	s := metaStore(t, dir)
	if r, _ := s.Repo(ctx, "alice", "proj"); r.PushProtection {
		t.Fatal("push protection on by default")
	}
	if out := mustGhost(t, dir, "repo", "set", "alice/proj.git", "--push-protection", "on"); !strings.Contains(out, "push protection on") {
		t.Errorf("stdout %q", out)
	}
	if r, _ := s.Repo(ctx, "alice", "proj"); !r.PushProtection {
		t.Fatal("--push-protection on did not turn it on")
	}
	for _, tt := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"repo", "set", "alice/proj"}, 2, "nothing to change"},
		{[]string{"repo", "set", "alice/proj", "--push-protection", "yes"}, 2, "want on or off"},
		{[]string{"repo", "set", "alice/nope", "--push-protection", "off"}, 1, "not found"},
		{[]string{"repo", "set", "noslash", "--push-protection", "off"}, 2, "want <owner>/<name>"},
	} {
		r := ghost(t, dir, tt.args...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.stderr) {
			t.Errorf("ghost %v: exit %d, stderr %q; want exit %d and %q", tt.args, r.code, r.stderr, tt.code, tt.stderr)
		}
	}
	if r, _ := s.Repo(ctx, "alice", "proj"); !r.PushProtection {
		t.Fatal("a refused command changed the setting")
	}
	mustGhost(t, dir, "repo", "set", "alice/proj", "--push-protection", "off")
	if r, _ := s.Repo(ctx, "alice", "proj"); r.PushProtection {
		t.Fatal("--push-protection off did not turn it off")
	}

	// Replace refs: refused by default; both settings in one command.
	if r, _ := s.Repo(ctx, "alice", "proj"); r.AllowReplaceRefs {
		t.Fatal("replace refs allowed by default")
	}
	if r := ghost(t, dir, "repo", "set", "alice/proj", "--allow-replace-refs", "maybe", "--push-protection", "on"); r.code != 2 || !strings.Contains(r.stderr, "want on or off") {
		t.Errorf("bad value: exit %d, %q", r.code, r.stderr)
	}
	if r, _ := s.Repo(ctx, "alice", "proj"); r.PushProtection || r.AllowReplaceRefs {
		t.Fatal("a refused command changed a setting")
	}
	out := mustGhost(t, dir, "repo", "set", "alice/proj", "--allow-replace-refs", "on", "--push-protection", "on")
	if !strings.Contains(out, "replace refs allowed on") || !strings.Contains(out, "push protection on") {
		t.Errorf("stdout %q", out)
	}
	if r, _ := s.Repo(ctx, "alice", "proj"); !r.PushProtection || !r.AllowReplaceRefs {
		t.Fatal("the two settings were not both applied")
	}
}
