package meta

import (
	"context"
	"errors"
	"fmt"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// The authorization checks return an error besides their answer so that a
// storage outage is never mistaken for "no": a caller that reported "no"
// as 404 would tell an owner their repository is gone, and nothing would
// be logged. On error the answer is always false (authorization fails
// closed), and the error wraps ErrUnavailable, which the API answers
// 503. See docs/adr/0021-meta-tokens-and-authorization.md.

// CanRead reports whether p (nil: anonymous) may read r: anyone for a
// public repository; for a private one the owning tenant, a member of the
// owning org, or an admin. Any token scope suffices, read being the lowest.
// A storage error is returned with false.
func (s *Store) CanRead(ctx context.Context, p *Principal, r Repo) (bool, error) {
	if r.Public {
		return true, nil
	}
	if p == nil || !p.Scope.Valid() {
		return false, nil
	}
	if p.IsAdmin() {
		return true, nil
	}
	return s.actsFor(ctx, p, r.Owner)
}

// CanWrite reports whether p may change r (push, delete, change
// visibility): a write-scope token of the owning tenant or of a member of
// the owning org, or an admin. Public visibility grants no write. A
// storage error is returned with false.
func (s *Store) CanWrite(ctx context.Context, p *Principal, r Repo) (bool, error) {
	return s.CanWriteOwner(ctx, p, r.Owner)
}

// CanAdminRepo reports whether p may change what guards r against its
// writers, its branch rules (docs/adr/0123-protected-branches.md): an
// admin-scope token, or a write token of the user that owns r. An org's
// members are all writers (there are no org roles yet), so an org's rules
// are an admin's to change.
func (s *Store) CanAdminRepo(p *Principal, r Repo) bool {
	if p == nil || !p.Scope.Valid() {
		return false
	}
	return p.IsAdmin() || p.Scope >= ScopeWrite && sameName(p.Tenant, r.Owner)
}

// CanWriteOwner reports whether p may create repositories under owner (or
// fork into it): the same rule as CanWrite, for a repository that does not
// exist yet. A storage error is returned with false.
func (s *Store) CanWriteOwner(ctx context.Context, p *Principal, owner string) (bool, error) {
	if p == nil || !p.Scope.Valid() {
		return false, nil
	}
	if p.IsAdmin() {
		return true, nil
	}
	if p.Scope < ScopeWrite {
		return false, nil
	}
	return s.actsFor(ctx, p, owner)
}

// actsFor reports whether p's tenant is owner or a member of org owner.
func (s *Store) actsFor(ctx context.Context, p *Principal, owner string) (bool, error) {
	if p.Tenant == "" || owner == "" {
		return false, nil
	}
	if sameName(p.Tenant, owner) {
		return true, nil
	}
	return s.isMember(ctx, owner, p.Tenant)
}

// isMember reports whether user belongs to org. A missing membership
// record is "no"; any other failure to read it is an error wrapping
// ErrUnavailable, with false.
func (s *Store) isMember(ctx context.Context, org, user string) (bool, error) {
	if ValidateName(org) != nil || ValidateName(user) != nil {
		return false, nil
	}
	var rec memberRecord
	_, err := s.getRecord(ctx, memberKey(lower(org), lower(user)), &rec)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, objstore.ErrNotFound):
		return false, nil
	}
	return false, unavailable(fmt.Errorf("membership of %s in %s: %w", user, org, err))
}

// unavailable marks err, a failed metadata read, as ErrUnavailable unless
// it is the caller's own cancellation, which no retry would cure and
// which must keep its own status.
func unavailable(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
