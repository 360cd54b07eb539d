package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/client"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/pulls"
)

// A repository's pull requests (issue 25, docs/design.md §7.13): the
// list with its open and closed tabs, a pull request's conversation with
// its commits and merge box, and its files changed. Pages read through
// the pull-request service (Options.Pulls) after the same read check as
// every repository page: a private repository is 404 to whoever may not
// read it. Every change (opening, editing, closing, reopening, merging)
// is one call of the REST API with the visitor's token, behind the
// session's CSRF check (docs/adr/0103-web-ui-forms.md): who may change a
// pull request, and the words of a refusal, are the API's.

// Pulls reads pull requests (pulls.Service does).
type Pulls interface {
	List(ctx context.Context, base meta.Repo, f pulls.Filter, before uint64, limit int) ([]pulls.PullRequest, uint64, error)
	Get(ctx context.Context, base meta.Repo, n uint64) (pulls.PullRequest, error)
	Status(ctx context.Context, base meta.Repo, pr pulls.PullRequest) (pulls.Status, error)
	Commits(ctx context.Context, base meta.Repo, pr pulls.PullRequest, page, perPage int) ([]pulls.Commit, error)
	Files(ctx context.Context, base meta.Repo, pr pulls.PullRequest, page, perPage int) ([]pulls.File, error)
	Notes(ctx context.Context, base meta.Repo, pr pulls.PullRequest, kind pulls.NoteKind, after uint64, limit int) ([]pulls.Note, uint64, error)
	Conversation(ctx context.Context, base meta.Repo, pr pulls.PullRequest, after uint64, limit int) ([]pulls.Note, uint64, error)
	CommitIDs(ctx context.Context, base meta.Repo, pr pulls.PullRequest) ([]string, error)
}

// pullFormBytes bounds the forms that carry a pull request's body: the
// body's bound, URL-encoded (up to three bytes a byte), and the rest.
const pullFormBytes = 3*pulls.MaxBodyBytes + 16<<10

// pullsPerPage is the page size of the list, of a pull request's
// commits and of its files.
const pullsPerPage = pulls.DefaultPageSize

// pullNotices are the fixed texts a redirect after a change shows.
var pullNotices = map[string]string{
	"opened":   "The pull request was opened.",
	"edited":   "The pull request was saved.",
	"closed":   "The pull request was closed.",
	"reopened": "The pull request was reopened.",
	"merged":   "The pull request was merged.",
	"reviewed": "Your review was submitted.",
}

func pullURL(repo meta.Repo, n uint64) string { return pullPath(repo.Owner, repo.Name, n) }

func pullPath(owner, name string, n uint64) string {
	return "/" + urlSegment(owner) + "/" + urlSegment(name) + "/-/pull/" + strconv.FormatUint(n, 10)
}

// pullReadable resolves {owner}/{repo} as readable for a pull-request
// page: 404 as well when the server keeps no pull requests.
func (h *Handler) pullReadable(r *http.Request, v *visitor) (*repoView, error) {
	rv, err := h.readable(r, v)
	if err != nil {
		return nil, err
	}
	if h.opts.Pulls == nil {
		return nil, errNotFound
	}
	return rv, nil
}

// pullNumber reads the path's {number}: 404 for anything that is not one
// (as the API's).
func pullNumber(r *http.Request) (uint64, error) {
	s := r.PathValue("number")
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || n > pulls.MaxNumber || strconv.FormatUint(n, 10) != s {
		return 0, errNotFound
	}
	return n, nil
}

