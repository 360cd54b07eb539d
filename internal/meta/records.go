package meta

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
)

// recordVersion is written into every record; readers refuse versions they
// do not know rather than misreading them.
const recordVersion = 1

const (
	tenantsPrefix  = "meta/tenants/"
	membersPrefix  = "meta/members/"
	tokensPrefix   = "meta/tokens/"
	tokenIDsPrefix = "meta/tokenids/"
	reposPrefix    = "meta/repos/"
)

func tenantKey(t string) string         { return tenantsPrefix + t }
func memberKey(org, user string) string { return membersPrefix + org + "/" + user }
func tokenKey(hashHex string) string    { return tokensPrefix + hashHex }
func tokenIDKey(t, id string) string    { return tokenIDsPrefix + t + "/" + strings.ToLower(id) }
func repoKey(owner, name string) string { return reposPrefix + owner + "/" + name }

// stamp is embedded in every record. Nonce is a random value the record's
// creator writes and nothing else reads: after a PutIfAbsent whose outcome
// is unknown (or a store that broke its promise and reported a lost race
// for a write that landed), the creator reads the record back and knows it
// as its own by the nonce, rather than telling itself "already exists"
// (docs/adr/0006-write-outcomes.md). Records written before it have none.
type stamp struct {
	Nonce string `json:"nonce,omitempty"`
}

func (s *stamp) setNonce(n string) { s.Nonce = n }
func (s *stamp) nonce() string     { return s.Nonce }

// stamped is a record createRecord can write: one that embeds stamp.
type stamped interface {
	setNonce(string)
	nonce() string
}

type tenantRecord struct {
	stamp
	V         int       `json:"v"`
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	CreatedAt time.Time `json:"created_at"`
}

type memberRecord struct {
	stamp
	V       int       `json:"v"`
	Org     string    `json:"org"`
	User    string    `json:"user"`
	AddedAt time.Time `json:"added_at"`
}

type tokenRecord struct {
	stamp
	V           int       `json:"v"`
	ID          string    `json:"id"`
	Tenant      string    `json:"tenant"`
	Scope       Scope     `json:"scope"`
	CreatedAt   time.Time `json:"created_at"`
	Description string    `json:"description,omitempty"`
	// TenantCreated is the creation time of the tenant the token was
	// minted for: a tenant deleted and created again under the same name
	// is a different tenant, and Authenticate refuses the old one's
	// tokens. Zero in tokens minted before it was recorded.
	TenantCreated time.Time `json:"tenant_created,omitzero"`
}

// tokenIDRecord indexes a token by tenant and id. It carries the hash (not
// the plaintext) so RevokeToken can find and delete the lookup record.
type tokenIDRecord struct {
	tokenRecord
	Hash string `json:"sha256"`
}

type repoRecord struct {
	stamp
	V          int       `json:"v"`
	ID         string    `json:"id"`
	Owner      string    `json:"owner"`
	Name       string    `json:"name"`
	Public     bool      `json:"public"`
	CreatedAt  time.Time `json:"created_at"`
	ForkedFrom string    `json:"forked_from,omitempty"`
	// PushProtection turns on scanning pushes for secrets
	// (docs/adr/0031-push-protection.md); absent in older records, so off.
	PushProtection bool `json:"push_protection,omitempty"`
	// Gen counts the writes of the record: each write sets it one higher
	// (and a fresh nonce), and its listing keys carry both, so that a
	// lister can tell keys of earlier writes from those of a write in
	// flight (docs/adr/0027-listing-keys.md). 0 in records written
	// before it.
	Gen uint64 `json:"gen,omitempty"`
	// AllowReplaceRefs lets pushes create refs/replace/* refs; absent in
	// older records, so refused.
	AllowReplaceRefs bool `json:"allow_replace_refs,omitempty"`
	// DefaultBranch is the branch HEAD names, without refs/heads/; absent
	// in older records and until set, so chosen by the server
	// (docs/adr/0110-default-branch.md).
	DefaultBranch string `json:"default_branch,omitempty"`
	// AllowMissingLFS lets pushes name Git LFS objects the repository
	// does not hold (a mirror's); absent in older records, so refused.
	AllowMissingLFS bool `json:"allow_missing_lfs,omitempty"`
	// LFSScanAfterPush leaves LFS objects past push protection's budget
	// to the scan run; absent in older records, so such pushes are refused.
	LFSScanAfterPush bool `json:"lfs_scan_after_push,omitempty"`
	// DenyMergeCommit, DenySquashMerge and DenyRebaseMerge turn off a
	// strategy of merging pull requests (docs/adr/0119-server-side-merge.md);
	// absent in older records, so every strategy is allowed, as on GitHub.
	DenyMergeCommit bool `json:"deny_merge_commit,omitempty"`
	DenySquashMerge bool `json:"deny_squash_merge,omitempty"`
	DenyRebaseMerge bool `json:"deny_rebase_merge,omitempty"`
	// BranchRules protect branches (docs/adr/0123-protected-branches.md);
	// absent in older records, so none.
	BranchRules []BranchRule `json:"branch_rules,omitempty"`
	// Deleted marks a name whose repository was deleted. The record stays
	// so that deletes and re-creates are compare-and-swaps on one object:
	// object storage has no conditional delete, and an unconditional one
	// could remove a record a racing creator had just written.
	Deleted bool `json:"deleted,omitempty"`
}

