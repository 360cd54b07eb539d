package pulls_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/pulls"
)

func bodies(ns []pulls.Note) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Body
	}
	return out
}

// Comments list oldest first, a page at a time; only the author edits,
// the author or a moderator deletes; an id finds its pull request.
func TestCommentsPagesEditDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, false)
	pr := e.topic()
	e.events.take()
	var made []pulls.Note
	for _, b := range []string{"one", "two", "three", "four", "five"} {
		c, err := e.pulls.Comment(ctx, e.repo, pr.Number, "bob", b)
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, c)
	}
	var got []string
	after, pages := uint64(0), 0
	for {
		page, next, err := e.pulls.Notes(ctx, e.repo, pr, pulls.KindComment, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		got = append(got, bodies(page)...)
		if next == 0 {
			break
		}
		after = next
	}
	if !slices.Equal(got, []string{"one", "two", "three", "four", "five"}) || pages != 3 {
		t.Fatalf("pages %d: %q", pages, got)
	}
	if n, err := e.pulls.Store().NoteNumber(ctx, e.repo.ID, pulls.KindComment, made[2].ID); err != nil || n != pr.Number {
		t.Fatalf("note number %d, %v", n, err)
	}
	if _, err := e.pulls.Store().NoteNumber(ctx, e.repo.ID, pulls.KindLineComment, made[2].ID); !errors.Is(err, pulls.ErrNotFound) {
		t.Fatalf("a comment's id as a line comment's: %v", err)
	}
	if _, err := e.pulls.EditNote(ctx, e.repo, pr.Number, pulls.KindComment, made[0].ID, "carol", "hijacked"); !errors.Is(err, pulls.ErrForbidden) {
		t.Fatalf("edit by another: %v", err)
	}
	if c, err := e.pulls.EditNote(ctx, e.repo, pr.Number, pulls.KindComment, made[0].ID, "bob", "one, edited"); err != nil || c.Body != "one, edited" {
		t.Fatalf("edit by the author: %+v, %v", c, err)
	}
	if err := e.pulls.DeleteNote(ctx, e.repo, pr.Number, pulls.KindComment, made[1].ID, "carol", false); !errors.Is(err, pulls.ErrForbidden) {
		t.Fatalf("delete by another: %v", err)
	}
	if err := e.pulls.DeleteNote(ctx, e.repo, pr.Number, pulls.KindComment, made[1].ID, "alice", true); err != nil {
		t.Fatalf("delete by a moderator: %v", err)
	}
	if _, err := e.pulls.Comment(ctx, e.repo, pr.Number, "bob", ""); !errors.Is(err, pulls.ErrInvalid) {
		t.Fatalf("empty comment: %v", err)
	}
	if _, err := e.pulls.Comment(ctx, e.repo, pr.Number, "bob", strings.Repeat("x", pulls.MaxBodyBytes+1)); !errors.Is(err, pulls.ErrInvalid) {
		t.Fatalf("oversized comment: %v", err)
	}
	if _, err := e.pulls.Comment(ctx, e.repo, 99, "bob", "where?"); !errors.Is(err, pulls.ErrNotFound) {
		t.Fatalf("comment on a missing pull request: %v", err)
	}
	page, _, _ := e.pulls.Notes(ctx, e.repo, pr, pulls.KindComment, 0, 10)
	if !slices.Equal(bodies(page), []string{"one, edited", "three", "four", "five"}) {
		t.Fatalf("after edit and delete: %q", bodies(page))
	}
	if ev := e.events.take(); len(ev) != 7 || ev[0] != "note created c by bob" || ev[5] != "note edited c by bob" || ev[6] != "note deleted c by alice" {
		t.Fatalf("events %q", ev)
	}
}

// A comment whose write lands and then reports an error is recognised as
// its own: one comment, not two, and no error.
func TestCommentLandedThenError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, false)
	pr := e.topic()
	e.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpPutIfAbsent && strings.HasPrefix(c.Key, "meta/pullnotes/") {
			return faultstore.Fault{Outcome: faultstore.LandedThenError}
		}
		return faultstore.Fault{}
	})
	c, err := e.pulls.Comment(ctx, e.repo, pr.Number, "bob", "once")
	e.fs.SetPlan(nil)
	if err != nil {
		t.Fatal(err)
	}
	page, _, _ := e.pulls.Notes(ctx, e.repo, pr, pulls.KindComment, 0, 10)
	if len(page) != 1 || page[0].ID != c.ID {
		t.Fatalf("comments %+v", page)
	}
}

