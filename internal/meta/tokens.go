package meta

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// TokenPrefix starts every plaintext token, so people, logs and ghost's own
// secret scanner can recognise a leaked one.
const TokenPrefix = "ghost_"

// tokenBytes is the token's entropy: 256 bits.
const tokenBytes = 32

// MaxDescriptionLen bounds a token description, in bytes.
const MaxDescriptionLen = 256

// tokenEncoding is lowercase RFC 4648 base32 without padding: 52 characters
// for 32 bytes, no ambiguous symbols, safe in URLs and Basic auth. It is
// built per call rather than held in a package variable.
func tokenEncoding() *base32.Encoding {
	return base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
}

// tokenLen is the exact plaintext length; anything else is malformed.
const tokenLen = len(TokenPrefix) + (tokenBytes*8+4)/5

// hashToken returns the hex SHA-256 of a plaintext token: the only form
// ever stored. A fast hash is right here, unlike for passwords: a token is
// 256 bits from crypto/rand, so there is no dictionary to try and brute
// force is 2^256 whatever the hash costs, while a slow hash (bcrypt,
// argon2) would add tens of milliseconds to every git request and prevent
// lookup by hash. Looking the record up by hash also means no comparison
// of secrets ever runs in variable time.
func hashToken(plaintext string) string {
	sum := sha256.Sum256([]byte(plaintext))
	return hex.EncodeToString(sum[:])
}

// wellFormed checks a presented token's shape before any storage access.
func wellFormed(plaintext string) bool {
	if len(plaintext) != tokenLen || !strings.HasPrefix(plaintext, TokenPrefix) {
		return false
	}
	b, err := tokenEncoding().DecodeString(plaintext[len(TokenPrefix):])
	return err == nil && len(b) == tokenBytes
}

func validDescription(d string) error {
	if len(d) > MaxDescriptionLen {
		return fmt.Errorf("%w: description is %d bytes, at most %d", ErrInvalidArgument, len(d), MaxDescriptionLen)
	}
	if !utf8.ValidString(d) {
		return fmt.Errorf("%w: description is not UTF-8", ErrInvalidArgument)
	}
	for _, r := range d {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: description contains a control character", ErrInvalidArgument)
		}
	}
	return nil
}

// CreateToken mints an access token for tenant and returns its plaintext,
// which is never stored and cannot be recovered: show it once. Whoever
// calls this must already be authorized to mint scope for tenant.
func (s *Store) CreateToken(ctx context.Context, tenant string, scope Scope, description string) (string, Token, error) {
	if !scope.Valid() {
		return "", Token{}, fmt.Errorf("%w: scope %d", ErrInvalidArgument, int(scope))
	}
	if err := validDescription(description); err != nil {
		return "", Token{}, err
	}
	t, err := s.Tenant(ctx, tenant)
	if err != nil {
		return "", Token{}, fmt.Errorf("create token: %w", err)
	}
	var raw [tokenBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", Token{}, fmt.Errorf("create token: %w", err)
	}
	plaintext := TokenPrefix + tokenEncoding().EncodeToString(raw[:])
	hash := hashToken(plaintext)
	rec := tokenRecord{V: recordVersion, ID: s.newID(), Tenant: t.Name, Scope: scope, CreatedAt: s.now(), Description: description, TenantCreated: t.CreatedAt}

	// The id record first: a crash between the two writes then leaves a
	// token that cannot authenticate, never one that cannot be revoked.
	idKey := tokenIDKey(lower(t.Name), rec.ID)
	if _, err := s.createRecord(ctx, idKey, &tokenIDRecord{tokenRecord: rec, Hash: hash}); err != nil {
		return "", Token{}, fmt.Errorf("create token: %w", err)
	}
	if _, err := s.createRecord(ctx, tokenKey(hash), &rec); err != nil {
		_ = s.objects.Delete(ctx, idKey)
		return "", Token{}, fmt.Errorf("create token: %w", err)
	}
	return plaintext, rec.token(), nil
}

