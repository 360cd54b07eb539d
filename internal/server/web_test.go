package server_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerServesWebUI checks the split of "/" between the web UI and
// git, and that the UI reads through the node cache with git's
// authorization.
func TestServerServesWebUI(t *testing.T) {
	s := newServer(t)
	tok, _ := seed(t, s)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	host := strings.TrimPrefix(ts.URL, "http://")
	src := t.TempDir()
	git(t, src, "init", "-q", "--initial-branch=main")
	git(t, src, "commit", "-q", "--allow-empty", "-m", "first <commit>")
	git(t, src, "push", "-q", "http://x:"+tok+"@"+host+"/alice/demo.git", "main")

	if code, body := get(t, ts.URL+"/"); code != 200 || !strings.Contains(body, "Sign in") {
		t.Fatalf("GET /: %d %q", code, body)
	}
	if code, _ := get(t, ts.URL+"/alice/demo"); code != 404 {
		t.Fatalf("private repository to anonymous: %d", code)
	}
	// Git's paths are still git's: anonymous fetch of a private repository
	// is the 401 challenge, not the UI's 404.
	if code, _ := get(t, ts.URL+"/alice/demo.git/info/refs?service=git-upload-pack"); code != 401 {
		t.Fatalf("git info/refs: %d", code)
	}
	if err := s.Meta().SetVisibility(context.Background(), "alice", "demo", true); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, ts.URL+"/alice/demo/-/commits/main")
	if code != 200 || !strings.Contains(body, "first &lt;commit&gt;") {
		t.Fatalf("public repository log: %d %q", code, body)
	}
	git(t, "", "clone", "-q", "http://"+host+"/alice/demo", filepath.Join(t.TempDir(), "c"))
}
