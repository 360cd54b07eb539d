package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/etcdserver"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/sshd"
)

// startServe runs "ghost serve args..." in-process and returns its base
// URL and a function that stops it (like SIGTERM) and returns the exit
// code. Unless args or the environment choose an SSH address, SSH listens
// on a free port, so that servers of parallel tests do not collide.
func startServe(t *testing.T, dir string, args ...string) (string, func() int) {
	t.Helper()
	url, _, stop := startServeSSH(t, dir, args...)
	return url, stop
}

// startServeSSH is startServe that also returns what serve printed after
// "ghost: ssh on " (the address first; "" when SSH is off).
func startServeSSH(t *testing.T, dir string, args ...string) (string, string, func() int) {
	t.Helper()
	if !hasFlag(args, "--ssh-listen") && os.Getenv("GHOST_SSH_LISTEN") == "" {
		args = append(args, "--ssh-listen", "127.0.0.1:0")
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	code := make(chan int, 1)
	go func() {
		code <- Main(ctx, append([]string{"serve"}, args...), pw, io.Discard)
		pw.Close()
	}()
	type addrs struct{ http, ssh string }
	addr := make(chan addrs, 1)
	go func() {
		var a addrs
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "ghost: ssh on "); ok {
				a.ssh = rest
			}
			if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
				a.http = strings.Fields(rest)[0]
				addr <- a
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			cancel()
			t.Fatalf("serve exited: code %d", <-code)
		}
		return a.http, a.ssh, func() int { cancel(); return <-code }
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("serve did not print its address")
	}
	return "", "", nil
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

func TestServeFlagsAndGracefulStop(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	url, stop := startServe(t, dir, "--data-dir", data, "--listen", "127.0.0.1:0", "--log-level", "warn")
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("address %q", url)
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz %d", resp.StatusCode)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit code %d after stop", code)
	}
	if _, err := os.Stat(filepath.Join(data, "cache")); err != nil {
		t.Fatalf("cache not under the data directory: %v", err)
	}
}

func TestServeListenFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GHOST_LISTEN", "127.0.0.1:0")
	t.Setenv("GHOST_SSH_LISTEN", "127.0.0.1:0")
	t.Setenv("GHOST_DATA_DIR", filepath.Join(dir, "envdata"))
	url, sshLine, stop := startServeSSH(t, dir)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasPrefix(sshLine, "127.0.0.1:") {
		stop()
		t.Fatalf("addresses %q, %q", url, sshLine)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "envdata", "objects")); err != nil {
		t.Fatalf("GHOST_DATA_DIR not used: %v", err)
	}
}

