package meta

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// newSSHKey returns a fresh Ed25519 public key and its authorized_keys
// line with comment.
func newSSHKey(t testing.TB, comment string) (ssh.PublicKey, []byte) {
	t.Helper()
	return genSSHKey(comment)
}

// genSSHKey is newSSHKey for callers without a testing.TB. Ed25519 key
// generation from crypto/rand cannot fail.
func genSSHKey(comment string) (ssh.PublicKey, []byte) {
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	pub, err := ssh.NewPublicKey(edPub)
	if err != nil {
		panic(err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	if comment != "" {
		line += " " + comment
	}
	return pub, []byte(line + "\n")
}

func TestSSHKeyLifecycle(t *testing.T) {
	backends(t, func(t *testing.T, objects objstore.Store) {
		ctx := context.Background()
		s := newStore(objects)
		mustTenant(t, s, "Alice", KindUser)
		pub, line := newSSHKey(t, "alice@laptop")

		k, err := s.AddSSHKey(ctx, "alice", "", line)
		if err != nil {
			t.Fatal(err)
		}
		fp := ssh.FingerprintSHA256(pub)
		if k.Tenant != "Alice" || k.Title != "alice@laptop" || k.Fingerprint != fp || k.Type != ssh.KeyAlgoED25519 || k.CreatedAt.IsZero() {
			t.Fatalf("AddSSHKey = %+v", k)
		}
		if !strings.HasPrefix(string(line), k.PublicKey+" ") {
			t.Fatalf("PublicKey %q is not the key of %q", k.PublicKey, line)
		}
		got, err := s.SSHKeyByFingerprint(ctx, fp)
		if err != nil || got != k {
			t.Fatalf("SSHKeyByFingerprint = %+v, %v; want %+v", got, err, k)
		}
		keys, err := s.ListSSHKeys(ctx, "ALICE")
		if err != nil || len(keys) != 1 || keys[0] != k {
			t.Fatalf("ListSSHKeys = %+v, %v", keys, err)
		}
		p, err := s.AuthenticateKey(ctx, pub)
		if err != nil || p.Tenant != "Alice" || p.Scope != ScopeWrite || p.TokenID != "" || p.KeyFingerprint != fp || p.KeyTitle != "alice@laptop" {
			t.Fatalf("AuthenticateKey = %+v, %v; want Alice with write scope, by this key", p, err)
		}
		if got, want := p.String(), `Alice (ssh key `+fp+` "alice@laptop")`; got != want {
			t.Fatalf("principal %q, want %q", got, want)
		}

		if err := s.RemoveSSHKey(ctx, "alice", fp); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AuthenticateKey(ctx, pub); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("AuthenticateKey after remove = %v, want ErrUnauthenticated", err)
		}
		if _, err := s.SSHKeyByFingerprint(ctx, fp); !errors.Is(err, ErrNotFound) {
			t.Fatalf("SSHKeyByFingerprint after remove = %v, want ErrNotFound", err)
		}
		if keys, err := s.ListSSHKeys(ctx, "alice"); err != nil || len(keys) != 0 {
			t.Fatalf("ListSSHKeys after remove = %+v, %v", keys, err)
		}
		if err := s.RemoveSSHKey(ctx, "alice", fp); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second remove = %v, want ErrNotFound", err)
		}
		// Removed, the key is free for anyone.
		if _, err := s.AddSSHKey(ctx, "alice", "again", line); err != nil {
			t.Fatalf("re-adding a removed key: %v", err)
		}
	})
}

func TestSSHKeyBelongsToOneTenant(t *testing.T) {
	ctx := context.Background()
	s := newStore(memstore.New())
	mustTenant(t, s, "alice", KindUser)
	mustTenant(t, s, "bob", KindUser)
	pub, line := newSSHKey(t, "")
	if _, err := s.AddSSHKey(ctx, "alice", "a", line); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"bob", "alice"} {
		_, err := s.AddSSHKey(ctx, tenant, "b", line)
		if !errors.Is(err, ErrKeyInUse) || !errors.Is(err, ErrExists) {
			t.Fatalf("adding alice's key to %s = %v want ErrKeyInUse wrapping ErrExists", tenant, err)
		}
		if strings.Contains(err.Error(), "alice") && tenant == "bob" {
			t.Fatalf("the refusal names the key's owner: %v", err)
		}
	}
	// Bob's refused add left nothing behind in his listing.
	if keys, err := s.ListSSHKeys(ctx, "bob"); err != nil || len(keys) != 0 {
		t.Fatalf("bob's keys = %+v, %v; want none", keys, err)
	}
	// Bob cannot remove alice's key by naming it.
	if err := s.RemoveSSHKey(ctx, "bob", ssh.FingerprintSHA256(pub)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob removing alice's key = %v, want ErrNotFound", err)
	}
	if p, err := s.AuthenticateKey(ctx, pub); err != nil || p.Tenant != "alice" {
		t.Fatalf("AuthenticateKey = %+v, %v; want alice", p, err)
	}
}

