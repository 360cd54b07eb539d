package meta

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// copierFunc is a ForkCopier made of a function: a test double that
// observes the store while ForkRepo calls it (internal/lfs tests the real
// one, docs/adr/0132-lfs-forks.md).
type copierFunc func(ctx context.Context, srcTenant, srcRepoID, dstTenant, dstRepoID string) error

func (f copierFunc) CopyToFork(ctx context.Context, srcTenant, srcRepoID, dstTenant, dstRepoID string) error {
	return f(ctx, srcTenant, srcRepoID, dstTenant, dstRepoID)
}

func newStoreWith(objects objstore.Store, c ForkCopier) *Store {
	return New(objects, wal.New(objects, wal.Options{Sleep: func(context.Context, time.Duration) error { return nil }}), WithForkCopier(c))
}

// TestForkCopierBeforeName: ForkRepo calls its copier once, with the
// tenants' display names and the logs' ids, after the fork's log is
// copied and before its name is claimed: during the call the fork's log
// is there and its name is not.
func TestForkCopierBeforeName(t *testing.T) {
	ctx := context.Background()
	objects := memstore.New()
	var s *Store
	var calls []string
	s = newStoreWith(objects, copierFunc(func(ctx context.Context, srcTenant, srcID, dstTenant, dstID string) error {
		calls = append(calls, fmt.Sprint(srcTenant, srcID, dstTenant, dstID))
		if _, err := s.Repo(ctx, "Bob", "mine"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the fork's name during the copy: %v, want not found", err)
		}
		if _, err := s.log.Head(ctx, dstID); err != nil {
			t.Errorf("the fork's log during the copy: %v", err)
		}
		return nil
	}))
	mustTenant(t, s, "Alice", KindUser)
	mustTenant(t, s, "Bob", KindUser)
	src, err := s.CreateRepo(ctx, "alice", "proj", false)
	if err != nil {
		t.Fatal(err)
	}
	commitSomething(t, s.log, src.ID)
	f, err := s.ForkRepo(ctx, "alice", "proj", "bob", "mine")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint("Alice", src.ID, "Bob", f.ID); len(calls) != 1 || calls[0] != want {
		t.Fatalf("copier calls %q, want [%q]", calls, want)
	}
}

// TestForkCopierFails: a copier's error fails the fork with that error
// in its chain (a store's failure as ErrUnavailable, 503), no name
// points at the fork, its log is a tombstone, and the name can be forked
// to again.
func TestForkCopierFails(t *testing.T) {
	ctx := context.Background()
	refused := errors.New("refused by the copier")
	storeDown := &objstore.Error{Op: "Put", Key: "lfs/refs/x", Err: objstore.ErrUnavailable}
	for _, tc := range []struct {
		name  string
		err   error
		wantU bool
	}{
		{"plain", refused, false},
		{"store", storeDown, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dst string
			fail := true
			s := newStoreWith(memstore.New(), copierFunc(func(_ context.Context, _, _, _, dstID string) error {
				dst = dstID
				if fail {
					return tc.err
				}
				return nil
			}))
			mustTenant(t, s, "alice", KindUser)
			if _, err := s.CreateRepo(ctx, "alice", "proj", false); err != nil {
				t.Fatal(err)
			}
			_, err := s.ForkRepo(ctx, "alice", "proj", "alice", "fork")
			if !errors.Is(err, tc.err) || errors.Is(err, ErrUnavailable) != tc.wantU {
				t.Fatalf("ForkRepo = %v, want %v (unavailable: %v)", err, tc.err, tc.wantU)
			}
			if _, err := s.Repo(ctx, "alice", "fork"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("the failed fork's name: %v, want not found", err)
			}
			if _, err := s.log.Head(ctx, dst); !errors.Is(err, wal.ErrRepoDeleted) {
				t.Fatalf("the failed fork's log: %v, want a tombstone", err)
			}
			if list, err := s.ListRepos(ctx, "alice"); err != nil || len(list) != 1 {
				t.Fatalf("alice's repositories after the failed fork: %+v, %v", list, err)
			}
			fail = false
			if _, err := s.ForkRepo(ctx, "alice", "proj", "alice", "fork"); err != nil {
				t.Fatalf("fork again: %v", err)
			}
		})
	}
}
