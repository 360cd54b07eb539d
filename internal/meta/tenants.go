package meta

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strings"

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
	// The first tenant of a new installation finds the listing complete
	// (there is nothing to list) and marks it so; an error here is the
	// store's, and the writes below report it.
	_, _ = s.listingReady(ctx)
	rec := tenantRecord{V: recordVersion, Name: name, Kind: kind, CreatedAt: s.now()}
	intent, err := s.announceTenant(ctx, &rec)
	if err != nil {
		return Tenant{}, fmt.Errorf("create tenant %s: %w", name, err)
	}
	if _, err := s.createRecord(ctx, tenantKey(key), &rec); err != nil {
		if errors.Is(err, ErrExists) {
			s.abandon(intent)
			return Tenant{}, fmt.Errorf("tenant %s: %w", name, ErrExists)
		}
		return Tenant{}, fmt.Errorf("create tenant %s: %w", name, err)
	}
	s.finishTenant(key, &rec)
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

// RemoveMember takes user's membership of org away: from the next request
// on, on every node, user can no longer read org's private repositories
// or write to any of them (there is no cache to expire; see Store). org
// must be an org. user need not exist any more, so that a membership left
// behind can always be removed. ErrNotFound if user is not a member.
func (s *Store) RemoveMember(ctx context.Context, org, user string) error {
	o, err := s.Tenant(ctx, org)
	if err != nil {
		return fmt.Errorf("remove member: org: %w", err)
	}
	if o.Kind != KindOrg {
		return fmt.Errorf("%w: remove member: %s is a %s, not an org", ErrInvalidArgument, o.Name, o.Kind)
	}
	u, err := canon(user)
	if err != nil {
		return fmt.Errorf("remove member: user: %w", err)
	}
	key := memberKey(lower(o.Name), u)
	var rec memberRecord
	if _, err := s.getRecord(ctx, key, &rec); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("remove member: %s is not a member of %s: %w", user, o.Name, ErrNotFound)
		}
		return fmt.Errorf("remove member: %w", err)
	}
	if err := s.objects.Delete(ctx, key); err != nil {
		return fmt.Errorf("remove member %s from %s: %w", user, o.Name, err)
	}
	return nil
}

// DeleteTenant deletes a user or org. While the tenant owns live
// repositories it refuses with ErrNotEmpty, unless force is set: then each
// repository is deleted as DeleteRepo does (log tombstoned, name
// tombstoned), so a later tenant of the same name inherits nothing.
//
// The steps, in an order that leaves nothing usable behind a crash:
//
//  1. repositories (forced only);
//  2. memberships: the org's members, or the user's memberships in every
//     org, so a new tenant of the same name gets none of them;
//  3. the tenant record (announced in the listing first, and its
//     listing keys removed after): from here on its tokens stop authenticating,
//     because Authenticate checks that the token's tenant exists and is
//     the incarnation the token was minted for;
//  4. the tenant's tokens and SSH keys, which are then only garbage (and
//     would free the keys for another tenant).
//
// A crash before step 3 leaves the tenant in place and DeleteTenant can
// simply run again; after it, the leftovers grant nothing. A repository
// created or a member added concurrently with a delete may outlive the
// tenant; the delete is an operator action and is not meant to race them.
func (s *Store) DeleteTenant(ctx context.Context, name string, force bool) error {
	key, err := canon(name)
	if err != nil {
		return fmt.Errorf("delete tenant: %w", err)
	}
	t, err := s.Tenant(ctx, name)
	if err != nil {
		return fmt.Errorf("delete tenant: %w", err)
	}
	repos, err := s.ListRepos(ctx, t.Name)
	if err != nil {
		return fmt.Errorf("delete tenant %s: %w", t.Name, err)
	}
	if len(repos) > 0 && !force {
		return fmt.Errorf("delete tenant %s: %w: %d repositories (delete them first, or force the delete)", t.Name, ErrNotEmpty, len(repos))
	}
	for _, r := range repos {
		if err := s.DeleteRepo(ctx, r.Owner, r.Name); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("delete tenant %s: %w", t.Name, err)
		}
	}
	// Once the tenant is gone no list of it tidies its repositories'
	// listing keys: settle what the deletes above left unsettled now.
	if err := s.settleRepoNames(ctx, repoListPrefix+key+"/"); err != nil {
		return fmt.Errorf("delete tenant %s: %w", t.Name, err)
	}
	if err := s.deleteMemberships(ctx, key); err != nil {
		return fmt.Errorf("delete tenant %s: %w", t.Name, err)
	}
	// The deletion announces itself in the listing first, so that a
	// lister meeting the tenant's key meanwhile reads the record.
	var rec tenantRecord
	if _, err := s.getRecord(ctx, tenantKey(key), &rec); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("delete tenant %s: %w", t.Name, ErrNotFound)
		}
		return fmt.Errorf("delete tenant %s: %w", t.Name, err)
	}
	if err := s.putKey(ctx, tenantEntryOf(&rec, stateDeleted, s.now()).key()); err != nil {
		return fmt.Errorf("delete tenant %s: %w", t.Name, err)
	}
	if err := s.objects.Delete(ctx, tenantKey(key)); err != nil {
		return fmt.Errorf("delete tenant %s: %w", t.Name, err)
	}
	s.finishTenant(key, nil)
	if err := s.deleteTokens(ctx, key); err != nil {
		return fmt.Errorf("delete tenant %s: tenant deleted, but removing its tokens failed (they no longer authenticate): %w", t.Name, err)
	}
	if err := s.deleteSSHKeys(ctx, key); err != nil {
		return fmt.Errorf("delete tenant %s: tenant deleted, but removing its ssh keys failed (they no longer authenticate): %w", t.Name, err)
	}
	return nil
}

// deleteMemberships removes every membership record naming key, as the
// org (meta/members/<key>/...) or as the user (meta/members/*/<key>).
func (s *Store) deleteMemberships(ctx context.Context, key string) error {
	keys, err := s.listKeys(ctx, membersPrefix)
	if err != nil {
		return err
	}
	for _, k := range keys {
		org, user, ok := strings.Cut(strings.TrimPrefix(k, membersPrefix), "/")
		if !ok || org != key && user != key {
			continue
		}
		if err := s.objects.Delete(ctx, k); err != nil {
			return fmt.Errorf("delete membership %s: %w", k, err)
		}
	}
	return nil
}

// deleteTokens removes every token of tenant key: the lookup record, then
// the id record, as RevokeToken does.
func (s *Store) deleteTokens(ctx context.Context, key string) error {
	keys, err := s.listKeys(ctx, tokenIDsPrefix+key+"/")
	if err != nil {
		return err
	}
	for _, k := range keys {
		var rec tokenIDRecord
		if _, err := s.getRecord(ctx, k, &rec); err != nil {
			if errors.Is(err, objstore.ErrNotFound) {
				continue
			}
			return err
		}
		if len(rec.Hash) == sha256.Size*2 {
			if err := s.objects.Delete(ctx, tokenKey(rec.Hash)); err != nil {
				return fmt.Errorf("delete token %s: %w", rec.ID, err)
			}
		}
		if err := s.objects.Delete(ctx, k); err != nil {
			return fmt.Errorf("delete token %s: %w", rec.ID, err)
		}
	}
	return nil
}