// Authenticate resolves a presented plaintext token: one GET keyed by its
// hash, and one of its tenant's record, so that deleting a tenant stops
// its tokens on every node at once, whatever became of the token records
// (see DeleteTenant). Malformed, unknown and revoked tokens, and tokens of
// a deleted tenant, all report ErrUnauthenticated; a storage failure is
// returned wrapping ErrUnavailable, so the server answers 503 rather than
// wrongly telling a client its token is bad.
func (s *Store) Authenticate(ctx context.Context, plaintext string) (Principal, error) {
	if !wellFormed(plaintext) {
		return Principal{}, fmt.Errorf("%w: malformed token", ErrUnauthenticated)
	}
	var rec tokenRecord
	if _, err := s.getRecord(ctx, tokenKey(hashToken(plaintext)), &rec); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return Principal{}, fmt.Errorf("%w: unknown or revoked token", ErrUnauthenticated)
		}
		return Principal{}, fmt.Errorf("authenticate: %w", unavailable(err))
	}
	if !rec.Scope.Valid() {
		return Principal{}, fmt.Errorf("%w: token has no valid scope", ErrUnauthenticated)
	}
	tk, err := canon(rec.Tenant)
	if err != nil {
		return Principal{}, fmt.Errorf("%w: token names no valid tenant", ErrUnauthenticated)
	}
	var t tenantRecord
	if _, err := s.getRecord(ctx, tenantKey(tk), &t); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return Principal{}, fmt.Errorf("%w: the token's tenant was deleted", ErrUnauthenticated)
		}
		return Principal{}, fmt.Errorf("authenticate: %w", unavailable(err))
	}
	if !rec.TenantCreated.IsZero() && !rec.TenantCreated.Equal(t.CreatedAt) {
		return Principal{}, fmt.Errorf("%w: the token's tenant was deleted", ErrUnauthenticated)
	}
	return Principal{Tenant: rec.Tenant, TokenID: rec.ID, Scope: rec.Scope}, nil
}

// RevokeToken deletes tenant's token id. The lookup record goes first, so
// the token stops authenticating on every node at once. ErrNotFound if the
// tenant has no such token.
func (s *Store) RevokeToken(ctx context.Context, tenant, tokenID string) error {
	t, err := canon(tenant)
	if err != nil {
		return fmt.Errorf("revoke token: %w", err)
	}
	if tokenID == "" || ValidateName(tokenID) != nil {
		return fmt.Errorf("revoke token %q: %w", tokenID, ErrNotFound)
	}
	idKey := tokenIDKey(t, tokenID)
	var rec tokenIDRecord
	if _, err := s.getRecord(ctx, idKey, &rec); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("revoke token %s of %s: %w", tokenID, tenant, ErrNotFound)
		}
		return fmt.Errorf("revoke token: %w", err)
	}
	if len(rec.Hash) != sha256.Size*2 {
		return fmt.Errorf("revoke token %s: corrupt record %s: bad hash", tokenID, idKey)
	}
	if err := s.objects.Delete(ctx, tokenKey(rec.Hash)); err != nil {
		return fmt.Errorf("revoke token %s: %w", tokenID, err)
	}
	if err := s.objects.Delete(ctx, idKey); err != nil {
		return fmt.Errorf("revoke token %s: %w", tokenID, err)
	}
	return nil
}

// ListTokens returns tenant's live tokens (never their plaintext), oldest
// first.
func (s *Store) ListTokens(ctx context.Context, tenant string) ([]Token, error) {
	t, err := s.Tenant(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	keys, err := s.listKeys(ctx, tokenIDsPrefix+lower(t.Name)+"/")
	if err != nil {
		return nil, err
	}
	out := make([]Token, 0, len(keys))
	for _, k := range keys {
		var rec tokenIDRecord
		if _, err := s.getRecord(ctx, k, &rec); err != nil {
			if errors.Is(err, objstore.ErrNotFound) {
				continue
			}
			return nil, err
		}
		out = append(out, rec.token())
	}
	return out, nil
}
