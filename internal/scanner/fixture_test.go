package scanner_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/cli"
	"github.com/ghost-scm/ghost/internal/compact"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver/etcdtest"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/testkit"
)

var etcdClient *clientv3.Client

// TestMain runs the tests on one etcd, or, re-executed with
// GHOST_SCANNER_TEST_GHOST=1, is the ghost command (a real "ghost worker"
// process for TestKilledWorkerProcess).
func TestMain(m *testing.M) {
	if os.Getenv("GHOST_SCANNER_TEST_GHOST") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	etcdtest.Main(m, &etcdClient)
}

type fixture struct {
	t     *testing.T
	srv   *server.Server
	host  string
	b     *etcdcoord.Backend
	ns    string
	clock *testkit.Clock
	tok   map[string]string // tenant -> write token
	// closeServer stops the HTTP server and waits for the push runs its
	// commit hook is starting.
	closeServer func()
}

type fixtureOpts struct {
	limits coord.Limits
	client *clientv3.Client // nil: the package's etcd
	// dataDir, when set, keeps the objects in an fsstore under
	// <dataDir>/objects, where a ghost process finds them.
	dataDir string
	// scan turns on the server's own scanning (push runs from its commit
	// hook) with these options.
	scan *scanner.Options
	// store, when set, wraps the object store (a faultstore, say).
	store func(objstore.Store) objstore.Store
	// compaction tunes the server's background compactions.
	compaction compact.TriggerOptions
}

// newFixture runs a ghost server (scanning off: tests start runs
// themselves, deterministically) on memstore, and an etcd backend in a
// namespace of its own on the package's etcd.
func newFixture(t *testing.T, o fixtureOpts) *fixture {
	t.Helper()
	client := o.client
	if client == nil {
		client = etcdClient
	}
	ns := fmt.Sprintf("/scantest/%s", strings.NewReplacer("/", "-", "#", "-").Replace(t.Name()))
	b, err := etcdcoord.New(etcdcoord.Config{Client: client, Namespace: ns, Limits: o.limits})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, b: b, ns: ns, clock: testkit.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), tok: map[string]string{}}
	so := server.Options{Store: memstore.New(), CacheDir: t.TempDir(), Compaction: o.compaction}
	if o.dataDir != "" {
		st, err := fsstore.Open(filepath.Join(o.dataDir, "objects"))
		if err != nil {
			t.Fatal(err)
		}
		so.Store = st
	}
	if o.store != nil {
		so.Store = o.store(so.Store)
	}
	if o.scan != nil {
		so.Scan = *o.scan
		so.Scan.Coord = func() coord.Backend { return b }
		so.Scan.Now = f.clock.Now
	}
	srv, err := server.New(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler()) // 127.0.0.1
	f.closeServer = sync.OnceFunc(func() { ts.Close(); srv.Close() })
	t.Cleanup(f.closeServer)
	f.srv, f.host = srv, strings.TrimPrefix(ts.URL, "http://")
	return f
}

