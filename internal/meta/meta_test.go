package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// backends runs fn once per object-store backend.
func backends(t *testing.T, fn func(t *testing.T, objects objstore.Store)) {
	t.Run("memstore", func(t *testing.T) { fn(t, memstore.New()) })
	t.Run("fsstore", func(t *testing.T) {
		fs, err := fsstore.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		fn(t, fs)
	})
}

func newStore(objects objstore.Store) *Store {
	return New(objects, wal.New(objects, wal.Options{Sleep: func(context.Context, time.Duration) error { return nil }}))
}

func mustTenant(t *testing.T, s *Store, name, kind string) {
	t.Helper()
	if _, err := s.CreateTenant(context.Background(), name, kind); err != nil {
		t.Fatalf("CreateTenant(%s): %v", name, err)
	}
}

func mustToken(t *testing.T, s *Store, tenant string, scope Scope) (string, *Principal) {
	t.Helper()
	ctx := context.Background()
	plain, _, err := s.CreateToken(ctx, tenant, scope, "test")
	if err != nil {
		t.Fatalf("CreateToken(%s): %v", tenant, err)
	}
	p, err := s.Authenticate(ctx, plain)
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	return plain, &p
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"alice", true},
		{"Alice-Repo_1.x", true},
		{".github", false}, // the git router refuses a leading '.'
		{".x", false},
		{"a..b", true},
		{"git", true},
		{"x.gitx", true},
		{strings.Repeat("a", MaxNameLen), true},
		{strings.Repeat("a", MaxNameLen+1), false},
		{"", false},
		{".", false},
		{"..", false},
		{"../etc", false},
		{"a/b", false},
		{"a\\b", false},
		{"/abs", false},
		{"a b", false},
		{"a\x00b", false},
		{"a\nb", false},
		{"-rf", false},
		{"x.git", false},
		{"x.GIT", false},
		{".git", false},
		{"café", false},
		{"ａｌｉｃｅ", false},    // full-width letters
		{"a\u2024b", false}, // one dot leader, looks like "."
		{"a%2e", false},
	}
	for _, tt := range tests {
		err := ValidateName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateName(%q) error %v does not wrap ErrInvalidName", tt.name, err)
		}
	}
}

