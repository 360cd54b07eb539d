package pulls_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/gitsvc/cacheadapter"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/pulls"
	"github.com/ghost-scm/ghost/internal/pushprotect"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// env is a node: the log and metadata over one in-memory store, a cache,
// the git service and the pull-request service, and a client's working
// repository whose commits are pushed through the git service's push path
// (a server push, which runs the same validation and commit as a
// client's).
type env struct {
	t      testing.TB
	fs     *faultstore.Store // passes every call unless a test plans otherwise
	meta   *meta.Store
	log    *wal.Log
	svc    *gitsvc.Service
	pulls  *pulls.Service
	pusher *hookPusher
	events *recorder
	copies pulls.Copies
	repo   meta.Repo
	git    []string // the client's git environment
	work   string   // the client's repository
	// as is the pusher of e.push ("" : alice); noHook leaves pushes
	// without the push hook, as if its background run had not yet come.
	as     string
	noHook bool
}

// hookPusher runs a hook before each push (a racing push), and can
// answer for a push it committed that the outcome is unknown.
type hookPusher struct {
	inner   pulls.Pusher
	mu      sync.Mutex
	before  func(p pulls.Push)
	unknown bool
}

func (h *hookPusher) Push(ctx context.Context, p pulls.Push) (pulls.PushResult, error) {
	h.mu.Lock()
	before, unknown := h.before, h.unknown
	h.before, h.unknown = nil, false
	h.mu.Unlock()
	if before != nil {
		before(p)
	}
	res, err := h.inner.Push(ctx, p)
	if unknown && err == nil && res.Committed {
		return pulls.PushResult{}, pulls.ErrOutcomeUnknown
	}
	return res, err
}

