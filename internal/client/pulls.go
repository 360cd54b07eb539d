package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// PullUser is a user as a pull request names one.
type PullUser struct {
	Login string `json:"login"`
	Type  string `json:"type"`
}

// PullRepo is a repository as a pull request's branches name one.
type PullRepo struct {
	ID       string    `json:"node_id"`
	Name     string    `json:"name"`
	FullName string    `json:"full_name"`
	Owner    *PullUser `json:"owner"`
	Private  bool      `json:"private"`
	Fork     bool      `json:"fork"`
}

// PullBranch is a pull request's head or base.
type PullBranch struct {
	Label string    `json:"label"`
	Ref   string    `json:"ref"`
	SHA   string    `json:"sha"`
	User  *PullUser `json:"user"`
	Repo  *PullRepo `json:"repo"`
}

// Pull is a pull request, in GitHub's shape.
type Pull struct {
	URL              string     `json:"url"`
	Number           uint64     `json:"number"`
	State            string     `json:"state"` // open or closed
	Locked           bool       `json:"locked"`
	Title            string     `json:"title"`
	Body             string     `json:"body"`
	User             *PullUser  `json:"user"`
	CreatedAt        time.Time  `json:"created_at"`
	UpdatedAt        time.Time  `json:"updated_at"`
	ClosedAt         *time.Time `json:"closed_at"`
	MergedAt         *time.Time `json:"merged_at"`
	MergeCommitSHA   *string    `json:"merge_commit_sha"`
	Draft            bool       `json:"draft"`
	Head             PullBranch `json:"head"`
	Base             PullBranch `json:"base"`
	Merged           bool       `json:"merged"`
	MergedBy         *PullUser  `json:"merged_by"`
	MergeMethod      string     `json:"merge_method,omitempty"`
	Mergeable        *bool      `json:"mergeable"`
	MergeableState   string     `json:"mergeable_state,omitempty"`
	ConflictingFiles []string   `json:"conflicting_files,omitempty"`
	Merging          bool       `json:"merging,omitempty"`
}

// NewPull opens a pull request: Head is a branch of the repository, or
// "owner:branch" of a fork.
type NewPull struct {
	Title string `json:"title"`
	Body  string `json:"body,omitempty"`
	Head  string `json:"head"`
	Base  string `json:"base"`
}

// PullEdit changes a pull request: only the fields set.
type PullEdit struct {
	Title *string `json:"title,omitempty"`
	Body  *string `json:"body,omitempty"`
	State *string `json:"state,omitempty"` // open or closed
	Base  *string `json:"base,omitempty"`
}

// PullMerge is a merge request.
type PullMerge struct {
	MergeMethod   string `json:"merge_method,omitempty"` // merge, squash or rebase
	SHA           string `json:"sha,omitempty"`
	CommitTitle   string `json:"commit_title,omitempty"`
	CommitMessage string `json:"commit_message,omitempty"`
	DeleteBranch  bool   `json:"delete_branch,omitempty"`
}

// PullMerged is a merge's answer.
type PullMerged struct {
	SHA     string `json:"sha"`
	Merged  bool   `json:"merged"`
	Message string `json:"message"`
}

// PullCommit is a commit of a pull request.
type PullCommit struct {
	SHA    string `json:"sha"`
	Commit struct {
		Author    PullPerson `json:"author"`
		Committer PullPerson `json:"committer"`
		Message   string     `json:"message"`
		Tree      struct {
			SHA string `json:"sha"`
		} `json:"tree"`
	} `json:"commit"`
	Parents []struct {
		SHA string `json:"sha"`
	} `json:"parents"`
}

// PullPerson is a commit's author or committer.
type PullPerson struct {
	Name  string    `json:"name"`
	Email string    `json:"email"`
	Date  time.Time `json:"date"`
}

// PullFile is a file a pull request changes.
type PullFile struct {
	SHA              string `json:"sha"`
	Filename         string `json:"filename"`
	Status           string `json:"status"`
	Additions        int    `json:"additions"`
	Deletions        int    `json:"deletions"`
	Changes          int    `json:"changes"`
	Patch            string `json:"patch,omitempty"`
	PreviousFilename string `json:"previous_filename,omitempty"`
	PatchOmitted     bool   `json:"patch_omitted,omitempty"`
}

func pullPath(owner, name string, n uint64) string {
	return repoPath(owner, name) + "/pulls/" + strconv.FormatUint(n, 10)
}

// ListPullsPage returns up to n (0: the server's page size) of a
// repository's pull requests in state (open, closed or all; "": open),
// newest first, below the number after (0: from the newest), and the
// cursor of the next page (0 after the last).
func (c *Client) ListPullsPage(ctx context.Context, owner, name, state string, after uint64, n int) ([]Pull, uint64, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	if after > 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	if n > 0 {
		q.Set("per_page", strconv.Itoa(n))
	}
	var ps []Pull
	var h http.Header
	if _, err := c.doHeader(ctx, http.MethodGet, repoPath(owner, name)+"/pulls", q, nil, &ps, &h); err != nil {
		return nil, 0, err
	}
	next, _ := strconv.ParseUint(nextCursor(h.Get("Link")), 10, 64)
	return ps, next, nil
}

// CreatePull opens a pull request.
func (c *Client) CreatePull(ctx context.Context, owner, name string, p NewPull) (Pull, error) {
	var out Pull
	_, err := c.do(ctx, http.MethodPost, repoPath(owner, name)+"/pulls", nil, p, &out)
	return out, err
}

