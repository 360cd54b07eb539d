package hooks

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/ids"
	"github.com/ghost-scm/ghost/internal/webhook"
)

// The errors of the hook store. The API maps them to statuses.
var (
	// ErrInvalid reports a hook definition or argument that is not valid;
	// nothing was changed.
	ErrInvalid = errors.New("invalid hook")
	// ErrNotFound reports a hook, delivery or scope that does not exist.
	ErrNotFound = errors.New("hook not found")
	// ErrLimit reports a scope that holds MaxHooks hooks already.
	ErrLimit = fmt.Errorf("%w: too many hooks", ErrInvalid)
	// ErrUnavailable reports a storage failure: retry.
	ErrUnavailable = errors.New("hook storage unavailable")
)

// Bounds of a hook definition.
const (
	// MaxHooks is how many hooks one repository, or one tenant, holds.
	// GitHub allows 20; ghost allows more so that one repository can feed
	// many receivers, and the set of a scope is still one record.
	MaxHooks = 1000
	// MaxURLBytes bounds a hook's URL.
	MaxURLBytes = 1024
	// MaxSecretBytes bounds a hook's secret.
	MaxSecretBytes = 1024
)

// The events a hook may subscribe to. Their names and payloads are
// GitHub's where GitHub has the event (docs/adr/0105-webhook-delivery.md).
const (
	EventPush       = "push"
	EventCreate     = "create"
	EventDelete     = "delete"
	EventRepository = "repository"
	EventAlert      = "secret_scanning_alert"
	// EventScanRun is ghost's own: a secret-scanning run completed.
	EventScanRun = "scan_run"
	// EventPullRequest is GitHub's pull_request: opened, edited, closed
	// (merged or not), reopened, synchronize.
	EventPullRequest = "pull_request"
	// EventIssueComment is GitHub's issue_comment: a comment on a pull
	// request's conversation created, edited or deleted.
	EventIssueComment = "issue_comment"
	// EventPullRequestReview is GitHub's pull_request_review: a review
	// submitted, edited or dismissed.
	EventPullRequestReview = "pull_request_review"
	// EventPullRequestReviewComment is GitHub's
	// pull_request_review_comment: a line comment created, edited or
	// deleted.
	EventPullRequestReviewComment = "pull_request_review_comment"
	// EventPing is sent when a hook is created and on request; every hook
	// gets it, whatever its events.
	EventPing = "ping"
	// EventAll subscribes to every event.
	EventAll = "*"
)

// Events lists the events a hook may name.
var Events = []string{EventPush, EventCreate, EventDelete, EventRepository, EventAlert, EventScanRun, EventPullRequest,
	EventIssueComment, EventPullRequestReview, EventPullRequestReviewComment, EventAll}

// logEvents are the events derived from the log's entries: a hook
// subscribed to one of them follows the log with a watermark.
var logEvents = []string{EventPush, EventCreate, EventDelete}

// Scope is what a hook belongs to: one repository, or every repository
// of a tenant (an organization's hooks, or a user's).
type Scope struct {
	// Tenant owns the scope (the repository's owner), as displayed.
	Tenant string
	// Repo is the repository's log id; empty for a tenant's hook.
	Repo string
	// Name is the repository's name as displayed (a repository scope).
	Name string
}

// IsRepo reports a repository's scope.
func (s Scope) IsRepo() bool { return s.Repo != "" }

// String names the scope as users do: "owner/name" or "owner".
func (s Scope) String() string {
	if s.IsRepo() {
		return s.Tenant + "/" + s.Name
	}
	return s.Tenant
}

func (s Scope) check() error {
	if err := ids.ValidateName(s.Tenant); err != nil {
		return fmt.Errorf("%w: tenant: %w", ErrInvalid, err)
	}
	if s.Repo == "" {
		return nil
	}
	if err := ids.CheckRepoID(s.Repo); err != nil {
		return fmt.Errorf("%w: repository id: %w", ErrInvalid, err)
	}
	if err := ids.ValidateName(s.Name); err != nil {
		return fmt.Errorf("%w: repository name: %w", ErrInvalid, err)
	}
	return nil
}

// setKey is where the scope's hooks live: one record for all of them.
func (s Scope) setKey() string {
	if s.IsRepo() {
		return setsPrefix + "r/" + s.Repo
	}
	return setsPrefix + "t/" + strings.ToLower(s.Tenant)
}