func newEnv(t testing.TB, protect bool, configure ...func(*pulls.Options)) *env {
	t.Helper()
	ctx := context.Background()
	store := faultstore.New(memstore.New())
	e := &env{t: t, log: wal.New(store, wal.Options{}), fs: store}
	e.meta = meta.New(store, e.log)
	// Packs are consolidated in the background, as a server does, not
	// inside the request that found too many.
	cache, err := repocache.New(t.TempDir(), e.log, repocache.Options{Background: gitexec.NewBackground(gitexec.BackgroundOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)
	opts := cacheadapter.Options(cache, e.log)
	if protect {
		pp, err := pushprotect.New(nil, alerts.New(store), pushprotect.Options{})
		if err != nil {
			t.Fatal(err)
		}
		opts.PushProtect = pp
	}
	var ps *pulls.Service
	opts.OnCommit = func(req gitsvc.Request, res wal.Result) {
		if e.noHook {
			return
		}
		h, err := e.log.ReadEntryHeader(context.Background(), req.Repo, res.ULID)
		if err != nil {
			t.Error(err)
			return
		}
		var refs []string
		for _, tr := range h.Transitions {
			refs = append(refs, tr.Ref)
		}
		ps.HeadPushed(context.Background(), req.Repo, refs)
	}
	if e.svc, err = gitsvc.New(opts); err != nil {
		t.Fatal(err)
	}
	e.copies = cacheadapter.PullCopies{Repos: cacheadapter.Repos{Cache: cache, Log: e.log}}
	e.pusher = &hookPusher{inner: cacheadapter.PullPusher{Service: e.svc}}
	e.events = &recorder{}
	po := pulls.Options{
		Store: pulls.NewStore(store), Repos: e.meta, Copies: e.copies, Pusher: e.pusher,
		Git: &gitexec.Runner{}, TempDir: cache.TempDir, Events: e.events, Pushes: e.log,
	}
	for _, c := range configure {
		c(&po)
	}
	ps, err = pulls.New(po)
	if err != nil {
		t.Fatal(err)
	}
	e.pulls = ps
	if _, err := e.meta.CreateTenant(ctx, "alice", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	if e.repo, err = e.meta.CreateRepo(ctx, "alice", "app", false); err != nil {
		t.Fatal(err)
	}
	if protect {
		if err := e.meta.SetPushProtection(ctx, "alice", "app", true); err != nil {
			t.Fatal(err)
		}
		e.repo, _ = e.meta.Repo(ctx, "alice", "app")
	}
	e.git = gittest.Env(t.TempDir())
	e.work = t.TempDir()
	e.gitc("init", "-q", "-b", "main")
	return e
}

func (e *env) gitc(args ...string) string {
	e.t.Helper()
	return strings.TrimSpace(gittest.Git(e.t, e.git, e.work, args...))
}

// commit writes files (path, content pairs) on the current branch.
func (e *env) commit(msg string, files ...string) string {
	e.t.Helper()
	for i := 0; i < len(files); i += 2 {
		p := filepath.Join(e.work, files[i])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			e.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(files[i+1]), 0o644); err != nil {
			e.t.Fatal(err)
		}
		e.gitc("add", files[i])
	}
	e.gitc("commit", "-q", "-m", msg)
	return e.gitc("rev-parse", "HEAD")
}

// refs is the repository's refs as the log has them.
func (e *env) refs(repo meta.Repo) map[string]string {
	e.t.Helper()
	c, err := e.copies.Materialize(context.Background(), repo.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return c.Refs
}

// push pushes local branch to repo's branch through the push path.
func (e *env) push(repo meta.Repo, branch string) {
	e.t.Helper()
	if err := e.tryPush(repo, branch); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) tryPush(repo meta.Repo, branch string) error {
	e.t.Helper()
	tip := e.gitc("rev-parse", branch)
	refs := e.refs(repo)
	old := refs["refs/heads/"+branch]
	if old == "" {
		old = pulls.ZeroID
	}
	in := tip + "\n--not\n"
	for _, id := range refs {
		if _, err := gittest.Run(e.git, e.work, nil, "cat-file", "-e", id); err == nil {
			in += id + "\n"
		}
	}
	pack := filepath.Join(e.t.TempDir(), "p")
	out, err := gittest.Run(e.git, e.work, strings.NewReader(in), "pack-objects", "--revs", "-q", pack)
	if err != nil {
		e.t.Fatal(err)
	}
	by := e.as
	if by == "" {
		by = "alice"
	}
	res, err := e.svc.Push(context.Background(), gitsvc.ServerPush{
		Request: gitsvc.Request{Repo: repo.ID, Principal: by, Tenant: repo.Owner, PushProtection: repo.PushProtection},
		Updates: []gitsvc.RefUpdate{{Ref: "refs/heads/" + branch, Old: old, New: tip}},
		Pack:    pack + "-" + strings.TrimSpace(out) + ".pack",
	})
	if err != nil {
		return err
	}
	if !res.Committed() {
		return errors.New("push refused: " + strings.Join(slices.Collect(mapValues(res.Reasons)), ", "))
	}
	return nil
}

func mapValues(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// topic makes main (a.txt) and a branch topic with one commit on each
// side, both pushed, and opens a pull request of topic into main.
func (e *env) topic() pulls.PullRequest {
	e.t.Helper()
	e.commit("base", "a.txt", "one\ntwo\nthree\n")
	e.push(e.repo, "main")
	e.gitc("checkout", "-q", "-b", "topic")
	e.commit("add b", "b.txt", "b\n")
	e.push(e.repo, "topic")
	e.gitc("checkout", "-q", "main")
	pr, err := e.pulls.Create(context.Background(), e.repo, pulls.NewPull{Head: e.repo, HeadRef: "topic", BaseRef: "main", Title: "Add b", Body: "Adds *b*.", Author: "alice"})
	if err != nil {
		e.t.Fatal(err)
	}
	return pr
}

func (e *env) isAncestor(a, b string) bool {
	_, err := gittest.Run(e.git, e.work, nil, "merge-base", "--is-ancestor", a, b)
	return err == nil
}

// fetch brings the log's objects into the client's repository.
func (e *env) fetchAll(c pulls.Copy) {
	e.t.Helper()
	e.gitc("fetch", "-q", c.Dir, "+refs/*:refs/remotes/log/*")
}

func TestCreateSetsAndFollowsPullRef(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	pr := e.topic()
	if pr.Number != 1 || pr.State != pulls.Open {
		t.Fatalf("created %+v", pr)
	}
	refs := e.refs(e.repo)
	if refs["refs/pull/1/head"] != refs["refs/heads/topic"] {
		t.Fatalf("refs/pull/1/head %q, topic %q", refs["refs/pull/1/head"], refs["refs/heads/topic"])
	}
	// More pushed to the head: the push hook moves the ref.
	e.gitc("checkout", "-q", "topic")
	tip := e.commit("more", "b.txt", "b\nmore\n")
	e.push(e.repo, "topic")
	if got := e.refs(e.repo)["refs/pull/1/head"]; got != tip {
		t.Fatalf("after a push refs/pull/1/head is %s, want %s", got, tip)
	}
	// A second pull request of the same head and base is refused; into
	// another base it is not.
	_, err := e.pulls.Create(context.Background(), e.repo, pulls.NewPull{Head: e.repo, HeadRef: "topic", BaseRef: "main", Title: "again", Author: "alice"})
	if !errors.Is(err, pulls.ErrExists) {
		t.Fatalf("duplicate: %v", err)
	}
	for name, np := range map[string]pulls.NewPull{
		"missing head": {Head: e.repo, HeadRef: "nope", BaseRef: "main", Title: "x", Author: "alice"},
		"missing base": {Head: e.repo, HeadRef: "topic", BaseRef: "nope", Title: "x", Author: "alice"},
		"same branch":  {Head: e.repo, HeadRef: "main", BaseRef: "main", Title: "x", Author: "alice"},
		"no title":     {Head: e.repo, HeadRef: "topic", BaseRef: "main", Author: "alice"},
	} {
		if _, err := e.pulls.Create(context.Background(), e.repo, np); err == nil {
			t.Errorf("%s: created", name)
		}
	}
	// Closed, the ref stays; reopened, it follows again.
	closed := pulls.Closed
	if _, err := e.pulls.Update(context.Background(), e.repo, 1, pulls.Edit{State: &closed}); err != nil {
		t.Fatal(err)
	}
	e.commit("closed meanwhile", "c.txt", "c\n")
	e.push(e.repo, "topic")
	if got := e.refs(e.repo)["refs/pull/1/head"]; got != tip {
		t.Fatalf("a closed pull request's ref moved to %s", got)
	}
	open := pulls.Open
	if _, err := e.pulls.Update(context.Background(), e.repo, 1, pulls.Edit{State: &open}); err != nil {
		t.Fatal(err)
	}
	if got := e.refs(e.repo)["refs/pull/1/head"]; got != e.gitc("rev-parse", "topic") {
		t.Fatalf("reopened, refs/pull/1/head is %s", got)
	}
}

// Get brings a ref whose update a push's hook missed (a crash between
// the push and the hook) up to the head.
func TestGetHealsPullRef(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.topic()
	e.gitc("checkout", "-q", "topic")
	tip := e.commit("more", "b.txt", "b2\n")
	hook := e.svc
	_ = hook
	// Push without the hook: through a second service with no OnCommit.
	refs := e.refs(e.repo)
	in := tip + "\n--not\n" + refs["refs/heads/topic"] + "\n"
	pack := filepath.Join(t.TempDir(), "p")
	out, err := gittest.Run(e.git, e.work, strings.NewReader(in), "pack-objects", "--revs", "-q", pack)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.log.Commit(context.Background(), e.repo.ID, walPush(t, "refs/heads/topic", refs["refs/heads/topic"], tip, pack+"-"+strings.TrimSpace(out)+".pack")); err != nil {
		t.Fatal(err)
	}
	if got := e.refs(e.repo)["refs/pull/1/head"]; got == tip {
		t.Fatal("the ref moved without the hook")
	}
	if _, err := e.pulls.Get(context.Background(), e.repo, 1); err != nil {
		t.Fatal(err)
	}
	if got := e.refs(e.repo)["refs/pull/1/head"]; got != tip {
		t.Fatalf("after Get refs/pull/1/head is %s, want %s", got, tip)
	}
}

func walPush(t *testing.T, ref, old, new, pack string) wal.Push {
	f, err := os.Open(pack)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, _ := f.Stat()
	return wal.Push{Transitions: []wal.Transition{{Ref: ref, Old: old, New: new}}, PushedBy: "test", Pack: f, PackSize: st.Size()}
}

func TestMergeStrategies(t *testing.T) {
	t.Parallel()
	for _, m := range pulls.Methods {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, false)
			pr := e.topic()
			// The base moves on (another file), so that every strategy
			// has real merging to do.
			e.commit("main moves", "a.txt", "one\ntwo\nthree\nfour\n")
			e.push(e.repo, "main")
			e.gitc("checkout", "-q", "topic")
			e.commit("second on topic", "b.txt", "b\nb2\n")
			e.push(e.repo, "topic")
			e.gitc("checkout", "-q", "main")
			before := e.refs(e.repo)
			st, err := e.pulls.Status(context.Background(), e.repo, pr)
			if err != nil || st.Mergeable == nil || !*st.Mergeable || st.MergeableState != "clean" {
				t.Fatalf("status %+v, %v", st, err)
			}
			merged, err := e.pulls.Merge(context.Background(), e.repo, pr.Number, pulls.MergeOptions{Method: m, By: "bob", DeleteBranch: true})
			if err != nil {
				t.Fatal(err)
			}
			after := e.refs(e.repo)
			tip := after["refs/heads/main"]
			if merged.State != pulls.Merged || merged.MergeCommit != tip || merged.MergeMethod != m || merged.MergedBy != "bob" ||
				merged.BaseSHA != before["refs/heads/main"] || merged.HeadSHA != before["refs/heads/topic"] || merged.Merging != nil {
				t.Fatalf("merged %+v, main %s", merged, tip)
			}
			if _, ok := after["refs/heads/topic"]; ok {
				t.Fatal("the head branch was not deleted")
			}
			if after["refs/pull/1/head"] != before["refs/heads/topic"] {
				t.Fatal("refs/pull/1/head moved")
			}
			c, _ := e.copies.Materialize(context.Background(), e.repo.ID)
			e.fetchAll(c)
			// Every strategy ends with both sides' files.
			if got := e.gitc("show", tip+":a.txt"); got != "one\ntwo\nthree\nfour" {
				t.Fatalf("a.txt %q", got)
			}
			if got := e.gitc("show", tip+":b.txt"); got != "b\nb2" {
				t.Fatalf("b.txt %q", got)
			}
			parents := strings.Fields(e.gitc("rev-list", "--parents", "-n1", tip))[1:]
			oldMain := before["refs/heads/main"]
			switch m {
			case pulls.MethodMerge:
				if !slices.Equal(parents, []string{oldMain, before["refs/heads/topic"]}) {
					t.Fatalf("merge commit's parents %v", parents)
				}
				if msg := e.gitc("log", "-1", "--format=%B", tip); !strings.HasPrefix(msg, "Merge pull request #1 from alice/topic\n\nAdd b") {
					t.Fatalf("merge message %q", msg)
				}
			case pulls.MethodSquash:
				if !slices.Equal(parents, []string{oldMain}) {
					t.Fatalf("squash parents %v", parents)
				}
				if msg := e.gitc("log", "-1", "--format=%B", tip); !strings.HasPrefix(msg, "Add b (#1)\n\n* add b\n\n* second on topic") {
					t.Fatalf("squash message %q", msg)
				}
				if a := e.gitc("log", "-1", "--format=%an", tip); a != "alice" {
					t.Fatalf("squash author %q, want the pull request's", a)
				}
			case pulls.MethodRebase:
				// Linear: two new commits on the old main, with the
				// original authors and messages, committed by bob.
				line := strings.Fields(e.gitc("rev-list", "--first-parent", oldMain+".."+tip))
				if len(line) != 2 || len(parents) != 1 {
					t.Fatalf("rebased %v", line)
				}
				if msgs := e.gitc("log", "--format=%s|%an|%cn", oldMain+".."+tip); msgs != "second on topic|Ghost Test|bob\nadd b|Ghost Test|bob" {
					t.Fatalf("rebased commits %q", msgs)
				}
			}
			if !e.isAncestor(oldMain, tip) {
				t.Fatal("the merge dropped the old base")
			}
			// Merged is final.
			if _, err := e.pulls.Merge(context.Background(), e.repo, 1, pulls.MergeOptions{By: "bob"}); !errors.Is(err, pulls.ErrState) {
				t.Fatalf("merging again: %v", err)
			}
			list, _, _ := e.pulls.List(context.Background(), e.repo, pulls.FilterClosed, 0, 10)
			if len(list) != 1 || list[0].State != pulls.Merged {
				t.Fatalf("closed list %+v", list)
			}
		})
	}
}

// A push moves the base between the merge's read of it and its commit:
// the merge's compare-and-swap fails, it reports "base changed", and the
// push is kept.
func TestMergeBaseChanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	pr := e.topic()
	racer := e.commit("racing push", "a.txt", "one\ntwo\nthree\nracer\n")
	e.pusher.before = func(pulls.Push) { e.push(e.repo, "main") }
	_, err := e.pulls.Merge(context.Background(), e.repo, pr.Number, pulls.MergeOptions{Method: pulls.MethodSquash, By: "bob"})
	if !errors.Is(err, pulls.ErrBaseChanged) {
		t.Fatalf("merge over a moved base: %v, want ErrBaseChanged", err)
	}
	if got := e.refs(e.repo)["refs/heads/main"]; got != racer {
		t.Fatalf("main is %s, want the racing push %s", got, racer)
	}
	got, err := e.pulls.Get(context.Background(), e.repo, 1)
	if err != nil || got.State != pulls.Open || got.Merging != nil {
		t.Fatalf("after the failed merge %+v, %v", got, err)
	}
	// Trying again merges on the new base.
	merged, err := e.pulls.Merge(context.Background(), e.repo, 1, pulls.MergeOptions{Method: pulls.MethodSquash, By: "bob"})
	if err != nil || !e.isAncestorLog(racer, merged.MergeCommit) {
		t.Fatalf("retry: %+v, %v", merged, err)
	}
}

