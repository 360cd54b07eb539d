package meta

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// CreateTenant creates a user or org. Of racing creators of one name (in
// any case), exactly one succeeds and the others get ErrExists. Names that
// would shadow the server's own paths (such as "api") are refused with
// ErrInvalidName.
func (s *Store) CreateTenant(ctx context.Context, name, kind string) (Tenant, error) {
	key, err := canon(name)
	if err != nil {
		return Tenant{}, fmt.Errorf("tenant: %w", err)
	}
	if reservedTenant(key) {
		return Tenant{}, fmt.Errorf("%w: tenant %q: reserved for the server's own paths", ErrInvalidName, name)
	}
	if kind != KindUser && kind != KindOrg {
		return Tenant{}, fmt.Errorf("%w: tenant kind %q: want %q or %q", ErrInvalidArgument, kind, KindUser, KindOrg)
	}
	rec := tenantRecord{V: recordVersion, Name: name, Kind: kind, CreatedAt: s.now()}
	if _, err := s.createRecord(ctx, tenantKey(key), &rec); err != nil {
		if errors.Is(err, ErrExists) {
			return Tenant{}, fmt.Errorf("tenant %s: %w", name, ErrExists)
		}
		return Tenant{}, fmt.Errorf("create tenant %s: %w", name, err)
	}
	return rec.tenant(), nil
}

// Tenant returns the named tenant (case-insensitive): ErrNotFound if there
// is none.
func (s *Store) Tenant(ctx context.Context, name string) (Tenant, error) {
	key, err := canon(name)
	if err != nil {
		return Tenant{}, fmt.Errorf("tenant: %w", err)
	}
	var rec tenantRecord
	if _, err := s.getRecord(ctx, tenantKey(key), &rec); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return Tenant{}, fmt.Errorf("tenant %s: %w", name, ErrNotFound)
		}
		return Tenant{}, err
	}
	return rec.tenant(), nil
}

// ListTenants returns every tenant, ordered by key (lowercase name).
func (s *Store) ListTenants(ctx context.Context) ([]Tenant, error) {
	keys, err := s.listKeys(ctx, tenantsPrefix)
	if err != nil {
		return nil, err
	}
	out := make([]Tenant, 0, len(keys))
	for _, k := range keys {
		var rec tenantRecord
		if _, err := s.getRecord(ctx, k, &rec); err != nil {
			if errors.Is(err, objstore.ErrNotFound) {
				continue
			}
			return nil, err
		}
		out = append(out, rec.tenant())
	}
	return out, nil
}

// AddMember lets user act on org's repositories (read private ones; push,
// create and delete with a write token). org must be an org and user a
// user. Adding an existing member is not an error, so scripts may repeat it.
func (s *Store) AddMember(ctx context.Context, org, user string) error {
	o, err := s.Tenant(ctx, org)
	if err != nil {
		return fmt.Errorf("add member: org: %w", err)
	}
	if o.Kind != KindOrg {
		return fmt.Errorf("%w: add member: %s is a %s, not an org", ErrInvalidArgument, o.Name, o.Kind)
	}
	u, err := s.Tenant(ctx, user)
	if err != nil {
		return fmt.Errorf("add member: user: %w", err)
	}
	if u.Kind != KindUser {
		return fmt.Errorf("%w: add member: %s is a %s, not a user", ErrInvalidArgument, u.Name, u.Kind)
	}
	rec := memberRecord{V: recordVersion, Org: o.Name, User: u.Name, AddedAt: s.now()}
	_, err = s.createRecord(ctx, memberKey(lower(o.Name), lower(u.Name)), &rec)
	if err != nil && !errors.Is(err, ErrExists) {
		return fmt.Errorf("add member %s to %s: %w", u.Name, o.Name, err)
	}
	return nil
}

// Members returns the user names that belong to org, sorted.
func (s *Store) Members(ctx context.Context, org string) ([]string, error) {
	o, err := s.Tenant(ctx, org)
	if err != nil {
		return nil, err
	}
	keys, err := s.listKeys(ctx, membersPrefix+lower(o.Name)+"/")
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		var rec memberRecord
		if _, err := s.getRecord(ctx, k, &rec); err != nil {
			if errors.Is(err, objstore.ErrNotFound) {
				continue
			}
			return nil, err
		}
		out = append(out, rec.User)
	}
	sort.Strings(out)
	return out, nil
}

// isMember reports whether user belongs to org. Storage errors count as
// "no": authorization fails closed.
func (s *Store) isMember(ctx context.Context, org, user string) bool {
	if ValidateName(org) != nil || ValidateName(user) != nil {
		return false
	}
	var rec memberRecord
	_, err := s.getRecord(ctx, memberKey(lower(org), lower(user)), &rec)
	return err == nil
}
