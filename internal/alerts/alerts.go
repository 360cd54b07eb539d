// Package alerts stores secret-scanning alerts: one per (repository,
// fingerprint of a secret), holding every place the secret was found, its
// state (open, or resolved with a reason, as GitHub's secret-scanning
// alerts are) and the push-protection bypasses that let it in
// (docs/design.md §10.1, §10.2).
//
// Alerts are small JSON records in the same object store as the logs and
// the metadata, so serving them depends on object storage alone, like the
// rest of the metadata (docs/design.md §6.5, §7):
//
//	meta/alerts/<tenant>/<repoID>/<fingerprint-hex>   one alert
//	meta/alertkeys/<tenant>                           the tenant's fingerprint key
//
// Every change is a read-modify-write with PutIfAbsent or PutIfMatch, so
// racing recorders on different nodes need no lock, and every change is
// idempotent: recording the same findings twice, or re-sending a write
// whose outcome was unknown (docs/adr/0006-write-outcomes.md), changes
// nothing the second time. See docs/adr/0070-alert-store.md.
//
// The scan engine (package secretscan, issue 11) has its own Finding type;
// a thin adapter converts it to this package's Finding, so that this
// package depends on no engine. Fingerprints agree: both are the hex
// HMAC-SHA256 of the secret under the tenant's key (FingerprintKey), which
// the worker hands to the engine.
package alerts

import (
	"errors"
	"fmt"
	"time"
)

// ErrNotFound reports an alert that does not exist.
var ErrNotFound = errors.New("alert not found")

// ErrInvalidArgument reports malformed input: a finding without a secret
// or fingerprint, an unknown state or resolution, a bad page token. No
// record was changed.
var ErrInvalidArgument = errors.New("invalid argument")

// ErrContention reports a change that lost its compare-and-swap on every
// attempt. Nothing of it applied; the caller may retry, as every change
// is idempotent.
var ErrContention = errors.New("alert changed concurrently too often; try again")

// ErrCorrupt reports a stored alert record that does not decode or breaks
// its invariants. Retrying does not help; it is reported, never served.
var ErrCorrupt = errors.New("corrupt alert record")

// ErrNoSecret reports an alert recorded from fingerprints only, whose
// secret is not stored, so Reveal has nothing to show.
var ErrNoSecret = errors.New("the alert's secret was not recorded")

// State is an alert's state, as in GitHub's secret-scanning alerts: open,
// or resolved with a Resolution.
type State string

// The states.
const (
	StateOpen     State = "open"
	StateResolved State = "resolved"
)

// Resolution says why a resolved alert was closed.
type Resolution string

// The resolutions, GitHub's names.
const (
	ResolutionRevoked       Resolution = "revoked"
	ResolutionFalsePositive Resolution = "false_positive"
	ResolutionUsedInTests   Resolution = "used_in_tests"
	ResolutionWontFix       Resolution = "wont_fix"
)

func (r Resolution) valid() bool {
	switch r {
	case ResolutionRevoked, ResolutionFalsePositive, ResolutionUsedInTests, ResolutionWontFix:
		return true
	}
	return false
}

// BypassReason is why a pusher let a secret past push protection
// (docs/design.md §10.2), GitHub's reasons.
type BypassReason string

// The bypass reasons.
const (
	BypassFalsePositive BypassReason = "false_positive"
	BypassUsedInTests   BypassReason = "used_in_tests"
	BypassWillFixLater  BypassReason = "will_fix_later"
)

func (r BypassReason) valid() bool {
	switch r {
	case BypassFalsePositive, BypassUsedInTests, BypassWillFixLater:
		return true
	}
	return false
}

// resolution is the state a bypass gives an alert it creates: GitHub
// closes it for "false positive" and "used in tests" and leaves it open
// for "will fix later".
func (r BypassReason) resolution() (State, Resolution) {
	switch r {
	case BypassFalsePositive:
		return StateResolved, ResolutionFalsePositive
	case BypassUsedInTests:
		return StateResolved, ResolutionUsedInTests
	}
	return StateOpen, ""
}

