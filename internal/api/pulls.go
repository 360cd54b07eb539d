package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/pulls"
)

// WithPulls serves the pull-request endpoints from p. Without it they
// answer 501.
func WithPulls(p *pulls.Service) Option {
	return func(h *handler) { h.pulls = p }
}

// The pull-request endpoints, in GitHub's REST shapes for the common
// calls (docs/adr/0118-pull-request-records.md): whoever may read the
// base repository lists and views its pull requests, their commits and
// files; opening, changing and merging one needs write access to it. A
// repository the caller may not read is 404, as everywhere.
func (h *handler) routePulls() {
	h.route("GET /api/repos/{owner}/{name}/pulls", h.listPulls)
	h.route("POST /api/repos/{owner}/{name}/pulls", h.createPull)
	h.route("GET /api/repos/{owner}/{name}/pulls/{number}", h.getPull)
	h.route("PATCH /api/repos/{owner}/{name}/pulls/{number}", h.patchPull)
}

// pairKey is one route of a pair: its method and, for the routes of a
// number, the last segment.
type pairKey struct{ method, sub string }

// routePairs registers METHOD <base>/{a}/{b} for the routes GitHub puts
// both at <base>/{number}/<sub> and at <base>/comments/{id}, which a
// ServeMux cannot tell apart ("comments" could be either's {a}): a
// number is never "comments", so {a} says which route it is.
func (h *handler) routePairs(base string, byNumber map[pairKey]apiFunc, byID map[string]apiFunc) {
	methods := map[string]bool{}
	for k := range byNumber {
		methods[k.method] = true
	}
	for m := range byID {
		methods[m] = true
	}
	for m := range methods {
		h.route(m+" "+base+"/{a}/{b}", func(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
			a, b := r.PathValue("a"), r.PathValue("b")
			if fn := byID[m]; a == "comments" && fn != nil {
				r.SetPathValue("id", b)
				return fn(w, r, p)
			}
			if fn := byNumber[pairKey{m, b}]; fn != nil && a != "comments" {
				r.SetPathValue("number", a)
				return fn(w, r, p)
			}
			return 0, nil, fmt.Errorf("%w: no such endpoint", meta.ErrNotFound)
		})
	}
}

var errNoPulls = fmt.Errorf("pull requests are not enabled here: %w", errors.ErrUnsupported)

// statusError is an error with its own HTTP status, for the statuses the
// meta kinds do not name (GitHub's 405 and 422 of the merge endpoint).
type statusError struct {
	code int
	err  error
}

func (e *statusError) Error() string   { return e.err.Error() }
func (e *statusError) Unwrap() error   { return e.err }
func (e *statusError) HTTPStatus() int { return e.code }

// pullError maps the pull-request service's errors to the API's
// statuses, keeping their words.
func pullError(err error) error {
	var me *pulls.MergeError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pulls.ErrNotFound), errors.Is(err, meta.ErrNotFound):
		return &kindError{err, meta.ErrNotFound}
	case errors.Is(err, pulls.ErrInvalid):
		return &kindError{err, meta.ErrInvalidArgument}
	case errors.Is(err, pulls.ErrNotMergeable) && errors.As(err, &me) && len(me.Conflicts) > 0:
		return &statusError{http.StatusMethodNotAllowed, fmt.Errorf("pull request is not mergeable: conflicts in %s", strings.Join(me.Conflicts, ", "))}
	case errors.Is(err, pulls.ErrReviewRequired) && errors.As(err, &me):
		return &statusError{http.StatusMethodNotAllowed, fmt.Errorf("%w: %s", err, strings.Join(me.Message, " "))}
	case errors.Is(err, pulls.ErrForbidden):
		return &kindError{err, meta.ErrForbidden}
	case errors.Is(err, pulls.ErrNotMergeable), errors.Is(err, pulls.ErrMethodNotAllowed), errors.Is(err, pulls.ErrReviewRequired):
		return &statusError{http.StatusMethodNotAllowed, err}
	case errors.Is(err, pulls.ErrHeld) && errors.As(err, &me):
		return &statusError{http.StatusConflict, fmt.Errorf("%w:\n%s", err, strings.Join(me.Message, "\n"))}
	case errors.Is(err, pulls.ErrBaseChanged), errors.Is(err, pulls.ErrHeadChanged), errors.Is(err, pulls.ErrHeld),
		errors.Is(err, pulls.ErrInProgress):
		return &statusError{http.StatusConflict, err}
	case errors.Is(err, pulls.ErrExists), errors.Is(err, pulls.ErrState):
		return &statusError{http.StatusUnprocessableEntity, err}
	case errors.Is(err, pulls.ErrContention), errors.Is(err, pulls.ErrOutcomeUnknown):
		// Both are safe to retry: a merge that landed is found as merged.
		return &kindError{err, meta.ErrContention}
	}
	return err
}

