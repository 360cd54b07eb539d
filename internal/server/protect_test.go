package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/memcoord"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/sshd"
)

// The adversarial suite of push protection and scanning (issue 18): one
// case per way a secret could be pushed around a diff-based scanner, each
// run over HTTP and over SSH, three times:
//
//   - protection on: the push is refused on every ref with "secret
//     detected by push protection" (report-status ng), and the log does
//     not move;
//   - a bypass (git push -o secret-scanning.bypass=used_in_tests): the
//     push lands, and the bypass is recorded with the pusher's credential
//     (the token's id over HTTP, the key's fingerprint and title over SSH);
//   - protection off: the push lands, its push run files exactly one
//     alert, and a full-history run afterwards adds none.
//
// One case is the negative control (a rename that adds no blob), which
// no mode blocks.
//
//	go test -run TestPushProtectionAdversarial ./internal/server/
//
// GHOST_ADVERSARIAL_CASES=control,note narrows it to some cases.

// protectCase is one way around.
type protectCase struct {
	name string
	// setup prepares the client's history and pushes what the case
	// needs to exist before the attack, with protection off (a case may
	// land its secret here, as a repository that had it before
	// protection was turned on).
	setup func(c *attack)
	// attack makes the commits and returns the git push arguments of
	// the push under test (without the remote and options).
	attack func(c *attack) []string
	// clean: nothing the attack pushes is new (the negative control).
	clean bool
	// replace: refs/replace/<id> pushes come first: refused by default,
	// then allowed by the repository's setting.
	replace func(c *attack) (ref string)
}

// attack is one case in one mode on one transport: a client work tree
// and a remote repository of its own.
type attack struct {
	t      *testing.T
	s      *protectSuite
	tr     *transport
	dir    string
	repo   meta.Repo
	secret string
	// real is a path whose content the web UI must show as pushed,
	// when a case needs the check (replace refs).
	real, realRev string
}

func (c *attack) git(args ...string) string {
	c.t.Helper()
	return strings.TrimSpace(gittest.Git(c.t, c.s.env, c.dir, args...))
}

