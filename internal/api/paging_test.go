package api

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// TestRepoListPages: the repository list comes a page at a time, with a
// Link header to the next; a visitor who may not read the owner's private
// repositories pages through the public ones only.
func TestRepoListPages(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for i := range 7 {
		if _, err := f.s.CreateRepo(ctx, "alice", fmt.Sprintf("r%d", i), i%2 == 0); err != nil {
			t.Fatal(err)
		}
	}
	walk := func(auth string, perPage int) []string {
		var names []string
		path := fmt.Sprintf("/api/repos/alice?per_page=%d", perPage)
		for pages := 0; path != ""; pages++ {
			if pages > 10 {
				t.Fatal("more pages than repositories")
			}
			r := f.do("GET", path, auth, "")
			if r.status != 200 {
				t.Fatalf("GET %s = %d %s", path, r.status, r.body)
			}
			var page []repoJSON
			r.json(t, &page)
			if len(page) > perPage {
				t.Fatalf("GET %s: %d repositories, more than per_page", path, len(page))
			}
			for _, rp := range page {
				names = append(names, rp.Name)
			}
			path = ""
			if link := r.header.Get("Link"); link != "" {
				u, ok := strings.CutPrefix(link, "<")
				u, _, ok2 := strings.Cut(u, `>; rel="next"`)
				if !ok || !ok2 {
					t.Fatalf("Link %q", link)
				}
				if p, err := url.Parse(u); err != nil || p.Query().Get("per_page") != fmt.Sprint(perPage) {
					t.Fatalf("next page %q does not keep per_page", u)
				}
				path = u
			}
		}
		return names
	}
	if got := strings.Join(walk(f.aliceR, 3), " "); got != "r0 r1 r2 r3 r4 r5 r6" {
		t.Errorf("the owner paged through %q", got)
	}
	if got := strings.Join(walk("", 2), " "); got != "r0 r2 r4 r6" {
		t.Errorf("an anonymous visitor paged through %q, want the public ones", got)
	}
	f.run([]step{
		{"per_page 0", "GET", "/api/repos/alice?per_page=0", "", "", 400},
		{"per_page too big", "GET", "/api/repos/alice?per_page=1001", "", "", 400},
		{"bad cursor", "GET", "/api/repos/alice?after=a/b", "", "", 400},
		{"cursor in any case", "GET", "/api/repos/alice?after=R3", "", "", 200},
		{"no such owner", "GET", "/api/repos/nobody?per_page=5", "", "", 404},
		{"tenants per_page 0", "GET", "/api/tenants?per_page=0", f.admin, "", 400},
	})
	// Tenants page the same way.
	r := f.do("GET", "/api/tenants?per_page=2", f.admin, "")
	var ts []tenantJSON
	r.json(t, &ts)
	if r.status != 200 || len(ts) != 2 || ts[0].Name != "acme" || !strings.Contains(r.header.Get("Link"), "after=alice") {
		t.Fatalf("first page of tenants: %d %+v Link %q", r.status, ts, r.header.Get("Link"))
	}
}
