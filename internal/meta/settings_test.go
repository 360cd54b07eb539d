package meta

import (
	"context"
	"errors"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

func newRepoForSettings(t *testing.T, objects objstore.Store) *Store {
	t.Helper()
	s := newStore(objects)
	mustTenant(t, s, "alice", KindUser)
	if _, err := s.CreateRepo(context.Background(), "alice", "proj", false); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPushProtectionSetting: off by default, on and off again, kept
// across other changes, and ErrNotFound for a missing repository.
func TestPushProtectionSetting(t *testing.T) {
	ctx := context.Background()
	s := newRepoForSettings(t, memstore.New())
	if r, _ := s.Repo(ctx, "alice", "proj"); r.PushProtection {
		t.Fatal("a new repository has push protection on")
	}
	if err := s.SetPushProtection(ctx, "alice", "proj.git", true); err != nil {
		t.Fatal(err)
	}
	if err := s.SetVisibility(ctx, "alice", "proj", true); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Repo(ctx, "alice", "proj"); !r.PushProtection || !r.Public {
		t.Fatalf("after setting both: %+v", r)
	}
	if list, _ := s.ListRepos(ctx, "alice"); len(list) != 1 || !list[0].PushProtection {
		t.Fatalf("ListRepos = %+v", list)
	}
	if err := s.SetPushProtection(ctx, "alice", "proj", true); err != nil {
		t.Fatalf("setting it again: %v", err)
	}
	if err := s.SetPushProtection(ctx, "alice", "proj", false); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Repo(ctx, "alice", "proj"); r.PushProtection || !r.Public {
		t.Fatalf("after turning it off: %+v", r)
	}
	if err := s.SetPushProtection(ctx, "alice", "nope", true); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing repository: %v", err)
	}
	if err := s.SetPushProtection(ctx, "alice", "proj", true); err != nil {
		t.Fatal(err)
	}
	if f, err := s.ForkRepo(ctx, "alice", "proj", "alice", "fork"); err != nil || f.PushProtection {
		t.Fatalf("fork = %+v, %v; want push protection off", f, err)
	}
}

// TestSetPushProtectionOutcomes runs the write against faultstore's
// outcomes (docs/adr/0006-write-outcomes.md): a write that landed is
// success; one that did not and cannot be ruled out is
// ErrOutcomeUnknown, never success; and calling again completes it.
func TestSetPushProtectionOutcomes(t *testing.T) {
	ctx := context.Background()
	for _, f := range faultstore.Faults() {
		t.Run(f.String(), func(t *testing.T) {
			fs := faultstore.New(memstore.New())
			s := newRepoForSettings(t, fs)
			fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
				if c.Op == faultstore.OpPutIfMatch && c.Key == repoKey("alice", "proj") {
					return faultstore.Fault{Outcome: f}
				}
				return faultstore.Fault{}
			})
			err := s.SetPushProtection(ctx, "alice", "proj", true)
			fs.SetPlan(nil)
			r, _ := s.Repo(ctx, "alice", "proj")
			if f == faultstore.LandedThenError {
				if err != nil || !r.PushProtection {
					t.Fatalf("landed write: err %v, record %+v; want success", err, r)
				}
				return
			}
			if !errors.Is(err, objstore.ErrOutcomeUnknown) || r.PushProtection {
				t.Fatalf("write that did not land: err %v, record %+v; want ErrOutcomeUnknown", err, r)
			}
			if err := s.SetPushProtection(ctx, "alice", "proj", true); err != nil {
				t.Fatal(err)
			}
			if r, _ := s.Repo(ctx, "alice", "proj"); !r.PushProtection {
				t.Fatal("calling again did not turn it on")
			}
		})
	}
}

// TestSetPushProtectionRival: a rival's write between our read and our
// compare-and-swap is kept, and ours is applied over it; so is a rival's
// write slipped in before a write that failed ambiguously, which can then
// never land.
func TestSetPushProtectionRival(t *testing.T) {
	ctx := context.Background()
	for _, outcome := range []faultstore.Outcome{faultstore.Pass, faultstore.Lost} {
		t.Run(outcome.String(), func(t *testing.T) {
			inner := memstore.New()
			fs := faultstore.New(inner)
			s := newRepoForSettings(t, fs)
			rival := newStore(inner)
			fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
				if c.Op == faultstore.OpPutIfMatch && c.N == 1 {
					if err := rival.SetVisibility(ctx, "alice", "proj", true); err != nil {
						t.Error(err)
					}
					return faultstore.Fault{Outcome: outcome}
				}
				return faultstore.Fault{}
			})
			if err := s.SetPushProtection(ctx, "alice", "proj", true); err != nil {
				t.Fatal(err)
			}
			r, _ := s.Repo(ctx, "alice", "proj")
			if !r.PushProtection || !r.Public {
				t.Fatalf("record %+v: want both changes", r)
			}
		})
	}
}

