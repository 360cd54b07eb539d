package meta

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// addBranch points refs/heads/<branch> at main's commit, a push without
// objects.
func addBranch(t *testing.T, s *Store, repo, branch string) {
	t.Helper()
	ctx := context.Background()
	x, err := s.log.Head(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.log.Commit(ctx, repo, wal.Push{
		Transitions: []wal.Transition{{Ref: "refs/heads/" + branch, Old: wal.ZeroID, New: x.Ref("refs/heads/main")}},
		PushedBy:    "test",
		Pack:        strings.NewReader(""),
	}); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultBranchSetting: unset in a new repository; only an existing,
// well-formed branch can be set; it shows in Repo (lists do not carry
// it: docs/adr/0110-default-branch.md), survives
// other settings and is carried by a fork.
func TestDefaultBranchSetting(t *testing.T) {
	ctx := context.Background()
	s := newRepoForSettings(t, memstore.New())
	r, err := s.Repo(ctx, "alice", "proj")
	if err != nil || r.DefaultBranch != "" {
		t.Fatalf("new repository: %+v, %v; want no default branch", r, err)
	}
	if err := s.SetDefaultBranch(ctx, "alice", "proj", "main"); !errors.Is(err, ErrNoSuchBranch) || !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("default branch of an empty repository = %v, want ErrNoSuchBranch", err)
	}
	commitSomething(t, s.log, r.ID)
	addBranch(t, s, r.ID, "dev")
	for _, bad := range []string{"", "a..b", "x.lock", "a b", "-/x/", "refs/heads/dev"} {
		if err := s.SetDefaultBranch(ctx, "alice", "proj", bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("SetDefaultBranch(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	if err := s.SetDefaultBranch(ctx, "alice", "proj", "nope"); !errors.Is(err, ErrNoSuchBranch) {
		t.Fatalf("a missing branch = %v, want ErrNoSuchBranch", err)
	}
	if err := s.SetDefaultBranch(ctx, "alice", "nope", "dev"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing repository = %v, want ErrNotFound", err)
	}
	if r, _ := s.Repo(ctx, "alice", "proj"); r.DefaultBranch != "" {
		t.Fatalf("refused changes changed the record: %+v", r)
	}
	if err := s.SetDefaultBranch(ctx, "alice", "proj.git", "dev"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetVisibility(ctx, "alice", "proj", true); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Repo(ctx, "alice", "proj"); r.DefaultBranch != "dev" || !r.Public {
		t.Fatalf("after setting dev and public: %+v", r)
	}
	if err := s.SetDefaultBranch(ctx, "alice", "proj", "dev"); err != nil {
		t.Fatalf("setting it again: %v", err)
	}
	if f, err := s.ForkRepo(ctx, "alice", "proj", "alice", "fork"); err != nil || f.DefaultBranch != "dev" {
		t.Fatalf("fork = %+v, %v; want the source's default branch", f, err)
	}
	if err := s.SetDefaultBranch(ctx, "alice", "proj", "main"); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Repo(ctx, "alice", "proj"); r.DefaultBranch != "main" {
		t.Fatalf("after setting main: %+v", r)
	}
}

// TestSetDefaultBranchFaults: a log that cannot be read is unavailable
// (503, retry), never "no such branch"; a write that may not have landed
// is ErrOutcomeUnknown and calling again completes it; a repository
// deleted and created again under its name while the branch was looked
// up is not changed.
func TestSetDefaultBranchFaults(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*Store, *faultstore.Store, *memstore.Store) {
		inner := memstore.New()
		fs := faultstore.New(inner)
		s := newRepoForSettings(t, fs)
		r, _ := s.Repo(ctx, "alice", "proj")
		commitSomething(t, s.log, r.ID)
		return s, fs, inner
	}
	t.Run("log unreadable", func(t *testing.T) {
		s, fs, _ := setup(t)
		fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
			if c.Op == faultstore.OpGet && c.Key != repoKey("alice", "proj") {
				return faultstore.Fault{Outcome: faultstore.Refused}
			}
			return faultstore.Fault{}
		})
		err := s.SetDefaultBranch(ctx, "alice", "proj", "main")
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("with the log unreadable = %v, want ErrUnavailable only", err)
		}
	})
	t.Run("lost write", func(t *testing.T) {
		s, fs, _ := setup(t)
		fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
			if c.Op == faultstore.OpPutIfMatch && c.Key == repoKey("alice", "proj") {
				return faultstore.Fault{Outcome: faultstore.Lost}
			}
			return faultstore.Fault{}
		})
		if err := s.SetDefaultBranch(ctx, "alice", "proj", "main"); !errors.Is(err, objstore.ErrOutcomeUnknown) {
			t.Fatalf("lost write = %v, want ErrOutcomeUnknown", err)
		}
		fs.SetPlan(nil)
		if err := s.SetDefaultBranch(ctx, "alice", "proj", "main"); err != nil {
			t.Fatal(err)
		}
		if r, _ := s.Repo(ctx, "alice", "proj"); r.DefaultBranch != "main" {
			t.Fatalf("calling again: %+v", r)
		}
	})
	t.Run("recreated meanwhile", func(t *testing.T) {
		s, fs, inner := setup(t)
		rival := newStore(inner)
		done := false
		fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
			if c.Op == faultstore.OpPutIfMatch && c.Key == repoKey("alice", "proj") && !done {
				done = true
				if err := rival.DeleteRepo(ctx, "alice", "proj"); err != nil {
					t.Error(err)
				}
				if _, err := rival.CreateRepo(ctx, "alice", "proj", false); err != nil {
					t.Error(err)
				}
			}
			return faultstore.Fault{}
		})
		if err := s.SetDefaultBranch(ctx, "alice", "proj", "main"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("on a repository recreated meanwhile = %v, want ErrNotFound", err)
		}
		if r, _ := s.Repo(ctx, "alice", "proj"); r.DefaultBranch != "" {
			t.Fatalf("the new repository got the setting: %+v", r)
		}
	})
}
