package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/meta"
)

func newPubKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(edPub)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// ghostStdin runs the CLI as Main does, with stdin.
func ghostStdin(t *testing.T, dataDir string, stdin string, args ...string) cliRun {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRootCmd(&Env{Stdout: &out, Stderr: &errb})
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append(args, "--data-dir", dataDir))
	code := 0
	if err := root.ExecuteContext(context.Background()); err != nil {
		errb.WriteString(err.Error())
		code = 1
	}
	return cliRun{code, out.String(), errb.String()}
}

func TestKeyCommands(t *testing.T) {
	t.Setenv("GHOST_S3_BUCKET", "")
	dir := newStore(t)
	ctx := context.Background()
	mustGhost(t, dir, "tenant", "create", "alice")
	mustGhost(t, dir, "tenant", "create", "bob")

	// From a file, with a title.
	pub1 := newPubKey(t)
	file := filepath.Join(t.TempDir(), "id_ed25519.pub")
	if err := os.WriteFile(file, append(bytes.TrimSpace(ssh.MarshalAuthorizedKey(pub1)), " alice@laptop\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	fp1 := ssh.FingerprintSHA256(pub1)
	if out := mustGhost(t, dir, "key", "add", "alice", "--title", "laptop", "--file", file); out != fp1+"\n" {
		t.Fatalf("key add printed %q, want the fingerprint %s", out, fp1)
	}

	// From stdin; the title defaults to the comment.
	pub2 := newPubKey(t)
	fp2 := ssh.FingerprintSHA256(pub2)
	r := ghostStdin(t, dir, string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(pub2)))+" ci-runner\n", "key", "add", "alice")
	if r.code != 0 || r.stdout != fp2+"\n" {
		t.Fatalf("key add from stdin: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	s := metaStore(t, dir)
	if p, err := s.AuthenticateKey(ctx, pub1); err != nil || p.Tenant != "alice" {
		t.Fatalf("AuthenticateKey = %+v, %v", p, err)
	}

	out := mustGhost(t, dir, "key", "list", "alice")
	for _, want := range []string{"FINGERPRINT", fp1, fp2, "laptop", "ci-runner", "ssh-ed25519"} {
		if !strings.Contains(out, want) {
			t.Errorf("key list lacks %q:\n%s", want, out)
		}
	}

	// A key belongs to one tenant.
	if r := ghost(t, dir, "key", "add", "bob", "--file", file); r.code != 1 || !strings.Contains(r.stderr, "already in use") {
		t.Fatalf("adding alice's key to bob: exit %d, %q", r.code, r.stderr)
	}
	// Not a key.
	if r := ghostStdin(t, dir, "hello\n", "key", "add", "bob"); r.code != 1 || !strings.Contains(r.stderr, "authorized_keys") {
		t.Fatalf("adding garbage: exit %d, %q", r.code, r.stderr)
	}
	if r := ghost(t, dir, "key", "add", "bob", "--file", filepath.Join(dir, "missing.pub")); r.code != 1 {
		t.Fatalf("missing file: exit %d, %q", r.code, r.stderr)
	}
	if r := ghostStdin(t, dir, strings.Repeat("x", maxKeyInput+1), "key", "add", "bob"); r.code != 1 || !strings.Contains(r.stderr, "larger than") {
		t.Fatalf("huge input: exit %d, %q", r.code, r.stderr)
	}

	if out := mustGhost(t, dir, "key", "remove", "alice", fp1); !strings.Contains(out, "removed") {
		t.Fatalf("key remove said %q", out)
	}
	if _, err := s.AuthenticateKey(ctx, pub1); !errors.Is(err, meta.ErrUnauthenticated) {
		t.Fatalf("removed key: AuthenticateKey = %v", err)
	}
	if r := ghost(t, dir, "key", "remove", "alice", fp1); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("removing twice: exit %d, %q", r.code, r.stderr)
	}
	if r := ghost(t, dir, "key", "remove", "alice", "nonsense"); r.code != 1 || !strings.Contains(r.stderr, "SHA256:") {
		t.Fatalf("bad fingerprint: exit %d, %q", r.code, r.stderr)
	}
	if r := ghost(t, dir, "key", "remove", "alice"); r.code != 2 {
		t.Fatalf("remove without fingerprint: exit %d, %q", r.code, r.stderr)
	}
}
