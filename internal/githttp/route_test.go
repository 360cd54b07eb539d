package githttp

import (
	"testing"

	"github.com/ghost-scm/ghost/internal/meta"
)

// TestRouteNamesAreMetaNames: the router accepts an owner or repository
// segment exactly when meta.ValidateName accepts the name, so a name that
// can be created can be reached, and one the router refuses cannot be
// created (issue 8 §6).
func TestRouteNamesAreMetaNames(t *testing.T) {
	for _, name := range []string{
		"alice", "Alice-Repo_1.x", "a..b", "git", "x.gitx",
		".github", ".x", "-rf", "..", "a b", "café", "x.GIT",
	} {
		want := meta.ValidateName(name) == nil
		for _, path := range []string{"/" + name + "/repo.git/info/refs", "/alice/" + name + "/git-upload-pack", "/alice/" + name + ".git/git-receive-pack"} {
			if _, ok := parseRoute(path); ok != want {
				t.Errorf("parseRoute(%q) ok = %v; ValidateName(%q) ok = %v", path, ok, name, want)
			}
		}
	}
}
