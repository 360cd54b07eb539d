package meta

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// errOutage is what failGet reports: an object store that cannot be
// reached, as opposed to one that reports a key absent.
var errOutage = errors.New("injected outage: connection refused")

// failGet wraps a store so that, while armed, every Get of a key under
// prefix fails with errOutage: a partial object-store outage.
type failGet struct {
	objstore.Store
	prefix string
	armed  atomic.Bool
}

func (f *failGet) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	if f.armed.Load() && strings.HasPrefix(key, f.prefix) {
		return nil, objstore.Info{}, errOutage
	}
	return f.Store.Get(ctx, key)
}

// TestAuthorizationReportsStorageErrors: during an outage of the
// membership records an org member's rights are neither granted nor
// reported as "no": every check returns false with an error wrapping
// ErrUnavailable (HTTP 503) and the store's own error.
func TestAuthorizationReportsStorageErrors(t *testing.T) {
	ctx := context.Background()
	objects := &failGet{Store: memstore.New(), prefix: membersPrefix}
	s := newStore(objects)
	mustTenant(t, s, "bob", KindUser)
	mustTenant(t, s, "acme", KindOrg)
	if err := s.AddMember(ctx, "acme", "bob"); err != nil {
		t.Fatal(err)
	}
	_, bob := mustToken(t, s, "bob", ScopeWrite)
	secret, err := s.CreateRepo(ctx, "acme", "secret", false)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.CanRead(ctx, bob, secret); !ok || err != nil {
		t.Fatalf("before the outage: CanRead = %v, %v", ok, err)
	}

	objects.armed.Store(true)
	checks := map[string]func() (bool, error){
		"CanRead":       func() (bool, error) { return s.CanRead(ctx, bob, secret) },
		"CanWrite":      func() (bool, error) { return s.CanWrite(ctx, bob, secret) },
		"CanWriteOwner": func() (bool, error) { return s.CanWriteOwner(ctx, bob, "acme") },
	}
	for name, check := range checks {
		ok, err := check()
		if ok {
			t.Errorf("%s granted during an outage", name)
		}
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errOutage) {
			t.Errorf("%s error = %v, want ErrUnavailable wrapping the outage", name, err)
		}
	}
	// The owner's own right needs no membership record, and a public
	// repository needs nothing: neither depends on the failing keys.
	if ok, err := s.CanRead(ctx, &Principal{Tenant: "acme", Scope: ScopeRead}, secret); !ok || err != nil {
		t.Errorf("org's own token: %v, %v", ok, err)
	}
	// A caller's cancellation is not an outage: it keeps its own kind.
	objects.armed.Store(false)
	objects.Store = cancelled{objects.Store}
	if ok, err := s.CanRead(ctx, bob, secret); ok || !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) {
		t.Errorf("cancelled: CanRead = %v, %v; want false, context.Canceled", ok, err)
	}
}

// cancelled fails every Get with context.Canceled.
type cancelled struct{ objstore.Store }

func (c cancelled) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	return nil, objstore.Info{}, context.Canceled
}

// TestAuthenticateReportsStorageErrors: a token that cannot be checked
// because the store fails is ErrUnavailable, not ErrUnauthenticated (which
// would tell its holder the token is bad).
func TestAuthenticateReportsStorageErrors(t *testing.T) {
	ctx := context.Background()
	for _, prefix := range []string{tokensPrefix, tenantsPrefix} {
		objects := &failGet{Store: memstore.New(), prefix: prefix}
		s := newStore(objects)
		mustTenant(t, s, "alice", KindUser)
		plain, _ := mustToken(t, s, "alice", ScopeRead)
		objects.armed.Store(true)
		_, err := s.Authenticate(ctx, plain)
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrUnauthenticated) {
			t.Errorf("outage of %s: Authenticate error %v, want ErrUnavailable", prefix, err)
		}
	}
}

