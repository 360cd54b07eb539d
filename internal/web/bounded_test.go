package web_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/web"
)

// allocated runs fn and returns the bytes the process allocated meanwhile.
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestHugeCommitMessages replays issue 19's reproduction at a smaller
// scale: commits whose messages are megabytes (they compress to almost
// nothing, so the push is tiny), with many branches pointing at them.
// Before, the repository page read every branch's subject whole and the
// log page put every subject into the HTML; now each page keeps a
// kilobyte of a subject, reads bodies only on a commit's page and only
// up to its cap, and the pages stay small whatever the messages weigh.
func TestHugeCommitMessages(t *testing.T) {
	const size = 4 << 20
	dir, env := bareRepo(t)
	tree := emptyTree(t, env, dir)
	parent := ""
	var tips []string
	for i := range 8 {
		msg := fmt.Sprintf("%d%s\n\n%s\n", i, strings.Repeat("s", size), strings.Repeat("b", size))
		var ps []string
		if parent != "" {
			ps = []string{parent}
		}
		parent = commitTree(t, env, dir, tree, msg, ps...)
		tips = append(tips, parent)
	}
	for i := range 16 {
		gittest.Git(t, env, dir, "branch", fmt.Sprintf("b%02d", i), tips[i%len(tips)])
	}
	gittest.Git(t, env, dir, "branch", "main", parent)
	f := newFixture(t, fixtureOpts{})
	f.addRepo("huge", dir)
	c := f.client()
	for _, p := range []string{"/alice/huge", "/alice/huge/-/commits/main", "/alice/huge/-/branches", "/alice/huge/-/commit/" + parent, "/alice/huge/-/tree/main"} {
		var status, n int
		var body string
		alloc := allocated(func() {
			res, b := c.get(p)
			status, n, body = res.StatusCode, len(b), b
		})
		t.Logf("GET %s: %d, %d bytes of HTML, %.1f MiB allocated", p, status, n, float64(alloc)/(1<<20))
		if status != 200 {
			t.Fatalf("GET %s: %d", p, status)
		}
		if n > 256<<10 {
			t.Errorf("GET %s: %d bytes of HTML, more than 256 KiB", p, n)
		}
		if alloc > 48<<20 {
			t.Errorf("GET %s allocated %d bytes, more than 48 MiB, for messages of %d", p, alloc, size)
		}
		if p == "/alice/huge/-/commit/"+parent && !strings.Contains(body, `id="bodycut"`) {
			t.Errorf("GET %s: the cut body has no notice", p)
		}
	}
}

// TestRefsArePaginated: a repository page lists the first 50 branches and
// links to the rest; the branch pages show 50 at a time.
func TestRefsArePaginated(t *testing.T) {
	dir, env := bareRepo(t)
	tip := commitTree(t, env, dir, emptyTree(t, env, dir), "one\n")
	var in strings.Builder
	for i := range 120 {
		fmt.Fprintf(&in, "create refs/heads/b%03d %s\n", i, tip)
		fmt.Fprintf(&in, "create refs/tags/t%03d %s\n", i, tip)
	}
	if _, err := gittest.Run(env, dir, strings.NewReader(in.String()), "update-ref", "--stdin"); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOpts{})
	f.addRepo("many", dir)
	c := f.client()
	_, body := c.get("/alice/many")
	if n := strings.Count(body, `/-/tree/b`); n != 50 {
		t.Errorf("repository page lists %d branches, want 50", n)
	}
	if n := strings.Count(body, `/-/tree/t`); n != 50 {
		t.Errorf("repository page lists %d tags, want 50", n)
	}
	if !strings.Contains(body, `id="allbranches"`) || !strings.Contains(body, `id="alltags"`) {
		t.Error("repository page has no link to all branches and tags")
	}
	var seen []string
	next := "/alice/many/-/branches"
	for pages := 0; next != ""; pages++ {
		if pages > 3 {
			t.Fatal("more branch pages than there are branches")
		}
		_, body := c.get(next)
		n := strings.Count(body, `/-/tree/b`)
		if n > 50 {
			t.Fatalf("%s lists %d branches", next, n)
		}
		for _, l := range strings.Split(body, `/-/tree/`)[1:] {
			seen = append(seen, l[:4])
		}
		next = ""
		if i := strings.Index(body, `href="?after=`); i >= 0 {
			rest := body[i+len(`href="?after=`):]
			next = "/alice/many/-/branches?after=" + rest[:strings.IndexByte(rest, '"')]
		}
	}
	if len(seen) != 120 || seen[0] != "b000" || seen[119] != "b119" {
		t.Fatalf("the branch pages listed %d branches (%v ... )", len(seen), seen[:min(3, len(seen))])
	}
	if _, body := c.get("/alice/many/-/tags?after=t100"); strings.Count(body, `/-/tree/t`) != 19 || strings.Contains(body, `id="next"`) {
		t.Error("the last tag page is wrong")
	}
}

