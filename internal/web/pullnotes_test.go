package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/alerts"
)

var lineCommentRE = regexp.MustCompile(`id="r([0-9]+)"`)

// TestPullConversationForms: the conversation's forms through the
// in-process API: a comment, a line comment from the files tab (the form
// at the line asked for, the comment shown at its line and in the
// conversation), a review; the author's own approval refused with the
// API's words and nothing written; a bad review event 400. The alerts in
// the pull request's commits show to its writers, not to a reader.
func TestPullConversationForms(t *testing.T) {
	f := newPullFixture(t)
	ctx := context.Background()
	w := f.signedIn(f.alice)
	base := "/alice/app"
	csrf := w.csrfFor(base + "/-/pulls")
	res := w.post(base+"/-/pulls", url.Values{"csrf": {csrf}, "head": {"topic"}, "base": {"main"}, "title": {"Add b"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("open: %d", res.StatusCode)
	}
	p1 := base + "/-/pull/1"
	if _, body := w.get(p1); !strings.Contains(body, `id="comment-form"`) || !strings.Contains(body, `id="review-form"`) {
		t.Fatalf("no comment or review form:\n%s", body)
	}
	res = w.post(p1+"/comments", url.Values{"csrf": {csrf}, "body": {"First, **bold** comment."}})
	if res.StatusCode != http.StatusSeeOther || !strings.Contains(res.Header.Get("Location"), "#issuecomment-") {
		t.Fatalf("comment: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	// The files tab offers a form at the line asked for.
	if _, body := w.get(p1 + "/files"); !strings.Contains(body, `comment=0-R1#diff-0-R1`) || strings.Contains(body, `id="line-comment-form"`) {
		t.Fatalf("files without ?comment=:\n%s", body)
	}
	if _, body := w.get(p1 + "/files?comment=0-R1"); !strings.Contains(body, `id="line-comment-form"`) || !strings.Contains(body, `name="path" value="b.txt"`) {
		t.Fatalf("files with ?comment=0-R1:\n%s", body)
	}
	res = w.post(p1+"/comments?page=1", url.Values{"csrf": {csrf}, "body": {"Why this line?"}, "path": {"b.txt"}, "line": {"1"}, "side": {"RIGHT"}})
	if res.StatusCode != http.StatusSeeOther || !strings.Contains(res.Header.Get("Location"), "/files?page=1#r") {
		t.Fatalf("line comment: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	_, body := w.get(p1 + "/files")
	if m := lineCommentRE.FindStringSubmatch(body); m == nil || !strings.Contains(body, "Why this line?") {
		t.Fatalf("the line comment is not at its line:\n%s", body)
	}
	// A line that is not there: the API's refusal, shown on the files tab.
	if res := w.post(p1+"/comments", url.Values{"csrf": {csrf}, "body": {"x"}, "path": {"b.txt"}, "line": {"9"}, "side": {"RIGHT"}}); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a comment past the file's end: %d", res.StatusCode)
	}
	// The author's approval: refused with the API's words.
	if res := w.post(p1+"/reviews", url.Values{"csrf": {csrf}, "event": {"APPROVE"}, "sha": {f.topic}}); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("the author approves: %d", res.StatusCode)
	}
	if res := w.post(p1+"/reviews", url.Values{"csrf": {csrf}, "event": {"SHIP_IT"}}); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a bad event: %d", res.StatusCode)
	}
	res = w.post(p1+"/reviews", url.Values{"csrf": {csrf}, "event": {"COMMENT"}, "body": {"Reviewed it."}, "sha": {f.topic}})
	if res.StatusCode != http.StatusSeeOther || !strings.HasSuffix(res.Header.Get("Location"), "?done=reviewed") {
		t.Fatalf("review: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	_, body = w.get(p1)
	for _, want := range []string{"<strong>bold</strong>", "Why this line?", "commented on <a href=\"" + p1 + "/files#r", "Reviewed it.", `class="reviewstate commented"`} {
		if !strings.Contains(body, want) {
			t.Errorf("conversation lacks %q", want)
		}
	}
	if strings.Index(body, "bold") > strings.Index(body, "Reviewed it.") {
		t.Error("the conversation is not in time order")
	}
	// A long conversation is paged: 50 a page, the next page after the
	// last id shown.
	for i := range 50 {
		if res := w.post(p1+"/comments", url.Values{"csrf": {csrf}, "body": {fmt.Sprintf("filler %d", i)}}); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("filler %d: %d", i, res.StatusCode)
		}
	}
	_, first := w.get(p1)
	more := regexp.MustCompile(`href="([^"]+\?notes=[0-9]+)" rel="next" id="more-notes"`).FindStringSubmatch(first)
	if more == nil || strings.Contains(first, "filler 49") || !strings.Contains(first, "filler 45") {
		t.Fatalf("the first page of a long conversation:\n%s", first)
	}
	if _, second := w.get(more[1]); !strings.Contains(second, "filler 49") || strings.Contains(second, "filler 45<") || strings.Contains(second, `id="more-notes"`) {
		t.Fatalf("the second page:\n%s", second)
	}
	body = first
	// An alert in the pull request's commit: its writers see it.
	if strings.Contains(body, `id="pull-alerts"`) {
		t.Fatal("alerts before any")
	}
	if err := f.s.Alerts().Record(ctx, "alice", f.priv.ID, []alerts.Finding{{RuleID: "generic-api-key", Description: "Generic API key",
		Commit: f.topic, Path: "b.txt", Line: 1, BlobID: strings.Repeat("ab", 20), Match: "key = REDACTED", Secret: "s3cr3t-value-1"}}, alerts.RunRef{}); err != nil {
		t.Fatal(err)
	}
	if _, body := w.get(p1); !strings.Contains(body, `id="pull-alerts"`) || !strings.Contains(body, "Generic API key") {
		t.Fatalf("the writer does not see the alert:\n%s", body)
	}
	r := f.signedIn(f.read)
	if _, body := r.get(p1); strings.Contains(body, `id="pull-alerts"`) || strings.Contains(body, `id="review-form"`) == false {
		t.Fatalf("a reader: alerts shown, or no review form:\n%s", body)
	}
}
