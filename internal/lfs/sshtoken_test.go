package lfs

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// TestTokens: a token verifies on any node of the installation (one key,
// created once), until it expires, with a few minutes' grace for a
// verifier whose clock runs ahead; altered, foreign or malformed tokens
// never do.
func TestTokens(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	a, err := LoadTokens(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadTokens(ctx, store) // another node
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1800000000, 0)
	a.now = func() time.Time { return now }
	tok, ttl := a.Mint(Claims{Tenant: "alice", RepoID: "01R", Write: true, Credential: "SHA256:x"})
	if ttl != TokenTTL || !IsToken(tok) {
		t.Fatalf("Mint = %q, %v", tok, ttl)
	}
	for _, d := range []time.Duration{0, TokenTTL, TokenTTL + tokenSkew - time.Second} {
		b.now = func() time.Time { return now.Add(d) }
		c, err := b.Verify(tok)
		if err != nil || c.Tenant != "alice" || c.RepoID != "01R" || !c.Write || c.Credential != "SHA256:x" {
			t.Fatalf("at +%v: %+v, %v", d, c, err)
		}
	}
	b.now = func() time.Time { return now.Add(TokenTTL + tokenSkew + time.Second) }
	if _, err := b.Verify(tok); !errors.Is(err, ErrBadToken) {
		t.Fatalf("expired: %v", err)
	}
	b.now = a.now
	other, err := LoadTokens(ctx, memstore.New()) // another installation
	if err != nil {
		t.Fatal(err)
	}
	foreign, _ := other.Mint(Claims{Tenant: "alice", RepoID: "01R"})
	payload, sig, _ := strings.Cut(strings.TrimPrefix(tok, TokenPrefix), ".")
	for name, bad := range map[string]string{
		"foreign":      foreign,
		"altered sig":  tok + "x",
		"other claims": TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(`{"t":"mallory","r":"01R","w":true,"e":"2030-01-01T00:00:00Z"}`)) + "." + sig,
		"no sig":       TokenPrefix + payload,
		"api token":    "ghost_0123456789",
		"empty":        "",
		"huge":         TokenPrefix + strings.Repeat("a", maxToken),
	} {
		if _, err := b.Verify(bad); !errors.Is(err, ErrBadToken) {
			t.Errorf("%s: %v, want ErrBadToken", name, err)
		}
	}
}

// FuzzVerify: any string is a valid token or ErrBadToken, never a panic.
func FuzzVerify(f *testing.F) {
	tk := &Tokens{key: make([]byte, tokenKeyBytes), now: time.Now}
	good, _ := tk.Mint(Claims{Tenant: "a", RepoID: "r"})
	f.Add(good)
	f.Add(TokenPrefix + "e30.x")
	f.Fuzz(func(t *testing.T, s string) {
		if c, err := tk.Verify(s); err != nil && !errors.Is(err, ErrBadToken) || err == nil && (c.Tenant == "" || c.RepoID == "") {
			t.Fatalf("Verify(%q) = %+v, %v", s, c, err)
		}
	})
}
