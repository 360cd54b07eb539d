package lfs

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
)

// Git LFS over SSH (docs/adr/0124-lfs-over-ssh.md): "ssh host
// git-lfs-authenticate <repo> <operation>" answers the Batch API's URL
// and a short-lived token for it, signed with the installation's key;
// the client then talks HTTP. The token names the tenant, the
// repository and whether it may upload; the HTTP side checks the
// signature and the expiry, then decides as for any caller of that
// tenant, so a key removed or a membership ended since takes effect.

// TokenKeyObject is the object-store key of the key that signs LFS
// tokens: created once by the first node that needs it, read by all.
const TokenKeyObject = "meta/lfs/token_key"

// TokenPrefix starts every LFS token, so that the authorizer tells it
// from an API token without trying both.
const TokenPrefix = "ghostlfs1."

// TokenTTL is how long a token minted over SSH is good for; git-lfs asks
// again when it runs out (expires_in).
const TokenTTL = time.Hour

// tokenSkew is how far a verifying node's clock may run ahead of the
// minting node's: nodes' clocks differ, and a token must not die early
// on one of them.
const tokenSkew = 5 * time.Minute

const tokenKeyBytes = 32

// ErrBadToken is a token that is not one this installation minted, was
// altered, or has expired.
var ErrBadToken = errors.New("lfs: invalid or expired token")

// Claims are what a token grants.
type Claims struct {
	Tenant string `json:"t"`
	RepoID string `json:"r"`
	// Write allows uploads (and locks); without it, downloads only.
	Write bool `json:"w,omitempty"`
	// Credential names the SSH key that asked, for audit records.
	Credential string    `json:"c,omitempty"`
	Expires    time.Time `json:"e"`
}

// Tokens mints and verifies LFS tokens.
type Tokens struct {
	key []byte
	now func() time.Time
}

// LoadTokens reads the installation's token key from store, creating it
// if no node has yet (record.CreateOnce: racing nodes agree on one).
func LoadTokens(ctx context.Context, store objstore.Store) (*Tokens, error) {
	raw := record.Raw(1 << 10)
	b, _, err := record.Get(ctx, store, raw, TokenKeyObject)
	if errors.Is(err, objstore.ErrNotFound) {
		ours := make([]byte, tokenKeyBytes)
		_, _ = rand.Read(ours) // crypto/rand.Read never fails (Go 1.24+)
		b, err = record.CreateOnce(ctx, store, raw, TokenKeyObject, &ours)
	}
	if err != nil {
		return nil, fmt.Errorf("lfs token key: %w", err)
	}
	if len(*b) != tokenKeyBytes {
		return nil, fmt.Errorf("lfs token key %s is corrupt: %d bytes, want %d (delete it to make a new one)", TokenKeyObject, len(*b), tokenKeyBytes)
	}
	return &Tokens{key: *b, now: time.Now}, nil
}

func (t *Tokens) mac(payload string) string {
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte(TokenPrefix + payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Mint returns a token for c, good for TokenTTL from now (c.Expires is
// set here).
func (t *Tokens) Mint(c Claims) (string, time.Duration) {
	c.Expires = t.now().Add(TokenTTL).UTC().Truncate(time.Second)
	b, _ := json.Marshal(c)
	payload := base64.RawURLEncoding.EncodeToString(b)
	return TokenPrefix + payload + "." + t.mac(payload), TokenTTL
}

// IsToken reports whether tok is shaped as an LFS token (it may still be
// invalid).
func IsToken(tok string) bool { return strings.HasPrefix(tok, TokenPrefix) }

// maxToken bounds what Verify decodes.
const maxToken = 2048

// Verify returns what tok grants: ErrBadToken unless this installation
// signed it and it has not expired.
func (t *Tokens) Verify(tok string) (Claims, error) {
	rest, ok := strings.CutPrefix(tok, TokenPrefix)
	if !ok || len(tok) > maxToken {
		return Claims{}, ErrBadToken
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(t.mac(payload))) {
		return Claims{}, ErrBadToken
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return Claims{}, ErrBadToken
	}
	var c Claims
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.Tenant == "" || c.RepoID == "" {
		return Claims{}, ErrBadToken
	}
	if t.now().After(c.Expires.Add(tokenSkew)) {
		return Claims{}, ErrBadToken
	}
	return c, nil
}