// TestTreeListingIsCapped: a directory with more entries than
// MaxTreeEntries lists that many and says there are more.
func TestTreeListingIsCapped(t *testing.T) {
	env := gittest.Env(t.TempDir())
	work := filepath.Join(t.TempDir(), "work")
	gittest.Git(t, env, "", "init", "-q", "-b", "main", work)
	for i := range 30 {
		if err := os.WriteFile(filepath.Join(work, fmt.Sprintf("f%02d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gittest.Git(t, env, work, "add", "-A")
	gittest.Git(t, env, work, "commit", "-q", "-m", "many files")
	bare := filepath.Join(t.TempDir(), "wide.git")
	gittest.Git(t, env, "", "clone", "-q", "--bare", work, bare)
	f := newFixture(t, fixtureOpts{opts: func(o *web.Options) { o.MaxTreeEntries = 10 }})
	f.addRepo("wide", bare)
	c := f.client()
	for _, p := range []string{"/alice/wide", "/alice/wide/-/tree/main"} {
		_, body := c.get(p)
		if n := strings.Count(body, `/-/blob/main/f`); n != 10 || !strings.Contains(body, `id="toomany"`) {
			t.Errorf("GET %s: %d entries listed, notice %v; want 10 and the notice", p, n, strings.Contains(body, `id="toomany"`))
		}
	}
	if _, body := c.get("/alice/pub/-/tree/main"); strings.Contains(body, `id="toomany"`) {
		t.Error("a small directory shows the notice")
	}
}

// TestDotPathsAreNotFound: paths with ".", ".." or empty segments name
// nothing in a tree. The mux redirects plain ones to their clean form,
// but escaped ones ("%2E%2E/x", "..%2Fx") reach the page: before, git
// read "./x" and "../x" relative to a working tree that a bare
// repository does not have, and the blob and raw pages answered 500 and
// logged an error.
func TestDotPathsAreNotFound(t *testing.T) {
	var logs bytes.Buffer
	f := newFixture(t, fixtureOpts{opts: func(o *web.Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }})
	c := f.client()
	for _, kind := range []string{"blob", "raw", "tree", "commits"} {
		for _, p := range []string{"%2E/README.md", ".%2FREADME.md", "..%2FREADME.md", "%2E%2E/README.md", "src%2F..%2FREADME.md",
			"src/%2E%2E%2FREADME.md", "src%2F%2Fmain.go", "src/.%2Fmain.go", ".%2F", "%2E", "%2E%2E"} {
			path := "/alice/pub/-/" + kind + "/main/" + p
			if res, _ := c.get(path); res.StatusCode != 404 {
				t.Errorf("GET %s: %d, want 404", path, res.StatusCode)
			}
		}
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("dot paths logged errors:\n%s", logs.String())
	}
}

// TestQuadraticReadme replays issue 19's reproduction: a README on which
// goldmark's parser is quadratic (here a 96 KiB run of ">", seconds of
// CPU) is shown as plain text once the render's budget runs out, rather
// than holding the request and a CPU until goldmark finishes.
func TestQuadraticReadme(t *testing.T) {
	env := gittest.Env(t.TempDir())
	work := filepath.Join(t.TempDir(), "work")
	gittest.Git(t, env, "", "init", "-q", "-b", "main", work)
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte(strings.Repeat(">", 96<<10)), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, env, work, "add", "-A")
	gittest.Git(t, env, work, "commit", "-q", "-m", "quadratic")
	bare := filepath.Join(t.TempDir(), "quad.git")
	gittest.Git(t, env, "", "clone", "-q", "--bare", work, bare)
	f := newFixture(t, fixtureOpts{opts: func(o *web.Options) { o.MaxBlobBytes = 1 << 20 }})
	f.addRepo("quad", bare)
	res, body := f.client().get("/alice/quad")
	if res.StatusCode != 200 {
		t.Fatalf("GET /alice/quad: %d", res.StatusCode)
	}
	if strings.Contains(body, "<blockquote>") || !strings.Contains(body, "<pre>&gt;&gt;&gt;") {
		t.Fatalf("the quadratic README was not shown as plain text (%d bytes of HTML)", len(body))
	}
}

// TestUnreachableCommitsAreNotShown: a commit no ref reaches (a deleted
// branch's, force-pushed history) is 404 on every page, by full id and by
// the shortest unique prefix, like a missing one; a commit that a ref
// reaches is shown by id (docs/adr/0091-reachable-objects.md). Before,
// any object the repository held was shown to anyone, from 4 hex digits.
func TestUnreachableCommitsAreNotShown(t *testing.T) {
	f := newFixture(t, fixtureOpts{commits: 3})
	bare := cacheOf(f).m[f.pub.ID]
	env := gittest.Env(t.TempDir())
	blob, err := gittest.Run(env, bare, strings.NewReader("password=hunter2\n"), "hash-object", "-w", "--stdin")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := gittest.Run(env, bare, strings.NewReader("100644 blob "+strings.TrimSpace(blob)+"\tleak.txt\n"), "mktree")
	if err != nil {
		t.Fatal(err)
	}
	gone := commitTree(t, env, bare, strings.TrimSpace(tree), "force-pushed away\n", f.head)
	short := strings.TrimSpace(gittest.Git(t, env, bare, "rev-parse", "--short=4", gone))
	old := strings.TrimSpace(gittest.Git(t, env, bare, "rev-parse", f.head+"~2"))
	c := f.client()
	for _, id := range []string{gone, short} {
		for _, p := range []string{"/-/commit/" + id, "/-/tree/" + id, "/-/blob/" + id + "/leak.txt", "/-/raw/" + id + "/leak.txt", "/-/commits/" + id} {
			if res, body := c.get("/alice/pub" + p); res.StatusCode != 404 || strings.Contains(body, "hunter2") || strings.Contains(body, "force-pushed") {
				t.Errorf("GET /alice/pub%s: %d", p, res.StatusCode)
			}
		}
	}
	for _, p := range []string{"/-/commit/" + old, "/-/commit/" + old[:7], "/-/tree/" + old, "/-/blob/" + old + "/README.md"} {
		if res, _ := c.get("/alice/pub" + p); res.StatusCode != 200 {
			t.Errorf("GET /alice/pub%s: %d, want 200", p, res.StatusCode)
		}
	}
}
