package meta

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// SSH public keys let a tenant use git over SSH (docs/design.md §7.7,
// docs/adr/0061-ssh-keys-and-host-key.md). A key is stored twice, like a
// token (docs/adr/0021-meta-tokens-and-authorization.md):
//
//	meta/sshkeys/<sha256hex>              the lookup record: one GET finds a
//	                                      presented key's tenant
//	meta/sshkeyids/<tenant>/<sha256hex>   the tenant's listing
//
// <sha256hex> is the hex form of the SHA-256 of the key's wire encoding,
// the same digest that ssh.FingerprintSHA256 prints in base64. The
// fingerprint itself cannot be a key segment: its base64 contains '/'.
//
// The listing record is written first, so any key that can authenticate
// can be listed and removed; the lookup record's PutIfAbsent is the commit
// point that makes a key belong to exactly one tenant.

// ErrKeyInUse reports an SSH key that is already registered, to this
// tenant or to another (which one is not said: that would tell anyone who
// holds a public key whose account it opens). It matches ErrExists too, so
// the API answers 409.
var ErrKeyInUse = fmt.Errorf("ssh key is already in use: %w", ErrExists)

// MaxKeyTitleLen bounds an SSH key's title, in bytes.
const MaxKeyTitleLen = MaxDescriptionLen

// minRSABits is the smallest RSA modulus accepted: OpenSSH refuses
// smaller keys by default since 8.8, and so does ghost.
const minRSABits = 2048

// keyScope is what an SSH key lets its tenant do: clone and push, never
// operator authority. Keys carry no scope of their own (yet), so a key is
// as good as a write token of its tenant and no better.
const keyScope = ScopeWrite

// SSHKey describes a registered SSH public key.
type SSHKey struct {
	Tenant      string
	Title       string
	Fingerprint string // ssh.FingerprintSHA256 form: "SHA256:<base64>"
	Type        string // the key's algorithm, e.g. "ssh-ed25519"
	PublicKey   string // authorized_keys form, without options or comment
	CreatedAt   time.Time
}

type sshKeyRecord struct {
	stamp
	V           int       `json:"v"`
	Tenant      string    `json:"tenant"`
	Title       string    `json:"title"`
	Fingerprint string    `json:"fingerprint"`
	Type        string    `json:"type"`
	PublicKey   string    `json:"public_key"`
	CreatedAt   time.Time `json:"created_at"`
	// TenantCreated is the creation time of the tenant the key was added
	// to, so a key of a deleted tenant never opens a later tenant of the
	// same name (as tokenRecord.TenantCreated).
	TenantCreated time.Time `json:"tenant_created"`
}

func (r *sshKeyRecord) key() SSHKey {
	return SSHKey{Tenant: r.Tenant, Title: r.Title, Fingerprint: r.Fingerprint, Type: r.Type, PublicKey: r.PublicKey, CreatedAt: r.CreatedAt}
}

const (
	sshKeysPrefix   = "meta/sshkeys/"
	sshKeyIDsPrefix = "meta/sshkeyids/"
)

func sshKeyKey(hexSum string) string      { return sshKeysPrefix + hexSum }
func sshKeyIDKey(t, hexSum string) string { return sshKeyIDsPrefix + t + "/" + hexSum }

// keyHex is the hex SHA-256 of pub's wire form: the digest of
// ssh.FingerprintSHA256, in a form that is a valid key segment.
func keyHex(pub ssh.PublicKey) string {
	sum := sha256.Sum256(pub.Marshal())
	return hex.EncodeToString(sum[:])
}