func TestScope(t *testing.T) {
	for _, sc := range []Scope{ScopeRead, ScopeWrite, ScopeAdmin} {
		got, err := ParseScope(strings.ToUpper(sc.String()))
		if err != nil || got != sc {
			t.Errorf("ParseScope(%q) = %v, %v", sc, got, err)
		}
		b, err := sc.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Scope
		if err := back.UnmarshalText(b); err != nil || back != sc {
			t.Errorf("text round trip of %v: %v, %v", sc, back, err)
		}
	}
	if !(ScopeRead < ScopeWrite && ScopeWrite < ScopeAdmin) {
		t.Error("scopes are not ordered")
	}
	for _, bad := range []string{"", "root", "readwrite", "0"} {
		if _, err := ParseScope(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ParseScope(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	if _, err := Scope(0).MarshalText(); err == nil {
		t.Error("MarshalText of the zero scope succeeded")
	}
}

func TestTenants(t *testing.T) {
	backends(t, func(t *testing.T, objects objstore.Store) {
		ctx := context.Background()
		s := newStore(objects)
		ten, err := s.CreateTenant(ctx, "Alice", KindUser)
		if err != nil {
			t.Fatal(err)
		}
		if ten.Name != "Alice" || ten.Kind != KindUser || ten.CreatedAt.IsZero() {
			t.Errorf("created %+v", ten)
		}
		cases := []struct {
			name, kind string
			want       error
		}{
			{"alice", KindUser, ErrExists}, // names are case-insensitive
			{"ALICE", KindOrg, ErrExists},
			{"api", KindUser, ErrInvalidName}, // shadows /api/
			{"API", KindOrg, ErrInvalidName},
			{"../x", KindUser, ErrInvalidName},
			{"bob", "robot", ErrInvalidArgument},
			{"bob", "", ErrInvalidArgument},
		}
		for _, c := range cases {
			if _, err := s.CreateTenant(ctx, c.name, c.kind); !errors.Is(err, c.want) {
				t.Errorf("CreateTenant(%q, %q) = %v, want %v", c.name, c.kind, err, c.want)
			}
		}
		mustTenant(t, s, "acme", KindOrg)
		got, err := s.Tenant(ctx, "ALICE")
		if err != nil || got.Name != "Alice" {
			t.Errorf("Tenant(ALICE) = %+v, %v", got, err)
		}
		if _, err := s.Tenant(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Tenant(nobody) = %v, want ErrNotFound", err)
		}
		list, err := s.ListTenants(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].Name != "acme" || list[1].Name != "Alice" {
			t.Errorf("ListTenants = %+v", list)
		}

		// Membership: org must be an org, user a user, both must exist.
		if err := s.AddMember(ctx, "acme", "alice"); err != nil {
			t.Fatal(err)
		}
		if err := s.AddMember(ctx, "ACME", "Alice"); err != nil {
			t.Errorf("repeated AddMember = %v, want nil", err)
		}
		for _, c := range []struct {
			org, user string
			want      error
		}{
			{"alice", "acme", ErrInvalidArgument},
			{"acme", "acme", ErrInvalidArgument},
			{"nope", "alice", ErrNotFound},
			{"acme", "nope", ErrNotFound},
			{"acme", "..", ErrInvalidName},
		} {
			if err := s.AddMember(ctx, c.org, c.user); !errors.Is(err, c.want) {
				t.Errorf("AddMember(%s, %s) = %v, want %v", c.org, c.user, err, c.want)
			}
		}
		members, err := s.Members(ctx, "acme")
		if err != nil || len(members) != 1 || members[0] != "Alice" {
			t.Errorf("Members = %v, %v", members, err)
		}
	})
}

func TestCreateRace(t *testing.T) {
	backends(t, func(t *testing.T, objects objstore.Store) {
		ctx := context.Background()
		s := newStore(objects)
		mustTenant(t, s, "alice", KindUser)

		race := func(what string, create func(i int) error) {
			t.Helper()
			const n = 16
			var wg sync.WaitGroup
			errs := make([]error, n)
			start := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					errs[i] = create(i)
				}()
			}
			close(start)
			wg.Wait()
			wins := 0
			for i, err := range errs {
				switch {
				case err == nil:
					wins++
				case !errors.Is(err, ErrExists):
					t.Errorf("%s: creator %d: %v, want nil or ErrExists", what, i, err)
				}
			}
			if wins != 1 {
				t.Errorf("%s: %d creators won, want exactly 1", what, wins)
			}
		}

		race("tenant", func(i int) error {
			// Different cases of one name race too.
			name := "Bob"
			if i%2 == 1 {
				name = "bob"
			}
			_, err := s.CreateTenant(ctx, name, KindUser)
			return err
		})
		race("repo", func(int) error {
			_, err := s.CreateRepo(ctx, "alice", "proj", false)
			return err
		})
		first, err := s.Repo(ctx, "alice", "proj")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteRepo(ctx, "alice", "proj"); err != nil {
			t.Fatal(err)
		}
		// Re-creating over the name's tombstone is a CAS race too.
		race("recreate", func(int) error {
			_, err := s.CreateRepo(ctx, "alice", "PROJ", true)
			return err
		})
		second, err := s.Repo(ctx, "alice", "proj")
		if err != nil {
			t.Fatal(err)
		}
		if second.ID == first.ID {
			t.Error("recreated repository reused the old id")
		}
		// Only one log was created per winner: losers leave no index.
		var indexes int
		if err := objstore.Walk(ctx, objects, "repos/", func(o objstore.Info) error {
			if strings.HasSuffix(o.Key, "/index") {
				indexes++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if indexes != 2 {
			t.Errorf("%d repository indexes after two winning creates, want 2", indexes)
		}
	})
}

func TestTokenLifecycle(t *testing.T) {
	backends(t, func(t *testing.T, objects objstore.Store) {
		ctx := context.Background()
		s := newStore(objects)
		mustTenant(t, s, "Alice", KindUser)

		plain, tok, err := s.CreateToken(ctx, "alice", ScopeWrite, "laptop")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(plain, TokenPrefix) || len(plain) != tokenLen {
			t.Errorf("plaintext %q: wrong shape", plain)
		}
		if tok.Tenant != "Alice" || tok.Scope != ScopeWrite || tok.Description != "laptop" || tok.ID == "" {
			t.Errorf("token %+v", tok)
		}
		// The plaintext is stored nowhere.
		if err := objstore.Walk(ctx, objects, "", func(o objstore.Info) error {
			b, _, err := objstore.ReadAll(ctx, objects, o.Key, 1<<20)
			if err != nil {
				return err
			}
			if bytes.Contains(b, []byte(plain)) || bytes.Contains(b, []byte(plain[len(TokenPrefix):])) {
				t.Errorf("object %s contains the plaintext token", o.Key)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}

		p, err := s.Authenticate(ctx, plain)
		if err != nil {
			t.Fatal(err)
		}
		if want := (Principal{Tenant: "Alice", TokenID: tok.ID, Scope: ScopeWrite}); p != want {
			t.Errorf("Authenticate = %+v, want %+v", p, want)
		}

		other, _, err := s.CreateToken(ctx, "alice", ScopeRead, "")
		if err != nil {
			t.Fatal(err)
		}
		if other == plain {
			t.Fatal("two tokens share a plaintext")
		}
		list, err := s.ListTokens(ctx, "ALICE")
		if err != nil || len(list) != 2 {
			t.Fatalf("ListTokens = %+v, %v", list, err)
		}

		// Wrong and malformed tokens.
		flipped := []byte(plain)
		if flipped[len(flipped)-1] == 'a' {
			flipped[len(flipped)-1] = 'b'
		} else {
			flipped[len(flipped)-1] = 'a'
		}
		for _, bad := range []string{
			"", "ghost_", "x", string(flipped),
			strings.ToUpper(plain),                     // alphabet is lowercase
			"ghp_" + plain[len(TokenPrefix):],          // wrong prefix
			plain + "a",                                // too long
			plain[:len(plain)-1],                       // too short
			plain[:len(plain)-1] + "1",                 // '1' is not base32
			"ghost_" + strings.Repeat("../", 17) + "a", // traversal-shaped
		} {
			if _, err := s.Authenticate(ctx, bad); !errors.Is(err, ErrUnauthenticated) {
				t.Errorf("Authenticate(%q) = %v, want ErrUnauthenticated", bad, err)
			}
		}

		// Creating for a missing tenant, with a bad scope or description.
		if _, _, err := s.CreateToken(ctx, "nobody", ScopeRead, ""); !errors.Is(err, ErrNotFound) {
			t.Errorf("CreateToken(nobody) = %v", err)
		}
		if _, _, err := s.CreateToken(ctx, "alice", Scope(9), ""); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("CreateToken(scope 9) = %v", err)
		}
		if _, _, err := s.CreateToken(ctx, "alice", ScopeRead, "a\x1bb"); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("CreateToken(control char) = %v", err)
		}
		if _, _, err := s.CreateToken(ctx, "alice", ScopeRead, strings.Repeat("d", MaxDescriptionLen+1)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("CreateToken(long description) = %v", err)
		}

		// Revoke: another tenant cannot name it; the owner can, once.
		mustTenant(t, s, "mallory", KindUser)
		if err := s.RevokeToken(ctx, "mallory", tok.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("RevokeToken by another tenant = %v, want ErrNotFound", err)
		}
		if err := s.RevokeToken(ctx, "alice", tok.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Authenticate(ctx, plain); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("Authenticate after revoke = %v, want ErrUnauthenticated", err)
		}
		if err := s.RevokeToken(ctx, "alice", tok.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("second RevokeToken = %v, want ErrNotFound", err)
		}
		if err := s.RevokeToken(ctx, "alice", "../x"); !errors.Is(err, ErrNotFound) {
			t.Errorf("RevokeToken(../x) = %v, want ErrNotFound", err)
		}
		if _, err := s.Authenticate(ctx, other); err != nil {
			t.Errorf("the other token stopped working: %v", err)
		}
		if list, _ := s.ListTokens(ctx, "alice"); len(list) != 1 {
			t.Errorf("ListTokens after revoke = %+v", list)
		}
	})
}

func TestAuthorizationMatrix(t *testing.T) {
	backends(t, func(t *testing.T, objects objstore.Store) {
		ctx := context.Background()
		s := newStore(objects)
		mustTenant(t, s, "alice", KindUser)
		mustTenant(t, s, "bob", KindUser)
		mustTenant(t, s, "carol", KindUser)
		mustTenant(t, s, "acme", KindOrg)
		mustTenant(t, s, "root", KindUser)
		if err := s.AddMember(ctx, "acme", "bob"); err != nil {
			t.Fatal(err)
		}

		_, aliceRead := mustToken(t, s, "alice", ScopeRead)
		_, aliceWrite := mustToken(t, s, "alice", ScopeWrite)
		aliceUpper := &Principal{Tenant: "ALICE", Scope: ScopeWrite} // owner matched case-insensitively
		_, bobRead := mustToken(t, s, "bob", ScopeRead)
		_, bobWrite := mustToken(t, s, "bob", ScopeWrite)
		_, carolWrite := mustToken(t, s, "carol", ScopeWrite)
		_, admin := mustToken(t, s, "root", ScopeAdmin)
		_, acmeWrite := mustToken(t, s, "acme", ScopeWrite)
		noScope := &Principal{Tenant: "alice"}

		repos := map[string]Repo{}
		for _, r := range []struct {
			owner, name string
			public      bool
		}{{"alice", "pub", true}, {"alice", "priv", false}, {"acme", "pub", true}, {"acme", "priv", false}} {
			repo, err := s.CreateRepo(ctx, r.owner, r.name, r.public)
			if err != nil {
				t.Fatal(err)
			}
			repos[r.owner+"/"+r.name] = repo
		}

		type want struct{ read, write bool }
		tests := []struct {
			who  string
			p    *Principal
			want map[string]want
		}{
			{"anonymous", nil, map[string]want{"alice/pub": {true, false}, "alice/priv": {false, false}, "acme/pub": {true, false}, "acme/priv": {false, false}}},
			{"no scope", noScope, map[string]want{"alice/pub": {true, false}, "alice/priv": {false, false}, "acme/pub": {true, false}, "acme/priv": {false, false}}},
			{"owner read", aliceRead, map[string]want{"alice/pub": {true, false}, "alice/priv": {true, false}, "acme/pub": {true, false}, "acme/priv": {false, false}}},
			{"owner write", aliceWrite, map[string]want{"alice/pub": {true, true}, "alice/priv": {true, true}, "acme/pub": {true, false}, "acme/priv": {false, false}}},
			{"owner other case", aliceUpper, map[string]want{"alice/pub": {true, true}, "alice/priv": {true, true}, "acme/pub": {true, false}, "acme/priv": {false, false}}},
			{"member read", bobRead, map[string]want{"alice/pub": {true, false}, "alice/priv": {false, false}, "acme/pub": {true, false}, "acme/priv": {true, false}}},
			{"member write", bobWrite, map[string]want{"alice/pub": {true, false}, "alice/priv": {false, false}, "acme/pub": {true, true}, "acme/priv": {true, true}}},
			{"other tenant", carolWrite, map[string]want{"alice/pub": {true, false}, "alice/priv": {false, false}, "acme/pub": {true, false}, "acme/priv": {false, false}}},
			{"org's own token", acmeWrite, map[string]want{"alice/pub": {true, false}, "alice/priv": {false, false}, "acme/pub": {true, true}, "acme/priv": {true, true}}},
			{"admin", admin, map[string]want{"alice/pub": {true, true}, "alice/priv": {true, true}, "acme/pub": {true, true}, "acme/priv": {true, true}}},
		}
		for _, tt := range tests {
			for name, w := range tt.want {
				r := repos[name]
				if got, err := s.CanRead(ctx, tt.p, r); got != w.read || err != nil {
					t.Errorf("%s CanRead(%s) = %v, %v; want %v", tt.who, name, got, err, w.read)
				}
				if got, err := s.CanWrite(ctx, tt.p, r); got != w.write || err != nil {
					t.Errorf("%s CanWrite(%s) = %v, %v; want %v", tt.who, name, got, err, w.write)
				}
			}
		}
		carolOK, _ := s.CanWriteOwner(ctx, carolWrite, "acme")
		bobOK, _ := s.CanWriteOwner(ctx, bobWrite, "acme")
		bobReadOK, _ := s.CanWriteOwner(ctx, bobRead, "acme")
		if carolOK || !bobOK || bobReadOK {
			t.Error("CanWriteOwner disagrees with CanWrite")
		}
	})
}

// failInit wraps a store so that writing any repository index fails, to
// exercise CreateRepo's release of the name.
type failInit struct{ objstore.Store }

func (f failInit) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	if strings.HasPrefix(key, "repos/") {
		return objstore.Info{}, errors.New("injected: bucket unavailable")
	}
	return f.Store.PutIfAbsent(ctx, key, r, size)
}

func TestCreateRepoReleasesNameWhenInitFails(t *testing.T) {
	ctx := context.Background()
	objects := memstore.New()
	good := newStore(objects)
	mustTenant(t, good, "alice", KindUser)
	bad := New(failInit{objects}, wal.New(failInit{objects}, wal.Options{}))
	if _, err := bad.CreateRepo(ctx, "alice", "proj", false); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("CreateRepo with failing log = %v, want the injected error", err)
	}
	if _, err := good.Repo(ctx, "alice", "proj"); !errors.Is(err, ErrNotFound) {
		t.Errorf("name after failed create: %v, want ErrNotFound", err)
	}
	if _, err := good.CreateRepo(ctx, "alice", "proj", false); err != nil {
		t.Errorf("create after failed create: %v", err)
	}
}

func TestRepoLifecycle(t *testing.T) {
	backends(t, func(t *testing.T, objects objstore.Store) {
		ctx := context.Background()
		s := newStore(objects)
		mustTenant(t, s, "Alice", KindUser)

		r, err := s.CreateRepo(ctx, "alice", "Proj", false)
		if err != nil {
			t.Fatal(err)
		}
		if r.Owner != "Alice" || r.Name != "Proj" || r.Public || r.ID == "" || r.ForkedFrom != "" {
			t.Errorf("created %+v", r)
		}
		if err := wal.CheckRepoID(r.ID); err != nil {
			t.Errorf("repo id: %v", err)
		}
		if x, err := s.log.Head(ctx, r.ID); err != nil || x.Seq != 0 {
			t.Errorf("log after create: %+v, %v", x, err)
		}
		for _, name := range []string{"Proj", "proj", "proj.git", "PROJ.GIT"} {
			got, err := s.Repo(ctx, "ALICE", name)
			if err != nil || got.ID != r.ID {
				t.Errorf("Repo(ALICE, %s) = %+v, %v", name, got, err)
			}
		}
		for _, c := range []struct {
			owner, name string
			want        error
		}{
			{"alice", "nope", ErrNotFound},
			{"nobody", "proj", ErrNotFound},
			{"alice", "proj.git.git", ErrInvalidName},
			{"alice", "..", ErrInvalidName},
			{"..", "proj", ErrInvalidName},
			{"alice", ".git", ErrInvalidName},
		} {
			if _, err := s.Repo(ctx, c.owner, c.name); !errors.Is(err, c.want) {
				t.Errorf("Repo(%s, %s) = %v, want %v", c.owner, c.name, err, c.want)
			}
		}
		for _, c := range []struct {
			owner, name string
			want        error
		}{
			{"alice", "proj", ErrExists},
			{"alice", "x.git", ErrInvalidName},
			{"alice", "a/b", ErrInvalidName},
			{"nobody", "x", ErrNotFound},
		} {
			if _, err := s.CreateRepo(ctx, c.owner, c.name, true); !errors.Is(err, c.want) {
				t.Errorf("CreateRepo(%s, %s) = %v, want %v", c.owner, c.name, err, c.want)
			}
		}

		// Visibility.
		if err := s.SetVisibility(ctx, "alice", "proj.git", true); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Repo(ctx, "alice", "proj"); !got.Public || got.ID != r.ID {
			t.Errorf("after SetVisibility: %+v", got)
		}
		if err := s.SetVisibility(ctx, "alice", "nope", true); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetVisibility(nope) = %v", err)
		}

		if _, err := s.CreateRepo(ctx, "alice", "other", false); err != nil {
			t.Fatal(err)
		}
		list, err := s.ListRepos(ctx, "alice")
		if err != nil || len(list) != 2 || list[0].Name != "other" || list[1].Name != "Proj" {
			t.Errorf("ListRepos = %+v, %v", list, err)
		}
		if _, err := s.ListRepos(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
			t.Errorf("ListRepos(nobody) = %v", err)
		}

		// Delete, then recreate: new id, the old log stays tombstoned.
		commitSomething(t, s.log, r.ID)
		if err := s.DeleteRepo(ctx, "alice", "PROJ.git"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Repo(ctx, "alice", "proj"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Repo after delete = %v, want ErrNotFound", err)
		}
		if err := s.DeleteRepo(ctx, "alice", "proj"); !errors.Is(err, ErrNotFound) {
			t.Errorf("second delete = %v, want ErrNotFound", err)
		}
		if err := s.SetVisibility(ctx, "alice", "proj", false); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetVisibility after delete = %v, want ErrNotFound", err)
		}
		if list, _ := s.ListRepos(ctx, "alice"); len(list) != 1 {
			t.Errorf("ListRepos after delete = %+v", list)
		}
		r2, err := s.CreateRepo(ctx, "alice", "proj", true)
		if err != nil {
			t.Fatal(err)
		}
		if r2.ID == r.ID || r2.Name != "proj" || !r2.Public {
			t.Errorf("recreated %+v (old id %s)", r2, r.ID)
		}
		if _, err := s.log.Head(ctx, r.ID); !errors.Is(err, wal.ErrRepoDeleted) {
			t.Errorf("old log after recreate: %v, want ErrRepoDeleted", err)
		}
		if x, err := s.log.Head(ctx, r2.ID); err != nil || len(x.Refs) != 0 {
			t.Errorf("new log: %+v, %v", x, err)
		}
		var entries int
		if err := objstore.Walk(ctx, objects, "repos/"+r.ID+"/entries/", func(objstore.Info) error { entries++; return nil }); err != nil {
			t.Fatal(err)
		}
		if entries != 0 {
			t.Errorf("%d entries of the deleted log were not purged", entries)
		}
	})
}

func TestDeleteFinishesAfterCrash(t *testing.T) {
	// A delete that tombstoned the log but crashed before releasing the
	// name is completed by running it again.
	ctx := context.Background()
	s := newStore(memstore.New())
	mustTenant(t, s, "alice", KindUser)
	r, err := s.CreateRepo(ctx, "alice", "proj", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.log.Delete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRepo(ctx, "alice", "proj"); err != nil {
		t.Fatalf("DeleteRepo over a tombstoned log: %v", err)
	}
	if _, err := s.Repo(ctx, "alice", "proj"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Repo = %v, want ErrNotFound", err)
	}
}

func TestFork(t *testing.T) {
	backends(t, func(t *testing.T, objects objstore.Store) {
		ctx := context.Background()
		s := newStore(objects)
		mustTenant(t, s, "alice", KindUser)
		mustTenant(t, s, "Bob", KindUser)
		src, err := s.CreateRepo(ctx, "alice", "proj", true)
		if err != nil {
			t.Fatal(err)
		}
		commitSomething(t, s.log, src.ID)
		commitSomething(t, s.log, src.ID)
		srcHead, err := s.log.Head(ctx, src.ID)
		if err != nil {
			t.Fatal(err)
		}

		f, err := s.ForkRepo(ctx, "alice", "proj.git", "bob", "mine")
		if err != nil {
			t.Fatal(err)
		}
		if f.ID == src.ID || f.Owner != "Bob" || f.Name != "mine" || f.ForkedFrom != "alice/proj" || !f.Public {
			t.Errorf("fork %+v", f)
		}
		got, err := s.log.Head(ctx, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Seq != srcHead.Seq || len(got.Layers) != 2 || fmt.Sprint(got.Refs) != fmt.Sprint(srcHead.Refs) {
			t.Errorf("forked index %+v, source %+v", got, srcHead)
		}
		for _, l := range got.Layers {
			a := readPack(t, s.log, src.ID, l)
			b := readPack(t, s.log, f.ID, l)
			if !bytes.Equal(a, b) || len(a) == 0 {
				t.Errorf("layer %s differs between source and fork", l.ULID)
			}
		}
		// The fork is independent: deleting the source leaves it intact.
		if err := s.DeleteRepo(ctx, "alice", "proj"); err != nil {
			t.Fatal(err)
		}
		if x, err := s.log.Head(ctx, f.ID); err != nil || len(x.Layers) != 2 {
			t.Errorf("fork after source delete: %+v, %v", x, err)
		}
		readPack(t, s.log, f.ID, got.Layers[0])

		for _, c := range []struct {
			so, sn, do, dn string
			want           error
		}{
			{"alice", "proj", "bob", "again", ErrNotFound}, // source deleted
			{"bob", "mine", "bob", "mine", ErrExists},
			{"bob", "mine", "bob", "MINE", ErrExists},
			{"bob", "mine", "nobody", "x", ErrNotFound},
			{"bob", "mine", "bob", "x.git", ErrInvalidName},
			{"bob", "nope", "bob", "x", ErrNotFound},
		} {
			if _, err := s.ForkRepo(ctx, c.so, c.sn, c.do, c.dn); !errors.Is(err, c.want) {
				t.Errorf("ForkRepo(%s/%s -> %s/%s) = %v, want %v", c.so, c.sn, c.do, c.dn, err, c.want)
			}
		}
		if _, err := s.ForkRepo(ctx, "bob", "mine", "alice", "proj"); err != nil {
			t.Errorf("fork onto a deleted name: %v", err)
		}
	})
}

func TestCorruptRecord(t *testing.T) {
	ctx := context.Background()
	objects := memstore.New()
	s := newStore(objects)
	for key, body := range map[string]string{
		"meta/repos/alice/junk": "{not json",
		"meta/repos/alice/v9":   `{"v":9,"id":"X"}`,
	} {
		if _, err := objects.Put(ctx, key, strings.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"junk", "v9"} {
		_, err := s.Repo(ctx, "alice", name)
		if err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "corrupt") {
			t.Errorf("Repo(%s) = %v, want a corrupt-record error", name, err)
		}
	}
}

// commitSomething commits one entry carrying a real pack to the log.
func commitSomething(t *testing.T, log *wal.Log, repo string) {
	t.Helper()
	ctx := context.Background()
	x, err := log.Head(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	pack, commit := makePack(t, len(x.Layers))
	old := x.Ref("refs/heads/main")
	if old == "" {
		old = wal.ZeroID
	}
	_, err = log.Commit(ctx, repo, wal.Push{
		Transitions: []wal.Transition{{Ref: "refs/heads/main", Old: old, New: commit}},
		PushedBy:    "test",
		Pack:        bytes.NewReader(pack),
		PackSize:    int64(len(pack)),
	})
	if err != nil {
		t.Fatal(err)
	}
}

// makePack builds a one-commit repository with git and returns a pack of
// its objects and the commit id. n varies the content.
func makePack(t *testing.T, n int) ([]byte, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	env := gittest.Env(t.TempDir())
	run := func(stdin []byte, args ...string) []byte {
		t.Helper()
		return []byte(gittest.Input(t, env, dir, bytes.NewReader(stdin), args...))
	}
	run(nil, "init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(fmt.Sprintf("content %d\n", n)), 0o644); err != nil {
		t.Fatal(err)
	}
	run(nil, "add", "f.txt")
	run(nil, "commit", "-q", "-m", fmt.Sprintf("c%d", n))
	commit := strings.TrimSpace(string(run(nil, "rev-parse", "HEAD")))
	objs := run(nil, "rev-list", "--objects", "HEAD")
	return run(objs, "pack-objects", "--stdout", "-q"), commit
}

func readPack(t *testing.T, log *wal.Log, repo string, l wal.Layer) []byte {
	t.Helper()
	rc, _, err := log.OpenPack(context.Background(), repo, l)
	if err != nil {
		t.Fatalf("OpenPack %s/%s: %v", repo, l.ULID, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read pack %s/%s: %v", repo, l.ULID, err)
	}
	return b
}

func TestTokenLenMatchesEncoding(t *testing.T) {
	if got := len(TokenPrefix) + tokenEncoding().EncodedLen(tokenBytes); got != tokenLen {
		t.Errorf("tokenLen = %d, encoding says %d", tokenLen, got)
	}
}
