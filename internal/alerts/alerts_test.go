package alerts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

const repo = "01JREPO0000000000000000000"

func blob(i int) string { return fmt.Sprintf("%040x", i) }

// finding returns a finding of secret number s at place p.
func finding(s, p int) Finding {
	return Finding{
		RuleID: "generic-api-key", Description: "Generic API key",
		Commit: fmt.Sprintf("%040x", 1000+p), Path: fmt.Sprintf("dir/f%d.txt", p), Line: p + 1, Column: 3,
		BlobID: blob(p), Match: "key = REDACTED", Secret: fmt.Sprintf("s3cr3t-%d", s),
	}
}

func mustAlert(t *testing.T, s *Store, tenant, fp string) Alert {
	t.Helper()
	a, err := s.Get(context.Background(), tenant, repo, fp)
	if err != nil {
		t.Fatalf("get %s: %v", fp, err)
	}
	return a
}

func fpOf(t *testing.T, s *Store, tenant, secret string) string {
	t.Helper()
	fp, err := s.Fingerprint(context.Background(), tenant, secret)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// places returns an alert's locations as a sorted list of paths, failing
// on duplicates.
func places(t *testing.T, a Alert) []string {
	t.Helper()
	var out []string
	seen := map[string]bool{}
	for _, l := range a.Locations {
		k := fmt.Sprintf("%s:%s:%d:%d", l.BlobID, l.Path, l.Line, l.Column)
		if seen[k] {
			t.Fatalf("alert %s lists %s twice", a.Fingerprint, k)
		}
		seen[k] = true
		out = append(out, l.Path)
	}
	slices.Sort(out)
	return out
}

func wantPaths(ps ...int) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("dir/f%d.txt", p))
	}
	slices.Sort(out)
	return out
}

func TestRecordIdempotent(t *testing.T) {
	ctx := context.Background()
	for name, objects := range map[string]objstore.Store{"mem": memstore.New(), "fs": mustFS(t)} {
		t.Run(name, func(t *testing.T) {
			s := New(objects)
			fs := []Finding{finding(1, 1), finding(1, 2), finding(2, 3), finding(1, 1)}
			if err := s.Record(ctx, "Alice", repo, fs, RunRef{ID: "run1", Seq: 4}); err != nil {
				t.Fatal(err)
			}
			a := mustAlert(t, s, "alice", fpOf(t, s, "alice", "s3cr3t-1"))
			if got := places(t, a); !slices.Equal(got, wantPaths(1, 2)) {
				t.Errorf("locations %v", got)
			}
			if a.State != StateOpen || a.Locations[0].Seq != 4 || a.Locations[0].RunID != "run1" || !a.HasSecret {
				t.Errorf("alert %+v", a)
			}
			// A full-history run attributes the same blobs to other commits:
			// still the same places, so nothing is added or written.
			before := a.UpdatedAt
			again := []Finding{finding(1, 2), finding(1, 1), finding(2, 3)}
			for i := range again {
				again[i].Commit = strings.Repeat("f", 40)
			}
			if err := s.Record(ctx, "alice", repo, again, RunRef{ID: "full", Seq: 9}); err != nil {
				t.Fatal(err)
			}
			a = mustAlert(t, s, "alice", a.Fingerprint)
			if got := places(t, a); !slices.Equal(got, wantPaths(1, 2)) || !a.UpdatedAt.Equal(before) || a.Locations[0].Seq != 4 {
				t.Errorf("after a re-run: %v, updated %v (was %v), seq %d", got, a.UpdatedAt, before, a.Locations[0].Seq)
			}
		})
	}
}

