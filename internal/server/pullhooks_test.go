package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v68/github"

	"github.com/ghost-scm/ghost/internal/hooks"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// TestPullRequestWebhooks: a hook subscribed to pull_request gets
// GitHub's pull_request event, signed and parsed by go-github, for each
// change of a pull request made through the API or by a push: opened,
// edited, synchronize (a push to the head branch, with the new head
// tip), closed with merged true (the merge commit, who merged) — and
// none of the pushes' own events, which it did not subscribe to.
func TestPullRequestWebhooks(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, memstore.New(), etcdEndpoints(t), "/p", &dialer{t: t}, nil, false)
	tok, repo := seed(t, n.srv)
	rc := newHookReceiver(t, hookSecret)
	secret := hookSecret
	if _, err := n.srv.Hooks().Create(ctx, hooks.Scope{Tenant: "alice", Repo: repo.ID, Name: "demo"}, hooks.Input{URL: &rc.srv.URL, Secret: &secret, Events: []string{"pull_request"}}, "alice"); err != nil {
		t.Fatal(err)
	}
	rc.wait(t, 1, 30*time.Second) // the ping
	api := func(method, path, body string) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, n.http.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
		return b
	}
	src := t.TempDir()
	git(t, src, "init", "-q", "--initial-branch=main")
	git(t, src, "commit", "-q", "--allow-empty", "-m", "base")
	git(t, src, "push", "-q", pushURL(n, tok), "main")
	git(t, src, "checkout", "-q", "-b", "topic")
	writeFile(t, src, "t.txt", "topic\n")
	git(t, src, "add", "t.txt")
	git(t, src, "commit", "-q", "-m", "topic")
	git(t, src, "push", "-q", pushURL(n, tok), "topic")
	first := git(t, src, "rev-parse", "HEAD")

	// Each change, then its event.
	next := func(i int, action string) *github.PullRequestEvent {
		t.Helper()
		g := rc.wait(t, i+1, 30*time.Second)
		x := g[i]
		pe, ok := x.parsed.(*github.PullRequestEvent)
		if x.event != "pull_request" || !ok {
			t.Fatalf("delivery %d: %s %T, want a pull_request event", i, x.event, x.parsed)
		}
		if pe.GetAction() != action || pe.GetNumber() != 1 || pe.GetRepo().GetFullName() != "alice/demo" || pe.GetSender().GetLogin() != "alice" {
			t.Fatalf("delivery %d: action %q number %d repo %q sender %q, want %s #1 of alice/demo by alice", i, pe.GetAction(), pe.GetNumber(), pe.GetRepo().GetFullName(), pe.GetSender().GetLogin(), action)
		}
		if bytes.Contains(x.body, []byte(hookSecret)) {
			t.Fatal("the hook's secret is in a payload")
		}
		return pe
	}
	api("POST", "/api/repos/alice/demo/pulls", `{"title":"Topic","head":"topic","base":"main"}`)
	pe := next(1, "opened")
	if p := pe.GetPullRequest(); p.GetState() != "open" || p.GetHead().GetSHA() != first || p.GetHead().GetRef() != "topic" || p.GetBase().GetRef() != "main" || p.GetTitle() != "Topic" {
		t.Fatalf("opened: state %q head %s@%s base %s title %q", p.GetState(), p.GetHead().GetRef(), p.GetHead().GetSHA(), p.GetBase().GetRef(), p.GetTitle())
	}
	api("PATCH", "/api/repos/alice/demo/pulls/1", `{"title":"Topic, retitled"}`)
	if p := next(2, "edited").GetPullRequest(); p.GetTitle() != "Topic, retitled" {
		t.Fatalf("edited: title %q", p.GetTitle())
	}
	writeFile(t, src, "t2.txt", "more\n")
	git(t, src, "add", "t2.txt")
	git(t, src, "commit", "-q", "-m", "more")
	git(t, src, "push", "-q", pushURL(n, tok), "topic")
	second := git(t, src, "rev-parse", "HEAD")
	if p := next(3, "synchronize").GetPullRequest(); p.GetHead().GetSHA() != second {
		t.Fatalf("synchronize: head %s, want the pushed %s", p.GetHead().GetSHA(), second)
	}
	// The conversation's events go to a hook subscribed to them.
	rc2 := newHookReceiver(t, hookSecret)
	if _, err := n.srv.Hooks().Create(ctx, hooks.Scope{Tenant: "alice", Repo: repo.ID, Name: "demo"}, hooks.Input{URL: &rc2.srv.URL, Secret: &secret,
		Events: []string{"issue_comment", "pull_request_review", "pull_request_review_comment"}}, "alice"); err != nil {
		t.Fatal(err)
	}
	rc2.wait(t, 1, 30*time.Second) // its ping
	api("POST", "/api/repos/alice/demo/issues/1/comments", `{"body":"hello"}`)
	api("POST", "/api/repos/alice/demo/pulls/1/reviews", `{"event":"COMMENT","body":"a review","comments":[{"path":"t2.txt","line":1,"body":"this line"}]}`)
	seen := map[string]bool{}
	for _, x := range rc2.wait(t, 4, 30*time.Second)[1:] {
		switch ev := x.parsed.(type) {
		case *github.IssueCommentEvent:
			seen["comment"] = ev.GetAction() == "created" && ev.GetComment().GetBody() == "hello" && ev.GetIssue().GetNumber() == 1 && ev.GetIssue().IsPullRequest()
		case *github.PullRequestReviewEvent:
			seen["review"] = ev.GetAction() == "submitted" && ev.GetReview().GetState() == "commented" && ev.GetPullRequest().GetNumber() == 1 && ev.GetReview().GetCommitID() == second
		case *github.PullRequestReviewCommentEvent:
			seen["line"] = ev.GetAction() == "created" && ev.GetComment().GetPath() == "t2.txt" && ev.GetComment().GetLine() == 1 && ev.GetComment().GetPullRequestReviewID() != 0
		default:
			t.Errorf("conversation hook: %s %T", x.event, x.parsed)
		}
	}
	if !seen["comment"] || !seen["review"] || !seen["line"] {
		t.Fatalf("conversation events %v", seen)
	}
	var merged struct {
		SHA string `json:"sha"`
	}
	json.Unmarshal(api("PUT", "/api/repos/alice/demo/pulls/1/merge", `{"merge_method":"merge"}`), &merged)
	p := next(4, "closed").GetPullRequest()
	if p.GetState() != "closed" || !p.GetMerged() || p.GetMergeCommitSHA() != merged.SHA || merged.SHA == "" || p.GetMergedBy().GetLogin() != "alice" {
		t.Fatalf("merged: state %q merged %v commit %q (the merge answered %q) by %q", p.GetState(), p.GetMerged(), p.GetMergeCommitSHA(), merged.SHA, p.GetMergedBy().GetLogin())
	}
	// Nothing else came: the pushes' events went to no hook here.
	time.Sleep(500 * time.Millisecond) // a grace for a stray delivery, not a timed assertion
	if g := rc.wait(t, 5, time.Second); len(g) != 5 {
		var evs []string
		for _, x := range g {
			evs = append(evs, x.event)
		}
		t.Fatalf("deliveries %v, want a ping and four pull_request events", evs)
	}
}