// TestSSHKeyRacingAdds: of tenants racing to add one key, exactly one
// gets it, and the losers keep no listing record.
func TestSSHKeyRacingAdds(t *testing.T) {
	ctx := context.Background()
	s := newStore(memstore.New())
	names := []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"}
	for _, n := range names {
		mustTenant(t, s, n, KindUser)
	}
	pub, line := newSSHKey(t, "")
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.AddSSHKey(ctx, n, "k", line)
		}()
	}
	wg.Wait()
	winner := ""
	for i, err := range errs {
		switch {
		case err == nil:
			if winner != "" {
				t.Fatalf("both %s and %s got the key", winner, names[i])
			}
			winner = names[i]
		case !errors.Is(err, ErrKeyInUse):
			t.Fatalf("%s: %v, want ErrKeyInUse", names[i], err)
		}
	}
	p, err := s.AuthenticateKey(ctx, pub)
	if err != nil || p.Tenant != winner {
		t.Fatalf("AuthenticateKey = %+v, %v; want winner %q", p, err, winner)
	}
	for _, n := range names {
		keys, err := s.ListSSHKeys(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1, false: 0}[n == winner]; len(keys) != want {
			t.Errorf("%s lists %d keys, want %d", n, len(keys), want)
		}
	}
}

// TestRemoveSSHKeyLeftoverListing: a listing record left by a loser that
// crashed before cleaning up must not let the loser delete the winner's
// lookup record.
func TestRemoveSSHKeyLeftoverListing(t *testing.T) {
	ctx := context.Background()
	s := newStore(memstore.New())
	mustTenant(t, s, "alice", KindUser)
	mustTenant(t, s, "bob", KindUser)
	pub, line := newSSHKey(t, "")
	if _, err := s.AddSSHKey(ctx, "alice", "a", line); err != nil {
		t.Fatal(err)
	}
	leftover := sshKeyRecord{V: recordVersion, Tenant: "bob", Fingerprint: ssh.FingerprintSHA256(pub)}
	if _, err := s.createRecord(ctx, sshKeyIDKey("bob", keyHex(pub)), &leftover); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveSSHKey(ctx, "bob", ssh.FingerprintSHA256(pub)); err != nil {
		t.Fatalf("bob removing his leftover = %v", err)
	}
	if p, err := s.AuthenticateKey(ctx, pub); err != nil || p.Tenant != "alice" {
		t.Fatalf("after bob's remove, AuthenticateKey = %+v, %v; want alice's key intact", p, err)
	}
}

func TestDeleteTenantRemovesSSHKeys(t *testing.T) {
	ctx := context.Background()
	s := newStore(memstore.New())
	mustTenant(t, s, "alice", KindUser)
	pub, line := newSSHKey(t, "")
	if _, err := s.AddSSHKey(ctx, "alice", "a", line); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTenant(ctx, "alice", false); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{sshKeysPrefix, sshKeyIDsPrefix} {
		if keys, err := s.listKeys(ctx, prefix); err != nil || len(keys) != 0 {
			t.Fatalf("%s after DeleteTenant: %v, %v; want nothing", prefix, keys, err)
		}
	}
	if _, err := s.AuthenticateKey(ctx, pub); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("AuthenticateKey = %v, want ErrUnauthenticated", err)
	}
	// The key is free again: another tenant may add it.
	mustTenant(t, s, "bob", KindUser)
	if _, err := s.AddSSHKey(ctx, "bob", "b", line); err != nil {
		t.Fatalf("adding a deleted tenant's key to bob: %v", err)
	}
}

// TestSSHKeyOfEarlierTenant: a key whose records outlived its tenant (a
// delete interrupted after the tenant record went) opens no later tenant
// of the same name.
func TestSSHKeyOfEarlierTenant(t *testing.T) {
	ctx := context.Background()
	objects := memstore.New()
	s := newStore(objects)
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	mustTenant(t, s, "alice", KindUser)
	pub, line := newSSHKey(t, "")
	if _, err := s.AddSSHKey(ctx, "alice", "a", line); err != nil {
		t.Fatal(err)
	}
	if err := objects.Delete(ctx, tenantKey("alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateKey(ctx, pub); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("key of a deleted tenant: AuthenticateKey = %v, want ErrUnauthenticated", err)
	}
	mustTenant(t, s, "alice", KindUser)
	if p, err := s.AuthenticateKey(ctx, pub); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("key of an earlier alice: AuthenticateKey = %+v, %v; want ErrUnauthenticated", p, err)
	}
}

func TestAuthenticateKeyOutage(t *testing.T) {
	ctx := context.Background()
	objects := &failingGets{Store: memstore.New()}
	s := newStore(objects)
	mustTenant(t, s, "alice", KindUser)
	pub, line := newSSHKey(t, "")
	if _, err := s.AddSSHKey(ctx, "alice", "a", line); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{sshKeysPrefix, tenantsPrefix} {
		objects.prefix = prefix
		_, err := s.AuthenticateKey(ctx, pub)
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("outage of %s: AuthenticateKey = %v, want ErrUnavailable", prefix, err)
		}
	}
}

