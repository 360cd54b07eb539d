package webhook

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Payloads follow GitHub's webhook shapes field for field where GitHub
// has the event, so receivers and libraries written for GitHub parse
// them unchanged (the tests decode them with go-github).

// Repository is the repository an event concerns.
type Repository struct {
	// ID is ghost's repository id; payloads carry it as node_id and a
	// number derived from it as id, since GitHub's ids are numbers.
	ID            string
	Owner, Name   string
	Private       bool
	DefaultBranch string
	// BaseURL is the server's public URL, e.g. "https://git.example.com".
	BaseURL string
}

// NumericID is the number a payload gives as the repository's id: the
// first 53 bits of the sha256 of ghost's id, stable and exact in
// JavaScript.
func NumericID(id string) int64 {
	sum := sha256.Sum256([]byte(id))
	return int64(binary.BigEndian.Uint64(sum[:8]) >> 11)
}

type repoJSON struct {
	ID            int64     `json:"id"`
	NodeID        string    `json:"node_id"`
	Name          string    `json:"name"`
	FullName      string    `json:"full_name"`
	Private       bool      `json:"private"`
	Owner         userJSON  `json:"owner"`
	HTMLURL       string    `json:"html_url"`
	URL           string    `json:"url"`
	CloneURL      string    `json:"clone_url"`
	DefaultBranch string    `json:"default_branch,omitempty"`
	Visibility    string    `json:"visibility"`
	PushedAt      *unixTime `json:"pushed_at,omitempty"`
}

type userJSON struct {
	Login string `json:"login,omitempty"`
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
}

// unixTime encodes as GitHub's push payloads do (seconds).
type unixTime int64

func (r Repository) json() repoJSON {
	html := strings.TrimRight(r.BaseURL, "/") + "/" + r.Owner + "/" + r.Name
	vis := "public"
	if r.Private {
		vis = "private"
	}
	return repoJSON{
		ID: NumericID(r.ID), NodeID: r.ID, Name: r.Name, FullName: r.Owner + "/" + r.Name,
		Private: r.Private, Owner: userJSON{Login: r.Owner, Name: r.Owner}, HTMLURL: html, URL: html,
		CloneURL: html + ".git", DefaultBranch: r.DefaultBranch, Visibility: vis,
	}
}

// Commit is one pushed commit.
type Commit struct {
	ID, TreeID, Message           string
	Timestamp                     time.Time
	AuthorName, AuthorEmail       string
	CommitterName, CommitterEmail string
}

// MaxPushCommits is how many commits a push payload lists, newest last,
// as GitHub's event API does; Size says how many there were.
const MaxPushCommits = 20

// Push is one ref's update by one push.
type Push struct {
	Ref, Before, After string
	Forced             bool
	// Commits are the commits the push made reachable from Ref, oldest
	// first; Size is their count when Commits was cut (0: len(Commits)).
	Commits []Commit
	Size    int
	// Pusher names who pushed (a tenant).
	Pusher string
	Repo   Repository
	// At is when the push was committed.
	At time.Time
}

type commitJSON struct {
	ID        string    `json:"id"`
	TreeID    string    `json:"tree_id,omitempty"`
	Distinct  bool      `json:"distinct"`
	Message   string    `json:"message"`
	Timestamp time.Time `json:"timestamp"`
	URL       string    `json:"url"`
	Author    userJSON  `json:"author"`
	Committer userJSON  `json:"committer"`
	Added     []string  `json:"added"`
	Removed   []string  `json:"removed"`
	Modified  []string  `json:"modified"`
}

type pushJSON struct {
	Ref        string       `json:"ref"`
	Before     string       `json:"before"`
	After      string       `json:"after"`
	Created    bool         `json:"created"`
	Deleted    bool         `json:"deleted"`
	Forced     bool         `json:"forced"`
	BaseRef    *string      `json:"base_ref"`
	Compare    string       `json:"compare"`
	Commits    []commitJSON `json:"commits"`
	Size       int          `json:"size"`
	HeadCommit *commitJSON  `json:"head_commit"`
	Repository repoJSON     `json:"repository"`
	Pusher     userJSON     `json:"pusher"`
	Sender     userJSON     `json:"sender"`
}

