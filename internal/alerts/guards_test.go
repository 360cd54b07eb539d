package alerts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// TestSettleAfterLastAttempt: when the very last write lands unseen, the
// final read finds it and Record succeeds rather than report a doubt.
func TestSettleAfterLastAttempt(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	fst := faultstore.New(inner)
	s := New(fst)
	if _, err := s.FingerprintKey(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	fst.SetPlan(func(c faultstore.Call) faultstore.Fault {
		switch {
		case !c.Op.Conditional():
			return faultstore.Fault{}
		case c.CAS-1 < maxAttempts: // the key's PutIfAbsent was CAS 1
			return faultstore.Fault{Outcome: faultstore.Lost}
		}
		return faultstore.Fault{Outcome: faultstore.LandedThenError}
	})
	if err := s.Record(ctx, "acme", repo, []Finding{finding(1, 1)}, RunRef{}); err != nil {
		t.Fatalf("Record: %v", err)
	}
	if n := fst.CASCount() - 1; n != maxAttempts {
		t.Errorf("%d alert writes, want %d", n, maxAttempts)
	}
	mustAlert(t, New(inner), "acme", fpOf(t, s, "acme", "s3cr3t-1"))
}

// TestCorruptRecordNotRetried: a corrupt record is reported at once, not
// read 64 times, and never overwritten.
func TestCorruptRecordNotRetried(t *testing.T) {
	ctx := context.Background()
	fst := faultstore.New(memstore.New())
	s := New(fst)
	fp := fpOf(t, s, "acme", "s3cr3t-1")
	body := `{"v":1,"state":"weird"}`
	if _, err := fst.Put(ctx, alertKey("acme", repo, fp), strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	gets := fst.Count(faultstore.OpGet)
	if err := s.Record(ctx, "acme", repo, []Finding{finding(1, 1)}, RunRef{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Record: %v", err)
	}
	if n := fst.Count(faultstore.OpGet) - gets; n != 1 || fst.CASCount() != 1 {
		t.Errorf("%d reads and %d conditional writes (the key's included); want 1 and 1", n, fst.CASCount())
	}
}

// TestBypassAmbiguous: a bypass whose write landed unseen is recorded
// once.
func TestBypassAmbiguous(t *testing.T) {
	ctx := context.Background()
	fst := faultstore.New(memstore.New())
	s := New(fst)
	if err := s.Record(ctx, "acme", repo, []Finding{finding(1, 1)}, RunRef{}); err != nil {
		t.Fatal(err)
	}
	fst.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpPutIfMatch && c.N == 1 {
			return faultstore.Fault{Outcome: faultstore.LandedThenError}
		}
		return faultstore.Fault{}
	})
	a, err := s.RecordBypass(ctx, "acme", repo, finding(1, 1), "dave", BypassWillFixLater)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Bypasses) != 1 || fst.Count(faultstore.OpPutIfMatch) != 1 {
		t.Errorf("%d bypasses after %d writes", len(a.Bypasses), fst.Count(faultstore.OpPutIfMatch))
	}
}