func mustFS(t *testing.T) objstore.Store {
	s, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConcurrentRecord: 16 recorders of overlapping findings leave exactly
// one alert per secret, holding the union of the locations.
func TestConcurrentRecord(t *testing.T) {
	for name, objects := range map[string]objstore.Store{"mem": memstore.New(), "fs": mustFS(t)} {
		t.Run(name, func(t *testing.T) { testConcurrentRecord(t, objects) })
	}
}

func testConcurrentRecord(t *testing.T, objects objstore.Store) {
	ctx := context.Background()
	const workers, secrets = 16, 3
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := New(objects) // a node of its own: no shared key cache
			// Worker w finds every secret at places w and w+1.
			var fs []Finding
			for sec := 0; sec < secrets; sec++ {
				fs = append(fs, finding(sec, w), finding(sec, w+1))
			}
			errs <- s.Record(ctx, "acme", repo, fs, RunRef{ID: "r", Seq: uint64(w)})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := New(objects)
	page, err := s.ListFull(ctx, Filter{Tenant: "acme"}, "", MaxPageSize)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Alerts) != secrets {
		t.Fatalf("%d alerts, want %d", len(page.Alerts), secrets)
	}
	all := make([]int, workers+1)
	for i := range all {
		all[i] = i
	}
	for _, a := range page.Alerts {
		if got := places(t, a); !slices.Equal(got, wantPaths(all...)) {
			t.Errorf("alert %s: %d locations %v", a.Fingerprint, len(got), got)
		}
	}
}

// TestRecordFaults runs Record against faultstore's three failing
// outcomes on each kind of call it makes, on the first, a middle and
// every such call. Whatever Record answers, the store never holds a
// duplicate, and a nil answer means every location is there; a clean
// re-run then completes the alert.
func TestRecordFaults(t *testing.T) {
	ctx := context.Background()
	type when struct {
		name string
		hit  func(n int) bool
	}
	whens := []when{
		{"first", func(n int) bool { return n == 1 }},
		{"second", func(n int) bool { return n == 2 }},
		{"every", func(int) bool { return true }},
	}
	for _, op := range []faultstore.Op{faultstore.OpPutIfAbsent, faultstore.OpPutIfMatch, faultstore.OpGet} {
		for _, out := range faultstore.Faults() {
			for _, w := range whens {
				t.Run(fmt.Sprintf("%s/%s/%s", op, out, w.name), func(t *testing.T) {
					inner := memstore.New()
					fst := faultstore.New(inner)
					s := New(fst)
					// The key exists and the alert exists, so that PutIfMatch
					// is reached by the second Record.
					if err := s.Record(ctx, "acme", repo, []Finding{finding(1, 1)}, RunRef{}); err != nil {
						t.Fatal(err)
					}
					fs := []Finding{finding(1, 2), finding(1, 3), finding(2, 4)}
					base := fst.Count(op) // faultstore counts from its creation
					fst.SetPlan(func(c faultstore.Call) faultstore.Fault {
						if c.Op == op && strings.HasPrefix(c.Key, alertsPrefix) && w.hit(c.N-base) {
							return faultstore.Fault{Outcome: out}
						}
						return faultstore.Fault{}
					})
					err := s.Record(ctx, "acme", repo, fs, RunRef{})
					fst.SetPlan(nil)
					check := New(inner)
					a1, e1 := check.Get(ctx, "acme", repo, fpOf(t, check, "acme", "s3cr3t-1"))
					if e1 != nil {
						t.Fatalf("alert 1: %v", e1)
					}
					got := places(t, a1)
					if err == nil {
						if !slices.Equal(got, wantPaths(1, 2, 3)) {
							t.Fatalf("Record succeeded but alert 1 holds %v", got)
						}
						a2 := mustAlert(t, check, "acme", fpOf(t, check, "acme", "s3cr3t-2"))
						if got := places(t, a2); !slices.Equal(got, wantPaths(4)) {
							t.Fatalf("Record succeeded but alert 2 holds %v", got)
						}
					} else if !errors.Is(err, objstore.ErrOutcomeUnknown) && !errors.Is(err, faultstore.ErrInjected) {
						t.Fatalf("Record: %v: neither unknown nor the injected failure", err)
					}
					if err := New(inner).Record(ctx, "acme", repo, fs, RunRef{}); err != nil {
						t.Fatal(err)
					}
					a1 = mustAlert(t, check, "acme", a1.Fingerprint)
					if got := places(t, a1); !slices.Equal(got, wantPaths(1, 2, 3)) {
						t.Fatalf("after a clean re-run: %v", got)
					}
				})
			}
		}
	}
}

