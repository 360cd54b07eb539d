// Package access is the one authorization decision for git: what a
// caller may do with a repository, and whether that lets them fetch or
// push. Both transports ask Decide and map its errors to their own
// answers (HTTP statuses and challenges, SSH messages), so the policy of
// docs/design.md §7.4 is written once.
package access

import (
	"errors"
	"path"
	"slices"
)

// Level is a caller's right on a repository. Levels are ordered: each
// includes the ones below it, as Soft Serve's access levels do.
type Level uint8

const (
	// None: the caller may not even learn that the repository exists.
	None Level = iota
	// Read: fetch and clone.
	Read
	// Write: push as well.
	Write
)

// String names the level as the API and logs do.
func (l Level) String() string {
	switch l {
	case None:
		return "none"
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return "unknown"
}

// Grant is what an authorizer resolved for one caller and repository:
// the caller's level and what serving the request needs to know.
type Grant struct {
	// RepoID is the repository's write-ahead-log id.
	RepoID string
	// Level is the caller's right on it.
	Level Level
	// Principal names the caller for the log's pushed-by field and for
	// push-protection bypasses ("" when anonymous).
	Principal string
	// Actor is the caller's tenant name, bare ("" when anonymous): whom
	// a branch rule's pushers name.
	Actor string
	// Tenant owns the repository (for push protection's alerts).
	Tenant string
	// Name is the repository's name as displayed (for webhook payloads).
	Name string
	// PushProtection is the repository's setting
	// (docs/adr/0031-push-protection.md).
	PushProtection bool
	// AllowReplaceRefs is the repository's setting: pushes may update
	// refs/replace/* (docs/adr/0031-push-protection.md).
	AllowReplaceRefs bool
	// AllowMissingLFS is the repository's setting: pushes may name Git
	// LFS objects it does not hold (a mirror).
	AllowMissingLFS bool
	// LFSScanAfterPush is the repository's setting: Git LFS objects too
	// large for push protection's budget are left to the scan run.
	LFSScanAfterPush bool
	// DefaultBranch is the repository's setting: the branch HEAD names,
	// without refs/heads/ ("" when unset; docs/adr/0110-default-branch.md).
	DefaultBranch string
	// BranchRules are the repository's protected branches
	// (docs/adr/0123-protected-branches.md).
	BranchRules []BranchRule
}

// The errors of an authorization. An authorizer returns ErrNotFound for
// a repository that does not exist, ErrUnauthenticated for a credential
// that is not valid and ErrUnavailable when the rights could not be
// decided (a storage outage: refuse and say retry, never answer as if
// the repository did not exist). Decide returns ErrNotFound,
// ErrUnauthenticated and ErrForbidden.
var (
	ErrNotFound        = errors.New("repository not found")
	ErrUnauthenticated = errors.New("authentication required")
	ErrForbidden       = errors.New("permission denied")
	ErrUnavailable     = errors.New("authorization unavailable")
)

// Decide says whether a caller holding level may fetch (write false) or
// push (write true); anonymous is a caller without a credential.
//
//   - A push needs Write. An anonymous push is ErrUnauthenticated before
//     anything else, whether or not the repository exists; an unreadable
//     repository is ErrNotFound; a readable one ErrForbidden.
//   - A fetch needs Read. Without it an anonymous caller gets
//     ErrUnauthenticated (the transport may prompt for a credential or
//     answer not found) and an authenticated one ErrNotFound.
//
// A private repository the caller cannot read is thus indistinguishable
// from one that does not exist: pass None for a missing repository.
func Decide(level Level, anonymous, write bool) error {
	if write {
		switch {
		case anonymous:
			return ErrUnauthenticated
		case level < Read:
			return ErrNotFound
		case level < Write:
			return ErrForbidden
		}
		return nil
	}
	switch {
	case level >= Read:
		return nil
	case anonymous:
		return ErrUnauthenticated
	}
	return ErrNotFound
}

// BranchRule protects the branches whose names match Pattern
// (docs/adr/0123-protected-branches.md). A rule with only a pattern
// refuses force-pushes and deletions, as GitHub's protection does by
// default; other pushes by writers pass.
type BranchRule struct {
	// Pattern matches branch names without refs/heads/, as path.Match
	// does: "main", "release/*" ('*' does not cross a '/').
	Pattern string `json:"pattern"`
	// RequirePullRequest lets only the merge of a pull request change a
	// matching branch: every direct push (create, update, delete) is
	// refused.
	RequirePullRequest bool `json:"require_pull_request,omitempty"`
	// AllowForcePushes lets a push move the branch to a commit that does
	// not descend from where it was.
	AllowForcePushes bool `json:"allow_force_pushes,omitempty"`
	// AllowDeletions lets a push delete the branch.
	AllowDeletions bool `json:"allow_deletions,omitempty"`
	// Pushers, when set, are the only tenants whose pushes may change a
	// matching branch (the merge of a pull request, by a writer, still
	// may).
	Pushers []string `json:"pushers,omitempty"`
	// RequiredApprovals is how many approving reviews, by writers other
	// than its author, a pull request into a matching branch needs
	// before it merges; a change requested by a writer blocks it until
	// that writer approves (docs/adr/0127-pull-request-reviews.md).
	RequiredApprovals int `json:"required_approvals,omitempty"`
	// DismissStaleApprovals counts only the approvals (and change
	// requests) given on the head being merged: a push to the head
	// dismisses the earlier ones.
	DismissStaleApprovals bool `json:"dismiss_stale_approvals,omitempty"`
	// RequireLastPushApproval, when approvals are required, counts no
	// approval by the person who pushed the head's last commit, so that a
	// writer cannot push to someone else's pull request, approve and
	// merge (GitHub's "require approval of the most recent reviewable
	// push"). Unset means on: rules stored before it existed get it
	// (docs/adr/0134-last-push-approval.md). LastPushApproval reads it.
	RequireLastPushApproval *bool `json:"require_last_push_approval,omitempty"`
}

// LastPushApproval reports whether r holds a merge until someone other
// than the head's last pusher approves: on by default wherever r requires
// approvals.
func (r BranchRule) LastPushApproval() bool {
	return r.RequiredApprovals > 0 && (r.RequireLastPushApproval == nil || *r.RequireLastPushApproval)
}

// Matches reports whether branch (without refs/heads/) is one r
// protects.
func (r BranchRule) Matches(branch string) bool {
	ok, err := path.Match(r.Pattern, branch)
	return ok && err == nil
}

// Equal reports whether r and o say the same.
func (r BranchRule) Equal(o BranchRule) bool {
	return r.Pattern == o.Pattern && r.RequirePullRequest == o.RequirePullRequest && r.AllowForcePushes == o.AllowForcePushes &&
		r.AllowDeletions == o.AllowDeletions && slices.Equal(r.Pushers, o.Pushers) &&
		r.RequiredApprovals == o.RequiredApprovals && r.DismissStaleApprovals == o.DismissStaleApprovals &&
		r.LastPushApproval() == o.LastPushApproval()
}

// RuleFor returns the rule of rules that protects branch (without
// refs/heads/): the first that matches it.
func RuleFor(rules []BranchRule, branch string) (BranchRule, bool) {
	for _, r := range rules {
		if r.Matches(branch) {
			return r, true
		}
	}
	return BranchRule{}, false
}