// ParseFingerprint turns a fingerprint as ssh-keygen -l and
// ssh.FingerprintSHA256 print it ("SHA256:" and unpadded base64) into the
// hex digest the records are keyed by. The URL-safe base64 alphabet ('-'
// and '_' for '+' and '/') is accepted too, because the standard one puts
// '/' into URL paths; the two alphabets differ only there, so the
// translation is unambiguous. Anything else is ErrInvalidArgument.
func ParseFingerprint(fp string) (string, error) {
	b64, ok := strings.CutPrefix(fp, "SHA256:")
	if !ok {
		return "", fmt.Errorf("%w: fingerprint %q: want SHA256:<base64>, as ssh-keygen -l prints it", ErrInvalidArgument, fp)
	}
	b64 = strings.NewReplacer("-", "+", "_", "/").Replace(strings.TrimRight(b64, "="))
	sum, err := base64.RawStdEncoding.DecodeString(b64)
	if err != nil || len(sum) != sha256.Size {
		return "", fmt.Errorf("%w: fingerprint %q: not a SHA-256 fingerprint", ErrInvalidArgument, fp)
	}
	return hex.EncodeToString(sum), nil
}

// ParseSSHKey parses exactly one public key in authorized_keys form
// ("ssh-ed25519 AAAA... comment"), as users paste it from their .pub file,
// and returns it with its comment. It refuses, with ErrInvalidArgument:
//
//   - more than one key: each key gets its own title and removal;
//   - authorized_keys options (from=, command=, ...): ghost would not
//     enforce them, and a key that silently lost its restrictions would
//     grant more than its owner meant;
//   - certificates, DSA keys and RSA keys under 2048 bits: certificate
//     authorities are not supported, and the others are refused by
//     OpenSSH's own defaults.
func ParseSSHKey(authorizedKey []byte) (ssh.PublicKey, string, error) {
	pub, comment, options, rest, err := ssh.ParseAuthorizedKey(authorizedKey)
	if err != nil {
		return nil, "", fmt.Errorf("%w: not an SSH public key in authorized_keys form (\"ssh-ed25519 AAAA... comment\"): %v", ErrInvalidArgument, err)
	}
	if len(options) > 0 {
		return nil, "", fmt.Errorf("%w: the key has authorized_keys options (%s); ghost does not enforce them, so remove them", ErrInvalidArgument, strings.Join(options, ","))
	}
	for _, line := range bytes.Split(rest, []byte("\n")) {
		if line = bytes.TrimSpace(line); len(line) > 0 && line[0] != '#' {
			return nil, "", fmt.Errorf("%w: more than one key; add one key at a time", ErrInvalidArgument)
		}
	}
	switch pub.Type() {
	case ssh.KeyAlgoED25519, ssh.KeyAlgoSKED25519,
		ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521, ssh.KeyAlgoSKECDSA256:
	case ssh.KeyAlgoRSA:
		ck, ok := pub.(ssh.CryptoPublicKey)
		if !ok {
			return nil, "", fmt.Errorf("%w: unreadable RSA key", ErrInvalidArgument)
		}
		rk, ok := ck.CryptoPublicKey().(*rsa.PublicKey)
		if !ok || rk.N.BitLen() < minRSABits {
			return nil, "", fmt.Errorf("%w: RSA keys must have at least %d bits; an Ed25519 key is better (ssh-keygen -t ed25519)", ErrInvalidArgument, minRSABits)
		}
	default:
		return nil, "", fmt.Errorf("%w: key type %s is not accepted; use ssh-ed25519, ecdsa-sha2-* or ssh-rsa (ssh-keygen -t ed25519)", ErrInvalidArgument, pub.Type())
	}
	return pub, comment, nil
}