// TestAmbiguousWriteIsReadBack: a write that landed but reported an error
// is found by the re-read, and not sent again.
func TestAmbiguousWriteIsReadBack(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	fst := faultstore.New(inner)
	s := New(fst)
	if _, err := s.FingerprintKey(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	fst.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpPutIfAbsent && c.N == 2 {
			return faultstore.Fault{Outcome: faultstore.LandedThenError}
		}
		return faultstore.Fault{}
	})
	if err := s.Record(ctx, "acme", repo, []Finding{finding(1, 1)}, RunRef{}); err != nil {
		t.Fatal(err)
	}
	if n := fst.Count(faultstore.OpPutIfAbsent) + fst.Count(faultstore.OpPutIfMatch); n != 2 {
		t.Errorf("%d conditional puts, want 2 (the key, then the alert once)", n)
	}
	// A backend that lands a write and then says "precondition failed"
	// (a retrying SDK) must not make Record report a failure.
	fst.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpPutIfMatch {
			return faultstore.Fault{Outcome: faultstore.LandedThenError, Err: objstore.ErrPreconditionFailed}
		}
		return faultstore.Fault{}
	})
	if err := s.Record(ctx, "acme", repo, []Finding{finding(1, 2)}, RunRef{}); err != nil {
		t.Fatal(err)
	}
	a := mustAlert(t, New(inner), "acme", fpOf(t, s, "acme", "s3cr3t-1"))
	if got := places(t, a); !slices.Equal(got, wantPaths(1, 2)) {
		t.Errorf("locations %v", got)
	}
}

// TestOutcomeUnknownReported: when every write is lost, Record says the
// outcome is unknown, never that nothing happened.
func TestOutcomeUnknownReported(t *testing.T) {
	ctx := context.Background()
	fst := faultstore.New(memstore.New())
	s := New(fst)
	if _, err := s.FingerprintKey(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	fst.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op.Conditional() {
			return faultstore.Fault{Outcome: faultstore.Lost}
		}
		return faultstore.Fault{}
	})
	err := s.Record(ctx, "acme", repo, []Finding{finding(1, 1)}, RunRef{})
	if !errors.Is(err, objstore.ErrOutcomeUnknown) || errors.Is(err, ErrContention) {
		t.Fatalf("Record: %v; want an unknown outcome", err)
	}
	// Every CAS lost definitely: contention, and nothing applied.
	fst.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op.Conditional() {
			return faultstore.Fault{Outcome: faultstore.Refused, Err: objstore.ErrPreconditionFailed}
		}
		return faultstore.Fault{}
	})
	err = s.Record(ctx, "acme", repo, []Finding{finding(1, 1)}, RunRef{})
	if !errors.Is(err, ErrContention) || errors.Is(err, objstore.ErrOutcomeUnknown) {
		t.Fatalf("Record: %v; want contention", err)
	}
}

