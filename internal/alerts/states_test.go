package alerts

import (
	"context"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// stateEnv is a store with n open alerts in repo, its state index built,
// and their fingerprints.
func stateEnv(t *testing.T, n int) (*Store, *faultstore.Store, []string) {
	t.Helper()
	ctx := context.Background()
	objects := faultstore.New(memstore.New())
	s := New(objects)
	var fs []Finding
	for i := range n {
		fs = append(fs, finding(i, i))
	}
	if err := s.Record(ctx, "acme", repo, fs, RunRef{}); err != nil {
		t.Fatal(err)
	}
	built, got, err := s.EnsureStateIndex(ctx)
	if err != nil || !built || got != n {
		t.Fatalf("EnsureStateIndex = %v, %d, %v; want it built over %d alerts", built, got, err, n)
	}
	p, err := s.List(ctx, Filter{Tenant: "acme", RepoID: repo}, "", MaxPageSize)
	if err != nil || len(p.Alerts) != n {
		t.Fatalf("%d alerts, %v", len(p.Alerts), err)
	}
	var fps []string
	for _, a := range p.Alerts {
		fps = append(fps, a.Fingerprint)
	}
	return s, objects, fps
}

func resolve(t *testing.T, s *Store, fp string) {
	t.Helper()
	if _, err := s.SetState(context.Background(), "acme", repo, fp, Change{State: StateResolved, Resolution: ResolutionRevoked, By: "ann"}); err != nil {
		t.Fatal(err)
	}
}

// listAll follows Next and returns the fingerprints of f's alerts and the
// records read (GETs).
func listAll(t *testing.T, s *Store, objects *faultstore.Store, f Filter, limit int) ([]string, int) {
	t.Helper()
	gets := objects.Count(faultstore.OpGet)
	var out []string
	tok := ""
	for {
		p, err := s.List(context.Background(), f, tok, limit)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range p.Alerts {
			if a.State != f.State {
				t.Fatalf("a list of %s alerts holds a %s one", f.State, a.State)
			}
			out = append(out, a.Fingerprint)
		}
		if tok = p.Next; tok == "" {
			return out, objects.Count(faultstore.OpGet) - gets
		}
	}
}

// TestStateIndex: a list by state reads that state's alerts only, per
// repository and tenant-wide, paged, and follows each change of state
// (docs/adr/0122-alert-state-index.md).
func TestStateIndex(t *testing.T) {
	s, objects, fps := stateEnv(t, 40)
	for _, fp := range fps[:37] {
		resolve(t, s, fp)
	}
	for _, f := range []Filter{{Tenant: "acme", RepoID: repo, State: StateOpen}, {Tenant: "acme", State: StateOpen}} {
		open, gets := listAll(t, s, objects, f, 0)
		if len(open) != 3 || gets != 3 {
			t.Errorf("%+v: %d open alerts for %d records read; want 3 and 3", f, len(open), gets)
		}
	}
	resolved, gets := listAll(t, s, objects, Filter{Tenant: "acme", State: StateResolved}, 5)
	if len(resolved) != 37 || gets != 37 {
		t.Errorf("resolved: %d alerts for %d records read, in pages of 5; want 37 and 37", len(resolved), gets)
	}
	seen := map[string]bool{}
	for _, fp := range resolved {
		if seen[fp] {
			t.Errorf("%s listed twice", fp)
		}
		seen[fp] = true
	}
	// Reopened: in the open list again, out of the resolved one.
	if _, err := s.SetState(context.Background(), "acme", repo, fps[0], Change{State: StateOpen, By: "ann"}); err != nil {
		t.Fatal(err)
	}
	if open, _ := listAll(t, s, objects, Filter{Tenant: "acme", State: StateOpen}, 0); len(open) != 4 {
		t.Errorf("after a reopen: %d open", len(open))
	}
	if res, _ := listAll(t, s, objects, Filter{Tenant: "acme", State: StateResolved}, 0); len(res) != 36 {
		t.Errorf("after a reopen: %d resolved", len(res))
	}
	// Another repository the caller may not read is skipped unread.
	if open, gets := listAll(t, s, objects, Filter{Tenant: "acme", State: StateOpen, Repos: map[string]bool{"01OTHER": true}}, 0); len(open) != 0 || gets != 0 {
		t.Errorf("a repository outside Repos: %d alerts, %d records read", len(open), gets)
	}
}

// TestStateIndexStaleHints: a hint left behind (its delete failed) is
// skipped and deleted by the next lister; a hint of a generation the
// record has not reached (a write in flight) is skipped and kept.
func TestStateIndexStaleHints(t *testing.T) {
	ctx := context.Background()
	s, objects, fps := stateEnv(t, 10)
	objects.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpDelete && strings.HasPrefix(c.Key, statesPrefix) {
			return faultstore.Fault{Outcome: faultstore.Refused}
		}
		return faultstore.Fault{}
	})
	for _, fp := range fps[:8] {
		resolve(t, s, fp)
	}
	objects.SetPlan(nil)
	open, gets := listAll(t, s, objects, Filter{Tenant: "acme", State: StateOpen}, 0)
	if len(open) != 2 || gets != 10 {
		t.Fatalf("with 8 stale hints: %d open for %d records read; want 2 and 10", len(open), gets)
	}
	if open, gets = listAll(t, s, objects, Filter{Tenant: "acme", State: StateOpen}, 0); len(open) != 2 || gets != 2 {
		t.Fatalf("after the lister deleted them: %d open for %d records read; want 2 and 2", len(open), gets)
	}
	// A write in flight: the hint of the next generation.
	rec, err := s.get(ctx, "acme", repo, fps[9])
	if err != nil {
		t.Fatal(err)
	}
	inflight, _ := hintKey(alertKey("acme", repo, fps[9]), StateResolved, rec.Gen+1)
	if _, err := objects.Put(ctx, inflight, strings.NewReader(""), 0); err != nil {
		t.Fatal(err)
	}
	if res, _ := listAll(t, s, objects, Filter{Tenant: "acme", State: StateResolved}, 0); len(res) != 8 {
		t.Fatalf("%d resolved with a hint in flight, want 8", len(res))
	}
	if _, _, err := objects.Get(ctx, inflight); err != nil {
		t.Fatalf("the hint of a write in flight was deleted: %v", err)
	}
	// That write lands: the alert is listed.
	resolve(t, s, fps[9])
	if res, _ := listAll(t, s, objects, Filter{Tenant: "acme", State: StateResolved}, 0); len(res) != 9 {
		t.Fatalf("%d resolved, want 9", len(res))
	}
}

