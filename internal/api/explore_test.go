package api

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// TestExploreIsBounded: a page of public repositories reads a bounded
// number of records however many private ones come first, and hands out a
// cursor to go on (docs/adr/0090-bounded-serving.md).
func TestExploreIsBounded(t *testing.T) {
	objects := &countList{Store: memstore.New()}
	f := newFixtureOn(t, objects, nil)
	srv := httptest.NewServer(NewHandler(f.s, nil)) // 127.0.0.1
	t.Cleanup(srv.Close)
	f.srv = srv
	ctx := context.Background()
	for i := range 1200 {
		if _, err := f.s.CreateRepo(ctx, "alice", fmt.Sprintf("a%04d", i), false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.s.CreateRepo(ctx, "bob", "open", true); err != nil {
		t.Fatal(err)
	}
	found, pages := 0, 0
	for next := ""; ; pages++ {
		if pages > 10 {
			t.Fatal("the pages never end")
		}
		before := objects.keys.Load()
		var p struct {
			Repos []repoJSON `json:"repos"`
			Next  string     `json:"next_page"`
		}
		f.do("GET", "/api/repos?page="+next, "", "").json(t, &p)
		if n := objects.keys.Load() - before; n > exploreRead {
			t.Fatalf("one page listed %d keys", n)
		}
		for _, r := range p.Repos {
			if !r.Public {
				t.Fatalf("a private repository on the explore page: %+v", r)
			}
		}
		found += len(p.Repos)
		if next = p.Next; next == "" {
			break
		}
	}
	if found != 1 || pages < 2 {
		t.Fatalf("found %d public repositories in %d pages", found, pages+1)
	}
}
