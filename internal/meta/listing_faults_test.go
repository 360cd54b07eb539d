package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// The tests in this file fault every object-store call of every write
// that changes what a list shows, one call at a time, with each of
// faultstore's outcomes (a request lost, one that landed and then
// reported an error, a refusal), and then check what
// docs/adr/0027-listing-keys.md promises:
//
//  1. whatever the write reported, every list agrees with the records at
//     once: a name is listed exactly when its record is live, as the
//     record says (a lister reads the record of a name whose keys a write
//     left unsettled);
//  2. once a lister has seen each name, and a day has passed for intents
//     of writes that never landed, each live record has exactly one key,
//     a final one, and nothing else is left: the next page is one LIST,
//     with no GET.

// listingWrite is one write whose every store call gets faulted.
type listingWrite struct {
	name  string
	setup func(t *testing.T, s *Store)
	run   func(s *Store) error
	// base, if set, faults calls the test does not count (a refusal that
	// sends the write down another path).
	base func(faultstore.Call) faultstore.Fault
}

func listingWrites() []listingWrite {
	ctx := context.Background()
	repo := func(t *testing.T, s *Store, owner, name string, public bool) {
		t.Helper()
		if _, err := s.CreateRepo(ctx, owner, name, public); err != nil {
			t.Fatal(err)
		}
	}
	return []listingWrite{
		{name: "create-tenant", run: func(s *Store) error {
			_, err := s.CreateTenant(ctx, "Alice", KindUser)
			return err
		}},
		{name: "delete-tenant", setup: func(t *testing.T, s *Store) {
			mustTenant(t, s, "Bob", KindOrg)
			repo(t, s, "bob", "Proj", true)
		}, run: func(s *Store) error { return s.DeleteTenant(ctx, "bob", true) }},
		{name: "create-repo", setup: func(t *testing.T, s *Store) { mustTenant(t, s, "carol", KindUser) },
			run: func(s *Store) error { _, err := s.CreateRepo(ctx, "carol", "Proj", true); return err }},
		{name: "create-over-tombstone", setup: func(t *testing.T, s *Store) {
			mustTenant(t, s, "dave", KindUser)
			repo(t, s, "dave", "proj", true)
			if err := s.DeleteRepo(ctx, "dave", "proj"); err != nil {
				t.Fatal(err)
			}
		}, run: func(s *Store) error { _, err := s.CreateRepo(ctx, "dave", "proj", false); return err }},
		{name: "create-repo-init-fails", setup: func(t *testing.T, s *Store) { mustTenant(t, s, "erin", KindUser) },
			run: func(s *Store) error { _, err := s.CreateRepo(ctx, "erin", "proj", true); return err },
			// The log's index cannot be written: the name is released.
			base: func(c faultstore.Call) faultstore.Fault {
				if c.Op == faultstore.OpPutIfAbsent && strings.HasPrefix(c.Key, "repos/") {
					return faultstore.Fault{Outcome: faultstore.Refused}
				}
				return faultstore.Fault{}
			}},
		{name: "fork", setup: func(t *testing.T, s *Store) {
			mustTenant(t, s, "fred", KindUser)
			mustTenant(t, s, "gina", KindOrg)
			repo(t, s, "fred", "src", true)
		}, run: func(s *Store) error { _, err := s.ForkRepo(ctx, "fred", "src", "gina", "Copy"); return err }},
		{name: "delete-repo", setup: func(t *testing.T, s *Store) {
			mustTenant(t, s, "hal", KindUser)
			repo(t, s, "hal", "a", true)
			repo(t, s, "hal", "b", false)
		}, run: func(s *Store) error { return s.DeleteRepo(ctx, "hal", "a") }},
		{name: "set-visibility", setup: func(t *testing.T, s *Store) {
			mustTenant(t, s, "ida", KindUser)
			repo(t, s, "ida", "a", true)
		}, run: func(s *Store) error { return s.SetVisibility(ctx, "ida", "a", false) }},
		{name: "set-push-protection", setup: func(t *testing.T, s *Store) {
			mustTenant(t, s, "jo", KindUser)
			repo(t, s, "jo", "a", false)
		}, run: func(s *Store) error { return s.SetPushProtection(ctx, "jo", "a", true) }},
	}
}