// TestStateIndexHintFirst: a state change whose hint cannot be written
// changes nothing, and one whose hint landed but reported an error
// changes nothing either; both are errors, and the alert stays listed
// where it was.
func TestStateIndexHintFirst(t *testing.T) {
	ctx := context.Background()
	for _, out := range []faultstore.Outcome{faultstore.Refused, faultstore.LandedThenError} {
		s, objects, fps := stateEnv(t, 2)
		objects.SetPlan(func(c faultstore.Call) faultstore.Fault {
			if c.Op == faultstore.OpPut && strings.HasPrefix(c.Key, statesPrefix) {
				return faultstore.Fault{Outcome: out}
			}
			return faultstore.Fault{}
		})
		_, err := s.SetState(ctx, "acme", repo, fps[0], Change{State: StateResolved, Resolution: ResolutionRevoked, By: "ann"})
		objects.SetPlan(nil)
		if err == nil {
			t.Fatalf("%s: the change landed without its hint", out)
		}
		if a := mustAlert(t, s, "acme", fps[0]); a.State != StateOpen {
			t.Fatalf("%s: the alert is %s", out, a.State)
		}
		if open, _ := listAll(t, s, objects, Filter{Tenant: "acme", State: StateOpen}, 0); len(open) != 2 {
			t.Fatalf("%s: %d open, want 2", out, len(open))
		}
		if res, _ := listAll(t, s, objects, Filter{Tenant: "acme", State: StateResolved}, 0); len(res) != 0 {
			t.Fatalf("%s: %d resolved, want 0", out, len(res))
		}
	}
}

// TestStateIndexBuild: alerts whose hints are missing (written before the
// index) are listed by state only once BuildStateIndex ran: until its
// marker exists, a list by state reads every alert; a store without
// alerts is ready at once.
func TestStateIndexBuild(t *testing.T) {
	ctx := context.Background()
	s, objects, fps := stateEnv(t, 6)
	resolve(t, s, fps[0])
	// An installation from before the index: no hints, no marker.
	if err := objstore.Walk(ctx, objects, statesPrefix, func(o objstore.Info) error { return objects.Delete(ctx, o.Key) }); err != nil {
		t.Fatal(err)
	}
	if err := objects.Delete(ctx, statesMarkerKey); err != nil {
		t.Fatal(err)
	}
	old := New(objects)
	if open, _ := listAll(t, old, objects, Filter{Tenant: "acme", State: StateOpen}, 0); len(open) != 5 {
		t.Fatalf("before the build: %d open, want 5 (read from every alert)", len(open))
	}
	if built, n, err := old.EnsureStateIndex(ctx); !built || n != 6 || err != nil {
		t.Fatalf("EnsureStateIndex = %v, %d, %v", built, n, err)
	}
	if open, gets := listAll(t, old, objects, Filter{Tenant: "acme", State: StateOpen}, 0); len(open) != 5 || gets != 5 {
		t.Fatalf("after the build: %d open for %d reads, want 5 and 5", len(open), gets)
	}
	if built, _, err := New(objects).EnsureStateIndex(ctx); built || err != nil {
		t.Fatalf("a second EnsureStateIndex built again (%v, %v)", built, err)
	}

	fresh := New(memstore.New())
	if built, n, err := fresh.EnsureStateIndex(ctx); built || n != 0 || err != nil {
		t.Fatalf("a store without alerts: EnsureStateIndex = %v, %d, %v; want ready", built, n, err)
	}
	if err := fresh.Record(ctx, "acme", repo, []Finding{finding(1, 1)}, RunRef{}); err != nil {
		t.Fatal(err)
	}
	p, err := fresh.List(ctx, Filter{Tenant: "acme", State: StateOpen}, "", 0)
	if err != nil || len(p.Alerts) != 1 {
		t.Fatalf("a new installation's alert: %d listed, %v", len(p.Alerts), err)
	}
}

// FuzzParseHint: any key parses or is refused without a panic, and what
// parses names the hint it came from.
func FuzzParseHint(f *testing.F) {
	f.Add(repo + "/" + strings.Repeat("a", 64) + ",3")
	f.Add("r/x,1")
	f.Add("/,")
	f.Fuzz(func(t *testing.T, rel string) {
		r, fp, gen, ok := parseHint(rel)
		if !ok {
			return
		}
		k, err := hintKey(alertKey("acme", r, fp), StateOpen, gen)
		if err != nil || k != statePrefix("acme", StateOpen)+rel && strings.Count(rel, "/") == 1 {
			t.Fatalf("parseHint(%q) = %q %q %d; hintKey %q, %v", rel, r, fp, gen, k, err)
		}
	})
}