// Limits on what one alert holds, so a record stays small enough to read
// whole (docs/adr/0070-alert-store.md).
const (
	// MaxSecretBytes bounds a finding's secret.
	MaxSecretBytes = 4 << 10
	// MaxLocations bounds the locations an alert keeps. Further ones are
	// dropped and the alert says so (LocationsTruncated): a secret found in
	// thousands of places needs revoking, not a longer list.
	MaxLocations = 1000
	// MaxHistory bounds the state changes and bypasses an alert keeps;
	// the oldest are dropped first.
	MaxHistory = 100
	// maxField bounds every other string of a finding or a change. A
	// finding's free text (path, match, description, ref) beyond it is
	// cut and ends in TruncatedMarker; an identifier beyond it makes the
	// finding invalid.
	maxField = 4 << 10
	// maxLocationBytes bounds the bytes an alert's locations hold, so that
	// a thousand locations with the longest paths still fit in a record;
	// beyond it, as beyond MaxLocations, locations are dropped and the
	// alert says so.
	maxLocationBytes = 768 << 10
	// maxRecordBytes bounds an alert record read from the store.
	maxRecordBytes = 2 << 20
)

// TruncatedMarker ends a finding's path, match, description or ref that
// was longer than the store keeps.
const TruncatedMarker = "…[truncated]"

// Sources of a finding: a file (a blob at a path), or a commit or tag
// object (its headers and message), as the scan engine names them.
const (
	SourceFile          = ""
	SourceCommitMessage = "commit-message"
	SourceTagMessage    = "tag-message"
)

// Finding is one secret at one place, the input of Record. It is this
// package's own type; the scan engine's findings are converted by an
// adapter (see the package comment). For secretscan.Finding the mapping
// is field for field (StartLine to Line, StartColumn to Column), and its
// Fingerprint is made under FingerprintKey; that engine hands out no
// clear-text secret today, so its alerts have nothing to reveal until it
// does (Secret below).
type Finding struct {
	RuleID      string
	Description string // of the rule
	// Commit is the commit whose diff added the secret, or whose message
	// holds it; empty when none does (a blob reached only through a tag,
	// or through no ref: Ref then says which ref reaches it, if any).
	Commit string
	Path   string
	Line   int // 1-based
	Column int // 1-based; 0 if unknown
	// BlobID is the object that holds the secret: a blob, or the commit
	// or tag object of a message finding.
	BlobID string
	// Source is SourceFile, SourceCommitMessage or SourceTagMessage.
	Source string
	// Ref names a ref that reaches a finding no commit adds.
	Ref string
	// Match is the matched text with the secret redacted. It is what
	// lists show.
	Match string
	// Secret is the clear-text secret, kept for Reveal. It may be empty
	// when Fingerprint is set (an engine that does not hand secrets out);
	// the alert then has nothing to reveal until a finding with the
	// secret arrives.
	Secret string
	// Fingerprint is the hex HMAC-SHA256 of Secret under the tenant's
	// FingerprintKey. Optional when Secret is set, and then it must agree.
	Fingerprint string
}

// RunRef names the scan run that produced findings: its id in the
// coordinator and the repository seq it scanned (docs/design.md §10.1).
type RunRef struct {
	ID  string
	Seq uint64
}

// Location is one place a secret was found. Locations are deduplicated by
// (BlobID, Path, Line, Column): the same blob at the same path is the same
// place whichever commit a scan attributes it to, so a push scan and a
// later full-history scan never list it twice.
type Location struct {
	Commit    string
	Path      string
	Line      int
	Column    int
	BlobID    string
	Source    string // as Finding.Source
	Ref       string // as Finding.Ref
	RuleID    string
	Match     string // redacted
	FirstSeen time.Time
	Seq       uint64 // of the run that found it first; 0 for a push-protection bypass
	RunID     string
}