// countingPlan counts calls and faults the k-th (from 1) with f, after
// base's verdict for calls base faults (which are not counted).
func countingPlan(base func(faultstore.Call) faultstore.Fault, k int, f faultstore.Outcome) (faultstore.Plan, func() int) {
	var mu sync.Mutex
	n := 0
	return func(c faultstore.Call) faultstore.Fault {
			if base != nil {
				if b := base(c); b.Outcome != faultstore.Pass {
					return b
				}
			}
			mu.Lock()
			defer mu.Unlock()
			n++
			if n == k {
				return faultstore.Fault{Outcome: f}
			}
			return faultstore.Fault{}
		}, func() int {
			mu.Lock()
			defer mu.Unlock()
			return n
		}
}

func TestListingFaultEveryStep(t *testing.T) {
	for _, w := range listingWrites() {
		// How many calls the write makes when nothing fails.
		calls := func() int {
			fs := faultstore.New(memstore.New())
			s := newStore(fs)
			if w.setup != nil {
				w.setup(t, s)
			}
			plan, n := countingPlan(w.base, 0, faultstore.Pass)
			fs.SetPlan(plan)
			w.run(s)
			return n()
		}()
		for k := 1; k <= calls; k++ {
			for _, f := range faultstore.Faults() {
				t.Run(fmt.Sprintf("%s/call%d/%s", w.name, k, f), func(t *testing.T) {
					inner := memstore.New()
					fs := faultstore.New(inner)
					s := newStore(fs)
					if w.setup != nil {
						w.setup(t, s)
					}
					plan, _ := countingPlan(w.base, k, f)
					fs.SetPlan(plan)
					err := w.run(s)
					fs.SetPlan(nil)
					checkListing(t, inner, err)
				})
			}
		}
	}
}

// TestListingWithoutFaults: the same writes, unfaulted, leave exactly one
// final key per live record behind them, with no lister's help.
func TestListingWithoutFaults(t *testing.T) {
	for _, w := range listingWrites() {
		t.Run(w.name, func(t *testing.T) {
			inner := memstore.New()
			fs := faultstore.New(inner)
			s := newStore(fs)
			if w.setup != nil {
				w.setup(t, s)
			}
			fs.SetPlan(w.base)
			err := w.run(s)
			fs.SetPlan(nil)
			if err != nil && w.base == nil {
				t.Fatal(err)
			}
			checkKeys(t, inner)
		})
	}
}

// checkListing checks promises 1 and 2 on the store a faulted write left.
func checkListing(t *testing.T, inner objstore.Store, werr error) {
	t.Helper()
	ctx := context.Background()
	tenants, repos := records(t, inner)
	s := newStore(inner)
	if err := agrees(ctx, s, tenants, repos); err != nil {
		t.Fatalf("after a write that returned %v: %v", werr, err)
	}
	// A day later, a lister has settled every name it met.
	later := newStore(inner)
	later.now = func() time.Time { return time.Now().Add(staleIntent + time.Hour).UTC().Truncate(time.Millisecond) }
	if err := agrees(ctx, later, tenants, repos); err != nil {
		t.Fatalf("a day later: %v", err)
	}
	checkKeys(t, inner)
}

// records reads the tenant and live repository records directly.
func records(t *testing.T, objects objstore.Store) (map[string]tenantRecord, map[string][]repoRecord) {
	t.Helper()
	ctx := context.Background()
	s := newStore(objects)
	tenants := map[string]tenantRecord{}
	repos := map[string][]repoRecord{}
	for _, k := range mustKeys(t, s, tenantsPrefix) {
		var r tenantRecord
		if _, err := s.getRecord(ctx, k, &r); err != nil {
			t.Fatal(err)
		}
		tenants[strings.TrimPrefix(k, tenantsPrefix)] = r
	}
	for _, k := range mustKeys(t, s, reposPrefix) {
		var r repoRecord
		if _, err := s.getRecord(ctx, k, &r); err != nil {
			t.Fatal(err)
		}
		if !r.Deleted {
			o := strings.Split(strings.TrimPrefix(k, reposPrefix), "/")[0]
			repos[o] = append(repos[o], r)
		}
	}
	return tenants, repos
}

