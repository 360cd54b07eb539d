package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/pulls"
)

// The conversation of a pull request in GitHub's shapes
// (docs/adr/0127-pull-request-reviews.md): comments
// (/issues/{number}/comments, /issues/comments/{id}), reviews
// (/pulls/{number}/reviews) and line comments (/pulls/{number}/comments,
// /pulls/comments/{id}). Reading needs read access; writing needs a
// write token and read access (a reader of a public repository comments
// and reviews; only writers' verdicts count toward required approvals);
// editing is the author's; deleting the author's or the repository
// admin's; dismissing a review a writer's.
func (h *handler) routePullNotes() {
	h.routePairs("/api/repos/{owner}/{name}/issues", map[pairKey]apiFunc{
		{"GET", "comments"}:  h.listNotes(pulls.KindComment),
		{"POST", "comments"}: h.createComment,
	}, map[string]apiFunc{
		"GET":    h.getNote(pulls.KindComment),
		"PATCH":  h.editNote(pulls.KindComment),
		"DELETE": h.deleteNote(pulls.KindComment),
	})
	h.routePairs("/api/repos/{owner}/{name}/pulls", map[pairKey]apiFunc{
		{"PUT", "merge"}:                  h.mergePull,
		{"GET", "merge"}:                  h.isMerged,
		{"GET", "commits"}:                h.pullCommits,
		{"GET", "files"}:                  h.pullFiles,
		{"GET", "comments"}:               h.listNotes(pulls.KindLineComment),
		{"POST", "comments"}:              h.createLineComment,
		{"GET", "reviews"}:                h.listNotes(pulls.KindReview),
		{"POST", "reviews"}:               h.createReview,
		{"GET", "secret-scanning-alerts"}: h.pullAlerts,
	}, map[string]apiFunc{
		"GET":    h.getNote(pulls.KindLineComment),
		"PATCH":  h.editNote(pulls.KindLineComment),
		"DELETE": h.deleteNote(pulls.KindLineComment),
	})
	h.route("POST /api/repos/{owner}/{name}/pulls/{number}/comments/{id}/replies", h.createReply)
	h.route("GET /api/repos/{owner}/{name}/pulls/{number}/reviews/{id}", h.getReview)
	h.route("PUT /api/repos/{owner}/{name}/pulls/{number}/reviews/{id}", h.editReview)
	h.route("PUT /api/repos/{owner}/{name}/pulls/{number}/reviews/{id}/dismissals", h.dismissReview)
}

// noteJSON is a comment, review or line comment in GitHub's shape: the
// fields of each kind, empty ones left out.
type noteJSON struct {
	ID        uint64      `json:"id"`
	URL       string      `json:"url,omitempty"`
	HTMLURL   string      `json:"html_url"`
	IssueURL  string      `json:"issue_url,omitempty"`
	PullURL   string      `json:"pull_request_url,omitempty"`
	Body      string      `json:"body"`
	User      *ghUserJSON `json:"user"`
	CreatedAt *time.Time  `json:"created_at,omitempty"`
	UpdatedAt *time.Time  `json:"updated_at,omitempty"`
	// Reviews.
	State       string     `json:"state,omitempty"`
	CommitID    string     `json:"commit_id,omitempty"`
	SubmittedAt *time.Time `json:"submitted_at,omitempty"`
	// Line comments. Line is null once the line changed (GitHub's
	// outdated comment); original_line keeps where it was written.
	ReviewID         *uint64 `json:"pull_request_review_id,omitempty"`
	InReplyTo        *uint64 `json:"in_reply_to_id,omitempty"`
	Path             string  `json:"path,omitempty"`
	Line             *int    `json:"line,omitempty"`
	OriginalLine     int     `json:"original_line,omitempty"`
	Side             string  `json:"side,omitempty"`
	OriginalCommitID string  `json:"original_commit_id,omitempty"`
	Outdated         *bool   `json:"outdated,omitempty"`
}

