package web_test

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/pulls"
)

// TestBrowserPullReview drives a headless Chromium through a review on a
// real server: in an org's repository whose main needs one approval,
// alice opens a pull request, the merge box says a review is required
// with its button off, she comments on a line from the files tab; carol,
// another member, signs in, approves through the review form, and merges.
func TestBrowserPullReview(t *testing.T) {
	exe := chromium(t)
	shots := os.Getenv("GHOST_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	f := newPullFixture(t)
	ctx := context.Background()
	m := f.s.Meta()
	for _, tn := range []struct{ name, kind string }{{"carol", meta.KindUser}, {"acme", meta.KindOrg}} {
		if _, err := m.CreateTenant(ctx, tn.name, tn.kind); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []string{"alice", "carol"} {
		if err := m.AddMember(ctx, "acme", u); err != nil {
			t.Fatal(err)
		}
	}
	carol, _, err := m.CreateToken(ctx, "carol", meta.ScopeWrite, "carol")
	if err != nil {
		t.Fatal(err)
	}
	lib, err := m.CreateRepo(ctx, "acme", "lib", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetBranchRules(ctx, "acme", "lib", []access.BranchRule{{Pattern: "main", RequiredApprovals: 1}}); err != nil {
		t.Fatal(err)
	}
	remote := strings.Replace(f.remote("app"), "/alice/app.git", "/acme/lib.git", 1)
	f.git("push", "-q", remote, "main", "topic")

	b := newBrowser(t, exe, shots, "review-")
	tctx := b.ctx
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	shot, do, text := b.shot, b.do, b.text
	signIn := func(who, token, next string) {
		t.Helper()
		do("sign in "+who,
			chromedp.Navigate(f.srv.URL+"/login?next="+url.QueryEscape(next)),
			chromedp.WaitVisible(css("#token")),
			chromedp.SendKeys(css("#token"), token),
			chromedp.Click(css("#signin-submit")),
			chromedp.WaitVisible(css("#signout")))
	}

	signIn("alice", f.alice, "/acme/lib")
	do("open",
		chromedp.Click(css("#pulls-tab")),
		chromedp.WaitVisible(css("#pull-form")),
		chromedp.SendKeys(css("#pull-head"), "topic"),
		chromedp.SendKeys(css("#pull-title"), "Add b"),
		chromedp.Click(css("#open-pull")),
		chromedp.WaitVisible(css("#review-required")), shot("review-required"))
	if body := text(); !strings.Contains(body, "At least 1 approving review is required") {
		t.Fatalf("the merge box of an unreviewed pull request:\n%s", body)
	}
	if disabled, err := chromedp.Run(tctx, chromedp.Evaluate[bool](`document.querySelector("#merge").disabled`)); err != nil || !disabled {
		t.Fatalf("the merge button before the approval is enabled (%v)", err)
	}
	do("line comment",
		chromedp.Click(css("#files-tab")),
		chromedp.WaitVisible(css("#diff-0-R1 a.addc")),
		chromedp.Click(css("#diff-0-R1 a.addc")),
		chromedp.WaitVisible(css("#line-comment-form")),
		chromedp.SendKeys(css("#line-comment-body"), "Should this say more?"),
		chromedp.Click(css("#add-line-comment")),
		chromedp.WaitVisible(css("article.comment.line")), shot("line-comment"))
	if body := text(); !strings.Contains(body, "Should this say more?") {
		t.Fatalf("the files tab after the line comment:\n%s", body)
	}
	do("sign out", chromedp.Click(css("#signout")), chromedp.WaitVisible(css("#signin")))

	signIn("carol", carol, "/acme/lib/-/pull/1")
	do("approve",
		chromedp.Click(css("#review summary")),
		chromedp.WaitVisible(css("#review-form")),
		chromedp.SendKeys(css("#review-body"), "Looks good."),
		chromedp.Click(css("#event-approve")),
		chromedp.Click(css("#submit-review")),
		chromedp.WaitVisible(css("#mergeable")), shot("approved"))
	if body := text(); !strings.Contains(body, "Your review was submitted.") || !strings.Contains(body, "approved these changes") ||
		!strings.Contains(body, "Should this say more?") || !strings.Contains(body, "Approved by carol") {
		t.Fatalf("after the approval:\n%s", body)
	}
	do("merge",
		chromedp.Click(css("#merge")),
		chromedp.WaitVisible(css("#merged")), shot("merged"))
	pr, err := pulls.NewStore(f.store).Get(ctx, lib.ID, 1)
	if err != nil || pr.State != pulls.Merged || pr.MergedBy != "carol" {
		t.Fatalf("after the merge: %+v, %v", pr, err)
	}
}
