package sshd

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// The tests in this file drive the server with the stock OpenSSH client,
// the way git does (GIT_SSH_COMMAND), with a generated key and a strict
// known_hosts file.

type stockClient struct {
	t     *testing.T
	dir   string
	port  string
	known string
}

func newStockClient(t *testing.T, f *fixture) *stockClient {
	t.Helper()
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client on PATH (Debian: openssh-client)")
	}
	dir := t.TempDir()
	_, port, err := net.SplitHostPort(f.addr)
	if err != nil {
		t.Fatal(err)
	}
	known := filepath.Join(dir, "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(f.addr)}, f.hostKey) + "\n"
	if err := os.WriteFile(known, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return &stockClient{t: t, dir: dir, port: port, known: known}
}

// keyFile writes a fresh Ed25519 private key for the client and returns
// its public key and path.
func (c *stockClient) keyFile(name string) (ssh.PublicKey, string) {
	c.t.Helper()
	edPub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		c.t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(edPub)
	if err != nil {
		c.t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, name)
	if err != nil {
		c.t.Fatal(err)
	}
	path := filepath.Join(c.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return pub, path
}

// run runs ssh with key (a path) and the remote command cmd ("" for
// none), with extra environment, and returns stdout, stderr and the
// exit code.
func (c *stockClient) run(key string, env []string, cmd string, extra ...string) (string, string, int) {
	c.t.Helper()
	args := []string{
		"-F", "/dev/null", "-T",
		"-o", "UserKnownHostsFile=" + c.known,
		"-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "StrictHostKeyChecking=yes",
		"-o", "IdentitiesOnly=yes",
		"-o", "IdentityAgent=none",
		"-o", "PasswordAuthentication=no",
		"-o", "ConnectTimeout=10",
		"-i", key,
		"-p", c.port,
	}
	args = append(args, extra...)
	args = append(args, "git@127.0.0.1")
	if cmd != "" {
		args = append(args, cmd)
	}
	x := exec.Command("ssh", args...)
	x.Env = append([]string{"HOME=" + c.dir, "PATH=" + os.Getenv("PATH")}, env...)
	var out, errb bytes.Buffer
	x.Stdout, x.Stderr = &out, &errb
	err := x.Run()
	code := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		c.t.Fatalf("ssh: %v", err)
	}
	return out.String(), errb.String(), code
}

func TestStockSSH(t *testing.T) {
	f := newFixture(t, Options{})
	c := newStockClient(t, f)
	alicePub, aliceKey := c.keyFile("alice_ed25519")
	if _, err := f.store.AddSSHKey(t.Context(), "alice", "stock", ssh.MarshalAuthorizedKey(alicePub)); err != nil {
		t.Fatal(err)
	}
	_, strangerKey := c.keyFile("stranger_ed25519")

	t.Run("greeting", func(t *testing.T) {
		_, stderr, code := c.run(aliceKey, nil, "", "-o", "BatchMode=yes")
		if !strings.Contains(stderr, "Hi alice! You've successfully authenticated, but ghost does not provide shell access.") || code != 1 {
			t.Fatalf("ssh git@host: exit %d, stderr %q", code, stderr)
		}
	})
	t.Run("git command with GIT_PROTOCOL", func(t *testing.T) {
		n := len(f.git.requests())
		stdout, stderr, code := c.run(aliceKey, []string{"GIT_PROTOCOL=version=2"}, "git-upload-pack '/alice/x.git'", "-o", "SendEnv=GIT_PROTOCOL", "-o", "BatchMode=yes")
		if code != 0 || stdout != "git-upload-pack alice/x for alice\n" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		reqs := f.git.requests()
		if len(reqs) != n+1 || reqs[n].GitProtocol != "version=2" || reqs[n].Owner != "alice" || reqs[n].Repo != "x" {
			t.Fatalf("requests = %+v", reqs[n:])
		}
	})
	t.Run("refused command", func(t *testing.T) {
		_, stderr, code := c.run(aliceKey, nil, "cat /etc/passwd", "-o", "BatchMode=yes")
		if code != 1 || !strings.Contains(stderr, "ERROR: bad command: ghost runs only git-upload-pack") {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
	})
	t.Run("unknown key denied", func(t *testing.T) {
		_, stderr, code := c.run(strangerKey, nil, "git-upload-pack '/alice/x.git'", "-o", "BatchMode=yes")
		if code != 255 || !strings.Contains(stderr, "Permission denied") {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
	})
	t.Run("host key changed", func(t *testing.T) {
		other := newSigner(t)
		bad := knownhosts.Line([]string{knownhosts.Normalize(f.addr)}, other.PublicKey()) + "\n"
		if err := os.WriteFile(c.known, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		defer func() {
			good := knownhosts.Line([]string{knownhosts.Normalize(f.addr)}, f.hostKey) + "\n"
			if err := os.WriteFile(c.known, []byte(good), 0o600); err != nil {
				t.Fatal(err)
			}
		}()
		_, stderr, code := c.run(aliceKey, nil, "", "-o", "BatchMode=yes")
		if code != 255 || !strings.Contains(stderr, "REMOTE HOST IDENTIFICATION HAS CHANGED") {
			t.Fatalf("with a wrong known_hosts: exit %d, stderr %q", code, stderr)
		}
	})
}

// TestStockSSHAnonymous: with AnonymousRead, a stock client whose key is
// unknown gets in as anonymous (through keyboard-interactive, which git's
// ssh tries after its keys).
func TestStockSSHAnonymous(t *testing.T) {
	f := newFixture(t, Options{AnonymousRead: true})
	c := newStockClient(t, f)
	_, strangerKey := c.keyFile("stranger_ed25519")
	stdout, stderr, code := c.run(strangerKey, nil, "git-upload-pack '/alice/x.git'")
	if code != 0 || stdout != "git-upload-pack alice/x for \n" {
		t.Fatalf("anonymous: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