func (e *env) isAncestorLog(a, b string) bool {
	c, _ := e.copies.Materialize(context.Background(), e.repo.ID)
	e.fetchAll(c)
	return e.isAncestor(a, b)
}

func TestMergeConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.commit("base", "a.txt", "one\ntwo\nthree\n")
	e.push(e.repo, "main")
	e.gitc("checkout", "-q", "-b", "topic")
	e.commit("topic edits", "a.txt", "one\nTOPIC\nthree\n")
	e.push(e.repo, "topic")
	e.gitc("checkout", "-q", "main")
	e.commit("main edits", "a.txt", "one\nMAIN\nthree\n")
	e.push(e.repo, "main")
	pr, err := e.pulls.Create(context.Background(), e.repo, pulls.NewPull{Head: e.repo, HeadRef: "topic", BaseRef: "main", Title: "conflict", Author: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.pulls.Status(context.Background(), e.repo, pr)
	if err != nil || st.Mergeable == nil || *st.Mergeable || st.MergeableState != "dirty" || !slices.Equal(st.Conflicts, []string{"a.txt"}) {
		t.Fatalf("status %+v, %v", st, err)
	}
	before := e.refs(e.repo)["refs/heads/main"]
	for _, m := range pulls.Methods {
		_, err := e.pulls.Merge(context.Background(), e.repo, pr.Number, pulls.MergeOptions{Method: m, By: "bob"})
		var me *pulls.MergeError
		if !errors.Is(err, pulls.ErrNotMergeable) || !errors.As(err, &me) || !slices.Equal(me.Conflicts, []string{"a.txt"}) {
			t.Fatalf("%s merge of a conflict: %v", m, err)
		}
	}
	if got := e.refs(e.repo)["refs/heads/main"]; got != before {
		t.Fatal("a refused merge moved main")
	}
}

// A merge whose commit message would add a secret is held by push
// protection, like any push.
func TestMergeHeldByPushProtection(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.commit("base", "a.txt", "one\n")
	e.push(e.repo, "main")
	e.gitc("checkout", "-q", "-b", "topic")
	e.commit("add b", "b.txt", "b\n")
	e.push(e.repo, "topic")
	pr, err := e.pulls.Create(context.Background(), e.repo, pulls.NewPull{Head: e.repo, HeadRef: "topic", BaseRef: "main",
		Title: "token ghp_Xk2Lq9Zr7Tm4Vb8Nc3Wd6Yf1Hg5Js0Pa2Qe7", Author: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	before := e.refs(e.repo)["refs/heads/main"]
	_, err = e.pulls.Merge(context.Background(), e.repo, pr.Number, pulls.MergeOptions{By: "bob"})
	var me *pulls.MergeError
	if !errors.Is(err, pulls.ErrHeld) || !errors.As(err, &me) || !strings.Contains(strings.Join(me.Message, "\n"), "github-pat") {
		t.Fatalf("merge with a secret: %v", err)
	}
	if got := e.refs(e.repo)["refs/heads/main"]; got != before {
		t.Fatal("a held merge moved main")
	}
	// Without the secret in its message it goes through.
	if _, err := e.pulls.Merge(context.Background(), e.repo, pr.Number, pulls.MergeOptions{By: "bob", CommitTitle: "Add b", CommitMessage: "clean"}); err != nil {
		t.Fatal(err)
	}
}

// The merge's commit lands and then its outcome is reported unknown: the
// pull request stays "merging", and the next read finds the commit in
// the base and marks it merged.
func TestMergeUnknownOutcomeSettles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	pr := e.topic()
	e.pusher.unknown = true
	_, err := e.pulls.Merge(context.Background(), e.repo, pr.Number, pulls.MergeOptions{By: "bob"})
	if !errors.Is(err, pulls.ErrOutcomeUnknown) {
		t.Fatalf("merge: %v", err)
	}
	raw, _ := e.pulls.Store().Get(context.Background(), e.repo.ID, 1)
	if raw.State != pulls.Open || raw.Merging == nil {
		t.Fatalf("record after an unknown outcome %+v", raw)
	}
	if _, err := e.pulls.Merge(context.Background(), e.repo, 1, pulls.MergeOptions{By: "bob"}); !errors.Is(err, pulls.ErrState) {
		t.Fatalf("merge again: %v, want ErrState (settled as merged)", err)
	}
	got, err := e.pulls.Get(context.Background(), e.repo, 1)
	if err != nil || got.State != pulls.Merged || got.MergeCommit != e.refs(e.repo)["refs/heads/main"] {
		t.Fatalf("settled %+v, %v", got, err)
	}
}

// A merge recorded in flight whose commit never landed is forgotten once
// it can no longer land.
func TestMergeInFlightExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	pr := e.topic()
	e.pusher.before = func(pulls.Push) { panic(errStop) }
	func() {
		defer func() {
			if r := recover(); r != errStop {
				panic(r)
			}
		}()
		e.pulls.Merge(context.Background(), e.repo, pr.Number, pulls.MergeOptions{By: "bob"})
	}()
	if _, err := e.pulls.Merge(context.Background(), e.repo, 1, pulls.MergeOptions{By: "bob"}); !errors.Is(err, pulls.ErrInProgress) {
		t.Fatalf("merge while one is in flight: %v", err)
	}
	e.pulls = e.newService(time.Nanosecond)
	got, err := e.pulls.Get(context.Background(), e.repo, 1)
	if err != nil || got.State != pulls.Open || got.Merging != nil {
		t.Fatalf("expired %+v, %v", got, err)
	}
	if _, err := e.pulls.Merge(context.Background(), e.repo, 1, pulls.MergeOptions{By: "bob"}); err != nil {
		t.Fatal(err)
	}
}

var errStop = errors.New("the node stops here")

func (e *env) newService(window time.Duration) *pulls.Service {
	c, _ := e.copies.(cacheadapter.PullCopies)
	_ = c
	ps, err := pulls.New(pulls.Options{
		Store: e.pulls.Store(), Repos: e.meta, Copies: e.copies, Pusher: e.pusher,
		Git: &gitexec.Runner{}, TempDir: func() (string, error) { return e.t.TempDir(), nil }, MergeWindow: window,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return ps
}

func TestHeadMovedAndSHA(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	pr := e.topic()
	_, err := e.pulls.Merge(context.Background(), e.repo, pr.Number, pulls.MergeOptions{By: "bob", SHA: strings.Repeat("a", 40)})
	if !errors.Is(err, pulls.ErrHeadChanged) {
		t.Fatalf("merge of another sha: %v", err)
	}
	head := e.refs(e.repo)["refs/heads/topic"]
	if _, err := e.pulls.Merge(context.Background(), e.repo, pr.Number, pulls.MergeOptions{By: "bob", SHA: head, Method: pulls.MethodRebase}); err != nil {
		t.Fatal(err)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	pr := e.topic()
	no := false
	if err := e.meta.SetMergeMethods(context.Background(), "alice", "app", meta.MergeMethods{Squash: &no}); err != nil {
		t.Fatal(err)
	}
	repo, _ := e.meta.Repo(context.Background(), "alice", "app")
	if _, err := e.pulls.Merge(context.Background(), repo, pr.Number, pulls.MergeOptions{By: "bob", Method: pulls.MethodSquash}); !errors.Is(err, pulls.ErrMethodNotAllowed) {
		t.Fatalf("squash where refused: %v", err)
	}
	if err := e.meta.SetMergeMethods(context.Background(), "alice", "app", meta.MergeMethods{Merge: &no, Rebase: &no}); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("turning off every method: %v", err)
	}
}

func TestForkPullRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx := context.Background()
	e.commit("base", "a.txt", "one\n")
	e.push(e.repo, "main")
	if _, err := e.meta.CreateTenant(ctx, "bob", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	fork, err := e.meta.ForkRepo(ctx, "alice", "app", "bob", "app")
	if err != nil {
		t.Fatal(err)
	}
	e.gitc("checkout", "-q", "-b", "feature")
	tip := e.commit("from the fork", "f.txt", "fork\n")
	e.push(fork, "feature")
	if _, ok := e.refs(e.repo)["refs/heads/feature"]; ok {
		t.Fatal("the base has the fork's branch")
	}
	pr, err := e.pulls.Create(ctx, e.repo, pulls.NewPull{Head: fork, HeadRef: "feature", BaseRef: "main", Title: "From bob", Author: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.refs(e.repo)["refs/pull/1/head"]; got != tip {
		t.Fatalf("refs/pull/1/head %q, want the fork's %s", got, tip)
	}
	// A push to the fork's branch moves the base's ref.
	tip = e.commit("more from the fork", "f.txt", "fork2\n")
	e.push(fork, "feature")
	if got := e.refs(e.repo)["refs/pull/1/head"]; got != tip {
		t.Fatalf("after the fork's push refs/pull/1/head %q, want %s", got, tip)
	}
	merged, err := e.pulls.Merge(ctx, e.repo, pr.Number, pulls.MergeOptions{By: "alice", DeleteBranch: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.refs(fork)["refs/heads/feature"]; ok {
		t.Fatal("the fork's branch was not deleted")
	}
	if !e.isAncestorLog(tip, merged.MergeCommit) {
		t.Fatal("the merge lacks the fork's commits")
	}
	// A repository that is not a fork of the base cannot be a head.
	other, _ := e.meta.CreateRepo(ctx, "bob", "other", false)
	if _, err := e.pulls.Create(ctx, e.repo, pulls.NewPull{Head: other, HeadRef: "x", BaseRef: "main", Title: "x", Author: "bob"}); !errors.Is(err, pulls.ErrInvalid) {
		t.Fatalf("a head from an unrelated repository: %v", err)
	}
}

func TestCommitsAndFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.commit("base", "a.txt", "one\ntwo\n", "old name.txt", "same content\nhere\n", "gone.txt", "bye\n")
	e.push(e.repo, "main")
	e.gitc("checkout", "-q", "-b", "topic")
	e.commit("first", "a.txt", "one\ntwo\nthree\n")
	e.gitc("mv", "old name.txt", "new name.txt")
	e.gitc("rm", "-q", "gone.txt")
	e.commit("second", "bin.dat", "\x00\x01\x02")
	e.push(e.repo, "topic")
	e.gitc("checkout", "-q", "main")
	e.commit("main moves", "z.txt", "z\n")
	e.push(e.repo, "main")
	pr, err := e.pulls.Create(context.Background(), e.repo, pulls.NewPull{Head: e.repo, HeadRef: "topic", BaseRef: "main", Title: "t", Author: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	commits, err := e.pulls.Commits(context.Background(), e.repo, pr, 1, 10)
	if err != nil || len(commits) != 2 || commits[0].Message != "first\n" || commits[1].Message != "second\n" ||
		commits[0].Author.Name != "Ghost Test" || commits[1].Parents[0] != commits[0].SHA {
		t.Fatalf("commits %+v, %v", commits, err)
	}
	page2, _ := e.pulls.Commits(context.Background(), e.repo, pr, 2, 1)
	if len(page2) != 1 || page2[0].SHA != commits[1].SHA {
		t.Fatalf("page 2 of 1: %+v", page2)
	}
	files, err := e.pulls.Files(context.Background(), e.repo, pr, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]pulls.File{}
	for _, f := range files {
		got[f.Filename] = f
	}
	if len(files) != 4 || got["z.txt"].Filename != "" {
		t.Fatalf("files %+v (the base's own change must not show)", files)
	}
	if f := got["a.txt"]; f.Status != "modified" || f.Additions != 1 || f.Deletions != 0 || !strings.HasPrefix(f.Patch, "@@ -1,2 +1,3 @@") || !strings.Contains(f.Patch, "+three") {
		t.Fatalf("a.txt %+v", f)
	}
	if f := got["new name.txt"]; f.Status != "renamed" || f.PreviousFilename != "old name.txt" || f.Patch != "" || f.PatchOmitted {
		t.Fatalf("rename %+v", f)
	}
	if f := got["gone.txt"]; f.Status != "removed" || f.SHA != "" || !strings.Contains(f.Patch, "-bye") {
		t.Fatalf("removed %+v", f)
	}
	if f := got["bin.dat"]; f.Status != "added" || !f.Binary || f.Patch != "" {
		t.Fatalf("binary %+v", f)
	}
	p2, _ := e.pulls.Files(context.Background(), e.repo, pr, 2, 3)
	if len(p2) != 1 || p2[0].Filename != files[3].Filename || p2[0].Patch != files[3].Patch {
		t.Fatalf("page 2 of 3: %+v", p2)
	}
}

// The merge's "in flight" mark lands and then its write reports an
// error: reading it back, the merge knows the mark as its own (not
// another merge's) and goes on.
func TestMergeMarkUnknownOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	pr := e.topic()
	var once sync.Once
	e.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		hit := false
		if c.Op == faultstore.OpPutIfMatch && strings.HasPrefix(c.Key, "meta/pulls/") {
			once.Do(func() { hit = true })
		}
		if hit {
			return faultstore.Fault{Outcome: faultstore.LandedThenError}
		}
		return faultstore.Fault{}
	})
	merged, err := e.pulls.Merge(context.Background(), e.repo, pr.Number, pulls.MergeOptions{By: "bob"})
	if err != nil || merged.State != pulls.Merged {
		t.Fatalf("merge: %+v, %v", merged, err)
	}
}

// With delete_branch the head's deletion is in the merge's own commit:
// a push to the head meanwhile refuses the merge rather than delete
// what it did not merge.
func TestMergeDeleteBranchHeadMoved(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	pr := e.topic()
	e.gitc("checkout", "-q", "topic")
	late := e.commit("late", "late.txt", "late\n")
	before := e.refs(e.repo)["refs/heads/main"]
	e.pusher.before = func(pulls.Push) { e.push(e.repo, "topic") }
	_, err := e.pulls.Merge(context.Background(), e.repo, pr.Number, pulls.MergeOptions{By: "bob", DeleteBranch: true})
	if !errors.Is(err, pulls.ErrHeadChanged) {
		t.Fatalf("merge while the head moves: %v", err)
	}
	refs := e.refs(e.repo)
	if refs["refs/heads/topic"] != late || refs["refs/heads/main"] != before {
		t.Fatalf("after the refused merge: topic %s main %s", refs["refs/heads/topic"], refs["refs/heads/main"])
	}
}

// recorder is an Events that keeps what it is told.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) PullRequest(_ context.Context, e pulls.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fmt.Sprintf("%s #%d %s by %s", e.Action, e.PullRequest.Number, e.PullRequest.State, e.Sender))
}

func (r *recorder) Note(_ context.Context, e pulls.NoteEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fmt.Sprintf("note %s %s by %s", e.Action, e.Note.Kind, e.Sender))
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

// The hook point tells each change once, as GitHub's pull_request
// events: opened, synchronize on a push to the head, edited, closed,
// reopened, and closed with the merged state.
func TestEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.topic()
	if got := e.events.take(); !slices.Equal(got, []string{"opened #1 open by alice"}) {
		t.Fatalf("opening: %q", got)
	}
	e.gitc("checkout", "-q", "topic")
	e.commit("more", "b.txt", "b2\n")
	e.push(e.repo, "topic")
	if got := e.events.take(); !slices.Equal(got, []string{"synchronize #1 open by alice"}) {
		t.Fatalf("a push to the head: %q", got)
	}
	title, closed, open := "New", pulls.Closed, pulls.Open
	for _, ed := range []pulls.Edit{{Title: &title, By: "carol"}, {Title: &title, By: "carol"}, {State: &closed, By: "carol"}, {State: &open, By: "dave"}} {
		if _, err := e.pulls.Update(context.Background(), e.repo, 1, ed); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.events.take(); !slices.Equal(got, []string{"edited #1 open by carol", "closed #1 closed by carol", "reopened #1 open by dave"}) {
		t.Fatalf("edits: %q (an edit that changes nothing says nothing)", got)
	}
	if _, err := e.pulls.Merge(context.Background(), e.repo, 1, pulls.MergeOptions{By: "bob"}); err != nil {
		t.Fatal(err)
	}
	if got := e.events.take(); !slices.Equal(got, []string{"closed #1 merged by bob"}) {
		t.Fatalf("merging: %q", got)
	}
}

// The merge is committed but marking the pull request merged fails: the
// caller is told it merged (it did), and the next read records it.
func TestMergeCommittedMarkFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	pr := e.topic()
	var mu sync.Mutex
	writes := 0
	e.fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op != faultstore.OpPutIfMatch || !strings.HasPrefix(c.Key, "meta/pulls/") {
			return faultstore.Fault{}
		}
		mu.Lock()
		defer mu.Unlock()
		if writes++; writes > 1 { // the in-flight mark passes; marking merged does not
			return faultstore.Fault{Outcome: faultstore.Refused}
		}
		return faultstore.Fault{}
	})
	merged, err := e.pulls.Merge(context.Background(), e.repo, pr.Number, pulls.MergeOptions{By: "bob"})
	tip := e.refs(e.repo)["refs/heads/main"]
	if err != nil || merged.State != pulls.Merged || merged.MergeCommit != tip {
		t.Fatalf("merge: %+v, %v (main %s)", merged, err, tip)
	}
	e.fs.SetPlan(nil)
	got, err := e.pulls.Get(context.Background(), e.repo, pr.Number)
	if err != nil || got.State != pulls.Merged || got.MergeCommit != tip || got.Merging != nil {
		t.Fatalf("read after: %+v, %v", got, err)
	}
}