func mustKeys(t *testing.T, s *Store, prefix string) []string {
	t.Helper()
	keys, err := s.listKeys(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// agrees reports where s's lists differ from the records.
func agrees(ctx context.Context, s *Store, tenants map[string]tenantRecord, repos map[string][]repoRecord) error {
	ts, err := s.ListTenants(ctx)
	if err != nil {
		return err
	}
	var want []Tenant
	for _, k := range slices.Sorted(mapKeys(tenants)) {
		r := tenants[k]
		want = append(want, r.tenant())
	}
	if !slices.Equal(ts, want) {
		return fmt.Errorf("tenants listed %v, records %v", ts, want)
	}
	for o := range tenants {
		got, err := s.ListRepos(ctx, o)
		if err != nil {
			return err
		}
		var want []Repo
		for _, r := range repos[o] {
			want = append(want, r.repo())
		}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("repositories of %s listed %v, records %v", o, got, want)
		}
	}
	for o := range repos {
		if _, ok := tenants[o]; !ok {
			return fmt.Errorf("live repositories %v of a deleted tenant %s", repos[o], o)
		}
	}
	// The scan sweep's pages of every repository.
	var all, wantAll []Repo
	for after := ""; ; {
		page, next, err := s.ReposPage(ctx, after, 2)
		if err != nil {
			return err
		}
		all = append(all, page...)
		if next == "" {
			break
		}
		after = next
	}
	for _, o := range slices.Sorted(mapKeys(repos)) {
		for _, r := range repos[o] {
			wantAll = append(wantAll, r.repo())
		}
	}
	if !reflect.DeepEqual(all, wantAll) {
		return fmt.Errorf("every repository listed %v, records %v", all, wantAll)
	}
	return nil
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// checkKeys checks that each live record has exactly one listing key, a
// final one describing it, and that the only other keys are the final
// keys of deletions less than a day old: one per repository tombstone,
// describing it, and one per deleted tenant.
func checkKeys(t *testing.T, inner objstore.Store) {
	t.Helper()
	ctx := context.Background()
	tenants, repos := records(t, inner)
	s := newStore(inner)
	if ok, err := s.listingReady(ctx); err != nil || !ok {
		// Lists read the records (a write of the marker failed): the keys
		// wait for BuildListings.
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	seen := map[string]bool{}
	for _, k := range mustKeys(t, s, tenantListPrefix) {
		e, ok := parseTenantEntry(k)
		r, live := tenants[e.name]
		switch {
		case !ok:
			t.Errorf("unreadable tenant key %q", k)
		case !live && e.state == stateDeleted:
		case !live || e.state != stateFinal || !e.describes(&r) || seen[e.name]:
			t.Errorf("tenant key %q left behind (record %+v, live %v)", k, r, live)
		}
		seen[e.name] = live
	}
	for name := range tenants {
		if !seen[name] {
			t.Errorf("tenant %s has no final key", name)
		}
	}
	live := map[string]repoRecord{}
	for o, rs := range repos {
		for _, r := range rs {
			live[o+"/"+lower(r.Name)] = r
		}
	}
	seen = map[string]bool{}
	for _, k := range mustKeys(t, s, repoListPrefix) {
		e, ok := parseRepoEntry(k)
		name := e.owner + "/" + e.name
		r, isLive := live[name]
		if !ok {
			t.Errorf("unreadable repository key %q", k)
			continue
		}
		if !isLive && e.state == stateFinal && e.flags&flagDeleted != 0 {
			var tomb repoRecord
			if _, err := s.getRecord(ctx, repoKey(e.owner, e.name), &tomb); err == nil && tomb.Deleted && e.describes(&tomb) && !seen[name] {
				seen[name] = true
				continue
			}
		}
		if !isLive || e.state != stateFinal || !e.describes(&r) || seen[name] {
			t.Errorf("repository key %q left behind (record %+v, live %v)", k, r, isLive)
		}
		seen[name] = true
	}
	for name := range live {
		if !seen[name] {
			t.Errorf("repository %s has no final key", name)
		}
	}
}

// TestListingIntentOfAnotherWriteStays: a write's tidying never deletes
// the intent of a write still in flight (a later generation), and a
// lister shows the record, not the intent, meanwhile.
func TestListingIntentOfAnotherWriteStays(t *testing.T) {
	ctx := context.Background()
	s := newStore(memstore.New())
	mustTenant(t, s, "kim", KindUser)
	if _, err := s.CreateRepo(ctx, "kim", "a", true); err != nil {
		t.Fatal(err)
	}
	rec, _, err := s.readRepo(ctx, "kim", "a")
	if err != nil {
		t.Fatal(err)
	}
	// A visibility change announced itself and has not written yet.
	next := rec
	next.Public = false
	intent, err := s.announceRepo(ctx, &next, rec.Gen)
	if err != nil {
		t.Fatal(err)
	}
	rs, _, err := s.ListRepoPage(ctx, "kim", "", 10, false)
	if err != nil || len(rs) != 1 || !rs[0].Public {
		t.Fatalf("listed %+v, %v; want a public repository, as its record says", rs, err)
	}
	keys := mustKeys(t, s, repoListPrefix)
	if !slices.Contains(keys, intent) {
		t.Fatalf("the lister deleted the intent of a write in flight: %v", keys)
	}
	// The write lands: the next lister shows it and settles the keys.
	if _, err := s.replaceRecord(ctx, repoKey("kim", "a"), &next, mustETag(t, s, repoKey("kim", "a"))); err != nil {
		t.Fatal(err)
	}
	if rs, _, err = s.ListRepoPage(ctx, "kim", "", 10, false); err != nil || len(rs) != 1 || rs[0].Public {
		t.Fatalf("listed %+v, %v; want the private repository", rs, err)
	}
	checkKeys(t, s.objects)
}

func mustETag(t *testing.T, s *Store, key string) string {
	t.Helper()
	var r repoRecord
	etag, err := s.getRecord(context.Background(), key, &r)
	if err != nil {
		t.Fatal(err)
	}
	return etag
}

// TestListingNeverShowsPrivateAsPublic: while a repository turns private,
// and if the write stops half way, no list of public repositories shows
// it: the key that still says "public" is never alone.
func TestListingNeverShowsPrivateAsPublic(t *testing.T) {
	ctx := context.Background()
	for k := 1; k <= 8; k++ {
		inner := memstore.New()
		fs := faultstore.New(inner)
		s := newStore(fs)
		mustTenant(t, s, "lee", KindUser)
		if _, err := s.CreateRepo(ctx, "lee", "secret", true); err != nil {
			t.Fatal(err)
		}
		plan, _ := countingPlan(nil, k, faultstore.LandedThenError)
		fs.SetPlan(plan)
		_ = s.SetVisibility(ctx, "lee", "secret", false)
		fs.SetPlan(nil)
		rec, _, err := s.readRepo(ctx, "lee", "secret")
		if err != nil {
			t.Fatal(err)
		}
		rs, _, err := newStore(inner).ListRepoPage(ctx, "lee", "", 10, true)
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Public && len(rs) != 0 {
			t.Fatalf("fault at call %d: the record is private and the public list shows %+v", k, rs)
		}
	}
}

// TestListingPageCost: a page of settled names is one LIST and the
// owner's GET, whatever the number of repositories; an unsettled name
// costs one GET more.
func TestListingPageCost(t *testing.T) {
	ctx := context.Background()
	counts := map[string]int{}
	var mu sync.Mutex
	fs := faultstore.New(memstore.New())
	s := newStore(fs)
	mustTenant(t, s, "max", KindUser)
	for i := range 250 {
		if _, err := s.CreateRepo(ctx, "max", fmt.Sprintf("r%03d", i), i%2 == 0); err != nil {
			t.Fatal(err)
		}
	}
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		mu.Lock()
		counts[c.Op.String()]++
		mu.Unlock()
		return faultstore.Fault{}
	})
	page := func(after string, limit int, public bool) ([]Repo, string) {
		clear(counts)
		rs, next, err := s.ListRepoPage(ctx, "max", after, limit, public)
		if err != nil {
			t.Fatal(err)
		}
		return rs, next
	}
	rs, next := page("", 100, false)
	if len(rs) != 100 || next != "r099" || counts["get"] != 1 || counts["list"] != 1 {
		t.Fatalf("first page: %d repositories, next %q, requests %v; want 100, r099, one GET and one LIST", len(rs), next, counts)
	}
	rs, next = page(next, 100, true)
	if len(rs) != 75 || next != "" || rs[0].Name != "r100" || counts["get"] != 1 || counts["list"] != 1 {
		t.Fatalf("public page after r099: %d repositories from %v, next %q, requests %v", len(rs), rs[0].Name, next, counts)
	}
	// A visibility change that stopped after its intent: one GET more.
	rec, _, err := s.readRepo(ctx, "max", "r000")
	if err != nil {
		t.Fatal(err)
	}
	rec.Public = false
	if _, err := s.announceRepo(ctx, &rec, rec.Gen); err != nil {
		t.Fatal(err)
	}
	if _, _ = page("", 10, false); counts["get"] != 2 {
		t.Fatalf("page with an unsettled name: requests %v; want two GETs", counts)
	}
	if _, _, err := s.ListRepoPage(ctx, "max", "R099", 10, false); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a cursor not in key form: %v", err)
	}
}