// TestSetPushProtectionReadBack: after an ambiguous write, a repository
// deleted meanwhile is ErrNotFound, and a read-back that fails leaves the
// outcome unknown, never success.
func TestSetPushProtectionReadBack(t *testing.T) {
	ctx := context.Background()
	t.Run("deleted", func(t *testing.T) {
		inner := memstore.New()
		fs := faultstore.New(inner)
		s := newRepoForSettings(t, fs)
		rival := newStore(inner)
		fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
			if c.Op == faultstore.OpPutIfMatch && c.Key == repoKey("alice", "proj") {
				if err := rival.DeleteRepo(ctx, "alice", "proj"); err != nil {
					t.Error(err)
				}
				return faultstore.Fault{Outcome: faultstore.Lost}
			}
			return faultstore.Fault{}
		})
		if err := s.SetPushProtection(ctx, "alice", "proj", true); !errors.Is(err, ErrNotFound) {
			t.Fatalf("SetPushProtection on a repository deleted meanwhile = %v, want ErrNotFound", err)
		}
	})
	t.Run("read-back fails", func(t *testing.T) {
		fs := faultstore.New(memstore.New())
		s := newRepoForSettings(t, fs)
		put := false
		fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
			switch {
			case c.Op == faultstore.OpPutIfMatch:
				put = true
				return faultstore.Fault{Outcome: faultstore.Lost}
			case c.Op == faultstore.OpGet && put:
				return faultstore.Fault{Outcome: faultstore.Refused}
			}
			return faultstore.Fault{}
		})
		err := s.SetPushProtection(ctx, "alice", "proj", true)
		if !errors.Is(err, objstore.ErrOutcomeUnknown) {
			t.Fatalf("SetPushProtection with a failed read-back = %v, want ErrOutcomeUnknown", err)
		}
	})
}

// TestAllowReplaceRefsSetting: refused by default, allowed and refused
// again, independent of push protection, and off in a fork.
func TestAllowReplaceRefsSetting(t *testing.T) {
	ctx := context.Background()
	s := newRepoForSettings(t, memstore.New())
	if r, _ := s.Repo(ctx, "alice", "proj"); r.AllowReplaceRefs {
		t.Fatal("a new repository allows replace refs")
	}
	if err := s.SetAllowReplaceRefs(ctx, "alice", "proj", true); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPushProtection(ctx, "alice", "proj", true); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Repo(ctx, "alice", "proj"); !r.AllowReplaceRefs || !r.PushProtection {
		t.Fatalf("after setting both: %+v", r)
	}
	if f, err := s.ForkRepo(ctx, "alice", "proj", "alice", "fork"); err != nil || f.AllowReplaceRefs {
		t.Fatalf("fork = %+v, %v; want replace refs refused", f, err)
	}
	if err := s.SetAllowReplaceRefs(ctx, "alice", "proj", false); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Repo(ctx, "alice", "proj"); r.AllowReplaceRefs || !r.PushProtection {
		t.Fatalf("after refusing again: %+v", r)
	}
	if err := s.SetAllowReplaceRefs(ctx, "alice", "nope", true); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing repository: %v", err)
	}
}

// TestPrincipalString: audit records name the credential.
func TestPrincipalString(t *testing.T) {
	var anon *Principal
	for p, want := range map[*Principal]string{
		anon:                              "",
		{Tenant: "alice", TokenID: "01J"}: "alice (token 01J)",
		{Tenant: "alice", KeyFingerprint: "SHA256:abc", KeyTitle: "lap\"top"}: `alice (ssh key SHA256:abc "lap\"top")`,
	} {
		if got := p.String(); got != want {
			t.Errorf("%+v: %q, want %q", p, got, want)
		}
	}
}
