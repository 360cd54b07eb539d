// Package meta is ghost's metadata: tenants (users and organizations), org
// membership, access tokens and the repository namespace that maps
// "owner/name" to a write-ahead-log repository id.
//
// Every record is a small JSON object in the same object store as the
// repository logs, so the git path (authenticate, resolve a name, check
// access) depends on object storage alone (docs/design.md §6.5): no database, no
// etcd. Creates are PutIfAbsent, updates are PutIfMatch, so racing writers on
// different nodes resolve without locks: one wins, the others see ErrExists
// or retry on the fresh record.
//
// Key layout (no key is a directory prefix of another, which the filesystem
// store cannot represent):
//
//	meta/tenants/<tenant>           tenantRecord
//	meta/members/<org>/<user>       memberRecord
//	meta/tokens/<sha256hex>         tokenRecord, looked up by Authenticate
//	meta/tokenids/<tenant>/<id>     tokenIDRecord, finds the hash to revoke by id
//	meta/repos/<owner>/<name>       repoRecord (a deleted name keeps a tombstone)
//	meta/sshkeys/<sha256hex>        sshKeyRecord, looked up by AuthenticateKey
//	meta/sshkeyids/<tenant>/<hex>   sshKeyRecord, the tenant's listing
//	meta/repolist/<owner>/<name>,…  what a list shows of a repository (listing.go)
//	meta/tenantlist/<tenant>,…      what a list shows of a tenant
//
// Names are case-insensitive: keys use the lowercase form, records keep the
// name as first written for display. See docs/adr/0020-meta-namespace.md and
// docs/adr/0021-meta-tokens-and-authorization.md.
package meta

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// ErrNotFound reports a tenant, repository, token or membership that does
// not exist (a deleted repository included). Callers serving a private
// repository the caller may not read report it too, so existence never
// leaks.
var ErrNotFound = errors.New("not found")

// ErrExists reports a create that lost to an existing record, whether it
// was there before or was written by a racing creator an instant earlier.
var ErrExists = errors.New("already exists")

// ErrUnauthenticated reports a token that is malformed, unknown or revoked.
// The three are deliberately indistinguishable to the caller.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrForbidden reports an authenticated caller without the right to act.
var ErrForbidden = errors.New("forbidden")

// ErrInvalidName reports a tenant or repository name ValidateName refuses.
var ErrInvalidName = errors.New("invalid name")

// ErrUnavailable reports that the object store failed (not "not found")
// while metadata was being read for authentication or authorization. It
// is a separate kind so that callers can answer 503 and log it, rather
// than either granting access or reporting a repository the caller may
// see as absent (docs/adr/0021-meta-tokens-and-authorization.md). It
// wraps the store's own error.
var ErrUnavailable = errors.New("metadata storage unavailable")

// ErrContention reports a record that changed under every attempt to
// change it: nothing applied, and retrying is safe. It answers 503.
var ErrContention = errors.New("the record changed concurrently on every attempt; retry")

// ErrNotEmpty reports a tenant that cannot be deleted because it still
// owns repositories and the delete was not forced.
var ErrNotEmpty = errors.New("tenant owns repositories")

// ErrInvalidArgument reports any other malformed input (tenant kind, scope,
// description), so an API can answer 400 without string matching.
var ErrInvalidArgument = errors.New("invalid argument")

// Tenant kinds. Users own tokens and act; orgs own repositories that their
// member users may act on.
const (
	KindUser = "user"
	KindOrg  = "org"
)

// Tenant is a user or an organization: the unit that owns repositories and
// tokens.
type Tenant struct {
	Name      string // display form; lookups are case-insensitive
	Kind      string // KindUser or KindOrg
	CreatedAt time.Time
}

// Repo is a named repository. The name is an alias for ID, which is what
// the log is keyed by: deleting and recreating a name yields a new ID, so a
// stale cache or a late push can never resurrect the old history.
type Repo struct {
	ID         string // wal repository id (a ULID); never reused
	Owner      string // tenant display name
	Name       string // display name, without ".git"
	Public     bool
	CreatedAt  time.Time
	ForkedFrom string // "owner/name" of the source at fork time, or ""
	// PushProtection makes pushes that add secrets fail unless bypassed
	// (docs/adr/0031-push-protection.md). Off by default; a fork starts
	// with it off too, since its owner decides.
	PushProtection bool
	// AllowReplaceRefs lets pushes create, move and delete refs/replace/*
	// refs, which are refused by default (docs/adr/0031-push-protection.md).
	// A fork starts with it off.
	AllowReplaceRefs bool
	// AllowMissingLFS lets pushes name Git LFS objects never uploaded to
	// the repository, as a mirror's pushes do (docs/design.md §7.10).
	// Off by default: such a push is refused. A fork starts with it off.
	AllowMissingLFS bool
	// LFSScanAfterPush lets a push with push protection on land when Git
	// LFS objects it adds are too large for the push's scan budget; the
	// push's scan run reads them and alerts (docs/adr/0130-lfs-push-protection.md).
	// Off by default: such a push is refused, naming the objects. A fork
	// starts with it off.
	LFSScanAfterPush bool
	// DefaultBranch is the branch a clone checks out and HEAD names
	// ("dev", without refs/heads/), or "" until an admin of the
	// repository sets one: then, and whenever the branch is missing, the
	// server picks main, then master, then the first branch by name
	// (docs/adr/0110-default-branch.md). A fork starts with its source's.
	DefaultBranch string
	// DenyMergeCommit, DenySquashMerge and DenyRebaseMerge turn off a
	// strategy of merging its pull requests (GitHub's allow_merge_commit,
	// allow_squash_merge and allow_rebase_merge, inverted so that the
	// zero value allows all three, as GitHub does;
	// docs/adr/0119-server-side-merge.md). Never all three. Lists (the
	// listing keys, docs/adr/0027-listing-keys.md) do not carry them:
	// read the repository (Store.Repo) to know them.
	DenyMergeCommit bool
	DenySquashMerge bool
	DenyRebaseMerge bool
	// BranchRules protect the branches they match: the push path refuses
	// what a rule forbids (docs/adr/0123-protected-branches.md). Lists do
	// not carry them either. A fork starts with none.
	BranchRules []BranchRule
}