// AddSSHKey registers the public key in authorizedKey (one authorized_keys
// line, see ParseSSHKey) for tenant. title names it in listings; empty
// means the key's own comment. A key belongs to exactly one tenant:
// adding a key that is registered anywhere, racing adds included, is
// ErrKeyInUse. Whoever calls this must already be authorized to add
// credentials for tenant.
func (s *Store) AddSSHKey(ctx context.Context, tenant, title string, authorizedKey []byte) (SSHKey, error) {
	pub, comment, err := ParseSSHKey(authorizedKey)
	if err != nil {
		return SSHKey{}, err
	}
	if title == "" {
		title = comment
	}
	title = strings.TrimSpace(title)
	if err := validDescription(title); err != nil {
		return SSHKey{}, fmt.Errorf("ssh key title: %w", err)
	}
	t, err := s.Tenant(ctx, tenant)
	if err != nil {
		return SSHKey{}, fmt.Errorf("add ssh key: %w", err)
	}
	sum := keyHex(pub)
	rec := sshKeyRecord{
		V: recordVersion, Tenant: t.Name, Title: title,
		Fingerprint: ssh.FingerprintSHA256(pub), Type: pub.Type(),
		PublicKey:     strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))),
		CreatedAt:     s.now(),
		TenantCreated: t.CreatedAt,
	}
	idKey := sshKeyIDKey(lower(t.Name), sum)
	if _, err := s.createRecord(ctx, idKey, &rec); err != nil {
		if errors.Is(err, ErrExists) {
			return SSHKey{}, fmt.Errorf("add ssh key %s to %s: %w", rec.Fingerprint, t.Name, ErrKeyInUse)
		}
		return SSHKey{}, fmt.Errorf("add ssh key: %w", err)
	}
	lookup := rec // its own nonce: createRecord stamps it afresh
	if _, err := s.createRecord(ctx, sshKeyKey(sum), &lookup); err != nil {
		// The listing record is ours to remove when the lookup record
		// certainly is not ours. When that is unknown it stays, so that
		// a key that may authenticate can still be listed and removed
		// (docs/adr/0006-write-outcomes.md).
		if !errors.Is(err, objstore.ErrOutcomeUnknown) {
			_ = s.objects.Delete(ctx, idKey)
		}
		if errors.Is(err, ErrExists) {
			return SSHKey{}, fmt.Errorf("add ssh key %s to %s: %w", rec.Fingerprint, t.Name, ErrKeyInUse)
		}
		return SSHKey{}, fmt.Errorf("add ssh key: %w", err)
	}
	return rec.key(), nil
}

// SSHKeyByFingerprint returns the key with fingerprint fp (see
// ParseFingerprint) with one GET, whoever owns it: ErrNotFound if none.
// It does not check that the key's tenant still exists; AuthenticateKey
// does.
func (s *Store) SSHKeyByFingerprint(ctx context.Context, fp string) (SSHKey, error) {
	sum, err := ParseFingerprint(fp)
	if err != nil {
		return SSHKey{}, err
	}
	var rec sshKeyRecord
	if _, err := s.getRecord(ctx, sshKeyKey(sum), &rec); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return SSHKey{}, fmt.Errorf("ssh key %s: %w", fp, ErrNotFound)
		}
		return SSHKey{}, err
	}
	return rec.key(), nil
}

// AuthenticateKey resolves a public key that an SSH client has proven it
// holds to the principal of the tenant it belongs to, as Authenticate does
// for a token: one GET by fingerprint, and one of the tenant, so that
// deleting a tenant stops its keys on every node at once. The principal
// has write scope and no token id (see keyScope). An unknown key, or one
// of a deleted tenant, is ErrUnauthenticated; a storage failure wraps
// ErrUnavailable.
func (s *Store) AuthenticateKey(ctx context.Context, pub ssh.PublicKey) (Principal, error) {
	var rec sshKeyRecord
	if _, err := s.getRecord(ctx, sshKeyKey(keyHex(pub)), &rec); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return Principal{}, fmt.Errorf("%w: unknown ssh key", ErrUnauthenticated)
		}
		return Principal{}, fmt.Errorf("authenticate ssh key: %w", unavailable(err))
	}
	tk, err := canon(rec.Tenant)
	if err != nil {
		return Principal{}, fmt.Errorf("%w: ssh key names no valid tenant", ErrUnauthenticated)
	}
	var t tenantRecord
	if _, err := s.getRecord(ctx, tenantKey(tk), &t); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return Principal{}, fmt.Errorf("%w: the ssh key's tenant was deleted", ErrUnauthenticated)
		}
		return Principal{}, fmt.Errorf("authenticate ssh key: %w", unavailable(err))
	}
	if !rec.TenantCreated.Equal(t.CreatedAt) {
		return Principal{}, fmt.Errorf("%w: the ssh key's tenant was deleted", ErrUnauthenticated)
	}
	return Principal{Tenant: t.Name, Scope: keyScope, KeyFingerprint: rec.Fingerprint, KeyTitle: rec.Title}, nil
}