func isZeroID(id string) bool { return id == "" || strings.Trim(id, "0") == "" }

// PushPayload returns the "push" event's body.
func PushPayload(p Push) ([]byte, error) {
	repo := p.Repo.json()
	if !p.At.IsZero() {
		t := unixTime(p.At.Unix())
		repo.PushedAt = &t
	}
	out := pushJSON{
		Ref: p.Ref, Before: p.Before, After: p.After,
		Created: isZeroID(p.Before), Deleted: isZeroID(p.After), Forced: p.Forced,
		Compare:    repo.HTMLURL + "/-/compare/" + p.Before + "..." + p.After,
		Commits:    []commitJSON{},
		Size:       p.Size,
		Repository: repo,
		Pusher:     userJSON{Name: p.Pusher},
		Sender:     userJSON{Login: p.Pusher},
	}
	if out.Size < len(p.Commits) {
		out.Size = len(p.Commits)
	}
	cs := p.Commits
	if len(cs) > MaxPushCommits {
		cs = cs[len(cs)-MaxPushCommits:]
	}
	for _, c := range cs {
		out.Commits = append(out.Commits, commitJSON{
			ID: c.ID, TreeID: c.TreeID, Distinct: true, Message: c.Message, Timestamp: c.Timestamp.UTC(),
			URL:       repo.HTMLURL + "/-/commit/" + c.ID,
			Author:    userJSON{Name: c.AuthorName, Email: c.AuthorEmail},
			Committer: userJSON{Name: c.CommitterName, Email: c.CommitterEmail},
			Added:     []string{}, Removed: []string{}, Modified: []string{},
		})
	}
	if n := len(out.Commits); n > 0 && !out.Deleted {
		head := out.Commits[n-1]
		out.HeadCommit = &head
	}
	return json.Marshal(out)
}

// RefEvent is the "create" or "delete" event GitHub sends beside a push
// that creates or deletes a branch or tag; ok is false for a push that
// does neither, or for a ref outside refs/heads and refs/tags.
func RefEvent(p Push) (event string, body []byte, ok bool, err error) {
	var refType, name string
	switch {
	case strings.HasPrefix(p.Ref, "refs/heads/"):
		refType, name = "branch", strings.TrimPrefix(p.Ref, "refs/heads/")
	case strings.HasPrefix(p.Ref, "refs/tags/"):
		refType, name = "tag", strings.TrimPrefix(p.Ref, "refs/tags/")
	default:
		return "", nil, false, nil
	}
	switch {
	case isZeroID(p.Before) && !isZeroID(p.After):
		event = "create"
	case !isZeroID(p.Before) && isZeroID(p.After):
		event = "delete"
	default:
		return "", nil, false, nil
	}
	body, err = json.Marshal(struct {
		Ref          string   `json:"ref"`
		RefType      string   `json:"ref_type"`
		MasterBranch string   `json:"master_branch,omitempty"`
		PusherType   string   `json:"pusher_type"`
		Repository   repoJSON `json:"repository"`
		Sender       userJSON `json:"sender"`
	}{name, refType, p.Repo.DefaultBranch, "user", p.Repo.json(), userJSON{Login: p.Pusher}})
	return event, body, err == nil, err
}

// Hook describes a hook in a ping.
type Hook struct {
	ID     int64
	URL    string
	Events []string
	Active bool
	// InsecureSSL is the hook's setting: TLS certificates not verified.
	InsecureSSL bool
	// Org names the tenant of a tenant-wide hook (an organization's, in
	// GitHub's words); empty for a repository's hook.
	Org string
}

// MarshalJSON encodes the repository as payloads carry it, so that
// events built elsewhere (package hooks) embed the same object.
func (r Repository) MarshalJSON() ([]byte, error) { return json.Marshal(r.json()) }

