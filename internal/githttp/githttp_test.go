package githttp_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ghost-scm/ghost/internal/githttp"
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
	out, err := gitErr(t, b, "push", e.remote("alice/pub", "rw"), "main")
	if err == nil {
		t.Fatal("non-fast-forward push succeeded")
	}
	if !strings.Contains(out, " ! [rejected]        main -> main (fetch first)") {
		t.Fatalf("unexpected output:\n%s", out)
	}
	t.Log(out)
}

func TestAuthAnswers(t *testing.T) {
	for _, anon404 := range []bool{false, true} {
		e := newEnv(t, func(o *githttp.Options) { o.AnonymousNotFound = anon404 })
		anonPriv := 401
		if anon404 {
			anonPriv = 404
		}
		cases := []struct {
			method, path, token string
			status              int
		}{
			{"GET", "/alice/pub/info/refs?service=git-upload-pack", "", 200},
			{"GET", "/alice/pub.git/info/refs?service=git-upload-pack", "", 200},
			{"GET", "/alice/priv/info/refs?service=git-upload-pack", "", anonPriv},
			{"GET", "/alice/nope/info/refs?service=git-upload-pack", "", anonPriv},
			{"GET", "/alice/priv/info/refs?service=git-upload-pack", "ro", 200},
			{"GET", "/alice/priv/info/refs?service=git-upload-pack", "nobody", 404},
			{"GET", "/alice/nope/info/refs?service=git-upload-pack", "nobody", 404},
			{"GET", "/alice/pub/info/refs?service=git-upload-pack", "bogus", 401},
			{"GET", "/alice/pub/info/refs?service=git-receive-pack", "", 401},
			{"GET", "/alice/nope/info/refs?service=git-receive-pack", "", 401},
			{"GET", "/alice/pub/info/refs?service=git-receive-pack", "ro", 403},
			{"GET", "/alice/pub/info/refs?service=git-receive-pack", "nobody", 403},
			{"GET", "/alice/priv/info/refs?service=git-receive-pack", "nobody", 404},
			{"GET", "/alice/pub/info/refs?service=git-receive-pack", "rw", 200},
			{"GET", "/alice/pub/info/refs", "", 403},
			{"GET", "/alice/pub/info/refs?service=git-upload-archive", "", 403},
			{"GET", "/alice/pub/objects/ab/cdef", "", 403},
			{"GET", "/alice/pub/HEAD", "", 403},
			{"GET", "/alice/pub/git-upload-pack", "", 405},
			{"POST", "/alice/pub/info/refs?service=git-upload-pack", "", 405},
			{"GET", "/alice", "", 404},
			{"GET", "/alice/../etc/info/refs?service=git-upload-pack", "", 404},
			{"GET", "/alice/pub/whatever", "", 404},
		}
		for _, tc := range cases {
			req, _ := http.NewRequest(tc.method, e.url+tc.path, nil)
			if tc.token != "" {
				req.SetBasicAuth("ignored", tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("anon404=%v %s %s token %q: %d, want %d", anon404, tc.method, tc.path, tc.token, resp.StatusCode, tc.status)
			}
			if resp.StatusCode == 401 && resp.Header.Get("WWW-Authenticate") != `Basic realm="ghost"` {
				t.Errorf("%s: 401 without the challenge", tc.path)
			}
		}
		// A POST with the wrong content type is refused.
		resp, _ := e.post("alice/pub", "git-upload-pack", "", nil, map[string]string{"Content-Type": "text/plain"})
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("wrong content type: %d", resp.StatusCode)
		}
	}
}

func TestConcurrentPushesToOneNode(t *testing.T) {
	e, src, _ := seeded(t)
	const n = 8
	for i := range n {
		git(t, src, "checkout", "-q", "-b", fmt.Sprintf("c%d", i), "main")
		commitFile(t, src, fmt.Sprintf("c%d.txt", i), fmt.Sprintf("%d\n", i))
	}
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := gitErr(t, src, "push", "-q", e.remote("alice/pub", "rw"), fmt.Sprintf("c%d", i)); err != nil {
				errs <- out
			}
		}()
	}
	wg.Wait()
	close(errs)
	for out := range errs {
		t.Error(out)
	}
	want := gitOut(t, src, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads")
	if got := e.logRefs("pub"); got != want {
		t.Fatalf("log refs:\n%s\nwant\n%s", got, want)
	}
	dst := filepath.Join(t.TempDir(), "m")
	git(t, "", "clone", "-q", "--mirror", e.remote("alice/pub", ""), dst)
	if got := gitOut(t, dst, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads"); got != want {
		t.Fatalf("clone refs:\n%s\nwant\n%s", got, want)
	}
}
