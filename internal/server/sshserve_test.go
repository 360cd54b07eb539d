package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/sshd"
)

// TestSSHServerIdleTimeout checks the SSH transport's wiring: the host key
// is the installation's, alice's key opens her repository, and
// Options.Limits.IOTimeout is the idle deadline, so a client that starts a fetch
// and then sends nothing is cut off.
func TestSSHServerIdleTimeout(t *testing.T) {
	ctx := context.Background()
	objects, err := fsstore.Open(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(ctx, server.Options{Store: objects, CacheDir: filepath.Join(t.TempDir(), "cache"), Limits: gitsvc.Limits{IOTimeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seed(t, s)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Meta().AddSSHKey(ctx, "alice", "test", ssh.MarshalAuthorizedKey(key.PublicKey())); err != nil {
		t.Fatal(err)
	}
	c := serveSSH(t, s, key)
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := sess.StdinPipe() // never written to: the client stalls
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := sess.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Start("git-upload-pack 'alice/demo.git'"); err != nil {
		t.Fatal(err)
	}
	// The advertisement of the empty repository comes, then nothing more.
	buf := make([]byte, 4)
	if _, err := stdout.Read(buf); err != nil {
		t.Fatalf("no advertisement: %v", err)
	}
	closed := make(chan struct{})
	go func() { c.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		t.Fatal("a stalled SSH client was not cut off by the IO timeout")
	}
}

// serveSSH serves s's SSH transport on 127.0.0.1 until the test ends and
// returns a client connected with key.
func serveSSH(t *testing.T, s *server.Server, key ssh.Signer) *ssh.Client {
	t.Helper()
	ctx := context.Background()
	srv, err := s.SSHServer(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
	hk, err := sshd.HostKey(ctx, s.Store())
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", ln.Addr().String(), &ssh.ClientConfig{
		User: "git", Auth: []ssh.AuthMethod{ssh.PublicKeys(key)},
		HostKeyCallback: ssh.FixedHostKey(hk.PublicKey()), Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