// PingPayload returns the "ping" event's body, sent when a hook is
// created. It names the hook's URL and events, never its secret. A
// tenant's hook (h.Org set) is described as GitHub describes an
// organization's, with the organization in place of a repository.
func PingPayload(h Hook, repo Repository, sender, zen string) ([]byte, error) {
	type config struct {
		URL         string `json:"url"`
		ContentType string `json:"content_type"`
		InsecureSSL string `json:"insecure_ssl"`
	}
	type hookJSON struct {
		Type   string   `json:"type"`
		ID     int64    `json:"id"`
		Name   string   `json:"name"`
		Active bool     `json:"active"`
		Events []string `json:"events"`
		Config config   `json:"config"`
	}
	ssl := "0"
	if h.InsecureSSL {
		ssl = "1"
	}
	if h.Org != "" {
		return json.Marshal(struct {
			Zen          string   `json:"zen"`
			HookID       int64    `json:"hook_id"`
			Hook         hookJSON `json:"hook"`
			Organization userJSON `json:"organization"`
			Sender       userJSON `json:"sender"`
		}{zen, h.ID, hookJSON{"Organization", h.ID, "web", h.Active, h.Events, config{h.URL, "json", ssl}}, userJSON{Login: h.Org}, userJSON{Login: sender}})
	}
	return json.Marshal(struct {
		Zen        string   `json:"zen"`
		HookID     int64    `json:"hook_id"`
		Hook       hookJSON `json:"hook"`
		Repository repoJSON `json:"repository"`
		Sender     userJSON `json:"sender"`
	}{zen, h.ID, hookJSON{"Repository", h.ID, "web", h.Active, h.Events, config{h.URL, "json", ssl}}, repo.json(), userJSON{Login: sender}})
}

// Alert is a secret-scanning alert as its event shows it. It has no
// field for the secret: a hook's receiver learns where a secret leaked
// and its type, never the secret itself.
type Alert struct {
	// ID is ghost's alert id (hex); Number, GitHub's, is derived from it.
	ID          string
	RuleID      string
	Description string
	State       string // "open" or "resolved"
	Resolution  string
	ResolvedBy  string
	ResolvedAt  time.Time
	Comment     string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// BypassedBy, BypassedAt and BypassReason describe a push-protection
	// bypass, when the event is one.
	BypassedBy   string
	BypassedAt   time.Time
	BypassReason string
	Repo         Repository
}

// AlertPayload returns the fields of GitHub's "secret_scanning_alert"
// event beside repository and sender (which the enqueuer adds): action
// (created, resolved, reopened; push_protection_bypassed, ghost's own,
// for a bypass on an alert that existed) and the alert.
func AlertPayload(action string, a Alert) ([]byte, error) {
	type alertJSON struct {
		Number                   int64      `json:"number"`
		CreatedAt                time.Time  `json:"created_at"`
		UpdatedAt                time.Time  `json:"updated_at"`
		URL                      string     `json:"url"`
		HTMLURL                  string     `json:"html_url"`
		State                    string     `json:"state"`
		Resolution               *string    `json:"resolution"`
		ResolvedAt               *time.Time `json:"resolved_at"`
		ResolvedBy               *userJSON  `json:"resolved_by"`
		ResolutionComment        *string    `json:"resolution_comment"`
		SecretType               string     `json:"secret_type"`
		SecretTypeDisplayName    string     `json:"secret_type_display_name"`
		PushProtectionBypassed   bool       `json:"push_protection_bypassed"`
		PushProtectionBypassedBy *userJSON  `json:"push_protection_bypassed_by"`
		PushProtectionBypassedAt *time.Time `json:"push_protection_bypassed_at"`
		// GhostID and BypassReason are ghost's own.
		GhostID      string `json:"ghost_id"`
		BypassReason string `json:"push_protection_bypass_reason,omitempty"`
	}
	html := a.Repo.json().HTMLURL + "/-/alerts/" + a.ID
	out := alertJSON{
		Number: NumericID(a.ID), CreatedAt: a.CreatedAt.UTC(), UpdatedAt: a.UpdatedAt.UTC(), URL: html, HTMLURL: html,
		State: a.State, SecretType: a.RuleID, SecretTypeDisplayName: a.Description, GhostID: a.ID,
	}
	if out.SecretTypeDisplayName == "" {
		out.SecretTypeDisplayName = a.RuleID
	}
	if a.State == "resolved" {
		res, at, by, c := a.Resolution, a.ResolvedAt.UTC(), userJSON{Login: a.ResolvedBy}, a.Comment
		out.Resolution, out.ResolvedAt, out.ResolvedBy, out.ResolutionComment = &res, &at, &by, &c
	}
	if a.BypassedBy != "" {
		at, by := a.BypassedAt.UTC(), userJSON{Login: a.BypassedBy}
		out.PushProtectionBypassed, out.PushProtectionBypassedBy, out.PushProtectionBypassedAt = true, &by, &at
		out.BypassReason = a.BypassReason
	}
	return json.Marshal(struct {
		Action string    `json:"action"`
		Alert  alertJSON `json:"alert"`
	}{action, out})
}

