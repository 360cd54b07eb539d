package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestOwnerPagePages: the owner page shows 50 repositories and links to
// the next page; an anonymous visitor pages through the public ones only,
// and a malformed cursor is a 400, not a 500.
func TestOwnerPagePages(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	ctx := context.Background()
	for i := range 60 {
		if _, err := f.meta.CreateRepo(ctx, "bob", fmt.Sprintf("r%02d", i), i < 55); err != nil {
			t.Fatal(err)
		}
	}
	anon := f.client()
	res, body := anon.get("/bob")
	if res.StatusCode != 200 || strings.Count(body, `href="/bob/r`) != 50 || !strings.Contains(body, `href="/bob?after=r49"`) {
		t.Fatalf("first page: %d, %d repositories, next link %v", res.StatusCode, strings.Count(body, `href="/bob/r`), strings.Contains(body, "after=r49"))
	}
	res, body = anon.get("/bob?after=r49")
	if res.StatusCode != 200 || strings.Count(body, `href="/bob/r`) != 5 || strings.Contains(body, "r55") || strings.Contains(body, "Next page") {
		t.Fatalf("second page for an anonymous visitor: %d\n%s", res.StatusCode, body)
	}
	bob := f.signedIn(f.bob)
	if _, body = bob.get("/bob?after=r49"); strings.Count(body, `href="/bob/r`) != 10 {
		t.Fatalf("second page for bob: %d repositories, want 10", strings.Count(body, `href="/bob/r`))
	}
	if res, _ = anon.get("/bob?after=a..b/c"); res.StatusCode != 400 {
		t.Fatalf("malformed cursor: %d, want 400", res.StatusCode)
	}
}