func (e *env) protect(rule access.BranchRule) {
	e.t.Helper()
	if err := e.meta.SetBranchRules(context.Background(), "alice", "app", []access.BranchRule{rule}); err != nil {
		e.t.Fatal(err)
	}
	var err error
	if e.repo, err = e.meta.Repo(context.Background(), "alice", "app"); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) review(pr pulls.PullRequest, who string, writer bool, event string) pulls.Note {
	e.t.Helper()
	rv, _, err := e.pulls.Review(context.Background(), e.repo, pr.Number, pulls.NewReview{Author: who, Writer: writer, Event: event, Body: event + " by " + who})
	if err != nil {
		e.t.Fatal(err)
	}
	return rv
}

// A branch rule's required approvals hold the merge: the author's own
// approval is refused, a reader's does not count, a writer's change
// request blocks until dismissed, and with stale dismissal a push to the
// head sets the count back.
func TestRequiredApprovals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, false)
	pr := e.topic()
	e.protect(access.BranchRule{Pattern: "main", RequiredApprovals: 1, DismissStaleApprovals: true})
	held := func(why string) {
		t.Helper()
		_, err := e.pulls.Merge(ctx, e.repo, pr.Number, pulls.MergeOptions{By: "bob"})
		var me *pulls.MergeError
		if !errors.Is(err, pulls.ErrReviewRequired) || !errors.As(err, &me) || len(me.Message) != 1 {
			t.Fatalf("%s: merge %v, want held for review", why, err)
		}
		cur, _ := e.pulls.Get(ctx, e.repo, pr.Number)
		st, err := e.pulls.Status(ctx, e.repo, cur)
		if err != nil || st.MergeableState != "blocked" || st.Reviews.Satisfied() {
			t.Fatalf("%s: status %+v, %v", why, st, err)
		}
	}
	held("no reviews")
	if _, _, err := e.pulls.Review(ctx, e.repo, pr.Number, pulls.NewReview{Author: "alice", Writer: true, Event: pulls.EventApprove}); !errors.Is(err, pulls.ErrInvalid) {
		t.Fatalf("the author's approval: %v", err)
	}
	if _, _, err := e.pulls.Review(ctx, e.repo, pr.Number, pulls.NewReview{Author: "bob", Writer: true, Event: "MERGE_IT"}); !errors.Is(err, pulls.ErrInvalid) {
		t.Fatalf("an unknown event: %v", err)
	}
	if _, _, err := e.pulls.Review(ctx, e.repo, pr.Number, pulls.NewReview{Author: "bob", Writer: true, Event: pulls.EventRequestChanges}); !errors.Is(err, pulls.ErrInvalid) {
		t.Fatalf("a change request without a body: %v", err)
	}
	e.review(pr, "reader", false, pulls.EventApprove)
	held("a reader's approval")
	carol := e.review(pr, "carol", true, pulls.EventRequestChanges)
	e.review(pr, "bob", true, pulls.EventApprove)
	held("carol requested changes")
	if _, err := e.pulls.DismissReview(ctx, e.repo, pr.Number, carol.ID, "alice", ""); !errors.Is(err, pulls.ErrInvalid) {
		t.Fatalf("a dismissal without a message: %v", err)
	}
	if d, err := e.pulls.DismissReview(ctx, e.repo, pr.Number, carol.ID, "alice", "addressed"); err != nil || d.State != pulls.Dismissed || d.DismissedBy != "alice" {
		t.Fatalf("dismiss: %+v, %v", d, err)
	}
	// A push to the head makes bob's approval stale.
	e.gitc("checkout", "-q", "topic")
	e.commit("more", "b.txt", "b\nmore\n")
	e.push(e.repo, "topic")
	e.gitc("checkout", "-q", "main")
	held("the approval is of an earlier head")
	e.review(pr, "bob", true, pulls.EventApprove)
	cur, _ := e.pulls.Get(ctx, e.repo, pr.Number)
	st, err := e.pulls.Status(ctx, e.repo, cur)
	if err != nil || st.MergeableState != "clean" || !slices.Equal(st.Reviews.Approvers, []string{"bob"}) {
		t.Fatalf("status after approval %+v, %v", st, err)
	}
	if _, err := e.pulls.Merge(ctx, e.repo, pr.Number, pulls.MergeOptions{By: "bob"}); err != nil {
		t.Fatalf("merge with the approval: %v", err)
	}
	// Reviews list oldest first, with their states.
	got, _, err := e.pulls.Notes(ctx, e.repo, pr, pulls.KindReview, 0, 10)
	var states []string
	for _, r := range got {
		states = append(states, r.Author+":"+string(r.State))
	}
	if err != nil || !slices.Equal(states, []string{"reader:APPROVED", "carol:DISMISSED", "bob:APPROVED", "bob:APPROVED"}) {
		t.Fatalf("reviews %q, %v", states, err)
	}
	if _, _, err := e.pulls.Review(ctx, e.repo, pr.Number, pulls.NewReview{Author: "carol", Writer: true, Event: pulls.EventApprove}); !errors.Is(err, pulls.ErrState) {
		t.Fatalf("approving a merged pull request: %v", err)
	}
}

