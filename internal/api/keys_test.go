package api

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/url"
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

// keyBody is the JSON body adding pub with a comment.
func keyBody(t *testing.T, pub ssh.PublicKey, title string) string {
	t.Helper()
	b, err := json.Marshal(map[string]string{"key": strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))) + " me@host", "title": title})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSSHKeysAPI(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	k1, k2, k3 := newPubKey(t), newPubKey(t), newPubKey(t)
	fp1, fp2, fp3 := ssh.FingerprintSHA256(k1), ssh.FingerprintSHA256(k2), ssh.FingerprintSHA256(k3)
	urlSafe := func(fp string) string { return strings.NewReplacer("+", "-", "/", "_").Replace(fp) }

	f.run([]step{
		{"add anonymous", "POST", "/api/tenants/alice/keys", "", keyBody(t, k1, "laptop"), 401},
		{"add self read token", "POST", "/api/tenants/alice/keys", f.aliceR, keyBody(t, k1, "laptop"), 403},
		{"add another tenant's", "POST", "/api/tenants/alice/keys", f.bobW, keyBody(t, k1, "laptop"), 403},
		{"add self write token", "POST", "/api/tenants/alice/keys", f.aliceW, keyBody(t, k1, "laptop"), 201},
		{"add admin", "POST", "/api/tenants/alice/keys", f.admin, keyBody(t, k2, ""), 201},
		{"add to another tenant", "POST", "/api/tenants/bob/keys", f.admin, keyBody(t, k1, "stolen"), 409},
		{"add twice", "POST", "/api/tenants/alice/keys", f.admin, keyBody(t, k1, "again"), 409},
		{"add garbage", "POST", "/api/tenants/alice/keys", f.admin, `{"key":"hello"}`, 400},
		{"add no key", "POST", "/api/tenants/alice/keys", f.admin, `{"title":"x"}`, 400},
		{"add unknown field", "POST", "/api/tenants/alice/keys", f.admin, `{"key":"x","name":"y"}`, 400},
		{"add missing tenant", "POST", "/api/tenants/nobody/keys", f.admin, keyBody(t, k3, ""), 404},
		{"add bob's", "POST", "/api/tenants/bob/keys", f.admin, keyBody(t, k3, ""), 201},

		{"list anonymous", "GET", "/api/tenants/alice/keys", "", "", 401},
		{"list other tenant", "GET", "/api/tenants/alice/keys", f.bobW, "", 403},
		{"list self read", "GET", "/api/tenants/alice/keys", f.aliceR, "", 200},
		{"list admin", "GET", "/api/tenants/alice/keys", f.admin, "", 200},
	})

	var keys []sshKeyJSON
	f.do("GET", "/api/tenants/alice/keys", f.aliceR, "").json(t, &keys)
	if len(keys) != 2 {
		t.Fatalf("alice's keys = %+v", keys)
	}
	byFP := map[string]sshKeyJSON{keys[0].Fingerprint: keys[0], keys[1].Fingerprint: keys[1]}
	if k := byFP[fp1]; k.Title != "laptop" || k.Type != "ssh-ed25519" || k.Tenant != "alice" || k.ID != urlSafe(fp1) || k.CreatedAt.IsZero() || !strings.HasPrefix(k.PublicKey, "ssh-ed25519 ") {
		t.Fatalf("key 1 = %+v", k)
	}
	if k := byFP[fp2]; k.Title != "me@host" {
		t.Fatalf("key 2's title = %q, want its comment", k.Title)
	}

	f.run([]step{
		{"remove anonymous", "DELETE", "/api/tenants/alice/keys/" + urlSafe(fp1), "", "", 401},
		{"remove other tenant", "DELETE", "/api/tenants/alice/keys/" + urlSafe(fp1), f.bobW, "", 403},
		{"remove self read token", "DELETE", "/api/tenants/alice/keys/" + urlSafe(fp1), f.aliceR, "", 403},
		{"remove bob's key as alice's", "DELETE", "/api/tenants/alice/keys/" + urlSafe(fp3), f.admin, "", 404},
		{"remove bad fingerprint", "DELETE", "/api/tenants/alice/keys/MD5:00", f.admin, "", 400},
		// The URL-safe form, and the standard one percent-encoded.
		{"remove self write", "DELETE", "/api/tenants/alice/keys/" + urlSafe(fp1), f.aliceW, "", 204},
		{"remove admin encoded", "DELETE", "/api/tenants/alice/keys/" + url.PathEscape(fp2), f.admin, "", 204},
		{"remove again", "DELETE", "/api/tenants/alice/keys/" + urlSafe(fp1), f.admin, "", 404},
		// Removed, the key may go to bob.
		{"re-add to bob", "POST", "/api/tenants/bob/keys", f.admin, keyBody(t, k1, "now bob's"), 201},
	})
	if _, err := f.s.AuthenticateKey(ctx, k2); !errors.Is(err, meta.ErrUnauthenticated) {
		t.Fatalf("removed key authenticates: %v", err)
	}
	if p, err := f.s.AuthenticateKey(ctx, k1); err != nil || p.Tenant != "bob" {
		t.Fatalf("AuthenticateKey = %+v, %v; want bob", p, err)
	}
	// A 409 does not say whose key it is.
	r := f.do("POST", "/api/tenants/alice/keys", f.admin, keyBody(t, k1, ""))
	if r.status != 409 || strings.Contains(string(r.body), "bob") {
		t.Fatalf("409 body %s names the owner", r.body)
	}
}