func toNote(base meta.Repo, c pulls.Note) noteJSON {
	num := strconv.FormatUint(c.Number, 10)
	id := strconv.FormatUint(c.ID, 10)
	apiRepo := "/api/repos/" + base.FullName()
	page := "/" + base.FullName() + "/-/pull/" + num
	out := noteJSON{ID: c.ID, Body: c.Body, User: ghUser(c.Author)}
	created, updated := c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	switch c.Kind {
	case pulls.KindComment:
		out.URL, out.HTMLURL, out.IssueURL = apiRepo+"/issues/comments/"+id, page+"#issuecomment-"+id, apiRepo+"/issues/"+num
		out.CreatedAt, out.UpdatedAt = &created, &updated
	case pulls.KindReview:
		out.HTMLURL, out.PullURL = page+"#pullrequestreview-"+id, apiRepo+"/pulls/"+num
		out.State, out.CommitID, out.SubmittedAt = string(c.State), c.CommitID, &created
	case pulls.KindLineComment:
		out.URL, out.HTMLURL, out.PullURL = apiRepo+"/pulls/comments/"+id, page+"/files#r"+id, apiRepo+"/pulls/"+num
		out.CreatedAt, out.UpdatedAt = &created, &updated
		out.Path, out.OriginalLine, out.Side, out.CommitID, out.OriginalCommitID = c.Path, c.Line, c.Side, c.CommitID, c.CommitID
		outdated := c.Outdated
		out.Outdated = &outdated
		if !outdated {
			line := c.Line
			out.Line = &line
		}
		if c.ReviewID != 0 {
			out.ReviewID = &c.ReviewID
		}
		if c.InReplyTo != 0 {
			out.InReplyTo = &c.InReplyTo
		}
	}
	return out
}

// noteID reads the path's {id}: 404 for anything that is not one.
func noteID(r *http.Request) (uint64, error) {
	s := r.PathValue("id")
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || strconv.FormatUint(n, 10) != s {
		return 0, fmt.Errorf("comment %q: %w", s, meta.ErrNotFound)
	}
	return n, nil
}

// commenter is the caller who may add to the conversation of the path's
// repository: a write token's tenant who can read it.
func (h *handler) commenter(r *http.Request, p *meta.Principal) (meta.Repo, error) {
	if err := requireAuth(p); err != nil {
		return meta.Repo{}, err
	}
	repo, err := h.readable(r, p)
	if err != nil {
		return meta.Repo{}, err
	}
	if p.Scope < meta.ScopeWrite {
		return meta.Repo{}, fmt.Errorf("%w: commenting needs a write token", meta.ErrForbidden)
	}
	return repo, nil
}

// commentTarget resolves the service, the path's repository for a
// commenter and its {number}.
func (h *handler) commentTarget(r *http.Request, p *meta.Principal) (*pulls.Service, meta.Repo, uint64, error) {
	ps, err := h.pullService()
	if err != nil {
		return nil, meta.Repo{}, 0, err
	}
	base, err := h.commenter(r, p)
	if err != nil {
		return nil, meta.Repo{}, 0, err
	}
	n, err := pullNumber(r)
	return ps, base, n, err
}

// noteTarget resolves the service, the path's repository for a
// commenter, and the pull request and id of the path's note of kind.
func (h *handler) noteTarget(r *http.Request, p *meta.Principal, kind pulls.NoteKind) (*pulls.Service, meta.Repo, uint64, uint64, error) {
	ps, err := h.pullService()
	if err != nil {
		return nil, meta.Repo{}, 0, 0, err
	}
	base, err := h.commenter(r, p)
	if err != nil {
		return nil, meta.Repo{}, 0, 0, err
	}
	n, id, err := h.notePR(r, ps, base, kind)
	return ps, base, n, id, err
}

// notePR resolves the pull request a note id of kind is on: the path's
// {number} when it has one (the note must be on it), else the id's key.
func (h *handler) notePR(r *http.Request, ps *pulls.Service, repo meta.Repo, kind pulls.NoteKind) (uint64, uint64, error) {
	id, err := noteID(r)
	if err != nil {
		return 0, 0, err
	}
	if r.PathValue("number") != "" {
		n, err := pullNumber(r)
		return n, id, err
	}
	n, err := ps.Store().NoteNumber(r.Context(), repo.ID, kind, id)
	return n, id, pullError(err)
}

func (h *handler) listNotes(kind pulls.NoteKind) apiFunc {
	return func(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
		ps, base, n, err := h.pullTarget(r, p, false)
		if err != nil {
			return 0, nil, err
		}
		q := r.URL.Query()
		limit, err := perPage(q, pulls.DefaultPageSize, pulls.MaxNotePage)
		if err != nil {
			return 0, nil, err
		}
		var after uint64
		if v := q.Get("after"); v != "" {
			if after, err = strconv.ParseUint(v, 10, 64); err != nil || after == 0 {
				return 0, nil, fmt.Errorf("%w: after=%q: want a comment id", meta.ErrInvalidArgument, v)
			}
		}
		pr, err := ps.Get(r.Context(), base, n)
		if err != nil {
			return 0, nil, pullError(err)
		}
		notes, next, err := ps.Notes(r.Context(), base, pr, kind, after, limit)
		if err != nil {
			return 0, nil, pullError(err)
		}
		if next > 0 {
			linkNext(w, r, strconv.FormatUint(next, 10))
		}
		out := make([]noteJSON, 0, len(notes))
		for _, c := range notes {
			out = append(out, toNote(base, c))
		}
		return http.StatusOK, out, nil
	}
}