// ScanRun is a finished secret-scanning run, ghost's own "scan_run"
// event.
type ScanRun struct {
	ID                    uint64
	Kind                  string // "push" or "full"
	Seq                   uint64
	Shards                int
	Blobs, Bytes, Found   int64
	CreatedAt, FinishedAt time.Time
}

// ScanRunPayload returns the fields of the "scan_run" event beside
// repository and sender: action "completed" and the run.
func ScanRunPayload(r ScanRun) ([]byte, error) {
	type runJSON struct {
		ID          uint64    `json:"id"`
		Kind        string    `json:"kind"`
		Seq         uint64    `json:"seq"`
		State       string    `json:"state"`
		Shards      int       `json:"shards"`
		Blobs       int64     `json:"blobs_scanned"`
		Bytes       int64     `json:"bytes_scanned"`
		Findings    int64     `json:"findings"`
		CreatedAt   time.Time `json:"created_at"`
		CompletedAt time.Time `json:"completed_at"`
	}
	return json.Marshal(struct {
		Action  string  `json:"action"`
		ScanRun runJSON `json:"scan_run"`
	}{"completed", runJSON{r.ID, r.Kind, r.Seq, "completed", r.Shards, r.Blobs, r.Bytes, r.Found, r.CreatedAt.UTC(), r.FinishedAt.UTC()}})
}

// PullRequest is a pull request as GitHub's "pull_request" event shows
// it.
type PullRequest struct {
	Number      uint64
	Title, Body string
	Author      string
	// State is ghost's: "open", "closed" or "merged" (GitHub's "closed"
	// with merged true).
	State                                    string
	CreatedAt, UpdatedAt, ClosedAt, MergedAt time.Time
	MergedBy, MergeCommit                    string
	// Head and Base are the branches, their tips and repositories.
	Head, Base PullBranch
}

// PullBranch is one side of a pull request.
type PullBranch struct {
	Ref, SHA string
	Repo     Repository
}

// prJSON is a pull request as GitHub's payloads show it.
type prJSON struct {
	ID             int64        `json:"id"`
	NodeID         string       `json:"node_id"`
	Number         uint64       `json:"number"`
	URL            string       `json:"url"`
	HTMLURL        string       `json:"html_url"`
	State          string       `json:"state"`
	Locked         bool         `json:"locked"`
	Title          string       `json:"title"`
	Body           *string      `json:"body"`
	User           userJSON     `json:"user"`
	CreatedAt      time.Time    `json:"created_at"`
	UpdatedAt      time.Time    `json:"updated_at"`
	ClosedAt       *time.Time   `json:"closed_at"`
	MergedAt       *time.Time   `json:"merged_at"`
	MergeCommitSHA *string      `json:"merge_commit_sha"`
	Draft          bool         `json:"draft"`
	Merged         bool         `json:"merged"`
	MergedBy       *userJSON    `json:"merged_by"`
	Head           prBranchJSON `json:"head"`
	Base           prBranchJSON `json:"base"`
}

