package githttp

import (
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/meta"
)

// FuzzParseRoute checks the request-path parser: whatever it accepts names
// a single-segment owner and repository from the allowed alphabet, never
// "." or "..", and a known action.
func FuzzParseRoute(f *testing.F) {
	for _, s := range []string{
		"/alice/repo.git/info/refs", "/alice/repo/git-upload-pack", "/alice/repo.git/git-receive-pack",
		"/a/b/HEAD", "/a/b/objects/info/packs", "/a/b/info/alternates", "/../x/info/refs", "//x/info/refs", "/a/.git/info/refs",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		rt, ok := parseRoute(path)
		if !ok {
			if rt != (route{}) {
				t.Fatalf("refused path returned %+v", rt)
			}
			return
		}
		for _, seg := range []string{rt.owner, rt.name} {
			if meta.ValidateName(seg) != nil || strings.Contains(seg, "/") {
				t.Fatalf("%q: bad segment %q accepted", path, seg)
			}
		}
		switch rt.action {
		case "info/refs", svcUpload, svcReceive, "dumb":
		default:
			t.Fatalf("%q: unknown action %q", path, rt.action)
		}
		if rt2, ok2 := parseRoute(path); !ok2 || rt2 != rt {
			t.Fatalf("%q: not deterministic", path)
		}
	})
}