// TestListingLaggingFinalAfterDelete: a lister (or writer) that read a
// live record, and writes its final key only after the repository was
// deleted and its keys settled, must not bring it back: the tombstone
// keeps a final key for a day, so the late key is never alone. A day
// later a lister deletes the tombstone's key without reading anything.
func TestListingLaggingFinalAfterDelete(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	s := newStore(inner)
	mustTenant(t, s, "nia", KindUser)
	if _, err := s.CreateRepo(ctx, "nia", "gone", true); err != nil {
		t.Fatal(err)
	}
	stale, _, err := s.readRepo(ctx, "nia", "gone")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRepo(ctx, "nia", "gone"); err != nil {
		t.Fatal(err)
	}
	// The lagging settle: no keys of its generation left, so it writes
	// the final key of the live record it read.
	if err := s.settleRepoKeys(ctx, nil, &stale); err != nil {
		t.Fatal(err)
	}
	if rs, _, err := s.ListRepoPage(ctx, "nia", "", 10, false); err != nil || len(rs) != 0 {
		t.Fatalf("after a lagging final key of a deleted repository: listed %+v, %v", rs, err)
	}
	if keys := mustKeys(t, s, repoListPrefix); len(keys) != 1 || !strings.Contains(keys[0], ",f,") {
		t.Fatalf("keys %v: want the tombstone's final key alone", keys)
	}
	later := newStore(&refusingRecordGets{Store: inner})
	later.now = func() time.Time { return time.Now().Add(staleIntent + time.Hour) }
	if rs, _, err := later.ListRepoPage(ctx, "nia", "", 10, false); err != nil || len(rs) != 0 {
		t.Fatalf("a day later: listed %+v, %v", rs, err)
	}
	if keys := mustKeys(t, s, repoListPrefix); len(keys) != 0 {
		t.Fatalf("a day later, keys %v are left", keys)
	}
}

