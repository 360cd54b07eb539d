package web_test

import (
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ghost-scm/ghost/internal/pulls"
)

// TestBrowserPullRequest drives a real headless Chromium through a pull
// request on a real server: sign in, open a pull request through the
// form, read its conversation and files changed, merge it through the
// merge box and see it merged with main moved to the merge; then a
// second pull request that conflicts with what was merged shows as not
// mergeable. Screenshots go to $GHOST_SCREENSHOTS (default: a temporary
// directory).
func TestBrowserPullRequest(t *testing.T) {
	exe := chromium(t)
	shots := os.Getenv("GHOST_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	f := newPullFixture(t)
	// clash changes the line topic2 changes: once topic2 is merged, its
	// pull request conflicts.
	for _, b := range []string{"topic2", "clash"} {
		f.git("checkout", "-q", "-b", b, f.base)
		f.write("a.txt", "one\n"+b+"\nthree\n")
		f.git("commit", "-q", "-am", "change a.txt on "+b)
		f.git("checkout", "-q", "main")
	}
	f.push("topic2", "clash")

	b := newBrowser(t, exe, shots, "pull-")
	tctx := b.ctx
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	shot, do, text := b.shot, b.do, b.text
	base := f.srv.URL
	openPull := func(head, title string) {
		t.Helper()
		do("open "+head,
			chromedp.Click(css("#pulls-tab")),
			chromedp.WaitVisible(css("#pull-form")),
			chromedp.SendKeys(css("#pull-head"), head),
			chromedp.SendKeys(css("#pull-title"), title),
			chromedp.SendKeys(css("#pull-body"), "Changes *a.txt*."), shot("new-"+head),
			chromedp.Click(css("#open-pull")),
			chromedp.WaitVisible(css("#merge-box")))
	}

	do("sign in",
		chromedp.Navigate(base+"/login?next="+url.QueryEscape("/alice/app")),
		chromedp.WaitVisible(css("#token")),
		chromedp.SendKeys(css("#token"), f.alice),
		chromedp.Click(css("#signin-submit")),
		chromedp.WaitVisible(css("#pulls-tab")))

	// Open a pull request through the form, and read it.
	openPull("topic2", "Second line")
	if body := text(); !strings.Contains(body, "The pull request was opened.") || !strings.Contains(body, "Changes a.txt.") ||
		!strings.Contains(body, "change a.txt on topic2") || !strings.Contains(body, "no conflicts") {
		t.Fatalf("the new pull request:\n%s", body)
	}
	do("files changed",
		chromedp.Click(css("#files-tab")),
		chromedp.WaitVisible(css("table.diff")), shot("files"))
	if body := text(); !strings.Contains(body, "a.txt") || !strings.Contains(body, "+topic2") || !strings.Contains(body, "-two") {
		t.Fatalf("files changed:\n%s", body)
	}
	// Each line is anchored: the old line 2 and the new line 2.
	do("anchors", chromedp.WaitVisible(css("#diff-0-L2")), chromedp.WaitVisible(css("#diff-0-R2")))

	// Merge it through the merge box.
	do("merge",
		chromedp.Click(css("#conversation-tab")),
		chromedp.WaitVisible(css("#merge-form")),
		chromedp.Click(css("#method-merge")),
		chromedp.Click(css("#delete-branch")), shot("merge-box"),
		chromedp.Click(css("#merge")),
		chromedp.WaitVisible(css("#merged")), shot("merged"))
	if body := text(); !strings.Contains(body, "The pull request was merged.") || !strings.Contains(body, "Merged by alice") {
		t.Fatalf("after merging:\n%s", body)
	}
	main := f.tip("app", "main")
	if pr := f.pull("app", 1); pr.State != pulls.Merged || pr.MergeCommit != main {
		t.Fatalf("after merging: main %s, %+v", main, pr)
	}
	f.git("fetch", "-q", f.remote("app"), "main")
	if parents := strings.Fields(f.git("log", "-1", "--format=%P", "FETCH_HEAD")); len(parents) != 2 || parents[0] != f.base {
		t.Fatalf("main is not a merge commit on the old main: parents %v", parents)
	}
	if tip := f.tip("app", "topic2"); tip != "" {
		t.Errorf("topic2 was not deleted: %s", tip)
	}

	// The merged pull request is listed as closed; a conflicting one shows
	// as not mergeable, with the file named and the button off.
	do("closed list",
		chromedp.Click(css("#pulls-tab")),
		chromedp.Click(css("#state-closed")),
		chromedp.WaitVisible(css("#pull-1")))
	openPull("clash", "Clashing line")
	do("conflict", chromedp.WaitVisible(css("#not-mergeable")), shot("conflict"))
	if body := text(); !strings.Contains(body, "Not mergeable") || !strings.Contains(body, "a.txt") {
		t.Fatalf("the conflicting pull request:\n%s", body)
	}
	if disabled, err := chromedp.Run(tctx, chromedp.Evaluate[bool](`document.querySelector("#merge").disabled`)); err != nil || !disabled {
		t.Fatalf("the merge button of a conflict is enabled (%v)", err)
	}
}
