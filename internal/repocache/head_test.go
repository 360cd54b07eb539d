package repocache

import (
	"testing"

	"github.com/ghost-scm/ghost/internal/wal"
)

// TestHeadBranch: the setting wins while its branch exists; otherwise
// main, then master, then the first branch by name, then main for an
// empty repository (docs/adr/0110-default-branch.md).
func TestHeadBranch(t *testing.T) {
	refs := func(names ...string) []wal.Ref {
		var rs []wal.Ref
		for _, n := range names {
			rs = append(rs, wal.Ref{Name: n, ID: wal.ZeroID})
		}
		return rs
	}
	for _, tc := range []struct {
		refs    []wal.Ref
		setting string
		want    string
	}{
		{refs(), "", "refs/heads/main"},
		{refs(), "dev", "refs/heads/main"},
		{refs("refs/heads/a", "refs/heads/dev", "refs/heads/main"), "", "refs/heads/main"},
		{refs("refs/heads/a", "refs/heads/dev", "refs/heads/main"), "dev", "refs/heads/dev"},
		{refs("refs/heads/a", "refs/heads/master"), "gone", "refs/heads/master"},
		{refs("refs/heads/b", "refs/heads/c", "refs/tags/a"), "", "refs/heads/b"},
		// A setting names a branch, never a tag or another namespace.
		{refs("refs/heads/b", "refs/tags/v1"), "v1", "refs/heads/b"},
		{refs("refs/heads/b", "refs/heads/x/y"), "x/y", "refs/heads/x/y"},
	} {
		if got := HeadBranch(tc.refs, tc.setting); got != tc.want {
			t.Errorf("HeadBranch(%v, %q) = %q, want %q", tc.refs, tc.setting, got, tc.want)
		}
	}
}
