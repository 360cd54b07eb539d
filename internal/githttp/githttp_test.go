package githttp_test

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	e := newEnv(t)
	src := workTree(t)
	git(t, src, "push", "-q", e.remote("alice/pub", "rw"), "--all")
	git(t, src, "push", "-q", e.remote("alice/pub", "rw"), "--tags")

	for _, proto := range []string{"0", "2"} {
		t.Run("v"+proto, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "clone")
			git(t, "", "-c", "protocol.version="+proto, "clone", "-q", "--mirror", e.remote("alice/pub.git", ""), dst)
			want := gitOut(t, src, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads", "refs/tags")
			got := gitOut(t, dst, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads", "refs/tags")
			if got != want {
				t.Fatalf("refs differ:\n%s\nwant\n%s", got, want)
			}
			git(t, dst, "fsck", "--full", "--strict")
			if a, b := gitOut(t, src, "rev-parse", "main^{tree}"), gitOut(t, dst, "rev-parse", "main^{tree}"); a != b {
				t.Fatalf("trees differ: %s %s", a, b)
			}
			if head := gitOut(t, dst, "symbolic-ref", "HEAD"); head != "refs/heads/main" {
				t.Fatalf("HEAD = %s", head)
			}
		})
	}
	if got, want := e.logRefs("pub"), gitOut(t, src, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads", "refs/tags"); got != want {
		t.Fatalf("log refs:\n%s\nwant\n%s", got, want)
	}
}

func TestNonFastForwardText(t *testing.T) {
	e := newEnv(t)
	a := workTree(t)
	git(t, a, "push", "-q", e.remote("alice/pub", "rw"), "main")
	b := filepath.Join(t.TempDir(), "b")
	git(t, "", "clone", "-q", e.remote("alice/pub", "rw"), b)
	commitFile(t, a, "a.txt", "a\n")
	git(t, a, "push", "-q", e.remote("alice/pub", "rw"), "main")
	commitFile(t, b, "b.txt", "b\n")
	out, err := gitErr(b, "push", e.remote("alice/pub", "rw"), "main")
	if err == nil {
		t.Fatal("non-fast-forward push succeeded")
	}
	if !strings.Contains(out, " ! [rejected]        main -> main (fetch first)") {
		t.Fatalf("unexpected output:\n%s", out)
	}
	t.Log(out)
}
