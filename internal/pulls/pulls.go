// Package pulls is ghost's pull requests: their records in the object
// store, the refs/pull/<n>/head ref each one keeps in its base
// repository, and merging on the server without a work tree
// (docs/design.md §7.13, docs/adr/0117-pull-request-refs.md,
// docs/adr/0118-pull-request-records.md,
// docs/adr/0119-server-side-merge.md).
//
// A pull request is a record, meta/pulls/<repoID>/<n>, changed only by
// compare-and-swap (internal/record), numbered per base repository by a
// counter record that is itself changed by compare-and-swap. Lists read
// listing keys, one LIST a page, and the records they show.
//
// Everything that changes a repository goes through the push path
// (Pusher, the git service's server-side push): the head ref a pull
// request keeps and the result of a merge are validated, checked by push
// protection and committed to the log exactly as a client's push is, the
// base's old id being the compare-and-swap's precondition.
package pulls

import (
	"context"
	"errors"
	"time"
)

// State is a pull request's state.
type State string

// The states. Merged is final; open and closed change into each other.
const (
	Open   State = "open"
	Closed State = "closed"
	Merged State = "merged"
)

// Method is a merge strategy (docs/adr/0119-server-side-merge.md).
type Method string

// The strategies, as GitHub's API names them.
const (
	// MethodMerge records a merge commit with the base and the head as
	// parents.
	MethodMerge Method = "merge"
	// MethodSquash records one commit on the base with the merged tree.
	MethodSquash Method = "squash"
	// MethodRebase replays the head's commits on the base, one by one:
	// linear history.
	MethodRebase Method = "rebase"
)

// Methods are the strategies, in the order settings list them.
var Methods = []Method{MethodMerge, MethodSquash, MethodRebase}

// Valid reports whether m names a strategy.
func (m Method) Valid() bool { return m == MethodMerge || m == MethodSquash || m == MethodRebase }

// The errors callers branch on. Each wraps nothing else: the package's
// errors match exactly one of them (or a storage error).
var (
	// ErrNotFound is a pull request, branch or repository that does not
	// exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid is a malformed request (a bad title, a branch that is
	// not a branch, an unknown strategy).
	ErrInvalid = errors.New("invalid request")
	// ErrExists is an open pull request for the same head and base.
	ErrExists = errors.New("a pull request already exists")
	// ErrState is a change the pull request's state does not allow
	// (merging a closed one, reopening a merged one).
	ErrState = errors.New("not allowed in this state")
	// ErrNotMergeable is a pull request whose head does not merge into
	// its base cleanly with the chosen strategy (conflicts, or merge
	// commits that rebase cannot replay).
	ErrNotMergeable = errors.New("pull request is not mergeable")
	// ErrMethodNotAllowed is a strategy the repository does not allow.
	ErrMethodNotAllowed = errors.New("merge method not allowed")
	// ErrBaseChanged is a base branch moved by a push (or another merge)
	// while the merge was being made: nothing was written; try again.
	ErrBaseChanged = errors.New("base branch changed; try again")
	// ErrHeadChanged is a head that is not the commit the caller named
	// (the merge's sha), or that moved while the merge was made.
	ErrHeadChanged = errors.New("head branch was modified; review and try again")
	// ErrHeld is a merge (or a head update) that push protection refused:
	// it would add a secret.
	ErrHeld = errors.New("held by push protection")
	// ErrInProgress is a merge of the same pull request already under way.
	ErrInProgress = errors.New("a merge of this pull request is in progress")
	// ErrContention is a record that changed under every attempt, or a
	// number that could not be allocated: nothing applied; retry.
	ErrContention = errors.New("too many concurrent changes; nothing was changed, retry")
	// ErrOutcomeUnknown is a write whose outcome could not be learned:
	// the change may or may not have applied; read the pull request.
	ErrOutcomeUnknown = errors.New("the change may or may not have been applied; read the pull request to check")
)