// Where names the location for people, on one line: "path:line" for a
// file a commit added, "commit message of <id>, line N" (or "tag
// message"), "path:line in blob <id>, reached from <ref>" for a blob no
// commit adds, and "blob <id>, line N, reached from no ref" for one no
// ref reaches any more.
func (l Location) Where() string {
	switch {
	case l.Source == SourceCommitMessage:
		return fmt.Sprintf("commit message of %s, line %d", l.BlobID, l.Line)
	case l.Source == SourceTagMessage:
		return fmt.Sprintf("tag message of %s, line %d", l.BlobID, l.Line)
	case l.Commit != "":
		return fmt.Sprintf("%s:%d", l.Path, l.Line)
	case l.Ref == "" && l.Path == "":
		return fmt.Sprintf("blob %s, line %d, reached from no ref", l.BlobID, l.Line)
	case l.Ref == "":
		return fmt.Sprintf("%s:%d in blob %s, reached from no ref", l.Path, l.Line, l.BlobID)
	case l.Path == "":
		return fmt.Sprintf("blob %s, line %d, reached from %s", l.BlobID, l.Line, l.Ref)
	}
	return fmt.Sprintf("%s:%d in blob %s, reached from %s", l.Path, l.Line, l.BlobID, l.Ref)
}

// Bypass records one push-protection bypass of the alert's secret.
type Bypass struct {
	ID     string // random; makes a resent bypass recognisable
	By     string
	Reason BypassReason
	At     time.Time
	Commit string
	Path   string
	Line   int
	Source string // as Finding.Source
	Ref    string // as Finding.Ref
}

// Event is one state change, kept in the alert's history.
type Event struct {
	ID         string // random; makes a resent change recognisable
	At         time.Time
	By         string
	State      State
	Resolution Resolution
	Comment    string
}

// Alert is one secret in one repository. It never carries the secret
// itself: only Reveal returns that, so no list can show it by accident.
type Alert struct {
	Tenant      string // lowercase tenant name
	RepoID      string // the repository's log id (docs/design.md §7.5)
	Fingerprint string // hex HMAC-SHA256 of the secret; the alert's id
	// RuleID and Description are of the first rule that found it; Rules
	// lists every rule that did.
	RuleID      string
	Description string
	Rules       []string
	Redacted    string // the first location's redacted match

	State      State
	Resolution Resolution // set when State is StateResolved
	ResolvedBy string
	ResolvedAt time.Time
	Comment    string // of the last state change

	CreatedAt time.Time
	UpdatedAt time.Time

	Locations []Location
	// LocationCount is how many locations the alert holds: more than
	// Locations in a List (see ListLocations).
	LocationCount      int
	LocationsTruncated bool
	Bypasses           []Bypass
	History            []Event
	// HasSecret reports whether Reveal can show the secret.
	HasSecret bool
}

// Change is a state change for SetState.
type Change struct {
	State      State
	Resolution Resolution // required for StateResolved, empty for StateOpen
	By         string     // who; required
	Comment    string
}

func (c Change) check() error {
	if c.By == "" {
		return fmt.Errorf("%w: a state change needs who made it", ErrInvalidArgument)
	}
	if len(c.By) > maxField || len(c.Comment) > maxField {
		return fmt.Errorf("%w: by or comment longer than %d bytes", ErrInvalidArgument, maxField)
	}
	switch c.State {
	case StateOpen:
		if c.Resolution != "" {
			return fmt.Errorf("%w: an open alert has no resolution (got %q)", ErrInvalidArgument, c.Resolution)
		}
	case StateResolved:
		if !c.Resolution.valid() {
			return fmt.Errorf("%w: resolution %q: want revoked, false_positive, used_in_tests or wont_fix", ErrInvalidArgument, c.Resolution)
		}
	default:
		return fmt.Errorf("%w: state %q: want open or resolved", ErrInvalidArgument, c.State)
	}
	return nil
}

// Filter selects alerts for List.
type Filter struct {
	Tenant string // required
	// RepoID limits the list to one repository; empty lists the tenant's.
	RepoID string
	// Repos, when not nil, limits a tenant-wide list to these repository
	// ids: the API passes the repositories the caller may read, and the
	// live ones only, so a deleted repository's alerts do not show.
	Repos map[string]bool
	State State  // empty: any
	Rule  string // empty: any; else alerts any of whose Rules is this
}

// Page is one page of List.
type Page struct {
	Alerts []Alert
	// Next is the token of the next page, empty on the last. A page may
	// hold fewer alerts than asked for, even none, while Next is set: a
	// List call examines a bounded number of records.
	Next string
}