// TestListExaminesBoundedRecords: a filter matching nothing still answers
// in bounded pages, and following Next visits everything once. (A filter
// by state reads the state index instead: TestStateIndex.)
func TestListExaminesBoundedRecords(t *testing.T) {
	ctx := context.Background()
	objects := faultstore.New(memstore.New())
	s := New(objects)
	s.maxExamined = 3
	var fs []Finding
	for i := 0; i < 10; i++ {
		fs = append(fs, finding(i, i))
	}
	if err := s.Record(ctx, "acme", repo, fs, RunRef{}); err != nil {
		t.Fatal(err)
	}
	// A stray object under the prefix is no alert: skipped, not an error.
	if _, err := objects.Put(ctx, repoPrefix("acme", repo)+"stray", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	tok, pages := "", 0
	for {
		gets := objects.Count(faultstore.OpGet)
		p, err := s.List(ctx, Filter{Tenant: "acme", RepoID: repo, Rule: "no-such-rule"}, tok, 10)
		if err != nil {
			t.Fatal(err)
		}
		if n := objects.Count(faultstore.OpGet) - gets; n > 3 || len(p.Alerts) != 0 {
			t.Fatalf("page read %d records and holds %d alerts", n, len(p.Alerts))
		}
		pages++
		if p.Next == "" {
			break
		}
		tok = p.Next
	}
	if pages != 4 {
		t.Errorf("%d pages over 10 records at 3 a page, want 4", pages)
	}
	p, err := s.List(ctx, Filter{Tenant: "acme", RepoID: repo}, "", 100)
	if err != nil || len(p.Alerts) != 3 || p.Next == "" {
		t.Errorf("unfiltered: %d alerts, next %q, %v", len(p.Alerts), p.Next, err)
	}
}

func TestDecodeRecordRefuses(t *testing.T) {
	good := merge(nil, ref{"acme", repo, strings.Repeat("ab", 32)}, []Finding{finding(1, 1), finding(1, 2)}, RunRef{}, New(nil).now())
	for name, mod := range map[string]func(r *record){
		"version":             func(r *record) { r.V = 2 },
		"fingerprint":         func(r *record) { r.Fingerprint = strings.Repeat("AB", 32) },
		"no rule":             func(r *record) { r.RuleID = "" },
		"state":               func(r *record) { r.State = "closed" },
		"open with reason":    func(r *record) { r.Resolution = ResolutionRevoked },
		"resolved, no reason": func(r *record) { r.State = StateResolved },
		"duplicate location":  func(r *record) { r.Locations[1] = r.Locations[0] },
		"bad event":           func(r *record) { r.History = []eventRecord{{State: StateOpen}} },
		"bad bypass":          func(r *record) { r.Bypasses = []bypassRecord{{ID: "x", Reason: "because"}} },
	} {
		r := *good
		r.Locations = slices.Clone(good.Locations)
		mod(&r)
		b, err := encodeRecord(&r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeRecord(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	b, _ := encodeRecord(good)
	if _, err := decodeRecord(b); err != nil {
		t.Errorf("good record: %v", err)
	}
}

func TestFingerprintKeyWrongSize(t *testing.T) {
	ctx := context.Background()
	objects := memstore.New()
	if _, err := objects.Put(ctx, keysPrefix+"acme", strings.NewReader("short"), 5); err != nil {
		t.Fatal(err)
	}
	if _, err := New(objects).FingerprintKey(ctx, "ACME"); err == nil {
		t.Error("a key of the wrong size was used")
	}
	var _ objstore.Store = objects
}

// TestRecordNothingWritesNothing: an empty batch (a scan that found
// nothing) neither writes alerts nor creates the tenant's key.
func TestRecordNothingWritesNothing(t *testing.T) {
	fst := faultstore.New(memstore.New())
	if err := New(fst).Record(context.Background(), "acme", repo, nil, RunRef{}); err != nil {
		t.Fatal(err)
	}
	if n := fst.Count(faultstore.OpGet) + fst.CASCount(); n != 0 {
		t.Errorf("%d store calls for no findings", n)
	}
}

// TestFingerprintKeyIsACopy: a caller that scribbles on its key (an
// engine clearing it after use, say) does not change the store's.
func TestFingerprintKeyIsACopy(t *testing.T) {
	ctx := context.Background()
	s := New(memstore.New())
	before := fpOf(t, s, "acme", "x")
	k, err := s.FingerprintKey(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	clear(k)
	if after := fpOf(t, s, "acme", "x"); after != before {
		t.Error("the caller's copy is the store's key")
	}
}

// TestSetStateFaults runs SetState against faultstore's matrix: a state
// change is applied once or not at all, and a nil answer means once.
func TestSetStateFaults(t *testing.T) {
	ctx := context.Background()
	for _, op := range []faultstore.Op{faultstore.OpPutIfMatch, faultstore.OpGet} {
		for _, out := range faultstore.Faults() {
			for _, every := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/every=%v", op, out, every), func(t *testing.T) {
					inner := memstore.New()
					fst := faultstore.New(inner)
					s := New(fst)
					if err := s.Record(ctx, "acme", repo, []Finding{finding(1, 1)}, RunRef{}); err != nil {
						t.Fatal(err)
					}
					fp := fpOf(t, s, "acme", "s3cr3t-1")
					base := fst.Count(op)
					fst.SetPlan(func(c faultstore.Call) faultstore.Fault {
						if c.Op == op && (every || c.N-base == 1) {
							return faultstore.Fault{Outcome: out}
						}
						return faultstore.Fault{}
					})
					_, err := s.SetState(ctx, "acme", repo, fp, Change{State: StateResolved, Resolution: ResolutionWontFix, By: "bob"})
					fst.SetPlan(nil)
					a := mustAlert(t, New(inner), "acme", fp)
					switch {
					case len(a.History) > 1:
						t.Fatalf("the change applied %d times", len(a.History))
					case err == nil && (len(a.History) != 1 || a.State != StateResolved):
						t.Fatalf("SetState succeeded but the alert is %s with %d events", a.State, len(a.History))
					case err != nil && !errors.Is(err, objstore.ErrOutcomeUnknown) && !errors.Is(err, faultstore.ErrInjected):
						t.Fatalf("SetState: %v", err)
					case err != nil && len(a.History) == 1 && !errors.Is(err, objstore.ErrOutcomeUnknown):
						t.Fatalf("SetState applied but answered %v, not an unknown outcome", err)
					}
				})
			}
		}
	}
}

// walkList follows List's pages from the first and returns the alerts in
// order and the number of pages, failing if any alert shows twice.
func walkList(t *testing.T, s *Store, f Filter, limit int) ([]Alert, int) {
	t.Helper()
	var all []Alert
	seen := map[string]bool{}
	tok, pages := "", 0
	for {
		p, err := s.List(context.Background(), f, tok, limit)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range p.Alerts {
			if seen[a.RepoID+a.Fingerprint] {
				t.Fatalf("alert %s on two pages", a.Fingerprint)
			}
			seen[a.RepoID+a.Fingerprint] = true
		}
		all = append(all, p.Alerts...)
		pages++
		if p.Next == "" {
			return all, pages
		}
		if pages > 1000 {
			t.Fatal("the pages never end")
		}
		tok = p.Next
	}
}

// TestTenantListListsBoundedKeys: a tenant-wide list for a caller who may
// read one repository, whose alerts come last in key order, lists at most
// maxListed keys per page (skipped keys count), and carries a cursor to
// the rest instead of listing the whole tenant in one request.
func TestTenantListListsBoundedKeys(t *testing.T) {
	ctx := context.Background()
	s := New(memstore.New())
	s.maxListed = 4
	repos := []string{"01JREPOA000000000000000000", "01JREPOB000000000000000000", "01JREPOZ000000000000000000"}
	for _, r := range repos {
		var fs []Finding
		for i := range 5 {
			fs = append(fs, finding(i, i))
		}
		if err := s.Record(ctx, "acme", r, fs, RunRef{}); err != nil {
			t.Fatal(err)
		}
	}
	got, pages := walkList(t, s, Filter{Tenant: "acme", Repos: map[string]bool{repos[2]: true}}, 10)
	if len(got) != 5 || pages != 4 {
		t.Fatalf("%d alerts in %d pages, want 5 in 4 (15 keys, 4 a page)", len(got), pages)
	}
	for _, a := range got {
		if a.RepoID != repos[2] {
			t.Fatalf("an alert of %s was listed", a.RepoID)
		}
	}
}

// TestListByteBudgets: a page ends when the records it read or the
// alerts it holds reach their byte budgets (but holds at least one), and
// following Next visits every alert once.
func TestListByteBudgets(t *testing.T) {
	ctx := context.Background()
	s := New(memstore.New())
	var fs []Finding
	for i := range 6 {
		for l := range 10 {
			f := finding(i, l)
			f.Match = strings.Repeat("m", 1000)
			fs = append(fs, f)
		}
	}
	if err := s.Record(ctx, "acme", repo, fs, RunRef{}); err != nil {
		t.Fatal(err)
	}
	f := Filter{Tenant: "acme", RepoID: repo}
	if all, pages := walkList(t, s, f, 100); len(all) != 6 || pages != 1 {
		t.Fatalf("unbounded: %d alerts in %d pages", len(all), pages)
	}
	s.maxPageBytes = 1 // every page holds one alert
	if all, pages := walkList(t, s, f, 100); len(all) != 6 || pages != 6 {
		t.Fatalf("a page budget of one byte: %d alerts in %d pages, want 6 in 6", len(all), pages)
	}
	s.maxPageBytes = defaultMaxPageBytes
	s.maxReadBytes = 25 << 10 // a record is about 12 KiB
	if all, pages := walkList(t, s, f, 100); len(all) != 6 || pages != 3 {
		t.Fatalf("a read budget of two records: %d alerts in %d pages, want 6 in 3", len(all), pages)
	}
}

// TestListTrimsAlerts: a list's alerts carry their first ListLocations
// locations and the count of all; Get and ListFull carry all of them.
func TestListTrimsAlerts(t *testing.T) {
	ctx := context.Background()
	s := New(memstore.New())
	var fs []Finding
	for l := range 10 {
		fs = append(fs, finding(1, l))
	}
	if err := s.Record(ctx, "acme", repo, fs, RunRef{}); err != nil {
		t.Fatal(err)
	}
	p, err := s.List(ctx, Filter{Tenant: "acme"}, "", 10)
	if err != nil || len(p.Alerts) != 1 {
		t.Fatalf("List: %+v, %v", p, err)
	}
	if a := p.Alerts[0]; len(a.Locations) != ListLocations || a.LocationCount != 10 {
		t.Fatalf("a listed alert has %d locations of %d", len(a.Locations), a.LocationCount)
	}
	full, err := s.ListFull(ctx, Filter{Tenant: "acme"}, "", 10)
	if err != nil || len(full.Alerts[0].Locations) != 10 {
		t.Fatalf("ListFull: %+v, %v", full, err)
	}
	a, err := s.Get(ctx, "acme", repo, p.Alerts[0].Fingerprint)
	if err != nil || len(a.Locations) != 10 || a.LocationCount != 10 {
		t.Fatalf("Get: %d locations of %d, %v", len(a.Locations), a.LocationCount, err)
	}
}