// pullPageError turns a pull-request service failure into a page.
func pullPageError(what string, err error) error {
	switch {
	case errors.Is(err, pulls.ErrNotFound):
		return &httpError{status: http.StatusNotFound, msg: "Not found.", err: err}
	case errors.Is(err, pulls.ErrInvalid):
		return &httpError{status: http.StatusBadRequest, msg: "Bad request.", err: err}
	case errors.Is(err, pulls.ErrContention), errors.Is(err, pulls.ErrOutcomeUnknown):
		return &httpError{status: http.StatusServiceUnavailable, msg: "The service is busy; try again shortly.", err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return classify(what, errGitTimeout)
	}
	return classify(what, err)
}

// pullRow is a pull request as the list and the page's header show it.
type pullRow struct {
	pulls.PullRequest
	// HeadLabel is the head as the visitor may see it: the branch, or
	// "owner:branch" of a fork (its repository is named only as the
	// API's head label names it, never linked).
	HeadLabel string
	// HeadURL is the head branch's tree when it is the base repository's.
	HeadURL string
	URL     string
}

func toRow(base meta.Repo, pr pulls.PullRequest) pullRow {
	row := pullRow{PullRequest: pr, HeadLabel: pr.Head.Ref, URL: pullURL(base, pr.Number)}
	if pr.Head.RepoID == base.ID {
		row.HeadURL = repoURL(base) + "/-/tree/" + pathURL(pr.Head.Ref)
	} else {
		owner, _, _ := strings.Cut(pr.Head.Repo, "/")
		row.HeadLabel = owner + ":" + pr.Head.Ref
	}
	return row
}

// pullsPage is the list's data.
type pullsPage struct {
	State   string // open or closed (merged ones with the closed)
	Pulls   []pullRow
	After   uint64 // this page's cursor, 0 on the first
	Next    uint64 // the next page's, 0 after the last
	CanOpen bool
	// Form is the "new pull request" form, with what was typed when
	// opening failed.
	Form struct{ Head, Base, Title, Body string }
}

func (h *Handler) pullList(w http.ResponseWriter, r *http.Request, v *visitor) error {
	return h.showPulls(w, r, v, http.StatusOK, pullsPage{}, pullNotices[r.URL.Query().Get("done")])
}

func (h *Handler) showPulls(w http.ResponseWriter, r *http.Request, v *visitor, status int, d pullsPage, notice string) error {
	rv, err := h.pullReadable(r, v)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	d.State = "open"
	if q.Get("state") == "closed" {
		d.State = "closed"
	}
	if s := q.Get("after"); s != "" {
		if d.After, err = strconv.ParseUint(s, 10, 64); err != nil || d.After == 0 || d.After > pulls.MaxNumber {
			return &httpError{status: http.StatusBadRequest, msg: "Bad request."}
		}
	}
	// One LIST and a GET a row: what the page shows, never what the
	// repository holds (docs/adr/0118-pull-request-records.md).
	prs, next, err := h.opts.Pulls.List(r.Context(), rv.Repo, pulls.Filter(d.State), d.After, pullsPerPage)
	if err != nil {
		return pullPageError("list pull requests", err)
	}
	d.Next = next
	for _, pr := range prs {
		d.Pulls = append(d.Pulls, toRow(rv.Repo, pr))
	}
	d.CanOpen = rv.CanWrite
	if d.CanOpen && d.Form.Base == "" {
		d.Form.Base = rv.DefaultBranch
		if d.Form.Base == "" {
			g, err := h.open(r, rv)
			if err != nil {
				return err
			}
			d.Form.Base = g.head()
		}
	}
	h.show(w, r, v, status, "pulls", page{Title: "Pull requests · " + rv.FullName(), Repo: rv, Tab: "pulls", Notice: notice, Data: d})
	return nil
}

// createPull opens a pull request from the list page's form: head is a
// branch of the repository, or "owner:branch" of a fork, as the API's.
func (h *Handler) createPull(w http.ResponseWriter, r *http.Request, v *visitor) error {
	owner, name := r.PathValue("owner"), r.PathValue("repo")
	var d pullsPage
	d.Form.Head, d.Form.Base = strings.TrimSpace(r.PostFormValue("head")), strings.TrimSpace(r.PostFormValue("base"))
	d.Form.Title, d.Form.Body = strings.TrimSpace(r.PostFormValue("title")), r.PostFormValue("body")
	pr, err := h.api(v).CreatePull(r.Context(), owner, name, client.NewPull{Title: d.Form.Title, Body: d.Form.Body, Head: d.Form.Head, Base: d.Form.Base})
	if err != nil {
		if msg, status, ok := refusal(err); ok {
			// The form again, with what was typed and why it failed.
			return h.showPulls(w, r, v, status, d, msg)
		}
		return apiError(err)
	}
	h.opts.Logger.InfoContext(r.Context(), "web: pull request opened", "repo", owner+"/"+name, "number", pr.Number, "by", v.p.Tenant, "token_id", v.p.TokenID)
	http.Redirect(w, r, pullPath(owner, name, pr.Number)+"?done=opened", http.StatusSeeOther)
	return nil
}

// refusal is an API refusal a form shows on its page: the API's words
// and status, for a refusal under 500 that is not a missing repository
// or pull request (that one is the page of a missing repository).
func refusal(err error) (msg string, status int, ok bool) {
	var ce *client.Error
	if errors.As(err, &ce) && ce.Status > 0 && ce.Status < 500 && ce.Status != http.StatusNotFound {
		return ce.Message, ce.Status, true
	}
	return "", 0, false
}

// conversationItem is one entry of a pull request's conversation: a
// comment, a review or a line comment, in time order
// (docs/adr/0127-pull-request-reviews.md).
type conversationItem struct {
	ID     uint64
	Kind   string // "comment", "review" or "line"
	Author string
	At     time.Time
	// State is a review's: approved, changes requested, commented or
	// dismissed; Dismissal says why one was dismissed.
	State     string
	Dismissal string
	// Body is the Markdown rendered and sanitized (template.HTML), or
	// the text shown plain (string); nil when there is none.
	Body any
	// Path, Line and Side place a line comment; Outdated: its line has
	// changed since.
	Path     string
	Line     int
	Side     string
	Outdated bool
}

// noteKindName names a kind of note as the page's items do.
func noteKindName(k pulls.NoteKind) string {
	switch k {
	case pulls.KindReview:
		return "review"
	case pulls.KindComment:
		return "comment"
	}
	return "line"
}

// noteItem turns a note into what the page shows.
func (h *Handler) noteItem(ctx context.Context, rv *repoView, base string, n pulls.Note) conversationItem {
	it := conversationItem{ID: n.ID, Author: n.Author, At: n.CreatedAt, Path: n.Path, Line: n.Line, Side: n.Side, Outdated: n.Outdated}
	it.Kind = noteKindName(n.Kind)
	if n.Kind == pulls.KindReview {
		it.State = strings.ToLower(strings.ReplaceAll(string(n.State), "_", " "))
		if n.State == pulls.Dismissed {
			it.Dismissal = n.DismissedBy + ": " + n.DismissMessage
		}
	}
	if n.Body != "" {
		at := "/" + pathURL(base) + "/"
		it.Body = h.render.markdown(ctx, "note:"+strconv.FormatUint(n.ID, 10)+":"+strconv.FormatInt(n.UpdatedAt.UnixNano(), 10), []byte(n.Body),
			repoURL(rv.Repo)+"/-/blob"+at, repoURL(rv.Repo)+"/-/raw"+at)
	}
	return it
}

// notesPerPage is the conversation's page size.
const notesPerPage = 50

// conversation returns a page of a pull request's reviews, comments and
// line comments in time order, from the cursor ?notes= (the last id of
// the page before), and the cursor of the next page (0: none).
func (h *Handler) conversation(ctx context.Context, rv *repoView, pr pulls.PullRequest, after uint64) ([]conversationItem, uint64, error) {
	notes, next, err := h.opts.Pulls.Conversation(ctx, rv.Repo, pr, after, notesPerPage)
	if err != nil {
		return nil, 0, err
	}
	items := make([]conversationItem, 0, len(notes))
	for _, n := range notes {
		items = append(items, h.noteItem(ctx, rv, pr.Base, n))
	}
	return items, next, nil
}

// pullPage is the data of a pull request's two tabs.
type pullPage struct {
	Tab string // "conversation" or "files"
	PR  pullRow
	// CanChange: the visitor may edit, close and reopen it; CanMerge:
	// merge it (both: write access, as the API decides).
	CanChange, CanMerge bool
	// CanComment: the visitor is signed in (the API decides the rest).
	CanComment bool
	// ReviewNote says what the reviews still need before the merge
	// (a branch rule's required approvals), or how many it has.
	ReviewNote string
	// Alerts are the secret-scanning alerts in its commits, for those
	// who see the repository's alerts; MoreAlerts: there are more.
	Alerts     []alerts.Alert
	MoreAlerts bool
	// CommentAt is the diff line whose comment form the files tab shows
	// ("<file>-R<line>" or "<file>-L<line>"), from ?comment=.
	CommentAt string
	// CommentError is why a comment or review was refused.
	CommentError string
	// MergedCommits is how many commits a merged pull request brought,
	// in words ("2 commits"), for the header; "" when not merged or its
	// commits are gone.
	MergedCommits string

	// The conversation tab.
	Body         any // the description, rendered (template.HTML) or plain (string)
	Conversation []conversationItem
	// NotesAfter is the conversation page's cursor (0: the first page),
	// NotesNext the next page's (0: none).
	NotesAfter, NotesNext uint64
	Commits               []pulls.Commit
	CommitPage            int
	MoreCommits           bool
	Status                pulls.Status
	// Methods are the strategies the repository allows, the first one
	// chosen.
	Methods []string
	// MergeError is why the merge just tried did not happen, in words.
	MergeError string
	// Edit holds what was typed when an edit failed.
	Edit *struct{ Title, Body string }

	// The files tab.
	Files     []pullFile
	FilePage  int
	MoreFiles bool
	Limit     int64 // the page's diff bytes (Options.MaxDiffBytes)
}

// lineSlot is what the files tab shows under a diff line: its line
// comments and, when asked for (?comment=), the form that adds one.
type lineSlot struct {
	Items                    []conversationItem
	Form                     bool
	Action, CSRF, Path, Side string
	Line                     int
}

// LineSlot returns the slot under line (at: "R12" or "L3") of f.
func (d pullPage) LineSlot(f pullFile, at string, line int, side, csrf string) lineSlot {
	return lineSlot{
		Items: f.Comments[at], Form: d.CanComment && d.CommentAt == strconv.Itoa(f.Index)+"-"+at,
		Action: d.PR.URL + "/comments?page=" + strconv.Itoa(d.FilePage), CSRF: csrf, Path: f.Filename, Side: side, Line: line,
	}
}

// pullFile is one file changed, with its diff's lines.
type pullFile struct {
	pulls.File
	// Index is the file's place in the pull request's files, from 0:
	// the stable part of its lines' anchors ("diff-<Index>-R<line>").
	Index int
	Lines []diffLine
	// Cut: its patch did not fit the page's bytes.
	Cut bool
	// Comments are the current line comments of the file, by line
	// ("R12", "L3").
	Comments map[string][]conversationItem
}

// loadPull resolves the path's pull request for v.
func (h *Handler) loadPull(r *http.Request, v *visitor) (*repoView, pulls.PullRequest, error) {
	rv, err := h.pullReadable(r, v)
	if err != nil {
		return nil, pulls.PullRequest{}, err
	}
	n, err := pullNumber(r)
	if err != nil {
		return nil, pulls.PullRequest{}, err
	}
	pr, err := h.opts.Pulls.Get(r.Context(), rv.Repo, n)
	if err != nil {
		return nil, pulls.PullRequest{}, pullPageError("read pull request", err)
	}
	return rv, pr, nil
}

func (h *Handler) pullConversation(w http.ResponseWriter, r *http.Request, v *visitor) error {
	return h.showPull(w, r, v, http.StatusOK, pullPage{}, pullNotices[r.URL.Query().Get("done")])
}

// showPull renders the conversation tab: the description, the
// conversation, a page of the commits, and the merge box.
func (h *Handler) showPull(w http.ResponseWriter, r *http.Request, v *visitor, status int, d pullPage, notice string) error {
	rv, pr, err := h.loadPull(r, v)
	if err != nil {
		return err
	}
	ctx := r.Context()
	d.Tab, d.PR = "conversation", toRow(rv.Repo, pr)
	if d.MergedCommits, err = h.mergedCommits(ctx, rv, pr); err != nil {
		return pullPageError("pull request commits", err)
	}
	d.CanChange, d.CanMerge, d.CanComment = rv.CanWrite, rv.CanWrite && pr.State == pulls.Open, v.p != nil
	if pr.Body != "" {
		sum := sha256.Sum256([]byte(pr.Body))
		at := "/" + pathURL(pr.Base) + "/"
		d.Body = h.render.markdown(ctx, "pull:"+hex.EncodeToString(sum[:]), []byte(pr.Body), repoURL(rv.Repo)+"/-/blob"+at, repoURL(rv.Repo)+"/-/raw"+at)
	}
	d.NotesAfter, _ = strconv.ParseUint(r.URL.Query().Get("notes"), 10, 64)
	if d.Conversation, d.NotesNext, err = h.conversation(ctx, rv, pr, d.NotesAfter); err != nil {
		return classify("pull request conversation", err)
	}
	d.CommitPage = pageOf(r)
	d.Commits, err = h.opts.Pulls.Commits(ctx, rv.Repo, pr, d.CommitPage, pullsPerPage)
	switch {
	case errors.Is(err, pulls.ErrNotFound):
		// Its branches are gone (a closed pull request whose tips were
		// never recorded): the page shows no commits.
	case err != nil:
		return pullPageError("pull request commits", err)
	}
	d.MoreCommits = len(d.Commits) == pullsPerPage && d.CommitPage*pullsPerPage < pulls.MaxCommits
	if d.Status, err = h.opts.Pulls.Status(ctx, rv.Repo, pr); err != nil {
		return pullPageError("pull request status", err)
	}
	if rd := d.Status.Reviews; rd.Required > 0 && pr.State == pulls.Open {
		d.ReviewNote = rd.Reason()
		if rd.Satisfied() {
			d.ReviewNote = fmt.Sprintf("Approved by %s (%d of %d required).", strings.Join(rd.Approvers, ", "), len(rd.Approvers), rd.Required)
		}
	}
	if rv.Alerts {
		if d.Alerts, d.MoreAlerts, err = h.pullAlerts(ctx, rv, pr); err != nil {
			return pullPageError("pull request alerts", err)
		}
	}
	for _, m := range pulls.Methods {
		if rv.AllowsMerge(string(m)) {
			d.Methods = append(d.Methods, string(m))
		}
	}
	h.show(w, r, v, status, "pull", page{Title: pr.Title + " · Pull request #" + strconv.FormatUint(pr.Number, 10) + " · " + rv.FullName(), Repo: rv, Tab: "pulls", Notice: notice, Data: d})
	return nil
}

// pageOf reads ?page= (from 1; anything else is the first page).
func pageOf(r *http.Request) int {
	n, err := strconv.Atoi(r.URL.Query().Get("page"))
	if err != nil || n < 1 || n > pulls.MaxFiles {
		return 1
	}
	return n
}

// pullFiles renders the files-changed tab: a page of the files with
// their diffs, within the commit page's bytes (Options.MaxDiffBytes) and
// the service's (pulls.MaxPatchBytes), each diff line anchored.
func (h *Handler) pullFiles(w http.ResponseWriter, r *http.Request, v *visitor) error {
	return h.showFiles(w, r, v, http.StatusOK, "")
}

func (h *Handler) showFiles(w http.ResponseWriter, r *http.Request, v *visitor, status int, comErr string) error {
	rv, pr, err := h.loadPull(r, v)
	if err != nil {
		return err
	}
	d := pullPage{Tab: "files", PR: toRow(rv.Repo, pr), CanChange: rv.CanWrite, CanComment: v.p != nil, FilePage: pageOf(r), Limit: h.opts.MaxDiffBytes,
		CommentAt: r.URL.Query().Get("comment"), CommentError: comErr}
	if d.MergedCommits, err = h.mergedCommits(r.Context(), rv, pr); err != nil {
		return pullPageError("pull request commits", err)
	}
	byLine, err := h.lineComments(r.Context(), rv, pr)
	if err != nil {
		return pullPageError("pull request line comments", err)
	}
	fs, err := h.opts.Pulls.Files(r.Context(), rv.Repo, pr, d.FilePage, pullsPerPage)
	switch {
	case errors.Is(err, pulls.ErrNotFound):
		// Its branches are gone: no files to show.
	case errors.Is(err, pulls.ErrNotMergeable):
		notice := "The branches share no history: there is no diff to show."
		h.show(w, r, v, http.StatusOK, "pull", page{Title: "Files changed · " + rv.FullName(), Repo: rv, Tab: "pulls", Notice: notice, Data: d})
		return nil
	case err != nil:
		return pullPageError("pull request files", err)
	}
	d.MoreFiles = len(fs) == pullsPerPage && d.FilePage*pullsPerPage < pulls.MaxFiles
	budget := h.opts.MaxDiffBytes
	for i, f := range fs {
		pf := pullFile{File: f, Index: (d.FilePage-1)*pullsPerPage + i, Comments: byLine[f.Filename]}
		switch {
		case int64(len(f.Patch)) > budget:
			pf.Cut = true
		case f.Patch != "":
			pf.Lines, budget = diffLines(f.Patch), budget-int64(len(f.Patch))
		}
		pf.Cut = pf.Cut || f.PatchOmitted
		d.Files = append(d.Files, pf)
	}
	h.show(w, r, v, status, "pull", page{Title: "Files changed · " + pr.Title + " · " + rv.FullName(), Repo: rv, Tab: "pulls", Data: d})
	return nil
}

// lineComments are a pull request's current line comments (the first
// page, pulls.MaxNotePage) by path and line ("R12", "L3"); outdated ones
// show in the conversation only.
func (h *Handler) lineComments(ctx context.Context, rv *repoView, pr pulls.PullRequest) (map[string]map[string][]conversationItem, error) {
	notes, _, err := h.opts.Pulls.Notes(ctx, rv.Repo, pr, pulls.KindLineComment, 0, pulls.MaxNotePage)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string][]conversationItem{}
	for _, n := range notes {
		if n.Outdated {
			continue
		}
		at := n.Side[:1] + strconv.Itoa(n.Line)
		if out[n.Path] == nil {
			out[n.Path] = map[string][]conversationItem{}
		}
		out[n.Path][at] = append(out[n.Path][at], h.noteItem(ctx, rv, pr.Base, n))
	}
	return out, nil
}

