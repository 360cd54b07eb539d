package server_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v68/github"

	"github.com/ghost-scm/ghost/internal/hooks"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// TestPushPayloadCompareLinkAnswers: the "compare" link of a push
// webhook payload is a web UI page that lists the push's commits — for
// the push that creates the branch, for a fast-forward (not the commits
// before it) and for a force push, whose "before" no ref reaches any
// more (issue 42: it answered 404).
func TestPushPayloadCompareLinkAnswers(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, memstore.New(), etcdEndpoints(t), "/cmp", &dialer{t: t}, nil, false)
	tok, repo := seed(t, n.srv)
	if err := n.srv.Meta().SetVisibility(ctx, "alice", "demo", true); err != nil {
		t.Fatal(err)
	}
	rc := newHookReceiver(t, hookSecret)
	secret := hookSecret
	if _, err := n.srv.Hooks().Create(ctx, hooks.Scope{Tenant: "alice", Repo: repo.ID, Name: "demo"}, hooks.Input{URL: &rc.srv.URL, Secret: &secret, Events: []string{"push"}}, "alice"); err != nil {
		t.Fatal(err)
	}
	rc.wait(t, 1, 30*time.Second) // the ping
	src := t.TempDir()
	git(t, src, "init", "-q", "--initial-branch=main")
	// check GETs the path of push number i's compare link on the node
	// (the payload's host is the configured base URL) and wants every
	// subject of want on the page and none of not.
	check := func(i int, want, not []string) {
		t.Helper()
		g := rc.wait(t, i+1, 30*time.Second)
		p, ok := g[i].parsed.(*github.PushEvent)
		if !ok {
			t.Fatalf("delivery %d is %s, want a push", i, g[i].event)
		}
		u, err := url.Parse(p.GetCompare())
		if err != nil || !strings.HasPrefix(p.GetCompare(), "https://git.example.com/alice/demo/-/compare/") {
			t.Fatalf("compare link %q: %v", p.GetCompare(), err)
		}
		code, body := get(t, n.http.URL+u.RequestURI())
		if code != 200 {
			t.Fatalf("GET %s: %d %q", u.RequestURI(), code, body)
		}
		for _, s := range want {
			if !strings.Contains(body, s) {
				t.Errorf("GET %s: no %q on the page", u.RequestURI(), s)
			}
		}
		for _, s := range not {
			if strings.Contains(body, s) {
				t.Errorf("GET %s: %q is on the page, the push did not bring it", u.RequestURI(), s)
			}
		}
	}
	git(t, src, "commit", "-q", "--allow-empty", "-m", "subject-alpha")
	git(t, src, "push", "-q", pushURL(n, tok), "main")
	check(1, []string{"subject-alpha"}, nil)

	git(t, src, "commit", "-q", "--allow-empty", "-m", "subject-beta")
	git(t, src, "commit", "-q", "--allow-empty", "-m", "subject-gamma")
	git(t, src, "push", "-q", pushURL(n, tok), "main")
	check(2, []string{"subject-beta", "subject-gamma"}, []string{"subject-alpha"})

	git(t, src, "reset", "-q", "--hard", "HEAD~2")
	git(t, src, "commit", "-q", "--allow-empty", "-m", "subject-delta")
	git(t, src, "push", "-q", "--force", pushURL(n, tok), "main")
	check(3, []string{"subject-delta"}, []string{"subject-alpha", "subject-beta", "subject-gamma"})
}