type prBranchJSON struct {
	Label string   `json:"label"`
	Ref   string   `json:"ref"`
	SHA   string   `json:"sha"`
	User  userJSON `json:"user"`
	Repo  repoJSON `json:"repo"`
}

// pullURL is the API's URL of pull request n of r; the web UI's page is
// its html_url.
func pullURL(r Repository, n uint64) (api, html string) {
	base := strings.TrimRight(r.BaseURL, "/")
	return fmt.Sprintf("%s/api/repos/%s/%s/pulls/%d", base, r.Owner, r.Name, n), fmt.Sprintf("%s/%s/%s/-/pull/%d", base, r.Owner, r.Name, n)
}

func (pr PullRequest) json() prJSON {
	side := func(b PullBranch) prBranchJSON {
		return prBranchJSON{Label: b.Repo.Owner + ":" + b.Ref, Ref: b.Ref, SHA: b.SHA, User: userJSON{Login: b.Repo.Owner}, Repo: b.Repo.json()}
	}
	nodeID := fmt.Sprintf("%s/pulls/%d", pr.Base.Repo.ID, pr.Number)
	url, html := pullURL(pr.Base.Repo, pr.Number)
	out := prJSON{
		ID: NumericID(nodeID), NodeID: nodeID, Number: pr.Number, URL: url, HTMLURL: html,
		State: pr.State, Title: pr.Title, User: userJSON{Login: pr.Author},
		CreatedAt: pr.CreatedAt.UTC(), UpdatedAt: pr.UpdatedAt.UTC(), Head: side(pr.Head), Base: side(pr.Base),
	}
	if pr.Body != "" {
		out.Body = &pr.Body
	}
	if pr.State != "open" {
		out.State = "closed"
		at := pr.ClosedAt.UTC()
		out.ClosedAt = &at
	}
	if pr.State == "merged" {
		at, by, c := pr.MergedAt.UTC(), userJSON{Login: pr.MergedBy}, pr.MergeCommit
		out.Merged, out.MergedAt, out.MergedBy, out.MergeCommitSHA = true, &at, &by, &c
	}
	return out
}

// PullRequestPayload returns the fields of GitHub's "pull_request" event
// beside repository and sender: action (opened, edited, closed,
// reopened, synchronize), number and pull_request.
func PullRequestPayload(action string, pr PullRequest) ([]byte, error) {
	out := pr.json()
	return json.Marshal(struct {
		Action      string `json:"action"`
		Number      uint64 `json:"number"`
		PullRequest prJSON `json:"pull_request"`
	}{action, pr.Number, out})
}

// Note is a comment, review or line comment of a pull request, as the
// issue_comment, pull_request_review and pull_request_review_comment
// events show it.
type Note struct {
	// Kind is "comment", "review" or "line".
	Kind   string
	ID     uint64
	Author string
	Body   string
	// State is a review's: APPROVED, CHANGES_REQUESTED, COMMENTED or
	// DISMISSED.
	State                string
	CommitID             string
	CreatedAt, UpdatedAt time.Time
	// Path, Line, Side, ReviewID and InReplyTo place a line comment.
	Path      string
	Line      int
	Side      string
	ReviewID  uint64
	InReplyTo uint64
}