func TestRemoveMember(t *testing.T) {
	ctx := context.Background()
	s := newStore(memstore.New())
	mustTenant(t, s, "bob", KindUser)
	mustTenant(t, s, "acme", KindOrg)
	if err := s.AddMember(ctx, "acme", "bob"); err != nil {
		t.Fatal(err)
	}
	_, bob := mustToken(t, s, "bob", ScopeWrite)
	secret, err := s.CreateRepo(ctx, "acme", "secret", false)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.CanWrite(ctx, bob, secret); !ok || err != nil {
		t.Fatalf("member cannot write: %v, %v", ok, err)
	}
	if err := s.RemoveMember(ctx, "ACME", "Bob"); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Members(ctx, "acme"); err != nil || len(m) != 0 {
		t.Errorf("members after removal: %v, %v", m, err)
	}
	for name, check := range map[string]func() (bool, error){
		"CanRead":       func() (bool, error) { return s.CanRead(ctx, bob, secret) },
		"CanWrite":      func() (bool, error) { return s.CanWrite(ctx, bob, secret) },
		"CanWriteOwner": func() (bool, error) { return s.CanWriteOwner(ctx, bob, "acme") },
	} {
		if ok, err := check(); ok || err != nil {
			t.Errorf("removed member: %s = %v, %v", name, ok, err)
		}
	}
	if err := s.RemoveMember(ctx, "acme", "bob"); !errors.Is(err, ErrNotFound) {
		t.Errorf("removing a non-member: %v, want ErrNotFound", err)
	}
	if err := s.RemoveMember(ctx, "bob", "acme"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("removing from a user: %v, want ErrInvalidArgument", err)
	}
	if err := s.RemoveMember(ctx, "nobody", "bob"); !errors.Is(err, ErrNotFound) {
		t.Errorf("removing from a missing org: %v, want ErrNotFound", err)
	}
	if err := s.RemoveMember(ctx, "acme", "../x"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("removing a bad name: %v, want ErrInvalidName", err)
	}
}

// steppingClock makes every tenant's creation time distinct, as it is in
// practice, so tests can recreate a name at once.
func steppingClock(s *Store) {
	var n atomic.Int64
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return base.Add(time.Duration(n.Add(1)) * time.Millisecond) }
}