// A dismissal that lands between the merge's first look at the reviews
// and its record of the merge in flight holds the merge: the record's
// compare-and-swap sees it.
func TestDismissalRacingMerge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, false)
	pr := e.topic()
	e.protect(access.BranchRule{Pattern: "main", RequiredApprovals: 1})
	bob := e.review(pr, "bob", true, pulls.EventApprove)
	before := e.refs(e.repo)["refs/heads/main"]
	key := "meta/pulls/" + e.repo.ID + "/1"
	dismissed := false
	e.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpPutIfMatch && c.Key == key && !dismissed {
			dismissed = true
			e.fs.SetPlan(nil)
			if _, err := e.pulls.DismissReview(ctx, e.repo, pr.Number, bob.ID, "alice", "not so fast"); err != nil {
				t.Error(err)
			}
		}
		return faultstore.Fault{}
	})
	_, err := e.pulls.Merge(ctx, e.repo, pr.Number, pulls.MergeOptions{By: "bob"})
	if !dismissed || !errors.Is(err, pulls.ErrReviewRequired) {
		t.Fatalf("merge racing a dismissal (dismissed %v): %v", dismissed, err)
	}
	if got := e.refs(e.repo)["refs/heads/main"]; got != before {
		t.Fatal("the merge landed")
	}
}