// AllowsMerge reports whether method ("merge", "squash" or "rebase") may
// merge r's pull requests.
func (r Repo) AllowsMerge(method string) bool {
	switch method {
	case "merge":
		return !r.DenyMergeCommit
	case "squash":
		return !r.DenySquashMerge
	case "rebase":
		return !r.DenyRebaseMerge
	}
	return false
}

// FullName is "owner/name", the form users type.
func (r Repo) FullName() string { return r.Owner + "/" + r.Name }

// Token describes an access token. The plaintext is never stored; only
// CreateToken ever returns it.
type Token struct {
	ID          string // stable handle for listing and revoking
	Tenant      string
	Scope       Scope
	CreatedAt   time.Time
	Description string
}

// Principal is an authenticated caller, as Authenticate returns it. A nil
// *Principal is the anonymous caller.
type Principal struct {
	Tenant  string
	TokenID string // the token's id, when a token authenticated
	Scope   Scope
	// KeyFingerprint and KeyTitle name the SSH key, when a key
	// authenticated (AuthenticateKey).
	KeyFingerprint string
	KeyTitle       string
}

// Credential names what authenticated p, for audit records: "token
// <id>", or "ssh key <fingerprint> <title, quoted>". Empty for the
// anonymous caller.
func (p *Principal) Credential() string {
	switch {
	case p == nil:
		return ""
	case p.KeyFingerprint != "":
		return "ssh key " + p.KeyFingerprint + " " + strconv.Quote(p.KeyTitle)
	case p.TokenID != "":
		return "token " + p.TokenID
	}
	return "no credential"
}

// String is p as audit records name a caller: the tenant and the
// credential, "alice (token 01J...)" or "alice (ssh key SHA256:...
// "laptop")". Empty for the anonymous caller.
func (p *Principal) String() string {
	if p == nil {
		return ""
	}
	return p.Tenant + " (" + p.Credential() + ")"
}

// IsAdmin reports whether p holds an admin-scope token. Admin scope is
// operator authority over the whole installation (see the ADR); p may be
// nil.
func (p *Principal) IsAdmin() bool { return p != nil && p.Scope >= ScopeAdmin }

// maxRecord bounds every metadata object read: records are tiny, and a
// corrupt or hostile giant object must not be read into memory.
const maxRecord = 64 << 10

// Store is the metadata store. It is safe for concurrent use and holds no
// cache: every lookup reads the object store, so all nodes agree at once
// (a revoked token or a deleted repository stops working on the next
// request, everywhere).
type Store struct {
	objects objstore.Store
	log     *wal.Log
	now     func() time.Time
	newID   func() string
	listing listingState
	// forks copies what a fork takes besides its log (WithForkCopier).
	forks ForkCopier
}

// ForkCopier copies what a repository keeps outside its log and its name
// record to a fork: its Git LFS references (docs/adr/0132-lfs-forks.md),
// implemented by internal/lfs, which meta does not know. ForkRepo calls it
// after the fork's log is copied and before the fork's name is claimed,
// so nobody sees the fork without them; an error fails the fork, which
// leaves no name and a tombstoned log. Tenants are display names
// (Repo.Owner), repository ids log ids.
type ForkCopier interface {
	CopyToFork(ctx context.Context, srcTenant, srcRepoID, dstTenant, dstRepoID string) error
}

// Option configures a Store.
type Option func(*Store)

// WithForkCopier makes ForkRepo copy through c. Without it a fork copies
// only its log and its settings.
func WithForkCopier(c ForkCopier) Option { return func(s *Store) { s.forks = c } }

// New returns a Store keeping metadata in objects and repository logs in
// log; both normally wrap the same object store.
func New(objects objstore.Store, log *wal.Log, opts ...Option) *Store {
	s := &Store{
		objects: objects,
		log:     log,
		now:     func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) },
		// ulid.Make is safe for concurrent use and monotonic within a
		// process; across processes the 80 random bits make collisions
		// negligible, and PutIfAbsent/Init would refuse one anyway.
		newID: func() string { return ulid.Make().String() },
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Log returns the repository log the store creates, forks and deletes in,
// so a server can share it rather than build a second one.
func (s *Store) Log() *wal.Log { return s.log }

// releaseTimeout bounds best-effort cleanups that run after the caller's
// context may already be done.
const releaseTimeout = 30 * time.Second