// PullRequest is one pull request, as its record has it.
type PullRequest struct {
	// Number is its number in the base repository, from 1.
	Number uint64
	// RepoID is the base repository's log id, and BaseRepo its
	// "owner/name" when the pull request was opened.
	RepoID   string
	BaseRepo string
	Title    string
	// Body is Markdown.
	Body string
	// Author is the tenant that opened it.
	Author string
	// Head is the branch to merge; Base the branch (of RepoID) to merge
	// into, a name without refs/heads/.
	Head Branch
	Base string
	// State is open, closed or merged.
	State     State
	CreatedAt time.Time
	UpdatedAt time.Time
	// ClosedAt is when it was closed or merged (zero while open).
	ClosedAt time.Time
	// MergedAt, MergedBy, MergeCommit and MergeMethod say how it was
	// merged; MergeCommit is the base's new tip.
	MergedAt    time.Time
	MergedBy    string
	MergeCommit string
	MergeMethod Method
	// BaseSHA and HeadSHA are the two tips the merge (or the close) saw:
	// the commits and files of a pull request that is no longer open are
	// read between them.
	BaseSHA string
	HeadSHA string
	// Merging is a merge in flight: written before the merge's commit
	// to the log, so that a merge that landed is recognised after a crash
	// (docs/adr/0119-server-side-merge.md).
	Merging *Merging
	// Verdicts are each reviewer's latest approval or change request
	// (docs/adr/0127-pull-request-reviews.md).
	Verdicts []Verdict
	// HeadPush is who pushed the head's last commit, as the push hook
	// last found it in the head's log (nil: not yet known), kept so that
	// it outlives the log entry's compaction
	// (docs/adr/0134-last-push-approval.md).
	HeadPush *HeadPush
	// Gen counts the record's writes.
	Gen uint64
}

// Branch is a branch of a repository: the head of a pull request.
type Branch struct {
	// RepoID is the repository's log id: the base's own, or a fork's.
	RepoID string
	// Repo is "owner/name" of that repository, as it was named when the
	// pull request was opened.
	Repo string
	// Ref is the branch name, without refs/heads/.
	Ref string
}

// HeadPush is the push that set a pull request's head branch to Commit.
type HeadPush struct {
	Commit string `json:"commit"`
	// By is the pusher: a tenant name.
	By string `json:"by"`
}

func (h *HeadPush) clone() *HeadPush {
	if h == nil {
		return nil
	}
	c := *h
	return &c
}

// Merging is a merge that may be committing.
type Merging struct {
	// Commit is the base's new tip the merge is committing, and Old the
	// base's tip it replaces.
	Commit string    `json:"commit"`
	Old    string    `json:"old"`
	Head   string    `json:"head"`
	Method Method    `json:"method"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
}

// Event actions, as GitHub's pull_request webhook names them.
const (
	ActionOpened      = "opened"
	ActionEdited      = "edited"
	ActionClosed      = "closed"
	ActionReopened    = "reopened"
	ActionSynchronize = "synchronize"
	// The actions of notes: GitHub's issue_comment and
	// pull_request_review_comment "created", "edited" and "deleted", and
	// pull_request_review "submitted", "edited" and "dismissed".
	ActionCreated   = "created"
	ActionDeleted   = "deleted"
	ActionSubmitted = "submitted"
	ActionDismissed = "dismissed"
)

// Event is one change of a pull request, as GitHub's pull_request
// webhook tells it.
type Event struct {
	// Action is one of the Action constants ("closed" with State Merged
	// for a merge, as GitHub's merged: true).
	Action string
	// PullRequest is the pull request as the change left it.
	PullRequest PullRequest
	// Sender is the tenant that made the change: who opened, edited,
	// closed, reopened or merged it. For "synchronize" it is the pull
	// request's author: the push that moved the head is not known here.
	Sender string
}

// Events is the hook point for pull-request events: the server queues
// GitHub's pull_request webhook event for each (docs/design.md §10.8).
// It is called after the change is committed. It must not block: a slow
// hook would slow the request that made the change. A nil Events sends
// nothing.
type Events interface {
	PullRequest(ctx context.Context, e Event)
	// Note is a comment, review or line comment created, edited,
	// deleted, submitted or dismissed (GitHub's issue_comment,
	// pull_request_review and pull_request_review_comment events).
	Note(ctx context.Context, e NoteEvent)
}

// NoteEvent is one change of a pull request's conversation.
type NoteEvent struct {
	// Action is created, edited or deleted; for a review submitted,
	// edited or dismissed.
	Action      string
	Note        Note
	PullRequest PullRequest
	Sender      string
}
