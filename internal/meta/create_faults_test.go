package meta

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// The tests in this file run record creation against faultstore's matrix
// of outcomes on the first, a middle and the last attempt of its
// PutIfAbsent (docs/adr/0006-write-outcomes.md). Earlier attempts are
// lost, so the creator has to resend. The invariant: a creator is never
// told "already exists" about its own record; success means the record is
// there and usable; a failure leaves no record behind.

// creation is one record-creating call and how to see its result.
type creation struct {
	name   string
	prefix string // key prefix of the record whose writes are faulted
	// op is the conditional put that creates it: PutIfAbsent, or
	// PutIfMatch over a tombstone.
	op     faultstore.Op
	setup  func(t *testing.T, s *Store)
	create func(s *Store) (check func() error, err error)
}

func creations() []creation {
	ctx := context.Background()
	return []creation{
		{
			name: "tenant", prefix: tenantsPrefix + "alice", op: faultstore.OpPutIfAbsent,
			create: func(s *Store) (func() error, error) {
				_, err := s.CreateTenant(ctx, "alice", KindUser)
				return func() error { _, err := s.Tenant(ctx, "alice"); return err }, err
			},
		},
		{
			name: "member", prefix: membersPrefix, op: faultstore.OpPutIfAbsent,
			setup: func(t *testing.T, s *Store) { mustTenant(t, s, "org", KindOrg); mustTenant(t, s, "bob", KindUser) },
			create: func(s *Store) (func() error, error) {
				err := s.AddMember(ctx, "org", "bob")
				return func() error {
					m, err := s.Members(ctx, "org")
					if err != nil || len(m) != 1 || m[0] != "bob" {
						return fmt.Errorf("members %v, %v: want [bob]", m, err)
					}
					return nil
				}, err
			},
		},
		{
			name: "token", prefix: tokensPrefix, op: faultstore.OpPutIfAbsent,
			setup: func(t *testing.T, s *Store) { mustTenant(t, s, "carol", KindUser) },
			create: func(s *Store) (func() error, error) {
				plain, _, err := s.CreateToken(ctx, "carol", ScopeWrite, "t")
				return func() error { _, err := s.Authenticate(ctx, plain); return err }, err
			},
		},
		{
			name: "ssh-key", prefix: sshKeysPrefix, op: faultstore.OpPutIfAbsent,
			setup: func(t *testing.T, s *Store) { mustTenant(t, s, "kim", KindUser) },
			create: func(s *Store) (func() error, error) {
				pub, line := genSSHKey("")
				_, err := s.AddSSHKey(ctx, "kim", "k", line)
				return func() error { _, err := s.AuthenticateKey(ctx, pub); return err }, err
			},
		},
		{
			name: "ssh-key-listing", prefix: sshKeyIDsPrefix, op: faultstore.OpPutIfAbsent,
			setup: func(t *testing.T, s *Store) { mustTenant(t, s, "lee", KindUser) },
			create: func(s *Store) (func() error, error) {
				pub, line := genSSHKey("")
				_, err := s.AddSSHKey(ctx, "lee", "k", line)
				return func() error {
					if ks, err := s.ListSSHKeys(ctx, "lee"); err != nil || len(ks) != 1 {
						return fmt.Errorf("listed %v, %v; want one key", ks, err)
					}
					_, err := s.AuthenticateKey(ctx, pub)
					return err
				}, err
			},
		},
		{
			name: "repo", prefix: reposPrefix, op: faultstore.OpPutIfAbsent,
			setup: func(t *testing.T, s *Store) { mustTenant(t, s, "dave", KindUser) },
			create: func(s *Store) (func() error, error) {
				_, err := s.CreateRepo(ctx, "dave", "proj", false)
				return func() error {
					r, err := s.Repo(ctx, "dave", "proj")
					if err != nil {
						return err
					}
					_, err = s.Log().Head(ctx, r.ID)
					return err
				}, err
			},
		},
		{
			// A name whose repository was deleted is claimed by replacing
			// its tombstone (PutIfMatch), not by PutIfAbsent.
			name: "repo-over-tombstone", prefix: reposPrefix, op: faultstore.OpPutIfMatch,
			setup: func(t *testing.T, s *Store) {
				mustTenant(t, s, "erin", KindUser)
				if _, err := s.CreateRepo(ctx, "erin", "proj", false); err != nil {
					t.Fatal(err)
				}
				if err := s.DeleteRepo(ctx, "erin", "proj"); err != nil {
					t.Fatal(err)
				}
			},
			create: func(s *Store) (func() error, error) {
				_, err := s.CreateRepo(ctx, "erin", "proj", true)
				return func() error {
					r, err := s.Repo(ctx, "erin", "proj")
					if err == nil && !r.Public {
						err = errors.New("the old record is live, not the new one")
					}
					return err
				}, err
			},
		},
	}
}

