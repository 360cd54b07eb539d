package alerts

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

func commitOf(p int) string { return fmt.Sprintf("%040x", 1000+p) }

func secretsOf(t *testing.T, s *Store, as []Alert) []string {
	t.Helper()
	var out []string
	for _, a := range as {
		sec, err := s.Reveal(context.Background(), "acme", repo, a.Fingerprint)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sec)
	}
	slices.Sort(out)
	return out
}

// ByCommits finds the alerts with a location in the commits asked for,
// and nothing else: not another commit's, not another repository's, not
// one whose record write failed after its commit key landed; the index
// is rebuilt for alerts that predate it.
func TestByCommits(t *testing.T) {
	ctx := context.Background()
	objects := faultstore.New(memstore.New())
	s := New(objects)
	// Secrets 0 and 1 in commit 0, secret 2 in commit 1, secret 0 again
	// in commit 2.
	fs := []Finding{finding(0, 0), finding(1, 0), finding(2, 1), finding(0, 2)}
	if err := s.Record(ctx, "acme", repo, fs, RunRef{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, "acme", "other-repo", []Finding{finding(5, 0)}, RunRef{}); err != nil {
		t.Fatal(err)
	}
	check := func(why string, commits []string, want ...string) {
		t.Helper()
		got, more, err := s.ByCommits(ctx, "acme", repo, commits, 0)
		if err != nil || more {
			t.Fatalf("%s: %v, more %v", why, err, more)
		}
		if g := secretsOf(t, s, got); !slices.Equal(g, want) {
			t.Fatalf("%s: secrets %q, want %q", why, g, want)
		}
	}
	check("commit 0", []string{commitOf(0)}, "s3cr3t-0", "s3cr3t-1")
	check("commit 1", []string{commitOf(1)}, "s3cr3t-2")
	check("commits 1 and 2", []string{commitOf(1), commitOf(2)}, "s3cr3t-0", "s3cr3t-2")
	check("no such commit", []string{commitOf(9)})
	if _, _, err := s.ByCommits(ctx, "acme", repo, []string{"HEAD"}, 0); err == nil {
		t.Fatal("a commit that is not an id was taken")
	}
	// A new location in commit 3 whose record write fails: its key
	// landed, the alert has no location there.
	objects.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpPutIfMatch && strings.HasPrefix(c.Key, alertsPrefix) {
			return faultstore.Fault{Outcome: faultstore.Refused}
		}
		return faultstore.Fault{}
	})
	if err := s.Record(ctx, "acme", repo, []Finding{finding(2, 3)}, RunRef{}); err == nil {
		t.Fatal("the refused write succeeded")
	}
	objects.SetPlan(nil)
	if keys, _ := objects.List(ctx, commitsPrefix+"acme/"+repo+"/"+commitOf(3)+"/", "", 10); len(keys) != 1 {
		t.Fatalf("commit 3's keys %v", keys)
	}
	check("a key whose write failed", []string{commitOf(3)})
	// The index rebuilt: every key gone, then BuildStateIndex.
	keys, _ := objects.List(ctx, commitsPrefix, "", 100)
	for _, k := range keys {
		objects.Delete(ctx, k.Key)
	}
	check("no index", []string{commitOf(0)})
	if _, err := s.BuildStateIndex(ctx); err != nil {
		t.Fatal(err)
	}
	check("rebuilt", []string{commitOf(0), commitOf(1)}, "s3cr3t-0", "s3cr3t-1", "s3cr3t-2")
	// The limit.
	got, more, err := s.ByCommits(ctx, "acme", repo, []string{commitOf(0), commitOf(1)}, 2)
	if err != nil || len(got) != 2 || !more {
		t.Fatalf("limit 2: %d, more %v, %v", len(got), more, err)
	}
}