func (h *handler) getNote(kind pulls.NoteKind) apiFunc {
	return func(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
		ps, err := h.pullService()
		if err != nil {
			return 0, nil, err
		}
		base, err := h.readable(r, p)
		if err != nil {
			return 0, nil, err
		}
		n, id, err := h.notePR(r, ps, base, kind)
		if err != nil {
			return 0, nil, err
		}
		c, err := ps.Store().GetNote(r.Context(), base.ID, n, kind, id)
		if err != nil {
			return 0, nil, pullError(err)
		}
		if kind == pulls.KindLineComment {
			// Outdated is the Service's to tell: read it through a page
			// of one.
			if pr, err := ps.Get(r.Context(), base, n); err == nil {
				if page, _, err := ps.Notes(r.Context(), base, pr, kind, id-1, 1); err == nil && len(page) == 1 && page[0].ID == id {
					c = page[0]
				}
			}
		}
		return http.StatusOK, toNote(base, c), nil
	}
}

func (h *handler) createComment(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	ps, base, n, err := h.commentTarget(r, p)
	if err != nil {
		return 0, nil, err
	}
	var req struct {
		Body string `json:"body"`
	}
	if err := decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	c, err := ps.Comment(r.Context(), base, n, p.Tenant, req.Body)
	if err != nil {
		return 0, nil, pullError(err)
	}
	return http.StatusCreated, toNote(base, c), nil
}

// lineCommentReq is a line comment as GitHub's API takes it.
type lineCommentReq struct {
	Body      string `json:"body"`
	CommitID  string `json:"commit_id"`
	Path      string `json:"path"`
	Line      int    `json:"line"`
	Side      string `json:"side"`
	InReplyTo uint64 `json:"in_reply_to"`
	// SubjectType "line" is the only one ghost has.
	SubjectType string `json:"subject_type"`
}

func (c lineCommentReq) comment(author string) (pulls.LineComment, error) {
	if c.SubjectType != "" && c.SubjectType != "line" {
		return pulls.LineComment{}, fmt.Errorf("%w: subject_type %q: only line comments are supported", meta.ErrInvalidArgument, c.SubjectType)
	}
	return pulls.LineComment{Author: author, Body: c.Body, CommitID: c.CommitID, Path: c.Path, Line: c.Line, Side: strings.ToUpper(c.Side), InReplyTo: c.InReplyTo}, nil
}

func (h *handler) createLineComment(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	ps, base, n, err := h.commentTarget(r, p)
	if err != nil {
		return 0, nil, err
	}
	var req lineCommentReq
	if err := decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	lc, err := req.comment(p.Tenant)
	if err != nil {
		return 0, nil, err
	}
	c, err := ps.AddLineComment(r.Context(), base, n, lc)
	if err != nil {
		return 0, nil, pullError(err)
	}
	return http.StatusCreated, toNote(base, c), nil
}

func (h *handler) createReply(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	ps, base, n, id, err := h.noteTarget(r, p, pulls.KindLineComment)
	if err != nil {
		return 0, nil, err
	}
	var req struct {
		Body string `json:"body"`
	}
	if err := decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	c, err := ps.AddLineComment(r.Context(), base, n, pulls.LineComment{Author: p.Tenant, Body: req.Body, InReplyTo: id})
	if err != nil {
		return 0, nil, pullError(err)
	}
	return http.StatusCreated, toNote(base, c), nil
}

func (h *handler) editNote(kind pulls.NoteKind) apiFunc {
	return func(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
		ps, base, n, id, err := h.noteTarget(r, p, kind)
		if err != nil {
			return 0, nil, err
		}
		var req struct {
			Body string `json:"body"`
		}
		if err := decode(w, r, &req); err != nil {
			return 0, nil, err
		}
		c, err := ps.EditNote(r.Context(), base, n, kind, id, p.Tenant, req.Body)
		if err != nil {
			return 0, nil, pullError(err)
		}
		return http.StatusOK, toNote(base, c), nil
	}
}

func (h *handler) deleteNote(kind pulls.NoteKind) apiFunc {
	return func(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
		ps, base, n, id, err := h.noteTarget(r, p, kind)
		if err != nil {
			return 0, nil, err
		}
		if err := ps.DeleteNote(r.Context(), base, n, kind, id, p.Tenant, h.store.CanAdminRepo(p, base)); err != nil {
			return 0, nil, pullError(err)
		}
		return http.StatusNoContent, nil, nil
	}
}

