package cli

import (
	"bytes"
	"context"
	"testing"
)

// TestNiceLowersBackgroundCommands: a command whose process is
// background work lowers its priority by --nice (default 10), 0 leaves
// it, and a value out of range is a usage error that lowers nothing
// (docs/adr/0051-geometric-checkpoints.md).
func TestNiceLowersBackgroundCommands(t *testing.T) {
	t.Setenv("GHOST_S3_BUCKET", "")
	dir := t.TempDir()
	mustGhost(t, dir, "init")
	mustGhost(t, dir, "tenant", "create", "alice")
	mustGhost(t, dir, "repo", "create", "alice/app")
	for _, tc := range []struct {
		args []string
		code int
		want []int
	}{
		{[]string{"gc", "--dry-run"}, 0, []int{10}},
		{[]string{"gc", "--dry-run", "--nice", "3"}, 0, []int{3}},
		{[]string{"gc", "--dry-run", "--nice", "0"}, 0, nil},
		{[]string{"gc", "--dry-run", "--nice", "20"}, 2, nil},
		{[]string{"repo", "compact", "alice/app", "--nice", "5"}, 0, []int{5}},
		{[]string{"repo", "compact", "alice/app", "--full"}, 0, []int{10}},
	} {
		var got []int
		var out, errb bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &errb, LowerPriority: func(n int) error { got = append(got, n); return nil }}
		code := Run(context.Background(), append(tc.args, "--data-dir", dir), env)
		if code != tc.code || len(got) != len(tc.want) || len(got) == 1 && got[0] != tc.want[0] {
			t.Errorf("ghost %v: exit %d, lowered by %v; want exit %d, %v\n%s%s", tc.args, code, got, tc.code, tc.want, out.String(), errb.String())
		}
	}
}
