package sshd

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// waitClosed fails t unless c's connection ends within limit.
func waitClosed(t *testing.T, c *ssh.Client, limit time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("the connection was still open after %v", limit)
	}
}

// TestIdleTimeoutStalledClient: a command waiting on a client that sends
// nothing is cut off after IdleTimeout.
func TestIdleTimeoutStalledClient(t *testing.T) {
	// A second, not less: the command must start before the connection's
	// own idle deadline, also on a busy machine.
	f := newFixture(t, Options{IdleTimeout: time.Second})
	c := f.mustDial(t, ssh.PublicKeys(f.alice))
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := sess.StdinPipe() // never written to, never closed
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := sess.Start("git-upload-pack '/alice/x.git'"); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, c, 10*time.Second)
}

// TestIdleTimeoutNoCommand: an authenticated connection that runs no
// command is closed after IdleTimeout.
func TestIdleTimeoutNoCommand(t *testing.T) {
	f := newFixture(t, Options{IdleTimeout: 300 * time.Millisecond})
	c := f.mustDial(t, ssh.PublicKeys(f.alice))
	waitClosed(t, c, 10*time.Second)
}

// TestIdleTimeoutServerThinking: time the service spends working, with no
// read or write of the session in progress, does not count.
func TestIdleTimeoutServerThinking(t *testing.T) {
	// Generous against a busy machine: the command must start within the
	// deadline; the thinking lasts twice as long.
	f := newFixture(t, Options{IdleTimeout: time.Second})
	f.git.think = 2 * time.Second
	c := f.mustDial(t, ssh.PublicKeys(f.alice))
	r := runCmd(t, c, "git-upload-pack '/alice/x.git'", nil, "")
	if r.exit != 0 || r.stdout != "git-upload-pack alice/x for alice\n" {
		t.Fatalf("a command that thinks longer than the idle timeout = %+v", r)
	}
}

// TestIdleTimeoutSteadyTransfer: a transfer that lasts longer than the
// idle timeout but keeps moving is not cut off.
func TestIdleTimeoutSteadyTransfer(t *testing.T) {
	// Gaps of 150 ms against a 1 s deadline: a wide margin on a busy
	// machine, and 1.8 s in all, longer than the deadline.
	f := newFixture(t, Options{IdleTimeout: time.Second})
	c := f.mustDial(t, ssh.PublicKeys(f.alice))
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	stdin, err := sess.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sess.Stdout = &out
	if err := sess.Start("git-upload-pack '/alice/x.git'"); err != nil {
		t.Fatal(err)
	}
	for range 12 { // 1.8 s in all
		if _, err := io.WriteString(stdin, "x"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
	}
	stdin.Close()
	if err := sess.Wait(); err != nil {
		t.Fatalf("steady transfer: %v", err)
	}
	if want := "git-upload-pack alice/x for alice\n" + strings.Repeat("x", 12); out.String() != want {
		t.Fatalf("stdout %q", out.String())
	}
}

// TestShutdownDrains: when Serve's context ends, a connection running no
// command is closed at once, while a running command goes on (up to
// ShutdownTimeout) and gets its exit status; no new command starts; Serve
// returns after the last one.
func TestShutdownDrains(t *testing.T) {
	f := newFixture(t, Options{})
	hk, err := HostKey(context.Background(), memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{HostKey: hk, Keys: f.store, Git: f.git, ShutdownTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	dial := func() *ssh.Client {
		c, err := ssh.Dial("tcp", ln.Addr().String(), &ssh.ClientConfig{
			User: "git", Auth: []ssh.AuthMethod{ssh.PublicKeys(f.alice)},
			HostKeyCallback: ssh.FixedHostKey(hk.PublicKey()), Timeout: 10 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	idle, busy := dial(), dial()
	sess, err := busy.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Start("git-receive-pack '/alice/x.git'"); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	if _, err := out.ReadString('\n'); err != nil { // the command is running
		t.Fatal(err)
	}

	cancel()
	waitClosed(t, idle, 10*time.Second)
	select {
	case err := <-done:
		t.Fatalf("Serve returned (%v) while a command ran", err)
	case <-time.After(200 * time.Millisecond):
	}
	// No new command starts on the draining connection.
	if r := runCmd(t, busy, "git-upload-pack '/alice/y.git'", nil, ""); r.exit != 1 || r.stderr != "ERROR: the server is shutting down; try again\n" {
		t.Fatalf("a new command while draining = %+v", r)
	}
	if _, err := io.WriteString(stdin, "after shutdown\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := out.ReadString('\n'); err != nil || line != "after shutdown\n" {
		t.Fatalf("the running command after shutdown began: %q, %v", line, err)
	}
	stdin.Close()
	if err := sess.Wait(); err != nil {
		t.Fatalf("the running command did not finish cleanly: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the last command ended")
	}
	waitClosed(t, busy, 10*time.Second)
}

// shortListener fails its first Accepts as a process out of file
// descriptors does.
type shortListener struct {
	net.Listener
	fails int
}

func (l *shortListener) Accept() (net.Conn, error) {
	if l.fails > 0 {
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestServeWaitsOutFDShortage: running out of file descriptors for a
// moment does not stop the server.
func TestServeWaitsOutFDShortage(t *testing.T) {
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, &shortListener{Listener: inner, fails: 3}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	}()
	c, err := ssh.Dial("tcp", inner.Addr().String(), &ssh.ClientConfig{
		User: "git", Auth: []ssh.AuthMethod{ssh.PublicKeys(f.alice)},
		HostKeyCallback: ssh.FixedHostKey(hk.PublicKey()), Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("dial after EMFILE: %v", err)
	}
	defer c.Close()
	if r := runCmd(t, c, "git-upload-pack '/alice/x.git'", nil, ""); r.exit != 0 {
		t.Fatalf("upload-pack = %+v", r)
	}
}