// TestListingLaggingTenantFinal is the same for a deleted tenant.
func TestListingLaggingTenantFinal(t *testing.T) {
	ctx := context.Background()
	s := newStore(memstore.New())
	mustTenant(t, s, "ola", KindUser)
	mustTenant(t, s, "pam", KindUser)
	var stale tenantRecord
	if _, err := s.getRecord(ctx, tenantKey("ola"), &stale); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTenant(ctx, "ola", false); err != nil {
		t.Fatal(err)
	}
	if err := s.settleTenantKeys(ctx, nil, &stale); err != nil {
		t.Fatal(err)
	}
	ts, err := s.ListTenants(ctx)
	if err != nil || len(ts) != 1 || ts[0].Name != "pam" {
		t.Fatalf("after a lagging final key of a deleted tenant: listed %+v, %v", ts, err)
	}
}

// refusingRecordGets is a store that refuses GETs of records, to show that a
// lister settles a tombstone's aged key without reading one.
type refusingRecordGets struct{ objstore.Store }

func (c *refusingRecordGets) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	if strings.HasPrefix(key, reposPrefix) {
		return nil, objstore.Info{}, fmt.Errorf("unexpected GET %s", key)
	}
	return c.Store.Get(ctx, key)
}

// delayedRecordWrite is a fake store (the fault cannot be had from a real
// one on demand): it holds the first conditional write of one record
// key, answers it with an unknown outcome, refuses every later GET of that
// key, and applies the held write when the test says so, after the call
// that sent it has returned: a request that lands late.
type delayedRecordWrite struct {
	objstore.Store
	key string

	mu   sync.Mutex
	held func() error
}