// mergedCommits says how many commits merged pull request pr brought
// into its base, as the header shows it ("1 commit", "3 commits", "250+
// commits" past what a pull request lists); "" for one not merged, or
// whose commits are gone.
func (h *Handler) mergedCommits(ctx context.Context, rv *repoView, pr pulls.PullRequest) (string, error) {
	if pr.State != pulls.Merged {
		return "", nil
	}
	ids, err := h.opts.Pulls.CommitIDs(ctx, rv.Repo, pr)
	switch {
	case errors.Is(err, pulls.ErrNotFound):
		return "", nil
	case err != nil:
		return "", err
	case len(ids) == 0:
		return "", nil
	case len(ids) == 1:
		return "1 commit", nil
	case len(ids) >= pulls.MaxCommits:
		return strconv.Itoa(len(ids)) + "+ commits", nil
	}
	return strconv.Itoa(len(ids)) + " commits", nil
}

// pullAlerts are the secret-scanning alerts with a location in pr's
// commits (docs/adr/0128-alert-commit-index.md).
func (h *Handler) pullAlerts(ctx context.Context, rv *repoView, pr pulls.PullRequest) ([]alerts.Alert, bool, error) {
	commits, err := h.opts.Pulls.CommitIDs(ctx, rv.Repo, pr)
	if errors.Is(err, pulls.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return h.opts.Alerts.ByCommits(ctx, rv.Owner, rv.ID, commits, 20)
}

// commentPull adds a comment to the conversation, or, with a path, to a
// line of the diff, through the API; a refusal is shown on the page the
// form was on.
func (h *Handler) commentPull(w http.ResponseWriter, r *http.Request, v *visitor) error {
	owner, name := r.PathValue("owner"), r.PathValue("repo")
	n, err := pullNumber(r)
	if err != nil {
		return err
	}
	body := r.PostFormValue("body")
	if path := r.PostFormValue("path"); path != "" {
		line, err := strconv.Atoi(r.PostFormValue("line"))
		if err != nil || line < 1 {
			return &httpError{status: http.StatusBadRequest, msg: "A line comment names a line."}
		}
		c, err := h.api(v).LineCommentPull(r.Context(), owner, name, n, client.PullLineComment{
			Path: path, Line: line, Side: r.PostFormValue("side"), Body: body, CommitID: r.PostFormValue("commit_id")})
		if err != nil {
			if msg, status, ok := refusal(err); ok {
				return h.showFiles(w, r, v, status, msg)
			}
			return apiError(err)
		}
		h.opts.Logger.InfoContext(r.Context(), "web: pull request line comment", "repo", owner+"/"+name, "number", n, "by", v.p.Tenant, "token_id", v.p.TokenID)
		http.Redirect(w, r, pullPath(owner, name, n)+"/files?page="+strconv.Itoa(pageOf(r))+"#r"+strconv.FormatUint(c.ID, 10), http.StatusSeeOther)
		return nil
	}
	c, err := h.api(v).CommentPull(r.Context(), owner, name, n, body)
	if err != nil {
		if msg, status, ok := refusal(err); ok {
			return h.showPull(w, r, v, status, pullPage{CommentError: msg}, "")
		}
		return apiError(err)
	}
	h.opts.Logger.InfoContext(r.Context(), "web: pull request comment", "repo", owner+"/"+name, "number", n, "by", v.p.Tenant, "token_id", v.p.TokenID)
	http.Redirect(w, r, pullPath(owner, name, n)+"#issuecomment-"+strconv.FormatUint(c.ID, 10), http.StatusSeeOther)
	return nil
}

// reviewPull submits a review (approve, request changes, comment) of the
// head the page showed, through the API.
func (h *Handler) reviewPull(w http.ResponseWriter, r *http.Request, v *visitor) error {
	owner, name := r.PathValue("owner"), r.PathValue("repo")
	n, err := pullNumber(r)
	if err != nil {
		return err
	}
	event := r.PostFormValue("event")
	if event != pulls.EventApprove && event != pulls.EventRequestChanges && event != pulls.EventComment {
		return &httpError{status: http.StatusBadRequest, msg: "Choose whether to approve, request changes or comment."}
	}
	if _, err := h.api(v).ReviewPull(r.Context(), owner, name, n, client.NewPullReview{Event: event, Body: r.PostFormValue("body"), CommitID: r.PostFormValue("sha")}); err != nil {
		if msg, status, ok := refusal(err); ok {
			return h.showPull(w, r, v, status, pullPage{CommentError: msg}, "")
		}
		return apiError(err)
	}
	h.opts.Logger.InfoContext(r.Context(), "web: pull request reviewed", "repo", owner+"/"+name, "number", n, "event", event, "by", v.p.Tenant, "token_id", v.p.TokenID)
	http.Redirect(w, r, pullPath(owner, name, n)+"?done=reviewed", http.StatusSeeOther)
	return nil
}

// editPull saves a pull request's title and description.
func (h *Handler) editPull(w http.ResponseWriter, r *http.Request, v *visitor) error {
	title, body := strings.TrimSpace(r.PostFormValue("title")), r.PostFormValue("body")
	return h.changePull(w, r, v, client.PullEdit{Title: &title, Body: &body}, "edited", &struct{ Title, Body string }{title, body})
}

// setPullState closes or reopens a pull request.
func (h *Handler) setPullState(w http.ResponseWriter, r *http.Request, v *visitor) error {
	state := r.PostFormValue("state")
	done := map[string]string{"closed": "closed", "open": "reopened"}[state]
	if done == "" {
		return &httpError{status: http.StatusBadRequest, msg: "A pull request is closed or reopened."}
	}
	return h.changePull(w, r, v, client.PullEdit{State: &state}, done, nil)
}

// changePull makes one change of a pull request through the API, and
// shows the pull request after it, or again with why it was refused.
func (h *Handler) changePull(w http.ResponseWriter, r *http.Request, v *visitor, e client.PullEdit, done string, typed *struct{ Title, Body string }) error {
	owner, name := r.PathValue("owner"), r.PathValue("repo")
	n, err := pullNumber(r)
	if err != nil {
		return err
	}
	if _, err := h.api(v).UpdatePull(r.Context(), owner, name, n, e); err != nil {
		if msg, status, ok := refusal(err); ok {
			return h.showPull(w, r, v, status, pullPage{Edit: typed}, msg)
		}
		return apiError(err)
	}
	h.opts.Logger.InfoContext(r.Context(), "web: pull request "+done, "repo", owner+"/"+name, "number", n, "by", v.p.Tenant, "token_id", v.p.TokenID)
	http.Redirect(w, r, pullPath(owner, name, n)+"?done="+done, http.StatusSeeOther)
	return nil
}

// mergePull merges a pull request from the merge box: the strategy
// chosen, the head the page showed (a head moved since is refused, not
// merged), and whether to delete the head branch. A refusal is shown in
// the merge box in words: the conflicting files, "the base branch
// changed", push protection's message.
func (h *Handler) mergePull(w http.ResponseWriter, r *http.Request, v *visitor) error {
	owner, name := r.PathValue("owner"), r.PathValue("repo")
	n, err := pullNumber(r)
	if err != nil {
		return err
	}
	m := client.PullMerge{MergeMethod: r.PostFormValue("method"), SHA: r.PostFormValue("sha"), DeleteBranch: r.PostFormValue("delete_branch") == "on"}
	if !slices.Contains(pulls.Methods, pulls.Method(m.MergeMethod)) {
		return &httpError{status: http.StatusBadRequest, msg: "Choose how to merge: merge, squash or rebase."}
	}
	if m.SHA == "" {
		// The box always sends the head it showed: a merge of whatever the
		// head is now is not what the visitor reviewed.
		return &httpError{status: http.StatusBadRequest, msg: "The form did not say which head was reviewed; reload the page and try again."}
	}
	res, err := h.api(v).MergePull(r.Context(), owner, name, n, m)
	if err != nil {
		if msg, status, ok := refusal(err); ok {
			return h.showPull(w, r, v, status, pullPage{MergeError: mergeWords(msg)}, "")
		}
		return apiError(err)
	}
	h.opts.Logger.InfoContext(r.Context(), "web: pull request merged", "repo", owner+"/"+name, "number", n, "commit", res.SHA, "by", v.p.Tenant, "token_id", v.p.TokenID)
	http.Redirect(w, r, pullPath(owner, name, n)+"?done=merged", http.StatusSeeOther)
	return nil
}

// mergeWords says why a merge did not happen, from the API's refusal:
// its message, which names the conflicting files or carries push
// protection's words, after what the visitor can do about it.
func mergeWords(msg string) string {
	switch {
	case strings.Contains(msg, pulls.ErrBaseChanged.Error()):
		return "Not merged: the base branch changed while merging. Nothing was written; try again. (" + msg + ")"
	case strings.Contains(msg, pulls.ErrHeadChanged.Error()):
		return "Not merged: the head branch moved since this page was shown. Review the new commits and try again. (" + msg + ")"
	case strings.Contains(msg, pulls.ErrHeld.Error()):
		return "Not merged: push protection held the merge, because it would add a secret.\n" + msg
	}
	return "Not merged: " + msg
}
