package sshd

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// fakeGit is a fake GitService, so the transport's tests can inject
// answers and refusals without a git service. It records each request, answers
// "<service> <owner>/<repo> for <tenant>" on stdout followed by whatever
// it reads on stdin, and refuses the repositories in errs.
type fakeGit struct {
	mu    sync.Mutex
	reqs  []Request
	errs  map[string]error // by repo name
	think time.Duration    // spent before answering, touching no stream
}

func (f *fakeGit) serve(svc Service, req Request) error {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	err := f.errs[req.Repo]
	f.mu.Unlock()
	if err != nil {
		return err
	}
	time.Sleep(f.think)
	fmt.Fprintf(req.Stdout, "%s %s/%s for %s\n", svc, req.Owner, req.Repo, tenantName(req.Principal))
	_, err = io.Copy(req.Stdout, req.Stdin)
	return err
}

func (f *fakeGit) UploadPack(_ context.Context, req Request) error {
	return f.serve(UploadPack, req)
}

func (f *fakeGit) ReceivePack(_ context.Context, req Request) error {
	return f.serve(ReceivePack, req)
}

func (f *fakeGit) UploadArchive(_ context.Context, req Request) error {
	return f.serve(UploadArchive, req)
}

func (f *fakeGit) LFSAuthenticate(_ context.Context, req Request) error {
	return f.serve(LFSAuthenticate, req)
}

func (f *fakeGit) LFSTransfer(_ context.Context, req Request) error {
	return f.serve(LFSTransfer, req)
}

func (f *fakeGit) requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.reqs...)
}

// fixture is a server on 127.0.0.1 with tenants alice and bob, each with
// one key, and a stranger's key that is registered nowhere.
type fixture struct {
	addr     string
	hostKey  ssh.PublicKey
	git      *fakeGit
	store    *meta.Store
	alice    ssh.Signer
	bob      ssh.Signer
	stranger ssh.Signer
	metrics  *Metrics
}

func newSigner(t testing.TB) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	ctx := context.Background()
	objects := memstore.New()
	store := meta.New(objects, wal.New(objects, wal.Options{}))
	f := &fixture{git: &fakeGit{errs: map[string]error{}}, store: store, alice: newSigner(t), bob: newSigner(t), stranger: newSigner(t)}
	for name, key := range map[string]ssh.Signer{"alice": f.alice, "bob": f.bob} {
		if _, err := store.CreateTenant(ctx, name, meta.KindUser); err != nil {
			t.Fatal(err)
		}
		if _, err := store.AddSSHKey(ctx, name, "test", ssh.MarshalAuthorizedKey(key.PublicKey())); err != nil {
			t.Fatal(err)
		}
	}
	hk, err := HostKey(ctx, objects)
	if err != nil {
		t.Fatal(err)
	}
	f.hostKey = hk.PublicKey()
	if opts.HostKey == nil {
		opts.HostKey = hk
	}
	if opts.Keys == nil {
		opts.Keys = store
	}
	opts.Git = f.git
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	f.metrics = opts.Metrics
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	return f
}

// dial connects with the given auth methods, checking the host key.
func (f *fixture) dial(auth ...ssh.AuthMethod) (*ssh.Client, error) {
	return ssh.Dial("tcp", f.addr, &ssh.ClientConfig{
		User:            "git",
		Auth:            auth,
		HostKeyCallback: ssh.FixedHostKey(f.hostKey),
		Timeout:         10 * time.Second,
	})
}