// Pull returns pull request n, with whether it merges cleanly.
func (c *Client) Pull(ctx context.Context, owner, name string, n uint64) (Pull, error) {
	var out Pull
	_, err := c.do(ctx, http.MethodGet, pullPath(owner, name, n), nil, nil, &out)
	return out, err
}

// UpdatePull changes pull request n.
func (c *Client) UpdatePull(ctx context.Context, owner, name string, n uint64, e PullEdit) (Pull, error) {
	var out Pull
	_, err := c.do(ctx, http.MethodPatch, pullPath(owner, name, n), nil, e, &out)
	return out, err
}

// MergePull merges pull request n.
func (c *Client) MergePull(ctx context.Context, owner, name string, n uint64, m PullMerge) (PullMerged, error) {
	var out PullMerged
	_, err := c.do(ctx, http.MethodPut, pullPath(owner, name, n)+"/merge", nil, m, &out)
	return out, err
}

// PullCommits returns page (from 1) of pull request n's commits.
func (c *Client) PullCommits(ctx context.Context, owner, name string, n uint64, page, perPage int) ([]PullCommit, error) {
	var out []PullCommit
	_, err := c.do(ctx, http.MethodGet, pullPath(owner, name, n)+"/commits", pageQuery(page, perPage), nil, &out)
	return out, err
}

// PullFiles returns page (from 1) of the files pull request n changes.
func (c *Client) PullFiles(ctx context.Context, owner, name string, n uint64, page, perPage int) ([]PullFile, error) {
	var out []PullFile
	_, err := c.do(ctx, http.MethodGet, pullPath(owner, name, n)+"/files", pageQuery(page, perPage), nil, &out)
	return out, err
}

func pageQuery(page, perPage int) url.Values {
	q := url.Values{}
	if page > 0 {
		q.Set("page", strconv.Itoa(page))
	}
	if perPage > 0 {
		q.Set("per_page", strconv.Itoa(perPage))
	}
	return q
}

// PullNote is a comment, review or line comment of a pull request, in
// GitHub's shape (the fields of each kind).
type PullNote struct {
	ID          uint64     `json:"id"`
	Body        string     `json:"body"`
	User        *PullUser  `json:"user"`
	CreatedAt   *time.Time `json:"created_at,omitempty"`
	State       string     `json:"state,omitempty"`
	CommitID    string     `json:"commit_id,omitempty"`
	SubmittedAt *time.Time `json:"submitted_at,omitempty"`
	Path        string     `json:"path,omitempty"`
	Line        *int       `json:"line,omitempty"`
	Original    int        `json:"original_line,omitempty"`
	Outdated    bool       `json:"outdated,omitempty"`
}

// PullLineComment places a line comment of a review.
type PullLineComment struct {
	// CommitID is the head commit the line is read from ("": the
	// current head).
	CommitID string `json:"commit_id,omitempty"`
	Path     string `json:"path"`
	Line     int    `json:"line"`
	Side     string `json:"side,omitempty"`
	Body     string `json:"body"`
}

// NewPullReview is a review to submit: Event is APPROVE, REQUEST_CHANGES
// or COMMENT.
type NewPullReview struct {
	Event    string            `json:"event"`
	Body     string            `json:"body,omitempty"`
	CommitID string            `json:"commit_id,omitempty"`
	Comments []PullLineComment `json:"comments,omitempty"`
}

// CommentPull adds a comment to pull request n's conversation.
func (c *Client) CommentPull(ctx context.Context, owner, name string, n uint64, body string) (PullNote, error) {
	var out PullNote
	_, err := c.do(ctx, http.MethodPost, repoPath(owner, name)+"/issues/"+strconv.FormatUint(n, 10)+"/comments", nil, map[string]string{"body": body}, &out)
	return out, err
}

// LineCommentPull comments on a line of pull request n's diff.
func (c *Client) LineCommentPull(ctx context.Context, owner, name string, n uint64, lc PullLineComment) (PullNote, error) {
	var out PullNote
	_, err := c.do(ctx, http.MethodPost, pullPath(owner, name, n)+"/comments", nil, lc, &out)
	return out, err
}

// ReviewPull submits a review of pull request n.
func (c *Client) ReviewPull(ctx context.Context, owner, name string, n uint64, r NewPullReview) (PullNote, error) {
	var out PullNote
	_, err := c.do(ctx, http.MethodPost, pullPath(owner, name, n)+"/reviews", nil, r, &out)
	return out, err
}

// PullNotes returns a page of pull request n's comments ("comments"),
// reviews ("reviews") or line comments ("line"), oldest first, after the
// id after (0: from the first), and the after of the next page (0: none).
func (c *Client) PullNotes(ctx context.Context, owner, name string, n uint64, kind string, after uint64, perPage int) ([]PullNote, uint64, error) {
	var p string
	switch kind {
	case "comments":
		p = repoPath(owner, name) + "/issues/" + strconv.FormatUint(n, 10) + "/comments"
	case "reviews":
		p = pullPath(owner, name, n) + "/reviews"
	case "line":
		p = pullPath(owner, name, n) + "/comments"
	default:
		return nil, 0, fmt.Errorf("client: note kind %q", kind)
	}
	q := pageQuery(0, perPage)
	if after > 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	var out []PullNote
	var h http.Header
	if _, err := c.doHeader(ctx, http.MethodGet, p, q, nil, &out, &h); err != nil {
		return nil, 0, err
	}
	next, _ := strconv.ParseUint(nextCursor(h.Get("Link")), 10, 64)
	return out, next, nil
}