func (c *attack) gitIn(stdin string, args ...string) string {
	c.t.Helper()
	out, err := gittest.Run(c.s.env, c.dir, strings.NewReader(stdin), args...)
	if err != nil {
		c.t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(out)
}

func (c *attack) write(path, content string) {
	c.t.Helper()
	p := filepath.Join(c.dir, path)
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.Remove(p)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

func (c *attack) commit(msg string) string {
	c.t.Helper()
	c.git("add", "-A")
	c.git("commit", "-q", "--allow-empty", "-m", msg)
	return c.git("rev-parse", "HEAD")
}

// push runs git push to the case's repository and returns its output
// and whether it succeeded.
func (c *attack) push(opts []string, args ...string) (string, bool) {
	c.t.Helper()
	a := append([]string{"push", "--porcelain"}, opts...)
	a = append(append(a, c.tr.url(c.repo.Name)), args...)
	out, err := gittest.Combined(c.tr.env, c.dir, nil, a...)
	return out, err == nil
}

func (c *attack) mustPush(args ...string) {
	c.t.Helper()
	if out, ok := c.push(nil, args...); !ok {
		c.t.Fatalf("push %v: %s", args, out)
	}
}

// fakeToken is a GitHub token the default rules find, distinct per seed.
func fakeToken(seed string) string {
	const alnum = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	h := sha256.Sum256([]byte("adversarial " + seed))
	var b strings.Builder
	b.WriteString("ghp_")
	for j := range 36 {
		b.WriteByte(alnum[int(h[j%32]+byte(j*11))%len(alnum)])
	}
	return b.String()
}

func protectCases() []protectCase {
	base := func(c *attack) {
		c.write("README", "hello\n")
		c.commit("base")
		c.mustPush("main")
	}
	return []protectCase{
		{name: "control", setup: base, attack: func(c *attack) []string {
			c.write("conf.txt", "x\ntoken = "+c.secret+"\n")
			c.commit("add a secret")
			return []string{"main"}
		}},
		{name: "merge-adds-file", setup: func(c *attack) {
			base(c)
			c.git("checkout", "-q", "-b", "side")
			c.write("side.txt", "side\n")
			c.commit("side")
			c.git("checkout", "-q", "main")
			c.mustPush("side")
		}, attack: func(c *attack) []string {
			c.git("merge", "-q", "--no-ff", "--no-commit", "side")
			c.write("evil.txt", "evil "+c.secret+"\n")
			c.commit("merge side")
			return []string{"main"}
		}},
		{name: "conflict-resolution", setup: func(c *attack) {
			c.write("f.txt", "base\n")
			c.commit("base")
			c.git("checkout", "-q", "-b", "side")
			c.write("f.txt", "side\n")
			c.commit("side")
			c.git("checkout", "-q", "main")
			c.write("f.txt", "main\n")
			c.commit("main")
			c.mustPush("main", "side")
		}, attack: func(c *attack) []string {
			if out, err := gittest.Run(c.s.env, c.dir, nil, "merge", "-q", "side"); err == nil {
				c.t.Fatalf("the merge did not conflict: %s", out)
			}
			c.write("f.txt", "resolved "+c.secret+"\n")
			c.commit("merge side")
			return []string{"main"}
		}},
		{name: "octopus", setup: base, attack: func(c *attack) []string {
			for _, b := range []string{"o1", "o2"} {
				c.git("checkout", "-q", "-b", b, "main")
				c.write(b+".txt", b+"\n")
				c.commit(b)
			}
			c.git("checkout", "-q", "main")
			c.git("merge", "-q", "--no-commit", "o1", "o2")
			c.write("octopus.txt", "octo "+c.secret+"\n")
			c.commit("octopus")
			return []string{"main"}
		}},
		{name: "tag-of-blob", setup: base, attack: func(c *attack) []string {
			blob := c.gitIn("key "+c.secret+"\n", "hash-object", "-w", "--stdin")
			c.git("tag", "-a", "-m", "a blob", "t1", blob)
			return []string{"refs/tags/t1"}
		}},
		{name: "tag-of-tree", setup: base, attack: func(c *attack) []string {
			blob := c.gitIn("key "+c.secret+"\n", "hash-object", "-w", "--stdin")
			sub := c.gitIn("100644 blob "+blob+"\tkey.txt\n", "mktree")
			tree := c.gitIn("040000 tree "+sub+"\tconf\n", "mktree")
			c.git("tag", "-a", "-m", "a tree", "t1", tree)
			return []string{"refs/tags/t1"}
		}},
		{name: "lightweight-tag-off-branch", setup: base, attack: func(c *attack) []string {
			c.git("checkout", "-q", "--detach")
			c.write("detached.txt", "d "+c.secret+"\n")
			id := c.commit("detached")
			c.git("checkout", "-q", "main")
			c.git("tag", "light", id)
			return []string{"refs/tags/light"}
		}},
		{name: "note", setup: base, attack: func(c *attack) []string {
			c.git("notes", "add", "-m", "note "+c.secret, "HEAD")
			return []string{"refs/notes/commits"}
		}},
		{name: "symlink-replaced", setup: func(c *attack) {
			c.write("README", "hello\n")
			if err := os.Symlink("README", filepath.Join(c.dir, "link")); err != nil {
				c.t.Skip("no symlinks:", err)
			}
			c.commit("symlink")
			c.mustPush("main")
		}, attack: func(c *attack) []string {
			c.write("link", "now a file "+c.secret+"\n")
			c.commit("file replaces symlink")
			return []string{"main"}
		}},
		{name: "replace-blob", setup: base, replace: func(c *attack) string {
			c.write("conf.txt", "token = "+c.secret+"\n")
			c.commit("secret")
			s := c.git("rev-parse", "HEAD:conf.txt")
			h := c.gitIn("harmless\n", "hash-object", "-w", "--stdin")
			c.git("replace", s, h)
			c.real, c.realRev = "conf.txt", "main"
			return "refs/replace/" + s
		}, attack: func(c *attack) []string { return []string{"main"} }},
		{name: "replace-commit", setup: base, replace: func(c *attack) string {
			c.write("conf.txt", "token = "+c.secret+"\n")
			s := c.commit("secret")
			c.git("checkout", "-q", "-b", "decoy", "HEAD~1")
			c.write("conf.txt", "harmless\n")
			h := c.commit("harmless")
			c.git("checkout", "-q", "main")
			c.git("replace", s, h)
			c.real, c.realRev = "conf.txt", s
			return "refs/replace/" + s
		}, attack: func(c *attack) []string { return []string{"main"} }},
		{name: "commit-message", setup: base, attack: func(c *attack) []string {
			c.write("a.txt", "a\n")
			c.commit("deploy\n\ntoken: " + c.secret)
			return []string{"main"}
		}},
		{name: "tag-message", setup: base, attack: func(c *attack) []string {
			c.git("tag", "-a", "-m", "release\n\n"+c.secret, "v1")
			return []string{"refs/tags/v1"}
		}},
		{name: "leading-nul", setup: base, attack: func(c *attack) []string {
			c.write("notes.txt", "\x00\nplain text\ntoken = "+c.secret+"\n")
			c.commit("nul")
			return []string{"main"}
		}},
		{name: "split-across-pushes", setup: func(c *attack) {
			// The first half is no secret to any rule.
			c.write("conf.txt", "a\nv: "+c.secret[:20])
			c.commit("first half")
			c.mustPush("main")
		}, attack: func(c *attack) []string {
			c.write("conf.txt", "a\nv: "+c.secret+"\n")
			c.commit("second half")
			return []string{"main"}
		}},
		{name: "branch-deleted-recreated", setup: func(c *attack) {
			base(c)
			c.git("checkout", "-q", "-b", "tmp")
			c.write("tmp.txt", "tmp "+c.secret+"\n")
			c.commit("tmp")
			c.git("checkout", "-q", "main")
			c.mustPush("tmp")
			c.mustPush(":tmp")
		}, attack: func(c *attack) []string { return []string{"tmp"} }},
		{name: "force-push-older-history", setup: func(c *attack) {
			for i := range 3 {
				c.write("f.txt", fmt.Sprintf("v%d\n", i))
				c.commit(fmt.Sprint("c", i))
			}
			c.mustPush("main")
		}, attack: func(c *attack) []string {
			c.git("reset", "-q", "--hard", "HEAD~2")
			c.write("g.txt", "g "+c.secret+"\n")
			c.commit("rewritten")
			return []string{"+main"}
		}},
		{name: "thin-pack", setup: func(c *attack) {
			var b strings.Builder
			for i := range 4000 {
				fmt.Fprintf(&b, "line %d of a large file\n", i)
			}
			c.write("big.txt", b.String())
			c.commit("big")
			c.mustPush("main")
		}, attack: func(c *attack) []string {
			body, _ := os.ReadFile(filepath.Join(c.dir, "big.txt"))
			c.write("big.txt", strings.Replace(string(body), "line 2000 of", "token = "+c.secret+" of", 1))
			c.commit("one line")
			return []string{"main"}
		}},
		{name: "rename-no-new-blob", clean: true, setup: func(c *attack) {
			c.write("a.txt", "token = "+c.secret+"\n")
			c.commit("a secret that landed before protection was on")
			c.mustPush("main")
		}, attack: func(c *attack) []string {
			c.git("mv", "a.txt", "b.txt")
			c.commit("rename")
			return []string{"main"}
		}},
	}
}

// transport is how the client reaches the server.
type transport struct {
	name string
	url  func(repo string) string
	env  []string
	// credential is what a bypass must record as who pushed.
	credential string
}

// protectSuite is one server, reached over HTTP and SSH, with scanning on.
type protectSuite struct {
	srv  *server.Server
	env  []string // the client's git environment (no transport)
	http *transport
	ssh  *transport
	// mu serializes scan drains: the suite's cases run in parallel, and
	// one worker drains every run.
	mu sync.Mutex
	w  *scanner.Worker
	n  int // repositories made
}

func newProtectSuite(t *testing.T) *protectSuite {
	t.Helper()
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("needs the OpenSSH client")
	}
	ctx := context.Background()
	store := memstore.New()
	backend := memcoord.New(coord.Limits{})
	srv, err := server.New(ctx, server.Options{
		Store: store, CacheDir: filepath.Join(t.TempDir(), "cache"),
		Scan: scanner.Options{Coord: func() coord.Backend { return backend }, InitialShards: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	m := srv.Meta()
	if _, err := m.CreateTenant(ctx, "alice", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	tok, tokInfo, err := m.CreateToken(ctx, "alice", meta.ScopeWrite, "suite")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler()) // 127.0.0.1
	t.Cleanup(ts.Close)
	host := strings.TrimPrefix(ts.URL, "http://")

	work := t.TempDir()
	env := gittest.Env(filepath.Join(work, "home"))
	s := &protectSuite{srv: srv, env: env}
	s.http = &transport{
		name: "http", env: env,
		url:        func(repo string) string { return "http://x:" + tok + "@" + host + "/alice/" + repo + ".git" },
		credential: "alice (token " + tokInfo.ID + ")",
	}

	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "suite")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(work, "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	key, err := m.AddSSHKey(ctx, "alice", "laptop", ssh.MarshalAuthorizedKey(signer.PublicKey()))
	if err != nil {
		t.Fatal(err)
	}
	sshSrv, err := srv.SSHServer(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { sshSrv.Serve(sctx, ln); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	hk, err := sshd.HostKey(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	knownHosts := filepath.Join(work, "known_hosts")
	if err := os.WriteFile(knownHosts, []byte("[127.0.0.1]:"+port+" "+string(ssh.MarshalAuthorizedKey(hk.PublicKey()))), 0o644); err != nil {
		t.Fatal(err)
	}
	s.ssh = &transport{
		name: "ssh",
		env: append(append([]string(nil), env...), "GIT_SSH_COMMAND=ssh -F /dev/null -i "+keyFile+
			" -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile="+knownHosts),
		url:        func(repo string) string { return "ssh://git@127.0.0.1:" + port + "/alice/" + repo + ".git" },
		credential: `alice (ssh key ` + key.Fingerprint + ` "laptop")`,
	}

	// The worker shares the node's cache, as serve's own workers do.
	s.w, err = srv.Scanner().NewWorker(scanner.WorkerOptions{Cache: srv.Cache(), EngineWorkers: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// scanPushes runs the push runs of repo to their end: those the commit
// hook started, and any it has not started yet (Reconcile).
func (s *protectSuite) scanPushes(t *testing.T, repo meta.Repo) {
	t.Helper()
	if _, err := s.srv.Scanner().Reconcile(context.Background(), repo.Owner, repo.ID); err != nil {
		t.Fatal(err)
	}
	s.drain(t)
}

// scanFull runs a full-history run of repo to its end.
func (s *protectSuite) scanFull(t *testing.T, repo meta.Repo) {
	t.Helper()
	if _, _, err := s.srv.Scanner().StartFull(context.Background(), repo.Owner, repo.ID); err != nil {
		t.Fatal(err)
	}
	s.drain(t)
}

func (s *protectSuite) drain(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx := context.Background()
	for range 10000 {
		did, err := s.w.Step(ctx)
		if err != nil {
			t.Fatalf("worker: %v", err)
		}
		if did {
			continue
		}
		act, err := s.srv.Scanner().Active(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(act) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("scan runs did not finish")
}

func (s *protectSuite) alertsOf(t *testing.T, repo meta.Repo) []alerts.Alert {
	t.Helper()
	p, err := s.srv.Alerts().List(context.Background(), alerts.Filter{Tenant: repo.Owner, RepoID: repo.ID}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	return p.Alerts
}

// logState is the log's refs and seq, to show that a refused push
// changed nothing.
func (s *protectSuite) logState(t *testing.T, repo meta.Repo) string {
	t.Helper()
	x, err := s.srv.Log().Head(context.Background(), repo.ID)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seq %d\n", x.Seq)
	for _, r := range x.Refs {
		fmt.Fprintf(&b, "%s %s\n", r.ID, r.Name)
	}
	return b.String()
}

// TestPushProtectionAdversarial runs every case over both transports in
// the three modes (see the top of this file).
func TestPushProtectionAdversarial(t *testing.T) {
	s := newProtectSuite(t)
	only := map[string]bool{}
	for _, n := range strings.Split(os.Getenv("GHOST_ADVERSARIAL_CASES"), ",") {
		if n != "" {
			only[n] = true
		}
	}
	if len(only) == 0 {
		// After every case: what push protection decided is on /metrics
		// (issue 21 §4), each check timed.
		t.Cleanup(func() {
			m := gatherAll(t, s.srv.Registry())
			checks := 0.0
			for _, o := range []string{"blocked", "bypassed", "clean"} {
				v := m[`ghost_push_protection_checks_total{outcome="`+o+`"}`]
				if v == 0 {
					t.Errorf("no %s push protection check counted", o)
				}
				checks += v
			}
			if m["ghost_push_protection_seconds_count"] < checks {
				t.Errorf("%v checks timed, want %v", m["ghost_push_protection_seconds_count"], checks)
			}
		})
	}
	for _, tr := range []*transport{s.http, s.ssh} {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			for _, pc := range protectCases() {
				if len(only) > 0 && !only[pc.name] {
					continue
				}
				t.Run(pc.name, func(t *testing.T) {
					for _, mode := range []string{"on", "bypass", "off"} {
						t.Run(mode, func(t *testing.T) { s.run(t, tr, pc, mode) })
					}
				})
			}
		})
	}
}

func (s *protectSuite) run(t *testing.T, tr *transport, pc protectCase, mode string) {
	ctx := context.Background()
	s.mu.Lock()
	s.n++
	name := fmt.Sprintf("r%03d-%s", s.n, tr.name)
	s.mu.Unlock()
	repo, err := s.srv.Meta().CreateRepo(ctx, "alice", name, true)
	if err != nil {
		t.Fatal(err)
	}
	c := &attack{t: t, s: s, tr: tr, dir: filepath.Join(t.TempDir(), "work"), repo: repo, secret: fakeToken(pc.name)}
	gittest.Git(t, s.env, "", "init", "-q", "-b", "main", c.dir)
	pc.setup(c)
	setupAlerts := 0
	if mode == "off" {
		s.scanPushes(t, repo)
		setupAlerts = len(s.alertsOf(t, repo))
	}
	if mode != "off" {
		if err := s.srv.Meta().SetPushProtection(ctx, "alice", name, true); err != nil {
			t.Fatal(err)
		}
	}
	if pc.replace != nil {
		ref := pc.replace(c)
		before := s.logState(t, repo)
		out, ok := c.push(nil, ref)
		if ok || !strings.Contains(out, "replace refs are refused on this repository") {
			t.Fatalf("a replace ref was accepted by default (%v):\n%s", ok, out)
		}
		if s.logState(t, repo) != before {
			t.Fatal("a refused replace ref moved the log")
		}
		if err := s.srv.Meta().SetAllowReplaceRefs(ctx, "alice", name, true); err != nil {
			t.Fatal(err)
		}
		if out, ok := c.push(nil, ref); !ok {
			t.Fatalf("replace ref refused with the setting on:\n%s", out)
		}
	}
	args := pc.attack(c)
	before := s.logState(t, repo)
	var opts []string
	if mode == "bypass" {
		opts = []string{"-o", "secret-scanning.bypass=used_in_tests"}
	}
	out, ok := c.push(opts, args...)
	switch {
	case mode == "on" && !pc.clean:
		if ok || !strings.Contains(out, "(secret detected by push protection)") || !strings.Contains(out, "GHOST PUSH PROTECTION") {
			t.Fatalf("push not refused by push protection (exit ok %v):\n%s", ok, out)
		}
		if s.logState(t, repo) != before {
			t.Fatalf("a blocked push moved the log:\n%s", out)
		}
		return
	case !ok:
		t.Fatalf("push refused:\n%s", out)
	}
	if s.logState(t, repo) == before {
		t.Fatalf("an accepted push did not move the log:\n%s", out)
	}
	if c.real != "" {
		s.checkRealObject(t, c)
	}
	switch mode {
	case "on", "bypass":
		as := s.alertsOf(t, repo)
		if pc.clean {
			// The negative control: not blocked, and no bypass recorded
			// (its setup's push run may have filed the old secret).
			for _, a := range as {
				if len(a.Bypasses) > 0 {
					t.Errorf("a bypass recorded for a push with nothing new: %+v", a.Bypasses)
				}
			}
			return
		}
		if !strings.Contains(out, "Push protection bypassed (used_in_tests)") {
			t.Errorf("no bypass notice:\n%s", out)
		}
		if len(as) != 1 || len(as[0].Bypasses) == 0 {
			t.Fatalf("alerts after a bypass: %+v", as)
		}
		for _, b := range as[0].Bypasses {
			if b.By != tr.credential || b.Reason != alerts.BypassUsedInTests {
				t.Errorf("bypass recorded as %q (%s), want %q", b.By, b.Reason, tr.credential)
			}
		}
		s.wantSecret(t, c, as[0])
	case "off":
		s.scanPushes(t, repo)
		as := s.alertsOf(t, repo)
		if len(as) != 1 {
			t.Fatalf("%d alerts after the push runs (%d after the setup), want 1: %+v", len(as), setupAlerts, as)
		}
		s.wantSecret(t, c, as[0])
		s.scanFull(t, repo)
		if again := s.alertsOf(t, repo); len(again) != 1 || again[0].Fingerprint != as[0].Fingerprint {
			t.Fatalf("the full run changed the alerts: %+v", again)
		}
	}
}

// wantSecret checks that alert a is the case's secret.
func (s *protectSuite) wantSecret(t *testing.T, c *attack, a alerts.Alert) {
	t.Helper()
	fp, err := s.srv.Alerts().Fingerprint(context.Background(), "alice", c.secret)
	if err != nil {
		t.Fatal(err)
	}
	if a.Fingerprint != fp {
		t.Errorf("alert %s (%s at %+v) is not the case's secret", a.Fingerprint, a.RuleID, a.Locations)
	}
}

// checkRealObject: with replace refs in the repository, the web UI
// serves the objects as pushed, not their replacements.
func (s *protectSuite) checkRealObject(t *testing.T, c *attack) {
	t.Helper()
	ts := httptest.NewServer(s.srv.Handler())
	defer ts.Close()
	res, err := http.Get(ts.URL + "/alice/" + c.repo.Name + "/-/raw/" + c.realRev + "/" + c.real)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.Contains(string(body), c.secret) {
		t.Errorf("the web UI shows %d %q for %s at %s, not the pushed content", res.StatusCode, body, c.real, c.realRev)
	}
}