func (h *handler) pullService() (*pulls.Service, error) {
	if h.pulls == nil {
		return nil, errNoPulls
	}
	return h.pulls, nil
}

// userJSON is a tenant as GitHub's API shows a user.
type ghUserJSON struct {
	Login string `json:"login"`
	Type  string `json:"type"`
}

func ghUser(name string) *ghUserJSON { return &ghUserJSON{Login: name, Type: "User"} }

type ghRepoJSON struct {
	ID       string      `json:"node_id"`
	Name     string      `json:"name"`
	FullName string      `json:"full_name"`
	Owner    *ghUserJSON `json:"owner"`
	Private  bool        `json:"private"`
	Fork     bool        `json:"fork"`
}

func ghRepo(r meta.Repo) *ghRepoJSON {
	return &ghRepoJSON{ID: r.ID, Name: r.Name, FullName: r.FullName(), Owner: ghUser(r.Owner), Private: !r.Public, Fork: r.ForkedFrom != ""}
}

type branchJSON struct {
	Label string      `json:"label"`
	Ref   string      `json:"ref"`
	SHA   string      `json:"sha"`
	User  *ghUserJSON `json:"user"`
	Repo  *ghRepoJSON `json:"repo"`
}

// pullJSON is a pull request in GitHub's shape (the fields scripts use),
// with ghost's own beside it: merge_method and conflicting_files.
type pullJSON struct {
	URL            string      `json:"url"`
	Number         uint64      `json:"number"`
	State          string      `json:"state"` // open or closed, merged ones closed as on GitHub
	Locked         bool        `json:"locked"`
	Title          string      `json:"title"`
	Body           string      `json:"body"`
	User           *ghUserJSON `json:"user"`
	CreatedAt      time.Time   `json:"created_at"`
	UpdatedAt      time.Time   `json:"updated_at"`
	ClosedAt       *time.Time  `json:"closed_at"`
	MergedAt       *time.Time  `json:"merged_at"`
	MergeCommitSHA *string     `json:"merge_commit_sha"`
	Draft          bool        `json:"draft"`
	Head           branchJSON  `json:"head"`
	Base           branchJSON  `json:"base"`
	Merged         bool        `json:"merged"`
	MergedBy       *ghUserJSON `json:"merged_by"`
	MergeMethod    string      `json:"merge_method,omitempty"`
	// Mergeable is computed on a single pull request's GET, as on
	// GitHub; lists leave it null.
	Mergeable        *bool    `json:"mergeable"`
	MergeableState   string   `json:"mergeable_state,omitempty"`
	ConflictingFiles []string `json:"conflicting_files,omitempty"`
	// Merging is a merge in flight (a read settles it).
	Merging bool `json:"merging,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// heads resolves the head repositories of the pull requests of one
// answer, once each, and only those the caller may read: a fork the
// caller may not read is left out (head.repo null), never named.
type heads struct {
	h    *handler
	r    *http.Request
	p    *meta.Principal
	seen map[string]*ghRepoJSON
}

func (h *handler) heads(r *http.Request, p *meta.Principal) *heads {
	return &heads{h: h, r: r, p: p, seen: map[string]*ghRepoJSON{}}
}

func (hs *heads) repo(fullName, id string) *ghRepoJSON {
	if v, ok := hs.seen[fullName]; ok {
		return v
	}
	var out *ghRepoJSON
	if owner, name, ok := strings.Cut(fullName, "/"); ok {
		repo, err := hs.h.store.Repo(hs.r.Context(), owner, name)
		if err == nil && repo.ID == id {
			if ok, err := hs.h.store.CanRead(hs.r.Context(), hs.p, repo); err == nil && ok {
				out = ghRepo(repo)
			}
		}
	}
	hs.seen[fullName] = out
	return out
}

func (hs *heads) toPull(base meta.Repo, pr pulls.PullRequest, st *pulls.Status) pullJSON {
	headOwner, _, _ := strings.Cut(pr.Head.Repo, "/")
	out := pullJSON{
		URL: "/api/repos/" + base.FullName() + "/pulls/" + strconv.FormatUint(pr.Number, 10), Number: pr.Number,
		State: "open", Title: pr.Title, Body: pr.Body, User: ghUser(pr.Author), CreatedAt: pr.CreatedAt.UTC(), UpdatedAt: pr.UpdatedAt.UTC(),
		ClosedAt: timePtr(pr.ClosedAt), MergedAt: timePtr(pr.MergedAt),
		Head:    branchJSON{Label: headOwner + ":" + pr.Head.Ref, Ref: pr.Head.Ref, User: ghUser(headOwner)},
		Base:    branchJSON{Label: base.Owner + ":" + pr.Base, Ref: pr.Base, User: ghUser(base.Owner), Repo: ghRepo(base)},
		Merging: pr.Merging != nil,
	}
	if pr.Head.RepoID == base.ID {
		out.Head.Repo = ghRepo(base)
	} else {
		out.Head.Repo = hs.repo(pr.Head.Repo, pr.Head.RepoID)
	}
	if pr.State != pulls.Open {
		out.State = "closed"
	}
	if pr.State == pulls.Merged {
		out.Merged, out.MergedBy, out.MergeMethod = true, ghUser(pr.MergedBy), string(pr.MergeMethod)
		out.MergeCommitSHA = &pr.MergeCommit
	}
	out.Head.SHA, out.Base.SHA = pr.HeadSHA, pr.BaseSHA
	if st != nil {
		out.Head.SHA, out.Base.SHA = st.HeadSHA, st.BaseSHA
		out.Mergeable, out.MergeableState, out.ConflictingFiles = st.Mergeable, st.MergeableState, st.Conflicts
	}
	return out
}

// pullNumber reads the path's {number}: 404 for anything that is not one.
func pullNumber(r *http.Request) (uint64, error) {
	s := r.PathValue("number")
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || n > pulls.MaxNumber || strconv.FormatUint(n, 10) != s {
		return 0, fmt.Errorf("pull request %q: %w", s, meta.ErrNotFound)
	}
	return n, nil
}

// listPulls answers a page of the base's pull requests, newest first:
// ?state=open (default), closed or all; ?per_page= (default 30, at most
// 100) and ?after=<number>, the last number of the previous page, named
// in a Link header as the other lists do.
func (h *handler) listPulls(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	ps, err := h.pullService()
	if err != nil {
		return 0, nil, err
	}
	repo, err := h.readable(r, p)
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	limit, err := perPage(q, pulls.DefaultPageSize, pulls.MaxPageSize)
	if err != nil {
		return 0, nil, err
	}
	var before uint64
	if v := q.Get("after"); v != "" {
		if before, err = strconv.ParseUint(v, 10, 64); err != nil || before == 0 {
			return 0, nil, fmt.Errorf("%w: after=%q: want a pull-request number", meta.ErrInvalidArgument, v)
		}
	}
	list, next, err := ps.List(r.Context(), repo, pulls.Filter(q.Get("state")), before, limit)
	if err != nil {
		return 0, nil, pullError(err)
	}
	if next > 0 {
		linkNext(w, r, strconv.FormatUint(next, 10))
	}
	out := make([]pullJSON, 0, len(list))
	hs := h.heads(r, p)
	for _, pr := range list {
		out = append(out, hs.toPull(repo, pr, nil))
	}
	return http.StatusOK, out, nil
}

// perPage reads ?per_page= between 1 and max, def when absent.
func perPage(q url.Values, def, max int) (int, error) {
	v := q.Get("per_page")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, fmt.Errorf("%w: per_page=%q: want a whole number from 1 to %d", meta.ErrInvalidArgument, v, max)
	}
	return n, nil
}

// createPull opens a pull request: {"title", "body", "head", "base"}, as
// GitHub's. head is a branch of this repository, or "owner:branch" for
// the branch of owner's fork (named as this repository, or as
// "head_repo": "owner/name" says).
func (h *handler) createPull(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	ps, err := h.pullService()
	if err != nil {
		return 0, nil, err
	}
	base, err := h.writable(r, p)
	if err != nil {
		return 0, nil, err
	}
	var req struct {
		Title    string `json:"title"`
		Body     string `json:"body"`
		Head     string `json:"head"`
		Base     string `json:"base"`
		HeadRepo string `json:"head_repo"`
		Draft    bool   `json:"draft"`
	}
	if err := decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	if req.Draft {
		return 0, nil, fmt.Errorf("%w: draft pull requests are not supported", meta.ErrInvalidArgument)
	}
	if req.Head == "" || req.Base == "" {
		return 0, nil, fmt.Errorf("%w: head and base are required", meta.ErrInvalidArgument)
	}
	head, ref := base, req.Head
	if owner, branch, ok := strings.Cut(req.Head, ":"); ok || req.HeadRepo != "" {
		name := base.Name
		if !ok {
			owner, branch = base.Owner, req.Head
		}
		if req.HeadRepo != "" {
			o, n, ok := strings.Cut(req.HeadRepo, "/")
			if !ok {
				return 0, nil, fmt.Errorf("%w: head_repo %q: want owner/name", meta.ErrInvalidArgument, req.HeadRepo)
			}
			owner, name = o, n
		}
		ref = branch
		if head, err = h.store.Repo(r.Context(), owner, name); err != nil {
			return 0, nil, err
		}
		if ok, err := h.store.CanRead(r.Context(), p, head); err != nil {
			return 0, nil, err
		} else if !ok {
			return 0, nil, repoNotFound(owner, name)
		}
	}
	pr, err := ps.Create(r.Context(), base, pulls.NewPull{Head: head, HeadRef: ref, BaseRef: req.Base, Title: req.Title, Body: req.Body, Author: p.Tenant})
	if err != nil {
		return 0, nil, pullError(err)
	}
	h.log.InfoContext(r.Context(), "pull request opened", "repo", base.FullName(), "number", pr.Number, "head", pr.Head.Repo+":"+pr.Head.Ref, "base", pr.Base, "by", p.Tenant, "token_id", p.TokenID)
	st, err := ps.Status(r.Context(), base, pr)
	if err != nil {
		return 0, nil, pullError(err)
	}
	return http.StatusCreated, h.heads(r, p).toPull(base, pr, &st), nil
}

func (h *handler) getPull(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	ps, base, n, err := h.pullTarget(r, p, false)
	if err != nil {
		return 0, nil, err
	}
	pr, err := ps.Get(r.Context(), base, n)
	if err != nil {
		return 0, nil, pullError(err)
	}
	st, err := ps.Status(r.Context(), base, pr)
	if err != nil {
		return 0, nil, pullError(err)
	}
	return http.StatusOK, h.heads(r, p).toPull(base, pr, &st), nil
}

// pullTarget resolves the service, the path's repository (readable, or
// writable when write) and number.
func (h *handler) pullTarget(r *http.Request, p *meta.Principal, write bool) (*pulls.Service, meta.Repo, uint64, error) {
	ps, err := h.pullService()
	if err != nil {
		return nil, meta.Repo{}, 0, err
	}
	var repo meta.Repo
	if write {
		repo, err = h.writable(r, p)
	} else {
		repo, err = h.readable(r, p)
	}
	if err != nil {
		return nil, meta.Repo{}, 0, err
	}
	n, err := pullNumber(r)
	if err != nil {
		return nil, meta.Repo{}, 0, err
	}
	return ps, repo, n, nil
}

// patchPull changes a pull request: "title", "body", "state" (open or
// closed) and "base", each when present.
func (h *handler) patchPull(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	ps, base, n, err := h.pullTarget(r, p, true)
	if err != nil {
		return 0, nil, err
	}
	var req struct {
		Title *string `json:"title"`
		Body  *string `json:"body"`
		State *string `json:"state"`
		Base  *string `json:"base"`
	}
	if err := decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	e := pulls.Edit{Title: req.Title, Body: req.Body, Base: req.Base, By: p.Tenant}
	if req.State != nil {
		st := pulls.State(*req.State)
		e.State = &st
	}
	pr, err := ps.Update(r.Context(), base, n, e)
	if err != nil {
		return 0, nil, pullError(err)
	}
	h.log.InfoContext(r.Context(), "pull request changed", "repo", base.FullName(), "number", n, "state", pr.State, "by", p.Tenant, "token_id", p.TokenID)
	st, err := ps.Status(r.Context(), base, pr)
	if err != nil {
		return 0, nil, pullError(err)
	}
	return http.StatusOK, h.heads(r, p).toPull(base, pr, &st), nil
}

// mergeJSON is the answer of a merge, GitHub's.
type mergeJSON struct {
	SHA     string `json:"sha"`
	Merged  bool   `json:"merged"`
	Message string `json:"message"`
}

// mergePull merges a pull request: {"merge_method": "merge" | "squash" |
// "rebase", "sha", "commit_title", "commit_message"}, as GitHub's, and
// ghost's "delete_branch". 405 when it does not merge (conflicts, a
// strategy the repository does not allow), 409 when the base or the
// head moved ("base changed, try again") or push protection holds it.
func (h *handler) mergePull(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	ps, base, n, err := h.pullTarget(r, p, true)
	if err != nil {
		return 0, nil, err
	}
	var req struct {
		MergeMethod   string `json:"merge_method"`
		SHA           string `json:"sha"`
		CommitTitle   string `json:"commit_title"`
		CommitMessage string `json:"commit_message"`
		DeleteBranch  bool   `json:"delete_branch"`
	}
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			return 0, nil, err
		}
	}
	pr, err := ps.Merge(r.Context(), base, n, pulls.MergeOptions{
		Method: pulls.Method(req.MergeMethod), SHA: req.SHA, CommitTitle: req.CommitTitle, CommitMessage: req.CommitMessage,
		DeleteBranch: req.DeleteBranch, By: p.Tenant,
	})
	if err != nil {
		return 0, nil, pullError(err)
	}
	h.log.InfoContext(r.Context(), "pull request merged", "repo", base.FullName(), "number", n, "method", pr.MergeMethod, "commit", pr.MergeCommit, "by", p.Tenant, "token_id", p.TokenID)
	return http.StatusOK, mergeJSON{SHA: pr.MergeCommit, Merged: true, Message: "Pull Request successfully merged"}, nil
}

// isMerged answers 204 for a merged pull request and 404 otherwise, as
// GitHub's GET .../merge.
func (h *handler) isMerged(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	ps, base, n, err := h.pullTarget(r, p, false)
	if err != nil {
		return 0, nil, err
	}
	pr, err := ps.Get(r.Context(), base, n)
	if err != nil {
		return 0, nil, pullError(err)
	}
	if pr.State != pulls.Merged {
		return 0, nil, fmt.Errorf("pull request #%d is not merged: %w", n, meta.ErrNotFound)
	}
	return http.StatusNoContent, nil, nil
}

// pageParam reads ?page= (from 1).
func pageParam(q url.Values) (int, error) {
	v := q.Get("page")
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1_000_000 {
		return 0, fmt.Errorf("%w: page=%q: want a positive whole number", meta.ErrInvalidArgument, v)
	}
	return n, nil
}

// linkPage names the next page by number, as GitHub's Link header does.
func linkPage(w http.ResponseWriter, r *http.Request, page int) {
	q := r.URL.Query()
	q.Set("page", strconv.Itoa(page))
	u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
	w.Header().Set("Link", "<"+u.String()+`>; rel="next"`)
}

type personJSON struct {
	Name  string    `json:"name"`
	Email string    `json:"email"`
	Date  time.Time `json:"date"`
}

type commitJSON struct {
	SHA    string `json:"sha"`
	Commit struct {
		Author    personJSON `json:"author"`
		Committer personJSON `json:"committer"`
		Message   string     `json:"message"`
		Tree      struct {
			SHA string `json:"sha"`
		} `json:"tree"`
	} `json:"commit"`
	Parents []struct {
		SHA string `json:"sha"`
	} `json:"parents"`
}

// pullCommits answers a page of a pull request's commits, oldest first
// (?page=, ?per_page= up to 100; at most pulls.MaxCommits in all).
func (h *handler) pullCommits(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	ps, base, n, err := h.pullTarget(r, p, false)
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	page, err := pageParam(q)
	if err != nil {
		return 0, nil, err
	}
	per, err := perPage(q, pulls.DefaultPageSize, pulls.MaxPageSize)
	if err != nil {
		return 0, nil, err
	}
	pr, err := ps.Get(r.Context(), base, n)
	if err != nil {
		return 0, nil, pullError(err)
	}
	cs, err := ps.Commits(r.Context(), base, pr, page, per)
	if err != nil {
		return 0, nil, pullError(err)
	}
	if len(cs) == per && page*per < pulls.MaxCommits {
		linkPage(w, r, page+1)
	}
	out := make([]commitJSON, 0, len(cs))
	for _, c := range cs {
		var cj commitJSON
		cj.SHA, cj.Commit.Message, cj.Commit.Tree.SHA = c.SHA, c.Message, c.Tree
		cj.Commit.Author = personJSON{c.Author.Name, c.Author.Email, c.Author.Date}
		cj.Commit.Committer = personJSON{c.Committer.Name, c.Committer.Email, c.Committer.Date}
		cj.Parents = make([]struct {
			SHA string `json:"sha"`
		}, len(c.Parents))
		for i, p := range c.Parents {
			cj.Parents[i].SHA = p
		}
		out = append(out, cj)
	}
	return http.StatusOK, out, nil
}

type fileJSON struct {
	SHA              string `json:"sha"`
	Filename         string `json:"filename"`
	Status           string `json:"status"`
	Additions        int    `json:"additions"`
	Deletions        int    `json:"deletions"`
	Changes          int    `json:"changes"`
	Patch            string `json:"patch,omitempty"`
	PreviousFilename string `json:"previous_filename,omitempty"`
	// PatchOmitted says the patch was left out: it did not fit the page's
	// byte budget (pulls.MaxPatchBytes).
	PatchOmitted bool `json:"patch_omitted,omitempty"`
}

// pullFiles answers a page of the files a pull request changes, against
// the merge base (?page=, ?per_page= up to 100; at most pulls.MaxFiles in
// all), with their patches within the page's byte budget.
func (h *handler) pullFiles(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	ps, base, n, err := h.pullTarget(r, p, false)
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	page, err := pageParam(q)
	if err != nil {
		return 0, nil, err
	}
	per, err := perPage(q, pulls.DefaultPageSize, pulls.MaxPageSize)
	if err != nil {
		return 0, nil, err
	}
	pr, err := ps.Get(r.Context(), base, n)
	if err != nil {
		return 0, nil, pullError(err)
	}
	fs, err := ps.Files(r.Context(), base, pr, page, per)
	if err != nil {
		return 0, nil, pullError(err)
	}
	if len(fs) == per && page*per < pulls.MaxFiles {
		linkPage(w, r, page+1)
	}
	out := make([]fileJSON, 0, len(fs))
	for _, f := range fs {
		out = append(out, fileJSON{SHA: f.SHA, Filename: f.Filename, Status: f.Status, Additions: f.Additions, Deletions: f.Deletions,
			Changes: f.Additions + f.Deletions, Patch: f.Patch, PreviousFilename: f.PreviousFilename, PatchOmitted: f.PatchOmitted})
	}
	return http.StatusOK, out, nil
}