func TestSetState(t *testing.T) {
	ctx := context.Background()
	s := New(memstore.New())
	if err := s.Record(ctx, "acme", repo, []Finding{finding(1, 1)}, RunRef{}); err != nil {
		t.Fatal(err)
	}
	fp := fpOf(t, s, "acme", "s3cr3t-1")
	for _, tc := range []struct {
		name   string
		change Change
		ok     bool
		state  State
		res    Resolution
	}{
		{"resolve revoked", Change{State: StateResolved, Resolution: ResolutionRevoked, By: "bob", Comment: "rotated"}, true, StateResolved, ResolutionRevoked},
		{"reopen", Change{State: StateOpen, By: "carol"}, true, StateOpen, ""},
		{"false positive", Change{State: StateResolved, Resolution: ResolutionFalsePositive, By: "bob"}, true, StateResolved, ResolutionFalsePositive},
		{"used in tests", Change{State: StateResolved, Resolution: ResolutionUsedInTests, By: "bob"}, true, StateResolved, ResolutionUsedInTests},
		{"wont fix", Change{State: StateResolved, Resolution: ResolutionWontFix, By: "bob"}, true, StateResolved, ResolutionWontFix},
		{"unknown state", Change{State: "closed", By: "bob"}, false, "", ""},
		{"resolved without resolution", Change{State: StateResolved, By: "bob"}, false, "", ""},
		{"unknown resolution", Change{State: StateResolved, Resolution: "fixed", By: "bob"}, false, "", ""},
		{"open with a resolution", Change{State: StateOpen, Resolution: ResolutionRevoked, By: "bob"}, false, "", ""},
		{"nobody", Change{State: StateOpen}, false, "", ""},
		{"bypass reason is no resolution", Change{State: StateResolved, Resolution: "will_fix_later", By: "bob"}, false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := mustAlert(t, s, "acme", fp)
			a, err := s.SetState(ctx, "acme", repo, fp, tc.change)
			after := mustAlert(t, s, "acme", fp)
			if !tc.ok {
				if !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("SetState: %v, want ErrInvalidArgument", err)
				}
				if !after.UpdatedAt.Equal(before.UpdatedAt) || after.State != before.State || len(after.History) != len(before.History) {
					t.Errorf("a refused change changed the alert: %+v", after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if after.State != tc.state || after.Resolution != tc.res || a.State != tc.state {
				t.Errorf("state %s/%s, want %s/%s", after.State, after.Resolution, tc.state, tc.res)
			}
			last := after.History[len(after.History)-1]
			if last.By != tc.change.By || last.Comment != tc.change.Comment || last.State != tc.state {
				t.Errorf("history %+v", last)
			}
			if tc.state == StateResolved && (after.ResolvedBy != tc.change.By || after.ResolvedAt.IsZero()) {
				t.Errorf("resolved by %q at %v", after.ResolvedBy, after.ResolvedAt)
			}
			if tc.state == StateOpen && (after.ResolvedBy != "" || !after.ResolvedAt.IsZero()) {
				t.Errorf("reopened alert still resolved by %q", after.ResolvedBy)
			}
		})
	}
	if _, err := s.SetState(ctx, "acme", repo, strings.Repeat("a", 64), Change{State: StateOpen, By: "x"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("absent alert: %v", err)
	}
	if _, err := s.SetState(ctx, "acme", repo, "nothex", Change{State: StateOpen, By: "x"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("malformed id: %v", err)
	}
}

// TestSetStateAmbiguous: a state change whose write landed unseen is
// recognised by its event id and not applied twice.
func TestSetStateAmbiguous(t *testing.T) {
	ctx := context.Background()
	fst := faultstore.New(memstore.New())
	s := New(fst)
	if err := s.Record(ctx, "acme", repo, []Finding{finding(1, 1)}, RunRef{}); err != nil {
		t.Fatal(err)
	}
	fp := fpOf(t, s, "acme", "s3cr3t-1")
	fst.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpPutIfMatch && c.N == 1 {
			return faultstore.Fault{Outcome: faultstore.LandedThenError}
		}
		return faultstore.Fault{}
	})
	if _, err := s.SetState(ctx, "acme", repo, fp, Change{State: StateResolved, Resolution: ResolutionRevoked, By: "bob"}); err != nil {
		t.Fatal(err)
	}
	if a := mustAlert(t, s, "acme", fp); len(a.History) != 1 || fst.Count(faultstore.OpPutIfMatch) != 1 {
		t.Errorf("history %d events after %d writes; want 1 and 1", len(a.History), fst.Count(faultstore.OpPutIfMatch))
	}
}

func TestBypass(t *testing.T) {
	ctx := context.Background()
	s := New(memstore.New())
	for _, tc := range []struct {
		reason BypassReason
		state  State
		res    Resolution
	}{
		{BypassFalsePositive, StateResolved, ResolutionFalsePositive},
		{BypassUsedInTests, StateResolved, ResolutionUsedInTests},
		{BypassWillFixLater, StateOpen, ""},
	} {
		f := finding(int(tc.reason[0]), 1)
		a, err := s.RecordBypass(ctx, "acme", repo, f, "dave", tc.reason)
		if err != nil {
			t.Fatal(err)
		}
		if a.State != tc.state || a.Resolution != tc.res || len(a.Bypasses) != 1 || a.Bypasses[0].By != "dave" || len(a.Locations) != 1 {
			t.Errorf("%s: %+v", tc.reason, a)
		}
	}
	// A bypass of a known secret adds itself and keeps the state.
	f := finding(int(BypassWillFixLater[0]), 2)
	a, err := s.RecordBypass(ctx, "acme", repo, f, "erin", BypassFalsePositive)
	if err != nil {
		t.Fatal(err)
	}
	if a.State != StateOpen || len(a.Bypasses) != 2 || len(a.Locations) != 2 {
		t.Errorf("second bypass: %+v", a)
	}
	if _, err := s.RecordBypass(ctx, "acme", repo, f, "erin", "because"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("bad reason: %v", err)
	}
	if _, err := s.RecordBypass(ctx, "acme", repo, f, "", BypassUsedInTests); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nobody: %v", err)
	}
}