// failingGets fails every Get of a key under prefix.
type failingGets struct {
	objstore.Store
	prefix string
}

func (f *failingGets) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	if f.prefix != "" && strings.HasPrefix(key, f.prefix) {
		return nil, objstore.Info{}, errors.New("injected outage")
	}
	return f.Store.Get(ctx, key)
}

func TestParseSSHKey(t *testing.T) {
	_, good := newSSHKey(t, "me@host")
	edPub, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	pub, _ := ssh.NewPublicKey(edPub)
	signer, _ := ssh.NewSignerFromKey(edPriv)
	cert := &ssh.Certificate{Key: pub, CertType: ssh.UserCert, ValidPrincipals: []string{"me"}, ValidBefore: ssh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, signer); err != nil {
		t.Fatal(err)
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	smallPub, _ := ssh.NewPublicKey(&small.PublicKey)
	big, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	bigPub, _ := ssh.NewPublicKey(&big.PublicKey)
	_, other := newSSHKey(t, "")

	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"ed25519", string(good), true},
		{"comments and blank lines after", string(good) + "\n# note\n\n", true},
		{"rsa 2048", string(ssh.MarshalAuthorizedKey(bigPub)), true},
		{"options", `command="/bin/sh",no-pty ` + string(good), false},
		{"from option", `from="10.0.0.1" ` + string(good), false},
		{"two keys", string(good) + string(other), false},
		{"certificate", string(ssh.MarshalAuthorizedKey(cert)), false},
		{"rsa 1024", string(ssh.MarshalAuthorizedKey(smallPub)), false},
		{"garbage", "hello world", false},
		{"empty", "", false},
		{"private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseSSHKey([]byte(tc.in))
			if tc.ok && err != nil {
				t.Fatalf("ParseSSHKey = %v, want ok", err)
			}
			if !tc.ok && !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("ParseSSHKey = %v, want ErrInvalidArgument", err)
			}
		})
	}
}

func TestAddSSHKeyTitle(t *testing.T) {
	ctx := context.Background()
	s := newStore(memstore.New())
	mustTenant(t, s, "alice", KindUser)
	_, line := newSSHKey(t, "from-comment")
	for _, bad := range []string{strings.Repeat("x", MaxKeyTitleLen+1), "a\x00b", "a\nb"} {
		if _, err := s.AddSSHKey(ctx, "alice", bad, line); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("title %q: %v, want ErrInvalidArgument", bad, err)
		}
	}
	k, err := s.AddSSHKey(ctx, "alice", "  work laptop ", line)
	if err != nil || k.Title != "work laptop" {
		t.Fatalf("AddSSHKey = %+v, %v; want title \"work laptop\"", k, err)
	}
	if _, err := s.AddSSHKey(ctx, "nobody", "t", line); !errors.Is(err, ErrNotFound) {
		t.Fatalf("key for a missing tenant = %v, want ErrNotFound", err)
	}
}

func TestParseFingerprint(t *testing.T) {
	pub, _ := newSSHKey(t, "")
	fp := ssh.FingerprintSHA256(pub)
	want := keyHex(pub)
	urlSafe := strings.NewReplacer("+", "-", "/", "_").Replace(fp)
	for _, in := range []string{fp, urlSafe, fp + "="} {
		if got, err := ParseFingerprint(in); err != nil || got != want {
			t.Fatalf("ParseFingerprint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "SHA256:", strings.TrimPrefix(fp, "SHA256:"), "MD5:" + fp[7:], fp[:len(fp)-2], fp + "AAAA", "SHA256:../../x", want} {
		if _, err := ParseFingerprint(in); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("ParseFingerprint(%q) = %v, want ErrInvalidArgument", in, err)
		}
	}
}

// TestAddSSHKeyUnknownOutcomeKeepsListing: when the lookup record's
// create ends with an unknown outcome, it may still apply, so the listing
// record stays and the key can be found and removed through its tenant.
func TestAddSSHKeyUnknownOutcomeKeepsListing(t *testing.T) {
	ctx := context.Background()
	fs := faultstore.New(memstore.New())
	s := newStore(fs)
	mustTenant(t, s, "alice", KindUser)
	pub, line := newSSHKey(t, "")
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpPutIfAbsent && strings.HasPrefix(c.Key, sshKeysPrefix) {
			return faultstore.Fault{Outcome: faultstore.Lost}
		}
		return faultstore.Fault{}
	})
	_, err := s.AddSSHKey(ctx, "alice", "k", line)
	fs.SetPlan(nil)
	if !errors.Is(err, objstore.ErrOutcomeUnknown) {
		t.Fatalf("AddSSHKey = %v, want ErrOutcomeUnknown", err)
	}
	keys, err := s.ListSSHKeys(ctx, "alice")
	if err != nil || len(keys) != 1 || keys[0].Fingerprint != ssh.FingerprintSHA256(pub) {
		t.Fatalf("after an unknown outcome alice lists %+v, %v; want the key", keys, err)
	}
	if err := s.RemoveSSHKey(ctx, "alice", keys[0].Fingerprint); err != nil {
		t.Fatal(err)
	}
}