// ListSSHKeys returns tenant's keys, ordered by their digest.
func (s *Store) ListSSHKeys(ctx context.Context, tenant string) ([]SSHKey, error) {
	t, err := s.Tenant(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("list ssh keys: %w", err)
	}
	keys, err := s.listKeys(ctx, sshKeyIDsPrefix+lower(t.Name)+"/")
	if err != nil {
		return nil, err
	}
	out := make([]SSHKey, 0, len(keys))
	for _, k := range keys {
		var rec sshKeyRecord
		if _, err := s.getRecord(ctx, k, &rec); err != nil {
			if errors.Is(err, objstore.ErrNotFound) {
				continue
			}
			return nil, err
		}
		out = append(out, rec.key())
	}
	return out, nil
}

// RemoveSSHKey removes tenant's key with fingerprint fp. The lookup record
// goes first, so the key stops authenticating on every node at once, and
// only if it is tenant's: naming another tenant's key is ErrNotFound, as
// is a key tenant does not have. tenant need not exist any more, so that
// a key left behind can always be removed.
func (s *Store) RemoveSSHKey(ctx context.Context, tenant, fp string) error {
	tk, err := canon(tenant)
	if err != nil {
		return fmt.Errorf("remove ssh key: %w", err)
	}
	sum, err := ParseFingerprint(fp)
	if err != nil {
		return fmt.Errorf("remove ssh key: %w", err)
	}
	idKey := sshKeyIDKey(tk, sum)
	var rec sshKeyRecord
	if _, err := s.getRecord(ctx, idKey, &rec); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("remove ssh key %s of %s: %w", fp, tenant, ErrNotFound)
		}
		return fmt.Errorf("remove ssh key: %w", err)
	}
	if err := s.deleteSSHKey(ctx, tk, idKey, sum); err != nil {
		return fmt.Errorf("remove ssh key %s of %s: %w", fp, tenant, err)
	}
	return nil
}

// deleteSSHKey deletes the lookup record of digest sum if it is tenant
// key tk's, then the listing record idKey. A lookup record that belongs to
// another tenant is left alone: the listing record was a leftover of a
// lost race, and deleting the lookup record would take the key from its
// owner.
func (s *Store) deleteSSHKey(ctx context.Context, tk, idKey, sum string) error {
	var lookup sshKeyRecord
	_, err := s.getRecord(ctx, sshKeyKey(sum), &lookup)
	switch {
	case err == nil && lower(lookup.Tenant) == tk:
		if err := s.objects.Delete(ctx, sshKeyKey(sum)); err != nil {
			return err
		}
	case err != nil && !errors.Is(err, objstore.ErrNotFound):
		return err
	}
	return s.objects.Delete(ctx, idKey)
}

// deleteSSHKeys removes every SSH key of tenant key tk, as RemoveSSHKey
// does; DeleteTenant calls it after the tenant record is gone, when the
// keys already no longer authenticate.
func (s *Store) deleteSSHKeys(ctx context.Context, tk string) error {
	keys, err := s.listKeys(ctx, sshKeyIDsPrefix+tk+"/")
	if err != nil {
		return err
	}
	for _, k := range keys {
		sum := strings.TrimPrefix(k, sshKeyIDsPrefix+tk+"/")
		if err := s.deleteSSHKey(ctx, tk, k, sum); err != nil {
			return fmt.Errorf("delete ssh key %s: %w", sum, err)
		}
	}
	return nil
}