// TestSecretOnlyInReveal: lists and gets never carry the secret; Reveal
// does. Fingerprints differ between tenants for the same secret.
func TestSecretOnlyInReveal(t *testing.T) {
	ctx := context.Background()
	s := New(memstore.New())
	for _, tenant := range []string{"acme", "other"} {
		if err := s.Record(ctx, tenant, repo, []Finding{finding(7, 1)}, RunRef{}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.List(ctx, Filter{Tenant: "acme"}, "", 0)
	if err != nil || len(page.Alerts) != 1 {
		t.Fatalf("list: %v, %v", page, err)
	}
	if strings.Contains(fmt.Sprintf("%+v", page.Alerts), "s3cr3t-7") {
		t.Errorf("list shows the secret")
	}
	fp := page.Alerts[0].Fingerprint
	if got, err := s.Reveal(ctx, "acme", repo, fp); err != nil || got != "s3cr3t-7" {
		t.Errorf("reveal: %q, %v", got, err)
	}
	if fpOf(t, s, "other", "s3cr3t-7") == fp {
		t.Errorf("two tenants share a fingerprint")
	}
	if _, err := s.Reveal(ctx, "other", repo, fp); !errors.Is(err, ErrNotFound) {
		t.Errorf("other tenant's reveal: %v", err)
	}
	// Findings with a fingerprint only: an alert with nothing to reveal,
	// until a finding brings the secret.
	fp2 := fpOf(t, s, "acme", "nope")
	f := finding(0, 5)
	f.Secret, f.Fingerprint = "", fp2
	if err := s.Record(ctx, "acme", repo, []Finding{f}, RunRef{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reveal(ctx, "acme", repo, fp2); !errors.Is(err, ErrNoSecret) {
		t.Errorf("reveal without a secret: %v", err)
	}
	f.Secret = "nope"
	if err := s.Record(ctx, "acme", repo, []Finding{f}, RunRef{}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Reveal(ctx, "acme", repo, fp2); err != nil || got != "nope" {
		t.Errorf("reveal after the secret came: %q, %v", got, err)
	}
	// A fingerprint made under another key is refused.
	f.Fingerprint = fpOf(t, s, "other", "nope")
	if err := s.Record(ctx, "acme", repo, []Finding{f}, RunRef{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("foreign fingerprint: %v", err)
	}
}

func TestListPagesAndFilters(t *testing.T) {
	ctx := context.Background()
	s := New(memstore.New())
	other := "01JREPO0000000000000000001"
	var fs []Finding
	for i := 0; i < 7; i++ {
		f := finding(i, i)
		if i%2 == 1 {
			f.RuleID = "aws-access-token"
		}
		fs = append(fs, f)
	}
	if err := s.Record(ctx, "acme", repo, fs, RunRef{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, "acme", other, fs[:2], RunRef{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetState(ctx, "acme", repo, fpOf(t, s, "acme", "s3cr3t-0"), Change{State: StateResolved, Resolution: ResolutionRevoked, By: "x"}); err != nil {
		t.Fatal(err)
	}
	collect := func(f Filter, limit int) []Alert {
		t.Helper()
		var out []Alert
		tok := ""
		for pages := 0; ; pages++ {
			p, err := s.List(ctx, f, tok, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Alerts) > limit {
				t.Fatalf("page of %d, limit %d", len(p.Alerts), limit)
			}
			out = append(out, p.Alerts...)
			if p.Next == "" {
				return out
			}
			if pages > 20 {
				t.Fatal("no end")
			}
			tok = p.Next
		}
	}
	for _, tc := range []struct {
		f    Filter
		want int
	}{
		{Filter{Tenant: "acme", RepoID: repo}, 7},
		{Filter{Tenant: "acme"}, 9},
		{Filter{Tenant: "ACME", Repos: map[string]bool{other: true}}, 2},
		{Filter{Tenant: "acme", Repos: map[string]bool{}}, 0},
		{Filter{Tenant: "acme", RepoID: repo, State: StateOpen}, 6},
		{Filter{Tenant: "acme", RepoID: repo, State: StateResolved}, 1},
		{Filter{Tenant: "acme", RepoID: repo, Rule: "aws-access-token"}, 3},
		{Filter{Tenant: "acme", Rule: "generic-api-key", State: StateOpen}, 4},
		{Filter{Tenant: "nobody"}, 0},
	} {
		for _, limit := range []int{1, 2, 3, 100} {
			got := collect(tc.f, limit)
			if len(got) != tc.want {
				t.Errorf("%+v limit %d: %d alerts, want %d", tc.f, limit, len(got), tc.want)
			}
			seen := map[string]bool{}
			for _, a := range got {
				k := a.RepoID + a.Fingerprint
				if seen[k] {
					t.Errorf("%+v limit %d: %s twice", tc.f, limit, k)
				}
				seen[k] = true
			}
		}
	}
	if _, err := s.List(ctx, Filter{Tenant: "acme"}, "!!", 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("bad token: %v", err)
	}
	if _, err := s.List(ctx, Filter{Tenant: "acme", State: "closed"}, "", 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("bad state: %v", err)
	}
}

func TestLocationsBounded(t *testing.T) {
	ctx := context.Background()
	s := New(memstore.New())
	var fs []Finding
	for p := 0; p < MaxLocations+5; p++ {
		fs = append(fs, finding(1, p))
	}
	if err := s.Record(ctx, "acme", repo, fs, RunRef{}); err != nil {
		t.Fatal(err)
	}
	a := mustAlert(t, s, "acme", fpOf(t, s, "acme", "s3cr3t-1"))
	if len(a.Locations) != MaxLocations || !a.LocationsTruncated {
		t.Errorf("%d locations, truncated %v", len(a.Locations), a.LocationsTruncated)
	}
}

// TestInvalidFindings: each finding is checked on its own. An invalid
// one is refused with ErrInvalidArgument, named by its index in a
// *RejectedError, and its valid neighbour is recorded all the same.
func TestInvalidFindings(t *testing.T) {
	ctx := context.Background()
	for name, mod := range map[string]func(*Finding){
		"no rule":       func(f *Finding) { f.RuleID = "" },
		"long rule":     func(f *Finding) { f.RuleID = strings.Repeat("r", maxField+1) },
		"no blob":       func(f *Finding) { f.BlobID = "" },
		"bad blob":      func(f *Finding) { f.BlobID = strings.Repeat("g", 40) },
		"bad commit":    func(f *Finding) { f.Commit = "c1" },
		"no secret":     func(f *Finding) { f.Secret = "" },
		"bad line":      func(f *Finding) { f.Line = -1 },
		"bad source":    func(f *Finding) { f.Source = "stdin" },
		"huge secret":   func(f *Finding) { f.Secret = strings.Repeat("x", MaxSecretBytes+1) },
		"bad fp":        func(f *Finding) { f.Secret, f.Fingerprint = "", "abc" },
		"wrong fp here": func(f *Finding) { f.Fingerprint = strings.Repeat("0", 64) },
	} {
		s := New(memstore.New())
		f := finding(1, 1)
		mod(&f)
		err := s.Record(ctx, "acme", repo, []Finding{finding(2, 2), f, finding(3, 3)}, RunRef{})
		var rej *RejectedError
		if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &rej) || len(rej.Rejected) != 1 || rej.Rejected[0].Index != 1 || rej.Rest != nil {
			t.Errorf("%s: %v", name, err)
		}
		p, err := s.List(ctx, Filter{Tenant: "acme"}, "", 0)
		if err != nil || len(p.Alerts) != 2 {
			t.Errorf("%s: the valid neighbours were not both recorded: %d alerts (%v)", name, len(p.Alerts), err)
		}
	}
	s := New(memstore.New())
	for _, bad := range []struct{ tenant, repo string }{{"", repo}, {"a/b", repo}, {"acme", "../x"}, {"acme", ""}} {
		if err := s.Record(ctx, bad.tenant, bad.repo, nil, RunRef{}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Record(%q, %q): %v", bad.tenant, bad.repo, err)
		}
	}
}

// TestLongFieldsTruncated: a path (and a match, a description, a ref)
// over the limit is cut and marked, and the finding recorded; an alert
// of a thousand such locations still fits in its record.
func TestLongFieldsTruncated(t *testing.T) {
	ctx := context.Background()
	s := New(memstore.New())
	long := strings.Repeat("é", maxField) // 2 bytes a character: the cut must not split one
	var fs []Finding
	for p := 0; p < MaxLocations; p++ {
		f := finding(1, p)
		f.Path = fmt.Sprintf("%d/%s", p, long)
		f.Match, f.Description, f.Ref = long, long, "refs/tags/"+long
		fs = append(fs, f)
	}
	if err := s.Record(ctx, "acme", repo, fs, RunRef{}); err != nil {
		t.Fatal(err)
	}
	a := mustAlert(t, s, "acme", fpOf(t, s, "acme", "s3cr3t-1"))
	if !a.LocationsTruncated || len(a.Locations) == 0 || len(a.Locations) == MaxLocations {
		t.Fatalf("%d locations, truncated %v: want the byte budget to cut the list", len(a.Locations), a.LocationsTruncated)
	}
	l := a.Locations[0]
	for name, v := range map[string]string{"path": l.Path, "match": l.Match, "ref": l.Ref, "description": a.Description} {
		if len(v) > maxField || !strings.HasSuffix(v, TruncatedMarker) || !utf8.ValidString(v) {
			t.Errorf("%s: %d bytes, marked %v, valid UTF-8 %v", name, len(v), strings.HasSuffix(v, TruncatedMarker), utf8.ValidString(v))
		}
	}
	// A record with more than the budget could not be written at all:
	// later findings still land (none here: it is full), and Record
	// keeps succeeding.
	if err := s.Record(ctx, "acme", repo, []Finding{finding(1, MaxLocations+1)}, RunRef{}); err != nil {
		t.Fatal(err)
	}
}

// TestSourceAndRef: a message finding and a finding reached from a ref
// keep their source and ref.
func TestSourceAndRef(t *testing.T) {
	ctx := context.Background()
	s := New(memstore.New())
	msg := finding(1, 1)
	msg.Path, msg.Source = "", SourceCommitMessage
	tagged := finding(1, 2)
	tagged.Commit, tagged.Ref = "", "refs/tags/v1"
	if err := s.Record(ctx, "acme", repo, []Finding{msg, tagged}, RunRef{}); err != nil {
		t.Fatal(err)
	}
	a := mustAlert(t, s, "acme", fpOf(t, s, "acme", "s3cr3t-1"))
	if len(a.Locations) != 2 || a.Locations[0].Source != SourceCommitMessage || a.Locations[1].Ref != "refs/tags/v1" || a.Locations[1].Commit != "" {
		t.Fatalf("locations %+v", a.Locations)
	}
	if _, err := s.RecordBypass(ctx, "acme", repo, msg, "bob (token t1)", BypassWillFixLater); err != nil {
		t.Fatal(err)
	}
	if a := mustAlert(t, s, "acme", fpOf(t, s, "acme", "s3cr3t-1")); len(a.Bypasses) != 1 || a.Bypasses[0].Source != SourceCommitMessage {
		t.Fatalf("bypasses %+v", a.Bypasses)
	}
}

// TestCorruptRecord: a record that does not decode is reported, not
// overwritten by Record.
func TestCorruptRecord(t *testing.T) {
	ctx := context.Background()
	objects := memstore.New()
	s := New(objects)
	fp := fpOf(t, s, "acme", "s3cr3t-1")
	key := alertKey("acme", repo, fp)
	if _, err := objects.Put(ctx, key, strings.NewReader(`{"v":1,"state":"weird"}`), 23); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, "acme", repo, []Finding{finding(1, 1)}, RunRef{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Record over a corrupt record: %v", err)
	}
	if _, err := s.Get(ctx, "acme", repo, fp); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Get: %v", err)
	}
}

func TestFingerprintKeyRace(t *testing.T) {
	ctx := context.Background()
	objects := memstore.New()
	fps := make([]string, 8)
	var wg sync.WaitGroup
	for i := range fps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fp, err := New(objects).Fingerprint(ctx, "acme", "x")
			if err != nil {
				t.Error(err)
			}
			fps[i] = fp
		}()
	}
	wg.Wait()
	for _, fp := range fps {
		if fp != fps[0] {
			t.Fatalf("racing nodes disagree on the key: %v", fps)
		}
	}
}
