package api

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// TestAlertListsAreBounded replays issue 19's reproduction at a smaller
// scale: alerts that each hold a thousand locations with long matches,
// listed anonymously at the largest page size. Before, the answer held
// every location of every alert (tens of MiB); now a list carries the
// first few locations of each alert and a page ends at a byte budget,
// while an alert's own page hands its locations out a page at a time.
func TestAlertListsAreBounded(t *testing.T) {
	f := newAlertFixture(t)
	ctx := context.Background()
	repo, err := f.s.Repo(ctx, "alice", "pub")
	if err != nil {
		t.Fatal(err)
	}
	const nAlerts, nLocs = 12, alerts.MaxLocations
	match := strings.Repeat("m", 1<<10)
	for a := range nAlerts {
		var fs []alerts.Finding
		for l := range nLocs {
			fs = append(fs, alerts.Finding{RuleID: "generic", Path: fmt.Sprintf("f%d.txt", l), Line: 1, BlobID: strings.Repeat("e", 40),
				Match: match, Secret: fmt.Sprintf("secret-%d", a)})
		}
		if err := f.a.Record(ctx, "alice", repo.ID, fs, alerts.RunRef{ID: "run", Seq: 2}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	counts := map[string]int{} // locations_count of each alert, as the list says
	next, pages := "", 0
	for {
		r := f.do("GET", "/api/repos/alice/pub/alerts?per_page=500&page="+next, f.aliceW, "")
		if r.status != 200 {
			t.Fatalf("list: %d %s", r.status, r.body)
		}
		if len(r.body) > 2<<20 {
			t.Fatalf("a page of the list is %d bytes", len(r.body))
		}
		var p struct {
			Alerts []struct {
				ID             string `json:"id"`
				Locations      []any  `json:"locations"`
				LocationsCount int    `json:"locations_count"`
			} `json:"alerts"`
			Next string `json:"next_page"`
		}
		r.json(t, &p)
		for _, a := range p.Alerts {
			if seen[a.ID] {
				t.Fatalf("alert %s on two pages", a.ID)
			}
			seen[a.ID] = true
			counts[a.ID] = a.LocationsCount
			// The record keeps as many locations as its size bound allows
			// (alerts.MaxLocations at most), far more than a list shows.
			if a.ID != f.ids["alice/pub"] && (len(a.Locations) != alerts.ListLocations || a.LocationsCount <= 2*alerts.ListLocations || a.LocationsCount > nLocs) {
				t.Errorf("alert %s: %d locations of %d in a list", a.ID, len(a.Locations), a.LocationsCount)
			}
		}
		pages++
		if next = p.Next; next == "" {
			break
		}
		if pages > nAlerts+1 {
			t.Fatal("the pages never end")
		}
	}
	if len(seen) != nAlerts+1 {
		t.Fatalf("the pages listed %d alerts, want %d", len(seen), nAlerts+1)
	}

	// An alert's own page: its locations a hundred at a time.
	fp, err := f.a.Fingerprint(ctx, "alice", "secret-0")
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for page := 1; page != 0; {
		r := f.do("GET", fmt.Sprintf("/api/repos/alice/pub/alerts/%s?locations_page=%d", fp, page), f.aliceW, "")
		var a struct {
			Locations []any `json:"locations"`
			Count     int   `json:"locations_count"`
			Next      int   `json:"locations_next_page"`
		}
		r.json(t, &a)
		if len(a.Locations) > 100 || a.Count != counts[fp] {
			t.Fatalf("page %d: %d locations of %d", page, len(a.Locations), a.Count)
		}
		got += len(a.Locations)
		page = a.Next
	}
	if got != counts[fp] || got <= 100 {
		t.Fatalf("the alert's pages held %d locations, want %d (more than a page)", got, counts[fp])
	}
	if r := f.do("GET", "/api/repos/alice/pub/alerts/"+fp+"?locations_page=0", f.aliceW, ""); r.status != 400 {
		t.Fatalf("locations_page=0: %d", r.status)
	}
}

// countList is a store that counts the keys its LISTs return.
type countList struct {
	objstore.Store
	keys atomic.Int64
}

func (c *countList) List(ctx context.Context, prefix, after string, limit int) ([]objstore.Info, error) {
	infos, err := c.Store.List(ctx, prefix, after, limit)
	c.keys.Add(int64(len(infos)))
	return infos, err
}

// TestTenantAlertListIsBounded replays issue 19's reproduction: the
// tenant-wide list of alerts read every key of the tenant, including the
// alerts of repositories the caller may not read. Now one request lists a
// bounded number of keys and hands out a cursor to the rest.
func TestTenantAlertListIsBounded(t *testing.T) {
	objects := &countList{Store: memstore.New()}
	f := newFixtureOn(t, objects, nil)
	a := alerts.New(objects)
	srv := httptest.NewServer(NewHandler(f.s, nil, WithAlerts(a))) // 127.0.0.1
	t.Cleanup(srv.Close)
	f.srv = srv
	ctx := context.Background()
	hidden, err := f.s.CreateRepo(ctx, "alice", "hidden", false)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // the next log id sorts after
	shown, err := f.s.CreateRepo(ctx, "alice", "shown", true)
	if err != nil {
		t.Fatal(err)
	}
	if shown.ID <= hidden.ID {
		t.Fatalf("log ids out of order: %s, %s", hidden.ID, shown.ID)
	}
	// The alerts of a repository the caller may not see (here: one that
	// was deleted, whose alerts outlive it) are never read, only listed:
	// plain objects under their keys do. Alerts are for writers, so the
	// caller is alice, who may write every repository she still has.
	if err := f.s.DeleteRepo(ctx, "alice", "hidden"); err != nil {
		t.Fatal(err)
	}
	for i := range 12000 {
		key := fmt.Sprintf("meta/alerts/alice/%s/%064x", hidden.ID, i)
		if _, err := objects.Put(ctx, key, strings.NewReader("{}"), 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Record(ctx, "alice", shown.ID, []alerts.Finding{{RuleID: "generic", Path: "x", Line: 1, BlobID: strings.Repeat("e", 40), Match: "m", Secret: "s"}}, alerts.RunRef{}); err != nil {
		t.Fatal(err)
	}
	found, pages := 0, 0
	for next := ""; ; pages++ {
		if pages > 10 {
			t.Fatal("the pages never end")
		}
		before := objects.keys.Load()
		r := f.do("GET", "/api/tenants/alice/alerts?page="+next, f.aliceW, "")
		var p struct {
			Alerts []any  `json:"alerts"`
			Next   string `json:"next_page"`
		}
		r.json(t, &p)
		if n := objects.keys.Load() - before; n > 5000+1000 { // the repositories' records are listed too
			t.Fatalf("one request listed %d keys", n)
		}
		found += len(p.Alerts)
		if next = p.Next; next == "" {
			break
		}
	}
	if found != 1 || pages < 2 {
		t.Fatalf("%d alerts in %d pages, want the public one after a few pages", found, pages+1)
	}
}