func (h *handler) getReview(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	return h.getNote(pulls.KindReview)(w, r, p)
}

func (h *handler) editReview(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	return h.editNote(pulls.KindReview)(w, r, p)
}

// createReview submits a review: {"event": APPROVE | REQUEST_CHANGES |
// COMMENT, "body", "commit_id", "comments": [{"path", "line", "side",
// "body"}]}. ghost has no pending reviews: an event is required.
func (h *handler) createReview(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	ps, base, n, err := h.commentTarget(r, p)
	if err != nil {
		return 0, nil, err
	}
	var req struct {
		Event    string           `json:"event"`
		Body     string           `json:"body"`
		CommitID string           `json:"commit_id"`
		Comments []lineCommentReq `json:"comments"`
	}
	if err := decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	if req.Event == "" {
		return 0, nil, fmt.Errorf("%w: event is required (APPROVE, REQUEST_CHANGES or COMMENT): ghost has no pending reviews", meta.ErrInvalidArgument)
	}
	writer, err := h.store.CanWrite(r.Context(), p, base)
	if err != nil {
		return 0, nil, err
	}
	nr := pulls.NewReview{Author: p.Tenant, Writer: writer, Event: req.Event, Body: req.Body, CommitID: req.CommitID}
	for _, c := range req.Comments {
		lc, err := c.comment(p.Tenant)
		if err != nil {
			return 0, nil, err
		}
		nr.Comments = append(nr.Comments, lc)
	}
	rv, _, err := ps.Review(r.Context(), base, n, nr)
	if err != nil {
		// A review recorded in part says so in its error's words.
		return 0, nil, pullError(err)
	}
	h.log.InfoContext(r.Context(), "pull request reviewed", "repo", base.FullName(), "number", n, "state", rv.State, "by", p.Tenant, "token_id", p.TokenID)
	return http.StatusOK, toNote(base, rv), nil
}

// dismissReview dismisses an approval or change request: {"message"}; a
// writer's act.
func (h *handler) dismissReview(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	ps, base, n, err := h.pullTarget(r, p, true)
	if err != nil {
		return 0, nil, err
	}
	id, err := noteID(r)
	if err != nil {
		return 0, nil, err
	}
	var req struct {
		Message string `json:"message"`
		Event   string `json:"event"`
	}
	if err := decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	if req.Event != "" && req.Event != "DISMISS" {
		return 0, nil, fmt.Errorf("%w: event %q: want DISMISS", meta.ErrInvalidArgument, req.Event)
	}
	rv, err := ps.DismissReview(r.Context(), base, n, id, p.Tenant, req.Message)
	if err != nil {
		return 0, nil, pullError(err)
	}
	h.log.InfoContext(r.Context(), "pull request review dismissed", "repo", base.FullName(), "number", n, "review", id, "by", p.Tenant, "token_id", p.TokenID)
	return http.StatusOK, toNote(base, rv), nil
}

// pullAlerts lists the secret-scanning alerts with a location in a pull
// request's commits (at most 250 commits, 100 alerts, newest first), for
// those who see the repository's alerts (docs/adr/0128-alert-commit-index.md).
// The head's commits are the base's too (refs/pull/<n>/head), so the
// base's scans find them, a fork's included.
func (h *handler) pullAlerts(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	ps, err := h.pullService()
	if err != nil {
		return 0, nil, err
	}
	as, err := h.alertStore()
	if err != nil {
		return 0, nil, err
	}
	base, err := h.securityView(r, p)
	if err != nil {
		return 0, nil, err
	}
	n, err := pullNumber(r)
	if err != nil {
		return 0, nil, err
	}
	pr, err := ps.Get(r.Context(), base, n)
	if err != nil {
		return 0, nil, pullError(err)
	}
	commits, err := ps.CommitIDs(r.Context(), base, pr)
	if err != nil {
		return 0, nil, pullError(err)
	}
	found, more, err := as.ByCommits(r.Context(), base.Owner, base.ID, commits, 0)
	if err != nil {
		return 0, nil, alertError(err)
	}
	out := struct {
		Alerts    []alertJSON `json:"alerts"`
		Truncated bool        `json:"truncated,omitempty"`
	}{Alerts: make([]alertJSON, 0, len(found)), Truncated: more}
	for _, a := range found {
		out.Alerts = append(out.Alerts, toAlert(base, a))
	}
	return http.StatusOK, out, nil
}