// Hook is one hook as the API shows it. Its secret never leaves the
// store but as SecretSet.
type Hook struct {
	ID          int64
	Scope       Scope
	URL         string
	SecretSet   bool
	InsecureSSL bool
	Events      []string
	Active      bool
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// Failures counts the events given up on in a row; DisabledReason says
	// why the dispatcher turned the hook off, when it did.
	Failures       int
	DisabledReason string
}

// Key names the hook across scopes (hookKey).
func (h Hook) Key() string { return hookKey(h.Scope, h.ID) }

// hookKey is one key segment naming a hook of a scope:
// "r.<repoID>.<id>" or "t.<tenant>.<id>".
func hookKey(s Scope, id int64) string {
	if s.IsRepo() {
		return "r." + s.Repo + "." + strconv.FormatInt(id, 10)
	}
	return "t." + strings.ToLower(s.Tenant) + "." + strconv.FormatInt(id, 10)
}

// parseHookKey returns the set key and the id a hook key names.
func parseHookKey(k string) (set string, id int64, ok bool) {
	kind, rest, found := strings.Cut(k, ".")
	if !found {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return "", 0, false
	}
	owner, num := rest[:i], rest[i+1:]
	id, err := strconv.ParseInt(num, 10, 64)
	if err != nil || id <= 0 {
		return "", 0, false
	}
	switch kind {
	case "r":
		if ids.CheckRepoID(owner) != nil {
			return "", 0, false
		}
		return setsPrefix + "r/" + owner, id, true
	case "t":
		if ids.ValidateName(owner) != nil || owner != strings.ToLower(owner) {
			return "", 0, false
		}
		return setsPrefix + "t/" + owner, id, true
	}
	return "", 0, false
}

// Input is a hook's definition as a caller gives it; nil fields keep
// what the hook has (on create: their defaults).
type Input struct {
	URL         *string
	Secret      *string
	ContentType *string
	InsecureSSL *bool
	Events      []string // nil keeps; on create, nil means ["push"]
	Active      *bool
}

// checkURL validates a hook URL: http or https, a host, no credentials
// or fragment, at most MaxURLBytes. A literal address the policy refuses
// is refused here already; names are checked when a delivery connects
// (webhook.Policy, after resolution).
func checkURL(raw string, policy webhook.Policy) error {
	if raw == "" {
		return fmt.Errorf("%w: config.url is required", ErrInvalid)
	}
	if len(raw) > MaxURLBytes {
		return fmt.Errorf("%w: config.url is longer than %d bytes", ErrInvalid, MaxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: config.url is not a URL", ErrInvalid)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: config.url: want an http or https URL", ErrInvalid)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%w: config.url has no host", ErrInvalid)
	case u.User != nil:
		return fmt.Errorf("%w: config.url holds credentials: use config.secret to authenticate deliveries", ErrInvalid)
	case u.Fragment != "":
		return fmt.Errorf("%w: config.url has a fragment", ErrInvalid)
	}
	for _, c := range raw {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: config.url holds a control character", ErrInvalid)
		}
	}
	if a, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		if err := policy.Check(a); err != nil {
			return fmt.Errorf("%w: config.url: %w", ErrInvalid, err)
		}
	}
	return nil
}

// checkEvents validates and normalizes an events list: known names,
// each once, sorted; "*" alone stands for all.
func checkEvents(evs []string) ([]string, error) {
	if len(evs) == 0 {
		return nil, fmt.Errorf("%w: events: name at least one of %s", ErrInvalid, strings.Join(Events, ", "))
	}
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		if !slices.Contains(Events, e) {
			return nil, fmt.Errorf("%w: events: unknown event %q; known: %s", ErrInvalid, e, strings.Join(Events, ", "))
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	if slices.Contains(out, EventAll) {
		return []string{EventAll}, nil
	}
	slices.Sort(out)
	return out, nil
}

// subscribed reports whether a hook with events evs gets event ev. Every
// hook gets pings.
func subscribed(evs []string, ev string) bool {
	return ev == EventPing || slices.Contains(evs, ev) || slices.Contains(evs, EventAll)
}

// followsLog reports whether a hook with events evs needs the log's
// events (push, create, delete).
func followsLog(evs []string) bool {
	return slices.ContainsFunc(logEvents, func(e string) bool { return subscribed(evs, e) })
}