func (f *fixture) mustDial(t *testing.T, auth ...ssh.AuthMethod) *ssh.Client {
	t.Helper()
	c, err := f.dial(auth...)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// result is what one session produced.
type result struct {
	stdout, stderr string
	exit           int // -1: no exit status
}

// runCmd runs cmd ("" for a shell) with env set and stdin sent.
func runCmd(t *testing.T, c *ssh.Client, cmd string, env map[string]string, stdin string) result {
	t.Helper()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for k, v := range env {
		if err := sess.Setenv(k, v); err != nil && k == "GIT_PROTOCOL" {
			t.Logf("setenv %s refused: %v", k, err)
		}
	}
	var out, errb bytes.Buffer
	sess.Stdout, sess.Stderr = &out, &errb
	sess.Stdin = strings.NewReader(stdin)
	if cmd == "" {
		err = sess.Shell()
		if err == nil {
			err = sess.Wait()
		}
	} else {
		err = sess.Run(cmd)
	}
	r := result{stdout: out.String(), stderr: errb.String()}
	var exitErr *ssh.ExitError
	switch {
	case err == nil:
		r.exit = 0
	case errors.As(err, &exitErr):
		r.exit = exitErr.ExitStatus()
	default:
		t.Fatalf("session %q: %v", cmd, err)
	}
	return r
}

func TestGreeting(t *testing.T) {
	f := newFixture(t, Options{})
	r := runCmd(t, f.mustDial(t, ssh.PublicKeys(f.alice)), "", nil, "")
	want := "Hi alice! You've successfully authenticated, but ghost does not provide shell access.\n"
	if r.stderr != want || r.stdout != "" || r.exit != 1 {
		t.Fatalf("shell = %+v; want stderr %q, exit 1", r, want)
	}
	if n := len(f.git.requests()); n != 0 {
		t.Fatalf("the git service ran %d times", n)
	}
}

func TestGitCommand(t *testing.T) {
	f := newFixture(t, Options{})
	c := f.mustDial(t, ssh.PublicKeys(f.bob))
	r := runCmd(t, c, "git-receive-pack '/alice/x.git'", map[string]string{"GIT_PROTOCOL": "version=2", "LD_PRELOAD": "/evil.so"}, "pack data")
	if r.exit != 0 || r.stdout != "git-receive-pack alice/x for bob\npack data" || r.stderr != "" {
		t.Fatalf("receive-pack = %+v", r)
	}
	reqs := f.git.requests()
	if len(reqs) != 1 || reqs[0].GitProtocol != "version=2" || reqs[0].Principal == nil || reqs[0].Principal.Tenant != "bob" || reqs[0].Principal.Scope != meta.ScopeWrite {
		t.Fatalf("requests = %+v", reqs)
	}
	// Each session starts without GIT_PROTOCOL, and a malformed value is
	// dropped, not passed to git.
	for _, env := range []map[string]string{nil, {"GIT_PROTOCOL": "version=2\nGIT_DIR=/etc"}} {
		r = runCmd(t, c, "git-upload-pack 'alice/x.git'", env, "")
		if r.exit != 0 {
			t.Fatalf("upload-pack = %+v", r)
		}
		reqs = f.git.requests()
		if got := reqs[len(reqs)-1].GitProtocol; got != "" {
			t.Fatalf("GIT_PROTOCOL %q passed through, want none", got)
		}
	}
}

func TestCommandRefused(t *testing.T) {
	f := newFixture(t, Options{})
	c := f.mustDial(t, ssh.PublicKeys(f.alice))
	for _, cmd := range []string{"ls -la", "git-upload-pack '/alice'", "scp -t /tmp"} {
		r := runCmd(t, c, cmd, nil, "")
		if r.exit != 1 || !strings.HasPrefix(r.stderr, "ERROR: ") || r.stdout != "" {
			t.Fatalf("%q = %+v; want ERROR on stderr, exit 1", cmd, r)
		}
	}
	if n := len(f.git.requests()); n != 0 {
		t.Fatalf("the git service ran %d times", n)
	}
}

// TestServiceErrors: the service's refusals reach the client as git
// expects ("ERROR: ..." on stderr, non-zero exit), and internal details
// do not.
func TestServiceErrors(t *testing.T) {
	f := newFixture(t, Options{})
	f.git.errs["missing"] = fmt.Errorf("repository alice/missing: %w", meta.ErrNotFound)
	f.git.errs["ro"] = fmt.Errorf("push: %w", meta.ErrForbidden)
	f.git.errs["down"] = fmt.Errorf("read meta/repos/alice/down: %w: dial 10.0.0.1: refused", meta.ErrUnavailable)
	f.git.errs["boom"] = errors.New("read repos/01J/index: checksum mismatch")
	f.git.errs["arch"] = fmt.Errorf("upload-archive: %w", errors.ErrUnsupported)
	c := f.mustDial(t, ssh.PublicKeys(f.alice))
	for repo, want := range map[string]string{
		"missing": "ERROR: repository not found\n",
		"ro":      "ERROR: permission denied: you may read this repository but not write to it\n",
		"down":    "ERROR: storage is temporarily unavailable; try again later\n",
		"boom":    "ERROR: internal error\n",
		"arch":    "ERROR: not supported by this server\n",
	} {
		r := runCmd(t, c, "git-upload-pack '/alice/"+repo+".git'", nil, "")
		if r.stderr != want || r.exit != 1 || r.stdout != "" {
			t.Errorf("%s: %+v; want stderr %q, exit 1", repo, r, want)
		}
	}
}

func TestUnknownKeyDenied(t *testing.T) {
	f := newFixture(t, Options{})
	if c, err := f.dial(ssh.PublicKeys(f.stranger)); err == nil {
		c.Close()
		t.Fatal("a key registered nowhere was let in")
	}
}

// TestAnonymousOffByDefault: without AnonymousRead, keyboard-interactive
// (how anonymous clients come in) is not offered.
func TestAnonymousOffByDefault(t *testing.T) {
	f := newFixture(t, Options{})
	kbd := ssh.KeyboardInteractive(func(string, string, []string, []bool) ([]string, error) { return nil, nil })
	if c, err := f.dial(ssh.PublicKeys(f.stranger), kbd); err == nil {
		c.Close()
		t.Fatal("an anonymous client was let in")
	}
}

func TestAnonymousRead(t *testing.T) {
	f := newFixture(t, Options{AnonymousRead: true})
	kbd := ssh.KeyboardInteractive(func(string, string, []string, []bool) ([]string, error) { return nil, nil })

	c := f.mustDial(t, ssh.PublicKeys(f.stranger), kbd)
	r := runCmd(t, c, "git-upload-pack '/alice/x.git'", nil, "")
	if r.exit != 0 || r.stdout != "git-upload-pack alice/x for \n" {
		t.Fatalf("anonymous upload-pack = %+v", r)
	}
	if p := f.git.requests()[0].Principal; p != nil {
		t.Fatalf("anonymous principal = %+v, want nil", p)
	}
	if r := runCmd(t, c, "", nil, ""); !strings.HasPrefix(r.stderr, "Hi there! You've connected anonymously") {
		t.Fatalf("anonymous greeting = %q", r.stderr)
	}

	// A registered key offered after an unknown one still authenticates:
	// unknown keys are not taken as anonymous.
	c = f.mustDial(t, ssh.PublicKeys(f.stranger, f.alice), kbd)
	if r := runCmd(t, c, "", nil, ""); !strings.HasPrefix(r.stderr, "Hi alice!") {
		t.Fatalf("greeting = %q, want alice's", r.stderr)
	}
}

// outageKeys is a KeyAuthenticator whose storage is down.
type outageKeys struct{}

func (outageKeys) AuthenticateKey(context.Context, ssh.PublicKey) (meta.Principal, error) {
	return meta.Principal{}, fmt.Errorf("authenticate ssh key: %w: read meta/sshkeys/ab: connection refused", meta.ErrUnavailable)
}

// TestKeyLookupOutage: a storage failure while looking a key up is told
// as such, not as "Permission denied", and runs nothing.
func TestKeyLookupOutage(t *testing.T) {
	f := newFixture(t, Options{Keys: outageKeys{}})
	c := f.mustDial(t, ssh.PublicKeys(f.alice))
	r := runCmd(t, c, "git-upload-pack '/alice/x.git'", nil, "")
	if r.exit != 1 || r.stderr != "ERROR: storage is temporarily unavailable; try again later\n" {
		t.Fatalf("upload-pack during an outage = %+v", r)
	}
	if n := len(f.git.requests()); n != 0 {
		t.Fatalf("the git service ran %d times", n)
	}
}

// TestHandshakeTimeout: a connection that never starts the handshake is
// closed after HandshakeTimeout.
func TestHandshakeTimeout(t *testing.T) {
	f := newFixture(t, Options{HandshakeTimeout: 200 * time.Millisecond})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = io.Copy(io.Discard, c) // the server's version line, then EOF
	if err != nil {
		t.Fatalf("the server kept an idle connection open: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("closed after %v", d)
	}
}

// TestServeStopsSessions: ending Serve's context ends running sessions
// and Serve returns (checked by the fixture's cleanup).
func TestServeStopsSessions(t *testing.T) {
	f := newFixture(t, Options{})
	c := f.mustDial(t, ssh.PublicKeys(f.alice))
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := sess.StdinPipe() // never closed: the fake copies forever
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := sess.Start("git-upload-pack '/alice/x.git'"); err != nil {
		t.Fatal(err)
	}
}

func TestNewRequiresOptions(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without a host key, keys and git service succeeded")
	}
}

// failingListener accepts one connection, then fails once fail is closed.
type failingListener struct {
	net.Listener
	fail     chan struct{}
	accepted bool
}

func (l *failingListener) Accept() (net.Conn, error) {
	if !l.accepted {
		l.accepted = true
		return l.Listener.Accept()
	}
	<-l.fail
	return nil, errors.New("injected accept failure")
}

// TestServeAcceptErrorStopsSessions: when Accept fails, Serve ends the
// running sessions and returns the error, rather than waiting forever
// for sessions nobody will stop.
func TestServeAcceptErrorStopsSessions(t *testing.T) {
	f := newFixture(t, Options{})
	hk, err := HostKey(context.Background(), memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{HostKey: hk, Keys: f.store, Git: f.git})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	ln := &failingListener{Listener: inner, fail: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()

	c, err := ssh.Dial("tcp", inner.Addr().String(), &ssh.ClientConfig{
		User: "git", Auth: []ssh.AuthMethod{ssh.PublicKeys(f.alice)},
		HostKeyCallback: ssh.FixedHostKey(hk.PublicKey()), Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := sess.StdinPipe() // never closed: the fake copies forever
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := sess.Start("git-upload-pack '/alice/x.git'"); err != nil {
		t.Fatal(err)
	}
	close(ln.fail)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "injected") {
			t.Fatalf("Serve = %v, want the accept error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after Accept failed")
	}
}

// TestSessionRefusals: one command per session, no pty, no channels but
// sessions.
func TestSessionRefusals(t *testing.T) {
	f := newFixture(t, Options{})
	c := f.mustDial(t, ssh.PublicKeys(f.alice))

	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.RequestPty("xterm", 24, 80, ssh.TerminalModes{}); err == nil {
		t.Error("pty-req was granted")
	}
	if ok, err := sess.SendRequest("subsystem", true, ssh.Marshal(struct{ Name string }{"sftp"})); ok || err != nil {
		t.Errorf("subsystem sftp = %v, %v; want refused", ok, err)
	}
	stdin, err := sess.StdinPipe() // never closed: the fake copies forever
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := sess.Start("git-upload-pack '/alice/x.git'"); err != nil {
		t.Fatal(err)
	}
	second := ssh.Marshal(struct{ Command string }{"git-receive-pack '/alice/y.git'"})
	if ok, err := sess.SendRequest("exec", true, second); ok || err != nil {
		t.Errorf("a second exec on one session = %v, %v; want refused", ok, err)
	}
	if _, _, err := c.OpenChannel("direct-tcpip", ssh.Marshal(struct {
		Host     string
		Port     uint32
		OrigHost string
		OrigPort uint32
	}{"127.0.0.1", 22, "127.0.0.1", 1})); err == nil {
		t.Error("a direct-tcpip channel was opened")
	}
	stdin.Close()
	if err := sess.Wait(); err != nil {
		t.Fatalf("the first command: %v", err)
	}
	for _, r := range f.git.requests() {
		if r.Repo == "y" {
			t.Fatal("the second exec ran")
		}
	}
}

// slowKeys is a KeyAuthenticator that answers only when its context ends,
// as meta does when the store hangs.
type slowKeys struct{}

func (slowKeys) AuthenticateKey(ctx context.Context, _ ssh.PublicKey) (meta.Principal, error) {
	<-ctx.Done()
	return meta.Principal{}, fmt.Errorf("authenticate ssh key: %w: %w", meta.ErrUnavailable, ctx.Err())
}

// TestAuthTimeout: a key lookup that hangs is cut off after AuthTimeout
// and told as an outage, well before the handshake deadline.
func TestAuthTimeout(t *testing.T) {
	f := newFixture(t, Options{Keys: slowKeys{}, AuthTimeout: 100 * time.Millisecond, HandshakeTimeout: time.Minute})
	start := time.Now()
	c := f.mustDial(t, ssh.PublicKeys(f.alice))
	r := runCmd(t, c, "git-upload-pack '/alice/x.git'", nil, "")
	if r.exit != 1 || r.stderr != "ERROR: storage is temporarily unavailable; try again later\n" {
		t.Fatalf("upload-pack after a hung lookup = %+v", r)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("took %v", d)
	}
}
