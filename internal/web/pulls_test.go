package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/pulls"
	"github.com/ghost-scm/ghost/internal/server"
)

// pullFixture is a whole server (ghost serve's handler: the UI, the API
// and git over HTTP, the pull-request service over the node cache) with
// alice's private repository app and public repository pub, each with
// main (a.txt) and branch topic (adding b.txt) pushed by a stock git
// client.
type pullFixture struct {
	*fixture
	s           *server.Server
	read        string // alice's read token
	env         []string
	work        string // a clone: main and topic
	base, topic string // their tips
}

func newPullFixture(t *testing.T) *pullFixture {
	t.Helper()
	ctx := context.Background()
	store := memstore.New()
	s, err := server.New(ctx, server.Options{Store: store, CacheDir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	m := s.Meta()
	f := &pullFixture{fixture: &fixture{t: t, meta: m, store: store, srv: ts}, s: s, env: gittest.Env(t.TempDir()), work: t.TempDir()}
	for _, tn := range []string{"alice", "bob"} {
		if _, err := m.CreateTenant(ctx, tn, meta.KindUser); err != nil {
			t.Fatal(err)
		}
	}
	if f.alice, _, err = m.CreateToken(ctx, "alice", meta.ScopeWrite, "write"); err != nil {
		t.Fatal(err)
	}
	if f.read, _, err = m.CreateToken(ctx, "alice", meta.ScopeRead, "read"); err != nil {
		t.Fatal(err)
	}
	if f.bob, _, err = m.CreateToken(ctx, "bob", meta.ScopeWrite, "bob"); err != nil {
		t.Fatal(err)
	}
	if f.priv, err = m.CreateRepo(ctx, "alice", "app", false); err != nil {
		t.Fatal(err)
	}
	if f.pub, err = m.CreateRepo(ctx, "alice", "pub", true); err != nil {
		t.Fatal(err)
	}
	f.git("init", "-q", "-b", "main")
	f.write("a.txt", "one\ntwo\nthree\n")
	f.git("add", "-A")
	f.git("commit", "-q", "-m", "base")
	f.base = f.git("rev-parse", "HEAD")
	f.git("checkout", "-q", "-b", "topic")
	f.write("b.txt", "the topic\n")
	f.git("add", "-A")
	f.git("commit", "-q", "-m", "add b.txt\n\nwith a body")
	f.topic = f.git("rev-parse", "HEAD")
	f.git("checkout", "-q", "main")
	f.push("main", "topic")
	return f
}

func (f *pullFixture) git(args ...string) string {
	f.t.Helper()
	return strings.TrimSpace(gittest.Git(f.t, f.env, f.work, args...))
}

func (f *pullFixture) write(name, body string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.work, name), []byte(body), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// remote is repo's URL with alice's write token.
func (f *pullFixture) remote(repo string) string {
	u, _ := url.Parse(f.srv.URL)
	u.User = url.UserPassword("alice", f.alice)
	return u.String() + "/alice/" + repo + ".git"
}

// push pushes refs of the clone to app and pub.
func (f *pullFixture) push(refs ...string) {
	f.t.Helper()
	for _, repo := range []string{"app", "pub"} {
		f.git(append([]string{"push", "-q", "-f", f.remote(repo)}, refs...)...)
	}
}

// tip is branch's id in repo, as a git client sees it.
func (f *pullFixture) tip(repo, branch string) string {
	f.t.Helper()
	out := f.git("ls-remote", f.remote(repo), "refs/heads/"+branch)
	if out == "" {
		return ""
	}
	return strings.Fields(out)[0]
}

func (f *pullFixture) pull(repo string, n uint64) pulls.PullRequest {
	f.t.Helper()
	r, err := f.meta.Repo(context.Background(), "alice", repo)
	if err != nil {
		f.t.Fatal(err)
	}
	pr, err := pulls.NewStore(f.store).Get(context.Background(), r.ID, n)
	if err != nil {
		f.t.Fatalf("pull request %s#%d: %v", repo, n, err)
	}
	return pr
}

var shaRE = regexp.MustCompile(`name="sha" value="([0-9a-f]{40})"`)

// TestPullPagesAccess walks every pull-request route of the UI as the
// anonymous visitor, alice's read token, another tenant and alice's
// write token, on a private and a public repository: a page needs read
// access, and a private repository is the page of a missing one to whoever
// may not read it; a form needs write access (as the API decides) and the
// session's form token, and a refused one changes nothing.
func TestPullPagesAccess(t *testing.T) {
	f := newPullFixture(t)
	visitors := []struct {
		who string
		c   *client
	}{
		{"anonymous", f.client()},
		{"read", f.signedIn(f.read)},
		{"other tenant", f.signedIn(f.bob)},
		{"write", f.signedIn(f.alice)},
	}
	writer := visitors[3].c
	for _, repo := range []string{"app", "pub"} {
		public := repo == "pub"
		base := "/alice/" + repo
		// alice opens #1 through the form; topic2 is left for #2.
		res := writer.post(base+"/-/pulls", url.Values{"csrf": {writer.csrfFor(base + "/-/pulls")}, "head": {"topic"}, "base": {"main"}, "title": {"Add b"}, "body": {"Adds **b**."}})
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != base+"/-/pull/1?done=opened" {
			t.Fatalf("%s: opening through the form: %d to %q", repo, res.StatusCode, res.Header.Get("Location"))
		}
		gets := []string{base + "/-/pulls", base + "/-/pulls?state=closed", base + "/-/pull/1", base + "/-/pull/1/files"}
		for _, v := range visitors {
			readable := public || v.who == "read" || v.who == "write"
			for _, path := range gets {
				res, body := v.c.get(path)
				switch {
				case readable && res.StatusCode != http.StatusOK:
					t.Errorf("%s GET %s: %d, want 200", v.who, path, res.StatusCode)
				case !readable && res.StatusCode != http.StatusNotFound:
					t.Errorf("%s GET %s: %d, want 404", v.who, path, res.StatusCode)
				case !readable:
					missing := strings.Replace(path, "/alice/app", "/alice/nope", 1)
					_, mbody := v.c.get(missing)
					norm := strings.NewReplacer("/alice/app/", "/alice/nope/", "%2falice%2fapp%2f", "%2falice%2fnope%2f")
					if norm.Replace(body) != mbody {
						t.Errorf("%s GET %s: not the page of a missing repository:\n%s\n---\n%s", v.who, path, body, mbody)
					}
				}
			}
			if !readable {
				continue
			}
			// The controls show to writers only.
			_, list := v.c.get(base + "/-/pulls")
			_, conv := v.c.get(base + "/-/pull/1")
			write := v.who == "write"
			for what, shown := range map[string]bool{
				"the tab":       strings.Contains(list, `id="pulls-tab"`),
				"the row":       strings.Contains(list, `id="pull-1"`) && strings.Contains(list, "Add b"),
				"the new form":  strings.Contains(list, `id="pull-form"`) == write,
				"the merge box": strings.Contains(conv, `id="merge-form"`) == write,
				"the edit form": strings.Contains(conv, `id="edit-form"`) == write,
				"close":         strings.Contains(conv, `id="close"`) == write,
				"mergeable":     strings.Contains(conv, `id="mergeable"`),
			} {
				if !shown {
					t.Errorf("%s on %s: %s wrong", v.who, repo, what)
				}
			}
		}
		posts := []struct {
			path string
			form url.Values
		}{
			{base + "/-/pulls", url.Values{"head": {"topic"}, "base": {"main"}, "title": {"Again"}}},
			{base + "/-/pull/1", url.Values{"title": {"Renamed"}, "body": {"x"}}},
			{base + "/-/pull/1/state", url.Values{"state": {"closed"}}},
			{base + "/-/pull/1/merge", url.Values{"method": {"merge"}, "sha": {f.topic}}},
		}
		for _, v := range visitors {
			for _, p := range posts {
				form := url.Values{}
				for k, vs := range p.form {
					form[k] = vs
				}
				// Without the form token: refused before anything else.
				if res := v.c.post(p.path, form); res.StatusCode != http.StatusForbidden {
					t.Errorf("%s POST %s without the form token: %d, want 403", v.who, p.path, res.StatusCode)
				}
				if v.who == "write" {
					continue // the allowed changes run below
				}
				form.Set("csrf", v.c.csrfFor("/login"))
				res := v.c.post(p.path, form)
				want := http.StatusForbidden
				switch {
				case v.who == "anonymous":
					want = http.StatusSeeOther
				case v.who == "other tenant" && !public:
					want = http.StatusNotFound
				}
				if res.StatusCode != want {
					t.Errorf("%s POST %s: %d, want %d", v.who, p.path, res.StatusCode, want)
				}
				if want == http.StatusSeeOther && res.Header.Get("Location") != "/login?next="+url.QueryEscape(p.path) {
					t.Errorf("%s POST %s: to %q, want the sign-in", v.who, p.path, res.Header.Get("Location"))
				}
			}
		}
		// Nothing changed: #1 is open with its title, there is no #2, main
		// is where it was.
		if pr := f.pull(repo, 1); pr.State != pulls.Open || pr.Title != "Add b" {
			t.Fatalf("%s: #1 changed by refused forms: %+v", repo, pr)
		}
		if tip := f.tip(repo, "main"); tip != f.base {
			t.Fatalf("%s: main moved by refused forms: %s", repo, tip)
		}
		// The writer's changes, each once.
		csrf := writer.csrfFor(base + "/-/pulls")
		for _, step := range []struct {
			path string
			form url.Values
			to   string
		}{
			{base + "/-/pull/1", url.Values{"title": {"Renamed"}, "body": {"x"}}, base + "/-/pull/1?done=edited"},
			{base + "/-/pull/1/state", url.Values{"state": {"closed"}}, base + "/-/pull/1?done=closed"},
			{base + "/-/pull/1/state", url.Values{"state": {"open"}}, base + "/-/pull/1?done=reopened"},
			{base + "/-/pull/1/merge", url.Values{"method": {"merge"}, "sha": {f.topic}}, base + "/-/pull/1?done=merged"},
		} {
			step.form.Set("csrf", csrf)
			if res := writer.post(step.path, step.form); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != step.to {
				t.Errorf("write POST %s %v: %d to %q, want 303 to %q", step.path, step.form, res.StatusCode, res.Header.Get("Location"), step.to)
			}
		}
		if pr := f.pull(repo, 1); pr.State != pulls.Merged || pr.Title != "Renamed" || pr.MergedBy != "alice" {
			t.Fatalf("%s: #1 after the writer's forms: %+v", repo, pr)
		}
	}
}

// TestPullMergeBox drives the merge box with real repositories: the
// files page anchors each diff line; a merge of a head that moved since
// the page was shown is refused in words and writes nothing; a merge of
// the head shown lands on main and deletes the branch when asked; a pull
// request that conflicts is shown as not mergeable, naming the file, and
// merging it anyway is refused.
func TestPullMergeBox(t *testing.T) {
	f := newPullFixture(t)
	w := f.signedIn(f.alice)
	base := "/alice/app"
	csrf := w.csrfFor(base + "/-/pulls")
	open := func(head, title, body string) string {
		t.Helper()
		res := w.post(base+"/-/pulls", url.Values{"csrf": {csrf}, "head": {head}, "base": {"main"}, "title": {title}, "body": {body}})
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("open %s: %d", head, res.StatusCode)
		}
		return strings.TrimSuffix(res.Header.Get("Location"), "?done=opened")
	}
	p1 := open("topic", "Add b", "Adds **b**.\n\n<script>alert(1)</script>")
	if _, body := w.get(p1); !strings.Contains(body, "<strong>b</strong>") || strings.Contains(body, "<script>alert(1)") ||
		!strings.Contains(body, "add b.txt") || !strings.Contains(body, `id="mergeable"`) {
		t.Fatalf("conversation of #1:\n%s", body)
	}
	if _, body := w.get(p1 + "/files"); !strings.Contains(body, `id="diff-0-R1"`) || !strings.Contains(body, "&#43;the topic") || !strings.Contains(body, "b.txt") {
		t.Fatalf("files of #1:\n%s", body)
	}
	// Bad input: a number that is not one, a form without the head it
	// showed or with no strategy, is refused and merges nothing.
	for _, p := range []string{"/-/pull/0", "/-/pull/01", "/-/pull/x", "/-/pull/99", "/-/pull/99999999999/files"} {
		if res, _ := w.get(base + p); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, res.StatusCode)
		}
	}
	for _, form := range []url.Values{{"method": {"merge"}}, {"method": {"octopus"}, "sha": {f.topic}}, {"sha": {f.topic}}} {
		form.Set("csrf", csrf)
		if res := w.post(p1+"/merge", form); res.StatusCode != http.StatusBadRequest {
			t.Errorf("merge with %v: %d, want 400", form, res.StatusCode)
		}
	}
	if res := w.post(p1+"/state", url.Values{"csrf": {csrf}, "state": {"merged"}}); res.StatusCode != http.StatusBadRequest {
		t.Errorf("state merged: %d, want 400", res.StatusCode)
	}
	if pr := f.pull("app", 1); pr.State != pulls.Open {
		t.Fatalf("#1 after bad forms: %+v", pr)
	}
	// The page showed topic's tip; topic moves; the merge of what was
	// shown is refused.
	_, body := w.get(p1)
	shown := shaRE.FindStringSubmatch(body)
	if shown == nil || shown[1] != f.topic {
		t.Fatalf("the merge box's head: %v, want %s", shown, f.topic)
	}
	f.git("checkout", "-q", "topic")
	f.write("b.txt", "the topic, revised\n")
	f.git("commit", "-q", "-am", "revise b.txt")
	moved := f.git("rev-parse", "HEAD")
	f.git("checkout", "-q", "main")
	f.push("topic")
	res, body := w.postPage(p1+"/merge", url.Values{"csrf": {csrf}, "method": {"squash"}, "sha": {shown[1]}, "delete_branch": {"on"}})
	if res.StatusCode != http.StatusConflict || !strings.Contains(body, `id="merge-error"`) || !strings.Contains(body, "the head branch moved since this page was shown") {
		t.Fatalf("merge of a moved head: %d\n%s", res.StatusCode, body)
	}
	if tip := f.tip("app", "main"); tip != f.base {
		t.Fatalf("main moved by a refused merge: %s", tip)
	}
	// Shown again, the box carries the new head; the merge lands.
	_, body = w.get(p1)
	if shown = shaRE.FindStringSubmatch(body); shown == nil || shown[1] != moved {
		t.Fatalf("the merge box's head after the push: %v, want %s", shown, moved)
	}
	res = w.post(p1+"/merge", url.Values{"csrf": {csrf}, "method": {"squash"}, "sha": {shown[1]}, "delete_branch": {"on"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("merge: %d", res.StatusCode)
	}
	main := f.tip("app", "main")
	pr := f.pull("app", 1)
	if pr.State != pulls.Merged || pr.MergeCommit != main || main == f.base || pr.MergeMethod != pulls.MethodSquash {
		t.Fatalf("after the merge: main %s, %+v", main, pr)
	}
	if tip := f.tip("app", "topic"); tip != "" {
		t.Errorf("topic was not deleted: %s", tip)
	}
	if _, body := w.get(p1); !strings.Contains(body, `id="merged"`) || !strings.Contains(body, shortSHA(main)) || strings.Contains(body, `id="merge-form"`) {
		t.Fatalf("conversation of the merged #1:\n%s", body)
	}
	if _, body := w.get(base + "/-/pulls?state=closed"); !strings.Contains(body, `id="pull-1"`) || !strings.Contains(body, "merged") {
		t.Fatalf("closed list:\n%s", body)
	}

	// Two branches changing the same line: the first merges, the second
	// then conflicts.
	for _, b := range []string{"clash1", "clash2"} {
		f.git("checkout", "-q", "-b", b, f.base)
		f.write("a.txt", "one\n"+b+"\nthree\n")
		f.git("commit", "-q", "-am", b)
		f.git("checkout", "-q", "main")
	}
	f.push("clash1", "clash2")
	p2, p3 := open("clash1", "Clash one", ""), open("clash2", "Clash two", "")
	_, body = w.get(p2)
	shown = shaRE.FindStringSubmatch(body)
	if res := w.post(p2+"/merge", url.Values{"csrf": {csrf}, "method": {"merge"}, "sha": {shown[1]}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("merge of clash1: %d", res.StatusCode)
	}
	main = f.tip("app", "main")
	_, body = w.get(p3)
	if !strings.Contains(body, `id="not-mergeable"`) || !strings.Contains(body, "<code>a.txt</code>") || !regexp.MustCompile(`id="merge" disabled`).MatchString(body) {
		t.Fatalf("conversation of the conflicting #3:\n%s", body)
	}
	shown = shaRE.FindStringSubmatch(body)
	res, body = w.postPage(p3+"/merge", url.Values{"csrf": {csrf}, "method": {"merge"}, "sha": {shown[1]}})
	if res.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(body, "Not merged: pull request is not mergeable: conflicts in a.txt") {
		t.Fatalf("merge of a conflict: %d\n%s", res.StatusCode, body)
	}
	if tip := f.tip("app", "main"); tip != main {
		t.Fatalf("main moved by a refused merge: %s", tip)
	}
	if pr := f.pull("app", 3); pr.State != pulls.Open {
		t.Fatalf("#3 after a refused merge: %+v", pr)
	}
}

func shortSHA(id string) string { return id[:10] }

// postPage posts form and returns the answer with its body.
func (c *client) postPage(path string, form url.Values) (*http.Response, string) {
	c.f.t.Helper()
	req, err := http.NewRequest("POST", c.f.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		c.f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res := c.do(req)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// TestPullHeaderSaysWhoMerged: the header of a merged pull request says,
// as GitHub's does, who merged how many commits into the base from the
// head, on both tabs, and no longer that its author "wants to merge";
// a closed one says its author wanted to, and when it was closed (issue
// 42).
func TestPullHeaderSaysWhoMerged(t *testing.T) {
	f := newPullFixture(t)
	f.git("checkout", "-q", "topic")
	f.write("c.txt", "more of the topic\n")
	f.git("add", "-A")
	f.git("commit", "-q", "-m", "add c.txt")
	f.git("checkout", "-q", "-b", "other", "main")
	f.write("d.txt", "another change\n")
	f.git("add", "-A")
	f.git("commit", "-q", "-m", "add d.txt")
	f.git("checkout", "-q", "main")
	f.push("topic", "other")
	base := "/alice/pub"
	alice := f.signedIn(f.alice)
	open := func(c *client, head string) string {
		t.Helper()
		res := c.post(base+"/-/pulls", url.Values{"csrf": {c.csrfFor(base + "/-/pulls")}, "head": {head}, "base": {"main"}, "title": {"Take " + head}})
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("open %s: %d", head, res.StatusCode)
		}
		return strings.TrimSuffix(res.Header.Get("Location"), "?done=opened")
	}
	p1, p2 := open(alice, "topic"), open(alice, "other")
	header := func(path string) string {
		t.Helper()
		res, body := alice.get(path)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, res.StatusCode)
		}
		start, end := strings.Index(body, `id="pull-head"`), strings.Index(body, `<nav class="tabs subtabs">`)
		if start < 0 || end < start {
			t.Fatalf("GET %s: no header\n%s", path, body)
		}
		return strings.Join(strings.Fields(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(body[start:end], " ")), " ")
	}
	if h := header(p1); !strings.Contains(h, "alice wants to merge topic into main · opened") {
		t.Errorf("header of the open #1: %q", h)
	}
	csrf := alice.csrfFor(p1)
	_, body := alice.get(p1)
	sha := shaRE.FindStringSubmatch(body)
	if sha == nil {
		t.Fatalf("no merge box on #1:\n%s", body)
	}
	if res := alice.post(p1+"/merge", url.Values{"csrf": {csrf}, "method": {"merge"}, "sha": {sha[1]}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("merge: %d", res.StatusCode)
	}
	for _, p := range []string{p1, p1 + "/files"} {
		if h := header(p); !strings.Contains(h, "merged alice merged 2 commits into main from topic ·") || strings.Contains(h, "wants to merge") {
			t.Errorf("header of the merged #1 on %s: %q", p, h)
		}
	}
	if res := alice.post(p2+"/state", url.Values{"csrf": {csrf}, "state": {"closed"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("close: %d", res.StatusCode)
	}
	if h := header(p2); !strings.Contains(h, "closed alice wanted to merge other into main · closed") || strings.Contains(h, "merged") {
		t.Errorf("header of the closed #2: %q", h)
	}
}