func TestServeRejectsBadFlags(t *testing.T) {
	var out, errb strings.Builder
	if code := Main(context.Background(), []string{"serve", "--log-level", "loud"}, &out, &errb); code != 2 {
		t.Fatalf("bad --log-level: exit %d", code)
	}
	if code := Main(context.Background(), []string{"serve", "extra"}, &out, &errb); code != 2 {
		t.Fatalf("extra argument: exit %d", code)
	}
	if code := Main(context.Background(), []string{"serve", "--org"}, &out, &errb); code != 2 {
		t.Fatalf("another command's flag: exit %d", code)
	}
	t.Setenv("GHOST_MAX_PUSH_BYTES", "lots")
	errb.Reset()
	if code := Main(context.Background(), []string{"serve"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "GHOST_MAX_PUSH_BYTES") {
		t.Fatalf("bad GHOST_MAX_PUSH_BYTES: exit %d, %s", code, errb.String())
	}
}

// TestServeRunsEmbeddedEtcd checks that serve starts etcd in-process under
// its data directory when no endpoints are configured, holds it while it
// runs, and stops it when it stops.
func TestServeRunsEmbeddedEtcd(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	url, stop := startServe(t, dir, "--data-dir", data, "--listen", "127.0.0.1:0", "--log-level", "warn")
	ctx := context.Background()
	// Probe etcd's directory lock without starting an etcd of our own,
	// which would race serve for the directory.
	lockPath := filepath.Join(data, "etcd", "ghost.lock")
	deadline := time.Now().Add(60 * time.Second)
	for !dirLocked(t, lockPath) {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("serve did not start embedded etcd under %s", data)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Requests to etcd and to the object store are counted (issue 22).
	for want := []string{`ghost_etcd_requests_total{method="/etcdserverpb.`, `ghost_objstore_requests_total{op="`}; ; {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), want[0]) && strings.Contains(string(b), want[1]) {
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("metrics lack %q or %q:\n%s", want[0], want[1], b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	// Stopped with the process: the directory is free again and holds a
	// working etcd.
	c, closer, err := etcdserver.Open(ctx, data, nil)
	if err != nil {
		t.Fatalf("embedded etcd not released after serve stopped: %v", err)
	}
	defer closer.Close()
	if _, err := c.Put(ctx, "probe", "ok"); err != nil {
		t.Fatal(err)
	}
}

// dirLocked reports whether another open file holds an exclusive flock on
// path (false while the file does not exist yet).
func dirLocked(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// TestServeTakesOverCoordination runs two nodes on one data directory:
// the second cannot start the embedded etcd while the first holds it,
// keeps serving git, and takes the coordination store over once the first
// stops.
func TestServeTakesOverCoordination(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	lockPath := filepath.Join(data, "etcd", "ghost.lock")
	waitLocked := func(what string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for !dirLocked(t, lockPath) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: embedded etcd not running under %s", what, data)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	_, stopA := startServe(t, dir, "--data-dir", data, "--listen", "127.0.0.1:0", "--log-level", "error")
	waitLocked("node A")
	urlB, stopB := startServe(t, dir, "--data-dir", data, "--listen", "127.0.0.1:0", "--log-level", "error")
	resp, err := http.Get(urlB + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("node B healthz %d while A holds etcd", resp.StatusCode)
	}
	if code := stopA(); code != 0 {
		t.Fatalf("node A exit code %d", code)
	}
	waitLocked("node B after A stopped")
	if code := stopB(); code != 0 {
		t.Fatalf("node B exit code %d", code)
	}
	if dirLocked(t, lockPath) {
		t.Fatal("embedded etcd still held after both nodes stopped")
	}
}

// TestServeSSH checks that serve listens for SSH, prints the address, and
// presents the installation's host key from the object store; and that
// --ssh-listen "" turns SSH off.
func TestServeSSH(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	_, sshLine, stop := startServeSSH(t, dir, "--data-dir", data, "--listen", "127.0.0.1:0", "--log-level", "warn")
	sshAddr, _, _ := strings.Cut(sshLine, " ")
	if !strings.HasPrefix(sshAddr, "127.0.0.1:") {
		stop()
		t.Fatalf("ssh address %q", sshAddr)
	}
	store, err := fsstore.Open(filepath.Join(data, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	hk, err := sshd.HostKey(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sshLine, "(host key "+ssh.FingerprintSHA256(hk.PublicKey())+")") {
		stop()
		t.Fatalf("serve printed %q, want the host key's fingerprint", sshLine)
	}
	_, err = ssh.Dial("tcp", sshAddr, &ssh.ClientConfig{
		User: "git", HostKeyCallback: ssh.FixedHostKey(hk.PublicKey()), Timeout: 10 * time.Second,
	})
	// No key: the handshake (host key checked) succeeds, authentication fails.
	if err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("dial without a key: %v, want an authentication failure after a good host key", err)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	_, sshAddr, stop = startServeSSH(t, dir, "--data-dir", data, "--listen", "127.0.0.1:0", "--ssh-listen", "", "--log-level", "warn")
	if code := stop(); code != 0 || sshAddr != "" {
		t.Fatalf(`--ssh-listen "": ssh on %q, exit %d`, sshAddr, code)
	}
}

// TestServeSSHPortInUse: a busy SSH port makes serve fail loudly rather
// than run without SSH.
func TestServeSSHPortInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var errb strings.Builder
	code := Main(context.Background(), []string{"serve", "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--listen", "127.0.0.1:0", "--ssh-listen", busy.Addr().String(), "--log-level", "error"}, io.Discard, &errb)
	want := "ssh: listen on " + busy.Addr().String() + ": address already in use (another server holds it; choose another address with --ssh-listen or GHOST_SSH_LISTEN, or --ssh-listen \"\" to turn SSH off)"
	if code != 1 || !strings.Contains(errb.String(), want) {
		t.Fatalf("exit %d, stderr %q, want %q", code, errb.String(), want)
	}
}

// TestServePortInUse: a busy HTTP port makes serve fail with an error
// that says another server holds it and names --listen and GHOST_LISTEN,
// not the bare "bind: address already in use" (issue 42).
func TestServePortInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var errb strings.Builder
	code := Main(context.Background(), []string{"serve", "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--listen", busy.Addr().String(), "--ssh-listen", "127.0.0.1:0", "--log-level", "error"}, io.Discard, &errb)
	want := "listen on " + busy.Addr().String() + ": address already in use (another server holds it; choose another address with --listen or GHOST_LISTEN)"
	if code != 1 || !strings.Contains(errb.String(), want) {
		t.Fatalf("exit %d, stderr %q, want %q", code, errb.String(), want)
	}
}
