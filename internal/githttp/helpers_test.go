package githttp_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/gittest"

	"github.com/ghost-scm/ghost/internal/githttp"
	"github.com/ghost-scm/ghost/internal/gitsvc/cacheadapter"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// fakeAuth stands in for the metadata layer: tokens "rw" (write
// everything), "ro" (read everything) and "nobody" (valid, no rights on
// private repositories).
type fakeAuth struct{ repos map[string]fakeRepo }

type fakeRepo struct {
	id      string
	public  bool
	protect bool // push protection on
}

func (a *fakeAuth) Authorize(ctx context.Context, token, owner, name string) (access.Grant, error) {
	switch token {
	case "", "rw", "ro", "nobody":
	default:
		return access.Grant{}, access.ErrUnauthenticated
	}
	r, ok := a.repos[owner+"/"+name]
	if !ok {
		return access.Grant{}, access.ErrNotFound
	}
	g := access.Grant{RepoID: r.id, Principal: token, Tenant: owner, PushProtection: r.protect}
	switch {
	case token == "rw":
		g.Level = access.Write
	case r.public || token == "ro":
		g.Level = access.Read
	}
	return g, nil
}

type env struct {
	t     *testing.T
	store *memstore.Store
	log   *wal.Log
	cache *repocache.Cache
	auth  *fakeAuth
	srv   *httptest.Server
	url   string // base URL without credentials
}

func newEnv(t *testing.T, opts ...func(*githttp.Options)) *env {
	t.Helper()
	e := &env{t: t, store: memstore.New()}
	e.log = wal.New(e.store, wal.Options{})
	var err error
	e.cache, err = repocache.New(t.TempDir(), e.log, repocache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.cache.Close)
	auth := &fakeAuth{repos: map[string]fakeRepo{
		"alice/pub":   {id: "pub", public: true},
		"alice/priv":  {id: "priv"},
		"alice/other": {id: "other", public: true},
		"alice/guard": {id: "guard", public: true, protect: true},
	}}
	e.auth = auth
	o := githttp.Options{ServiceOptions: cacheadapter.Options(e.cache, e.log), Auth: auth}
	for _, f := range opts {
		f(&o)
	}
	h, err := githttp.NewHandler(o)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	e.url = e.srv.URL
	return e
}

// remote returns a URL for owner/repo with token as password ("" = none).
func (e *env) remote(repo, token string) string {
	u := strings.TrimPrefix(e.url, "http://")
	if token != "" {
		return "http://x:" + token + "@" + u + "/" + repo
	}
	return "http://" + u + "/" + repo
}

// git runs the git client in dir and returns stdout+stderr; it fails the
// test on a non-zero exit.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitErr(t, dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

func gitErr(t *testing.T, dir string, args ...string) (string, error) {
	return gittest.Combined(gittest.Env(t.TempDir()), dir, nil, args...)
}

// gitOut runs git and returns only stdout.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(gittest.Git(t, gittest.Env(t.TempDir()), dir, args...))
}

// workTree makes a repository with some history: two branches, a merge,
// a lightweight and an annotated tag.
func workTree(t *testing.T) string {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "--initial-branch=main")
	for i := range 3 {
		write(t, dir, fmt.Sprintf("file%d.txt", i), strings.Repeat(fmt.Sprintf("content %d\n", i), 100))
		git(t, dir, "add", ".")
		git(t, dir, "commit", "-q", "-m", fmt.Sprintf("commit %d", i))
	}
	git(t, dir, "checkout", "-q", "-b", "topic")
	write(t, dir, "dir/sub/topic.txt", "topic\n")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "topic")
	git(t, dir, "checkout", "-q", "main")
	write(t, dir, "main.txt", "main\n")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "main")
	git(t, dir, "merge", "-q", "--no-edit", "topic")
	git(t, dir, "tag", "v1")
	git(t, dir, "tag", "-a", "-m", "release", "v2", "HEAD~1")
	return dir
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func commitFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	write(t, dir, name, content)
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "edit "+name)
	return gitOut(t, dir, "rev-parse", "HEAD")
}

// logRefs returns the log's ref snapshot as "id name" lines.
func (e *env) logRefs(repo string) string {
	e.t.Helper()
	x, err := e.log.Head(context.Background(), repo)
	if err != nil {
		e.t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range x.Refs {
		fmt.Fprintf(&b, "%s %s\n", r.ID, r.Name)
	}
	return strings.TrimSpace(b.String())
}

func (e *env) seq(repo string) uint64 {
	e.t.Helper()
	x, _, err := e.log.ReadIndex(context.Background(), repo)
	if err != nil {
		e.t.Fatal(err)
	}
	return x.Seq
}