// NotePayload returns the fields, beside repository and sender, of the
// event of a change of n on pr: GitHub's issue_comment (action, issue,
// comment), pull_request_review (action, review, pull_request) or
// pull_request_review_comment (action, comment, pull_request), by n's
// Kind, and that event's name.
func NotePayload(action string, n Note, pr PullRequest) (event string, payload []byte, err error) {
	p := pr.json()
	html := p.HTMLURL
	user := userJSON{Login: n.Author}
	var body *string
	if n.Body != "" {
		body = &n.Body
	}
	switch n.Kind {
	case "comment":
		type issueJSON struct {
			ID          int64    `json:"id"`
			Number      uint64   `json:"number"`
			Title       string   `json:"title"`
			State       string   `json:"state"`
			User        userJSON `json:"user"`
			HTMLURL     string   `json:"html_url"`
			PullRequest struct {
				URL     string `json:"url"`
				HTMLURL string `json:"html_url"`
			} `json:"pull_request"`
		}
		type commentJSON struct {
			ID        uint64    `json:"id"`
			HTMLURL   string    `json:"html_url"`
			Body      *string   `json:"body"`
			User      userJSON  `json:"user"`
			CreatedAt time.Time `json:"created_at"`
			UpdatedAt time.Time `json:"updated_at"`
		}
		is := issueJSON{ID: p.ID, Number: p.Number, Title: p.Title, State: p.State, User: p.User, HTMLURL: html}
		is.PullRequest.URL, is.PullRequest.HTMLURL = p.URL, html
		payload, err = json.Marshal(struct {
			Action  string      `json:"action"`
			Issue   issueJSON   `json:"issue"`
			Comment commentJSON `json:"comment"`
		}{action, is, commentJSON{n.ID, fmt.Sprintf("%s#issuecomment-%d", html, n.ID), body, user, n.CreatedAt.UTC(), n.UpdatedAt.UTC()}})
		return "issue_comment", payload, err
	case "review":
		type reviewJSON struct {
			ID          uint64    `json:"id"`
			User        userJSON  `json:"user"`
			Body        *string   `json:"body"`
			State       string    `json:"state"`
			CommitID    string    `json:"commit_id"`
			SubmittedAt time.Time `json:"submitted_at"`
			HTMLURL     string    `json:"html_url"`
		}
		payload, err = json.Marshal(struct {
			Action      string     `json:"action"`
			Review      reviewJSON `json:"review"`
			PullRequest prJSON     `json:"pull_request"`
		}{action, reviewJSON{n.ID, user, body, strings.ToLower(n.State), n.CommitID, n.CreatedAt.UTC(), fmt.Sprintf("%s#pullrequestreview-%d", html, n.ID)}, p})
		return "pull_request_review", payload, err
	case "line":
		type lineJSON struct {
			ID                  uint64    `json:"id"`
			PullRequestReviewID *uint64   `json:"pull_request_review_id"`
			InReplyToID         *uint64   `json:"in_reply_to_id,omitempty"`
			Path                string    `json:"path"`
			Line                int       `json:"line"`
			Side                string    `json:"side"`
			CommitID            string    `json:"commit_id"`
			OriginalCommitID    string    `json:"original_commit_id"`
			Body                string    `json:"body"`
			User                userJSON  `json:"user"`
			CreatedAt           time.Time `json:"created_at"`
			UpdatedAt           time.Time `json:"updated_at"`
			HTMLURL             string    `json:"html_url"`
		}
		c := lineJSON{ID: n.ID, Path: n.Path, Line: n.Line, Side: n.Side, CommitID: n.CommitID, OriginalCommitID: n.CommitID, Body: n.Body,
			User: user, CreatedAt: n.CreatedAt.UTC(), UpdatedAt: n.UpdatedAt.UTC(), HTMLURL: fmt.Sprintf("%s/files#r%d", html, n.ID)}
		if n.ReviewID != 0 {
			c.PullRequestReviewID = &n.ReviewID
		}
		if n.InReplyTo != 0 {
			c.InReplyToID = &n.InReplyTo
		}
		payload, err = json.Marshal(struct {
			Action      string   `json:"action"`
			Comment     lineJSON `json:"comment"`
			PullRequest prJSON   `json:"pull_request"`
		}{action, c, p})
		return "pull_request_review_comment", payload, err
	}
	return "", nil, fmt.Errorf("webhook: note kind %q", n.Kind)
}