// Line comments are placed on a line of a file of the head (or of the
// merge base), answered in threads, and shown outdated once the line
// changes.
func TestLineCommentsOutdated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, false)
	e.commit("base", "a.txt", "one\ntwo\nthree\n")
	e.push(e.repo, "main")
	e.gitc("checkout", "-q", "-b", "topic")
	first := e.commit("topic", "b.txt", "b1\nb2\n", "c.txt", "c1\n")
	e.push(e.repo, "topic")
	pr, err := e.pulls.Create(ctx, e.repo, pulls.NewPull{Head: e.repo, HeadRef: "topic", BaseRef: "main", Title: "t", Author: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []pulls.LineComment{
		{Path: "b.txt", Line: 3, Body: "past the end"},
		{Path: "b.txt", Line: 0, Body: "line 0"},
		{Path: "nope.txt", Line: 1, Body: "no such file"},
		{Path: "../b.txt", Line: 1, Body: "escape"},
		{Path: "b.txt", Line: 1, Body: "bad side", Side: "UP"},
		{Path: "b.txt", Line: 1, Body: ""},
		{Path: "b.txt", Line: 1, Body: "not a commit of the head", CommitID: strings.Repeat("ab", 20)},
		{Path: "b.txt\nx", Line: 1, Body: "newline"},
	} {
		bad.Author = "bob"
		if _, err := e.pulls.AddLineComment(ctx, e.repo, pr.Number, bad); !errors.Is(err, pulls.ErrInvalid) {
			t.Fatalf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
	onB, err := e.pulls.AddLineComment(ctx, e.repo, pr.Number, pulls.LineComment{Author: "bob", Path: "b.txt", Line: 1, Body: "why b1?"})
	if err != nil || onB.CommitID != first || onB.Side != pulls.SideRight {
		t.Fatalf("line comment %+v, %v", onB, err)
	}
	onC, _ := e.pulls.AddLineComment(ctx, e.repo, pr.Number, pulls.LineComment{Author: "bob", Path: "c.txt", Line: 1, Body: "fine"})
	onA, err := e.pulls.AddLineComment(ctx, e.repo, pr.Number, pulls.LineComment{Author: "bob", Path: "a.txt", Line: 2, Side: pulls.SideLeft, Body: "base line"})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := e.pulls.AddLineComment(ctx, e.repo, pr.Number, pulls.LineComment{Author: "alice", InReplyTo: onB.ID, Body: "because"})
	if err != nil || reply.Path != "b.txt" || reply.Line != 1 || reply.InReplyTo != onB.ID {
		t.Fatalf("reply %+v, %v", reply, err)
	}
	// b.txt's line 1 changes; c.txt's line 1 stays while its file grows.
	e.commit("edit", "b.txt", "B1\nb2\n", "c.txt", "c1\nc2\n")
	e.push(e.repo, "topic")
	pr, _ = e.pulls.Get(ctx, e.repo, pr.Number)
	got, _, err := e.pulls.Notes(ctx, e.repo, pr, pulls.KindLineComment, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	outdated := map[uint64]bool{}
	for _, c := range got {
		outdated[c.ID] = c.Outdated
	}
	if len(got) != 4 || !outdated[onB.ID] || !outdated[reply.ID] || outdated[onC.ID] || outdated[onA.ID] {
		t.Fatalf("outdated %v (b %d, reply %d, c %d, a %d)", outdated, onB.ID, reply.ID, onC.ID, onA.ID)
	}
	// A review carries line comments, which name it.
	rv, cs, err := e.pulls.Review(ctx, e.repo, pr.Number, pulls.NewReview{Author: "bob", Writer: true, Event: pulls.EventComment,
		Comments: []pulls.LineComment{{Path: "c.txt", Line: 2, Body: "new line"}}})
	if err != nil || rv.State != pulls.Commented || len(cs) != 1 || cs[0].ReviewID != rv.ID {
		t.Fatalf("review %+v %+v, %v", rv, cs, err)
	}
	// Nothing of a review with a bad line comment is written.
	if _, _, err := e.pulls.Review(ctx, e.repo, pr.Number, pulls.NewReview{Author: "bob", Writer: true, Event: pulls.EventApprove,
		Comments: []pulls.LineComment{{Path: "c.txt", Line: 1, Body: "ok"}, {Path: "c.txt", Line: 9, Body: "bad"}}}); !errors.Is(err, pulls.ErrInvalid) {
		t.Fatalf("review with a bad line comment: %v", err)
	}
	if rs, _, _ := e.pulls.Notes(ctx, e.repo, pr, pulls.KindReview, 0, 10); len(rs) != 1 {
		t.Fatalf("reviews %+v", rs)
	}
	if pr, _ := e.pulls.Get(ctx, e.repo, pr.Number); len(pr.Verdicts) != 0 {
		t.Fatalf("verdicts %+v", pr.Verdicts)
	}
}

// The conversation merges the three kinds in time order, a page at a
// time, and reads only the notes a page shows.
func TestConversationPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, false)
	pr := e.topic()
	var want []uint64
	for i := range 3 {
		c, err := e.pulls.Comment(ctx, e.repo, pr.Number, "bob", "comment")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, c.ID)
		rv, _, err := e.pulls.Review(ctx, e.repo, pr.Number, pulls.NewReview{Author: "bob", Event: pulls.EventComment, Body: "review"})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rv.ID)
		if i < 2 {
			lc, err := e.pulls.AddLineComment(ctx, e.repo, pr.Number, pulls.LineComment{Author: "bob", Path: "b.txt", Line: 1, Body: "line"})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, lc.ID)
		}
	}
	var got []uint64
	after, pages := uint64(0), 0
	for {
		gets := e.fs.Count(faultstore.OpGet)
		page, next, err := e.pulls.Conversation(ctx, e.repo, pr, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page) > 3 {
			t.Fatalf("page of %d", len(page))
		}
		// Line comments read the copy, not the store; the notes shown
		// are one GET each, plus the copy's index reads at most.
		if n := e.fs.Count(faultstore.OpGet) - gets; n > len(page)+4 {
			t.Fatalf("page %d: %d GETs for %d notes", pages, n, len(page))
		}
		for _, n := range page {
			got = append(got, n.ID)
		}
		if next == 0 {
			break
		}
		after = next
	}
	if !slices.Equal(got, want) || pages != 3 {
		t.Fatalf("pages %d: %v, want %v", pages, got, want)
	}
}
