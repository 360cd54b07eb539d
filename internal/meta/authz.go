package meta

import "context"

// CanRead reports whether p (nil: anonymous) may read r: anyone for a
// public repository; for a private one the owning tenant, a member of the
// owning org, or an admin. Any token scope suffices, read being the lowest.
// Storage errors deny: authorization fails closed.
func (s *Store) CanRead(ctx context.Context, p *Principal, r Repo) bool {
	if r.Public {
		return true
	}
	if p == nil || !p.Scope.Valid() {
		return false
	}
	return p.IsAdmin() || s.actsFor(ctx, p, r.Owner)
}

// CanWrite reports whether p may change r (push, delete, change
// visibility): a write-scope token of the owning tenant or of a member of
// the owning org, or an admin. Public visibility grants no write.
func (s *Store) CanWrite(ctx context.Context, p *Principal, r Repo) bool {
	return s.CanWriteOwner(ctx, p, r.Owner)
}

// CanWriteOwner reports whether p may create repositories under owner (or
// fork into it): the same rule as CanWrite, for a repository that does not
// exist yet.
func (s *Store) CanWriteOwner(ctx context.Context, p *Principal, owner string) bool {
	if p == nil || !p.Scope.Valid() {
		return false
	}
	if p.IsAdmin() {
		return true
	}
	return p.Scope >= ScopeWrite && s.actsFor(ctx, p, owner)
}

// actsFor reports whether p's tenant is owner or a member of org owner.
func (s *Store) actsFor(ctx context.Context, p *Principal, owner string) bool {
	if p.Tenant == "" || owner == "" {
		return false
	}
	if sameName(p.Tenant, owner) {
		return true
	}
	return s.isMember(ctx, owner, p.Tenant)
}