func (r *repoRecord) repo() Repo {
	return Repo{ID: r.ID, Owner: r.Owner, Name: r.Name, Public: r.Public, CreatedAt: r.CreatedAt, ForkedFrom: r.ForkedFrom, PushProtection: r.PushProtection, AllowReplaceRefs: r.AllowReplaceRefs, DefaultBranch: r.DefaultBranch,
		AllowMissingLFS: r.AllowMissingLFS, LFSScanAfterPush: r.LFSScanAfterPush, DenyMergeCommit: r.DenyMergeCommit, DenySquashMerge: r.DenySquashMerge, DenyRebaseMerge: r.DenyRebaseMerge,
		BranchRules: cloneRules(r.BranchRules)}
}

func (t *tenantRecord) tenant() Tenant {
	return Tenant{Name: t.Name, Kind: t.Kind, CreatedAt: t.CreatedAt}
}

func (t *tokenRecord) token() Token {
	return Token{ID: t.ID, Tenant: t.Tenant, Scope: t.Scope, CreatedAt: t.CreatedAt, Description: t.Description}
}

// getRecord reads and decodes key into v, returning its ETag.
// objstore.ErrNotFound passes through (wrapped) for the caller to translate.
func (s *Store) getRecord(ctx context.Context, key string, v any) (string, error) {
	b, info, err := objstore.ReadAll(ctx, s.objects, key, maxRecord)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", key, err)
	}
	if err := decodeRecord(b, v); err != nil {
		return "", fmt.Errorf("corrupt metadata record %s: %w", key, err)
	}
	return info.ETag, nil
}

func decodeRecord(b []byte, v any) error {
	var hdr struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(b, &hdr); err != nil {
		return err
	}
	if hdr.V != recordVersion {
		return fmt.Errorf("record version %d, this build reads %d", hdr.V, recordVersion)
	}
	return json.Unmarshal(b, v)
}

func encodeRecord(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode metadata record: %w", err)
	}
	return b, nil
}

// createRecord writes v at key only if the key is absent: ErrExists when
// it is not. It returns the new ETag.
//
// v gets a fresh nonce first, unless it has one (a caller that announced
// the record's listing keys under it, docs/adr/0027-listing-keys.md), so
// that after a lost race or an unknown outcome the record read back tells
// whose it is (record.Create): ours means the write applied, another's
// means ErrExists, and none means the same bytes are sent again. If the
// outcome cannot be learned the error
// matches objstore.ErrOutcomeUnknown, never ErrExists.
func (s *Store) createRecord(ctx context.Context, key string, v stamped) (string, error) {
	if v.nonce() == "" {
		var raw [16]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return "", fmt.Errorf("write %s: nonce: %w", key, err)
		}
		v.setNonce(hex.EncodeToString(raw[:]))
	}
	etag, err := record.Create(ctx, s.objects, anyCodec, key, &v)
	switch {
	case err == nil:
		return etag, nil
	case errors.Is(err, record.ErrExists):
		return "", fmt.Errorf("%s: %w", key, ErrExists)
	}
	return "", fmt.Errorf("write %s: %w", key, err)
}

// anyCodec encodes any metadata record for record.Create (which never
// decodes what it reads back: it compares bytes).
var anyCodec = record.Codec[stamped]{
	Encode: func(v *stamped) ([]byte, error) { return encodeRecord(*v) },
	Decode: func([]byte, *stamped) error { return errors.New("metadata records are decoded by type") },
	Max:    maxRecord,
}

// recordCodec is the codec of one metadata record type, for record.Update.
func recordCodec[T any]() record.Codec[T] {
	return record.Codec[T]{
		Encode: func(v *T) ([]byte, error) { return encodeRecord(v) },
		Decode: func(b []byte, v *T) error { return decodeRecord(b, v) },
		Max:    maxRecord,
	}
}

// updateRecord applies mutate to the record at key by compare-and-swap
// (record.Update): lost races are retried, an unknown outcome is settled
// by reading back, and the errors say which of the three outcomes of
// docs/adr/0006-write-outcomes.md happened. A record that changed under
// every attempt is ErrContention (503: retry).
func updateRecord[T any](ctx context.Context, s *Store, key string, mutate record.Mutate[T]) (*T, error) {
	v, err := record.Update(ctx, s.objects, recordCodec[T](), key, record.Options{Attempts: maxCASAttempts}, mutate)
	if errors.Is(err, record.ErrContention) {
		return nil, fmt.Errorf("%w: %w", ErrContention, err)
	}
	return v, err
}

// replaceRecord writes v at key only if its ETag is still etag. A lost
// compare-and-swap is returned as objstore.ErrPreconditionFailed.
func (s *Store) replaceRecord(ctx context.Context, key string, v any, etag string) (string, error) {
	b, err := encodeRecord(v)
	if err != nil {
		return "", err
	}
	info, err := s.objects.PutIfMatch(ctx, key, bytes.NewReader(b), int64(len(b)), etag)
	if err != nil {
		return "", fmt.Errorf("write %s: %w", key, err)
	}
	return info.ETag, nil
}

// listKeys returns every key under prefix.
func (s *Store) listKeys(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	err := objstore.Walk(ctx, s.objects, prefix, func(o objstore.Info) error {
		keys = append(keys, o.Key)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	return keys, nil
}