func (d *delayedRecordWrite) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (objstore.Info, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if key != d.key || d.held != nil {
		if key == d.key {
			return objstore.Info{}, fmt.Errorf("put %s: %w", key, objstore.ErrOutcomeUnknown)
		}
		return d.Store.PutIfMatch(ctx, key, r, size, etag)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return objstore.Info{}, err
	}
	d.held = func() error {
		_, err := d.Store.PutIfMatch(context.Background(), key, bytes.NewReader(b), int64(len(b)), etag)
		return err
	}
	return objstore.Info{}, fmt.Errorf("put %s: %w", key, objstore.ErrOutcomeUnknown)
}

func (d *delayedRecordWrite) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	d.mu.Lock()
	held := d.held != nil
	d.mu.Unlock()
	if key == d.key && held {
		return nil, objstore.Info{}, fmt.Errorf("get %s: %w", key, objstore.ErrUnavailable)
	}
	return d.Store.Get(ctx, key)
}

// TestListingLateWriteKeepsIntent: a visibility change whose record write
// has an unknown outcome that cannot be settled keeps its intent key, so
// that when the write lands after the call returned, the old final key
// ("public") is not alone: no public list shows the now private
// repository. Deleting every attempt's intent when the call ends makes it
// fail.
func TestListingLateWriteKeepsIntent(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	s := newStore(inner)
	mustTenant(t, s, "lou", KindUser)
	if _, err := s.CreateRepo(ctx, "lou", "secret", true); err != nil {
		t.Fatal(err)
	}
	key, err := repoRef("lou", "secret")
	if err != nil {
		t.Fatal(err)
	}
	d := &delayedRecordWrite{Store: inner, key: key}
	err = newStore(d).SetVisibility(ctx, "lou", "secret", false)
	if !errors.Is(err, objstore.ErrOutcomeUnknown) {
		t.Fatalf("SetVisibility with its write held: %v, want an unknown outcome", err)
	}
	if err := d.held(); err != nil {
		t.Fatalf("the held write: %v", err)
	}
	rec, _, err := s.readRepo(ctx, "lou", "secret")
	if err != nil || rec.Public {
		t.Fatalf("after the late write the record is %+v, %v; want private", rec, err)
	}
	rs, _, err := s.ListRepoPage(ctx, "lou", "", 10, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 0 {
		t.Fatalf("the record is private and the public list shows %+v", rs)
	}
}