func TestDeleteTenant(t *testing.T) {
	ctx := context.Background()
	objects := memstore.New()
	s := newStore(objects)
	steppingClock(s)
	mustTenant(t, s, "alice", KindUser)
	mustTenant(t, s, "bob", KindUser)
	mustTenant(t, s, "acme", KindOrg)
	if err := s.AddMember(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMember(ctx, "acme", "bob"); err != nil {
		t.Fatal(err)
	}
	alicePlain, _ := mustToken(t, s, "alice", ScopeWrite)
	repo, err := s.CreateRepo(ctx, "alice", "proj", false)
	if err != nil {
		t.Fatal(err)
	}
	commitSomething(t, s.Log(), repo.ID)

	// Refused while alice owns a repository; nothing changes.
	if err := s.DeleteTenant(ctx, "alice", false); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("unforced delete of an owner: %v, want ErrNotEmpty (409)", err)
	}
	if _, err := s.Authenticate(ctx, alicePlain); err != nil {
		t.Fatalf("refused delete broke the token: %v", err)
	}
	if _, err := s.Repo(ctx, "alice", "proj"); err != nil {
		t.Fatalf("refused delete broke the repository: %v", err)
	}

	// Forced: the repository is deleted as DeleteRepo does, the tokens
	// and memberships go, and the token stops at once.
	if err := s.DeleteTenant(ctx, "Alice", true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Tenant(ctx, "alice"); !errors.Is(err, ErrNotFound) {
		t.Errorf("tenant after delete: %v", err)
	}
	if _, err := s.Repo(ctx, "alice", "proj"); !errors.Is(err, ErrNotFound) {
		t.Errorf("repository after forced delete: %v", err)
	}
	if _, err := s.Log().Head(ctx, repo.ID); !errors.Is(err, wal.ErrRepoDeleted) {
		t.Errorf("log after forced delete: %v, want ErrRepoDeleted", err)
	}
	if _, err := s.Authenticate(ctx, alicePlain); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("token of a deleted tenant: %v, want ErrUnauthenticated", err)
	}
	for _, prefix := range []string{tokenIDsPrefix + "alice/", membersPrefix + "acme/alice"} {
		if keys, err := s.listKeys(ctx, prefix); err != nil || len(keys) != 0 {
			t.Errorf("left behind under %s: %v, %v", prefix, keys, err)
		}
	}
	if m, err := s.Members(ctx, "acme"); err != nil || len(m) != 1 || m[0] != "bob" {
		t.Errorf("acme's members: %v, %v", m, err)
	}

	// A new alice inherits nothing: no repository, no membership, and the
	// old token stays dead.
	mustTenant(t, s, "alice", KindUser)
	_, newAlice := mustToken(t, s, "alice", ScopeWrite)
	if rs, err := s.ListRepos(ctx, "alice"); err != nil || len(rs) != 0 {
		t.Errorf("new alice's repositories: %v, %v", rs, err)
	}
	if ok, err := s.CanWriteOwner(ctx, newAlice, "acme"); ok || err != nil {
		t.Errorf("new alice inherited the membership: %v, %v", ok, err)
	}
	if _, err := s.Authenticate(ctx, alicePlain); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("old token after the name was recreated: %v", err)
	}

	// An org's delete takes its memberships with it.
	if err := s.DeleteTenant(ctx, "acme", false); err != nil {
		t.Fatal(err)
	}
	if keys, err := s.listKeys(ctx, membersPrefix); err != nil || len(keys) != 0 {
		t.Errorf("memberships left after the org's delete: %v, %v", keys, err)
	}
	if err := s.DeleteTenant(ctx, "acme", false); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting twice: %v, want ErrNotFound", err)
	}
	if err := s.DeleteTenant(ctx, ".x", false); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad name: %v, want ErrInvalidName", err)
	}
}

// TestTokenNeedsItsTenant: a token whose tenant record is gone (or was
// replaced by a new tenant of the same name) does not authenticate, even
// if its token records were left behind, say by a crash in DeleteTenant
// or a record removed by hand.
func TestTokenNeedsItsTenant(t *testing.T) {
	ctx := context.Background()
	objects := memstore.New()
	s := newStore(objects)
	steppingClock(s)
	mustTenant(t, s, "alice", KindUser)
	plain, _ := mustToken(t, s, "alice", ScopeWrite)

	if err := objects.Delete(ctx, tenantKey("alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, plain); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("token of a tenant whose record is gone: %v, want ErrUnauthenticated", err)
	}
	mustTenant(t, s, "alice", KindUser)
	if _, err := s.Authenticate(ctx, plain); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("token of the previous tenant of the name: %v, want ErrUnauthenticated", err)
	}
	fresh, _ := mustToken(t, s, "alice", ScopeWrite)
	if _, err := s.Authenticate(ctx, fresh); err != nil {
		t.Fatalf("the new tenant's token: %v", err)
	}
}

// TestLeadingDotRefusedAtCreation: a name the git router cannot route is
// refused when it would be created, for tenants and repositories alike.
func TestLeadingDotRefusedAtCreation(t *testing.T) {
	ctx := context.Background()
	s := newStore(memstore.New())
	mustTenant(t, s, "alice", KindUser)
	if _, err := s.CreateTenant(ctx, ".alice", KindUser); !errors.Is(err, ErrInvalidName) {
		t.Errorf("CreateTenant(.alice): %v", err)
	}
	if _, err := s.CreateRepo(ctx, "alice", ".github", true); !errors.Is(err, ErrInvalidName) {
		t.Errorf("CreateRepo(alice/.github): %v", err)
	}
	if _, err := s.CreateRepo(ctx, "alice", "src", true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForkRepo(ctx, "alice", "src", "alice", ".fork"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("ForkRepo to alice/.fork: %v", err)
	}
}