// planFor faults the attempt-th op on a key under prefix with f, after
// making every earlier one Lost.
func planFor(op faultstore.Op, prefix string, attempt int, f faultstore.Fault) faultstore.Plan {
	var mu sync.Mutex
	n := 0
	return func(c faultstore.Call) faultstore.Fault {
		if c.Op != op || !strings.HasPrefix(c.Key, prefix) {
			return faultstore.Fault{}
		}
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		switch {
		case i < attempt:
			return faultstore.Fault{Outcome: faultstore.Lost}
		case i == attempt:
			return f
		}
		return faultstore.Fault{}
	}
}

func TestCreateRecordFaultMatrix(t *testing.T) {
	for _, c := range creations() {
		for _, attempt := range []int{1, 4, maxCASAttempts} {
			faults := []faultstore.Fault{
				{Outcome: faultstore.Lost},
				{Outcome: faultstore.LandedThenError},
				{Outcome: faultstore.Refused},
				// A store that breaks its promise: the write landed, and a
				// resend of it (a retrying SDK) was told 412.
				{Outcome: faultstore.LandedThenError, Err: objstore.ErrPreconditionFailed},
			}
			for _, f := range faults {
				label := f.Outcome.String()
				if f.Err != nil {
					label += "-412"
				}
				t.Run(fmt.Sprintf("%s/attempt%d/%s", c.name, attempt, label), func(t *testing.T) {
					fs := faultstore.New(memstore.New())
					s := newStore(fs)
					if c.setup != nil {
						c.setup(t, s)
					}
					fs.SetPlan(planFor(c.op, c.prefix, attempt, f))
					check, err := c.create(s)
					fs.SetPlan(nil)
					if errors.Is(err, ErrExists) {
						t.Fatalf("the creator was told its own record already exists: %v", err)
					}
					landed := f.Outcome == faultstore.LandedThenError || attempt < maxCASAttempts
					if landed {
						if err != nil {
							t.Fatalf("create = %v, want success", err)
						}
						if err := check(); err != nil {
							t.Fatalf("created, but: %v", err)
						}
						return
					}
					// The last attempt did not apply, and every earlier one
					// was lost: the creator cannot know, and must say so.
					if !errors.Is(err, objstore.ErrOutcomeUnknown) {
						t.Fatalf("create = %v, want ErrOutcomeUnknown", err)
					}
					if check() == nil {
						t.Fatal("create failed, but its record is usable")
					}
				})
			}
		}
	}
}

// TestCreateRecordRival: a record that really is someone else's is still
// reported as ErrExists, after a lost first attempt too.
func TestCreateRecordRival(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	fs := faultstore.New(inner)
	s := newStore(fs)
	rival := newStore(inner)
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpPutIfAbsent && c.N == 1 {
			if _, err := rival.CreateTenant(ctx, "Alice", KindOrg); err != nil {
				t.Error(err)
			}
			return faultstore.Fault{Outcome: faultstore.Lost}
		}
		return faultstore.Fault{}
	})
	if _, err := s.CreateTenant(ctx, "alice", KindUser); !errors.Is(err, ErrExists) {
		t.Fatalf("CreateTenant after a rival's = %v, want ErrExists", err)
	}
	if tn, err := s.Tenant(ctx, "alice"); err != nil || tn.Kind != KindOrg {
		t.Fatalf("tenant = %+v, %v; want the rival's org", tn, err)
	}
}