func (f *fixture) scanner(o scanner.Options) *scanner.Scanner {
	f.t.Helper()
	o.Store = f.srv.Store()
	o.Log = f.srv.Log()
	o.Alerts = f.srv.Alerts()
	if o.Coord == nil {
		o.Coord = func() coord.Backend { return f.b }
	}
	if o.Now == nil {
		o.Now = f.clock.Now
	}
	s, err := scanner.New(o)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func (f *fixture) worker(s *scanner.Scanner, o scanner.WorkerOptions) *scanner.Worker {
	f.t.Helper()
	c, err := repocache.New(f.t.TempDir(), f.srv.Log(), repocache.Options{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(c.Close)
	o.Cache = c
	o.EngineWorkers = 1
	w, err := s.NewWorker(o)
	if err != nil {
		f.t.Fatal(err)
	}
	return w
}

func (f *fixture) tenant(name string) {
	f.t.Helper()
	ctx := context.Background()
	if _, err := f.srv.Meta().CreateTenant(ctx, name, meta.KindUser); err != nil {
		f.t.Fatal(err)
	}
	tok, _, err := f.srv.Meta().CreateToken(ctx, name, meta.ScopeWrite, "test")
	if err != nil {
		f.t.Fatal(err)
	}
	f.tok[name] = tok
}

func (f *fixture) repo(owner, name string) meta.Repo {
	f.t.Helper()
	r, err := f.srv.Meta().CreateRepo(context.Background(), owner, name, false)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fixture) remote(owner, name string) string {
	return "http://x:" + f.tok[owner] + "@" + f.host + "/" + owner + "/" + name + ".git"
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(gittest.Git(t, gittest.Env(t.TempDir()), dir, args...))
}

// secret returns a distinct, realistic GitHub token for i.
func secret(i int) string {
	const alnum = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	h := sha256.Sum256([]byte(fmt.Sprint("planted", i)))
	var b strings.Builder
	b.WriteString("ghp_")
	for j := range 36 {
		b.WriteByte(alnum[int(h[j%32]+byte(j*7))%len(alnum)])
	}
	return b.String()
}

// place is where a planted secret must be reported.
type place struct {
	Path string
	Line int
}

// history builds, in a new work tree, a history over three branches with
// planted secrets, and pushes it to remote after every commit (many
// pushes), then returns, per secret index, the places it was added.
// fillers adds that many secret-free files per commit, so shards have
// blobs to split.
func history(t *testing.T, remote string, fillers int) map[int][]place {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	want := map[int][]place{}
	n := 0
	commit := func(branch string, files map[string]string) {
		for p, c := range files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for i := range fillers {
			p := filepath.Join(dir, "filler", fmt.Sprintf("f%03d-%03d.txt", n, i))
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte(fmt.Sprintf("filler %d %d\nnothing to see\n", n, i)), 0o644)
		}
		n++
		git(t, dir, "add", "-A")
		git(t, dir, "commit", "-q", "-m", fmt.Sprint("commit ", n))
		git(t, dir, "push", "-q", remote, branch)
	}
	plant := func(i int, path string, line int) string {
		want[i] = append(want[i], place{path, line})
		return fmt.Sprintf("token = \"%s\"\n", secret(i))
	}
	commit("main", map[string]string{"README": "hello\n"})
	commit("main", map[string]string{"conf/a.env": "# a\n" + plant(0, "conf/a.env", 2)})
	git(t, dir, "checkout", "-q", "-b", "dev")
	commit("dev", map[string]string{"dev/b.go": "package b\n\n" + plant(1, "dev/b.go", 3)})
	commit("dev", map[string]string{"dev/c.txt": plant(2, "dev/c.txt", 1)})
	git(t, dir, "checkout", "-q", "main")
	git(t, dir, "checkout", "-q", "-b", "feature")
	// The same secret as on dev, at another path: one alert, two places.
	commit("feature", map[string]string{"feat/x.yml": "x: 1\n" + plant(1, "feat/x.yml", 2)})
	commit("feature", map[string]string{"feat/y.txt": "y\ny\ny\n" + plant(3, "feat/y.txt", 4)})
	git(t, dir, "checkout", "-q", "main")
	commit("main", map[string]string{"README": "hello again\n", "main/d.txt": plant(4, "main/d.txt", 1)})
	return want
}

// drain runs the workers, each in turn, until no run is active.
func drain(t *testing.T, s *scanner.Scanner, ws ...*scanner.Worker) {
	t.Helper()
	ctx := context.Background()
	for range 1000 {
		did := false
		for _, w := range ws {
			d, err := w.Step(ctx)
			if err != nil {
				t.Fatalf("worker step: %v", err)
			}
			did = did || d
		}
		if !did {
			act, err := s.Active(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(act) == 0 {
				return
			}
		}
	}
	t.Fatal("runs did not finish")
}

// alertView is an alert reduced to what two equivalent scans agree on.
type alertView struct {
	Fingerprint string
	Rule        string
	Places      []string
}

func view(t *testing.T, as *alerts.Store, tenant, repoID string) []alertView {
	t.Helper()
	page, err := as.List(context.Background(), alerts.Filter{Tenant: tenant, RepoID: repoID}, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []alertView
	for _, a := range page.Alerts {
		v := alertView{Fingerprint: a.Fingerprint, Rule: a.RuleID}
		for _, l := range a.Locations {
			v.Places = append(v.Places, fmt.Sprintf("%s:%d:%s", l.Path, l.Line, l.BlobID))
		}
		slices.Sort(v.Places)
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b alertView) int { return strings.Compare(a.Fingerprint, b.Fingerprint) })
	return out
}
