package web_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/meta"
)

var moreRE = regexp.MustCompile(`<a href="([^"]*)" class="more">More repositories of acme</a>`)

// TestDashboardPagesEachOwner: the signed-in home shows a page of each
// owner's repositories, as long as the owner page's, and links to the
// owner page where it goes on; an owner with one page has no link.
func TestDashboardPagesEachOwner(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	ctx := context.Background()
	if _, err := f.meta.CreateTenant(ctx, "acme", meta.KindOrg); err != nil {
		t.Fatal(err)
	}
	if err := f.meta.AddMember(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	const n = 53 // the owner page shows 50
	for i := range n {
		if _, err := f.meta.CreateRepo(ctx, "acme", fmt.Sprintf("r%02d", i), false); err != nil {
			t.Fatal(err)
		}
	}
	alice := f.signedIn(f.alice)
	body := mustGet(t, alice, "/")
	if got := strings.Count(body, `href="/acme/r`); got != 50 {
		t.Errorf("the home shows %d of acme's repositories, want a page of 50", got)
	}
	if strings.Contains(body, `href="/acme/r50"`) {
		t.Error("the home shows past the first page")
	}
	m := moreRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no link to the rest of acme's repositories:\n%s", body)
	}
	if strings.Contains(body, "More repositories of alice") {
		t.Error("a link to more of alice's repositories, which fit on the page")
	}
	rest := mustGet(t, alice, strings.ReplaceAll(m[1], "&amp;", "&"))
	for i := 50; i < n; i++ {
		if !strings.Contains(rest, fmt.Sprintf(`href="/acme/r%02d"`, i)) {
			t.Errorf("the page the link opens lacks acme/r%02d", i)
		}
	}
	if strings.Contains(rest, `href="/acme/r49"`) {
		t.Error("the page the link opens repeats the home's")
	}
}
