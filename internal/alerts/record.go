package alerts

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// recordVersion is written into every alert record; readers refuse
// versions they do not know rather than misread them.
const recordVersion = 1

// record is an alert as stored. It is the only place the secret lives
// (docs/adr/0070-alert-store.md): alert() drops it.
type record struct {
	V           int    `json:"v"`
	Tenant      string `json:"tenant"`
	RepoID      string `json:"repo_id"`
	Fingerprint string `json:"fingerprint"`

	RuleID      string   `json:"rule_id"`
	Description string   `json:"description,omitempty"`
	Rules       []string `json:"rules"`
	Redacted    string   `json:"redacted,omitempty"`
	Secret      string   `json:"secret,omitempty"`

	State      State      `json:"state"`
	Resolution Resolution `json:"resolution,omitempty"`
	ResolvedBy string     `json:"resolved_by,omitempty"`
	ResolvedAt time.Time  `json:"resolved_at,omitzero"`
	Comment    string     `json:"comment,omitempty"`

	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`

	// Gen counts the record's writes; StateGen is the Gen of the write
	// that set State. The per-state index names both (states.go). Records
	// written before the index have neither (0).
	Gen      uint64 `json:"gen,omitempty"`
	StateGen uint64 `json:"state_gen,omitempty"`

	Locations []locationRecord `json:"locations"`
	Truncated bool             `json:"locations_truncated,omitempty"`
	Bypasses  []bypassRecord   `json:"bypasses,omitempty"`
	History   []eventRecord    `json:"history,omitempty"`
}

type locationRecord struct {
	Commit    string    `json:"commit,omitempty"`
	Path      string    `json:"path"`
	Line      int       `json:"line"`
	Column    int       `json:"column,omitempty"`
	BlobID    string    `json:"blob"`
	Source    string    `json:"source,omitempty"`
	Ref       string    `json:"ref,omitempty"`
	RuleID    string    `json:"rule_id"`
	Match     string    `json:"match,omitempty"`
	FirstSeen time.Time `json:"first_seen"`
	Seq       uint64    `json:"seq,omitempty"`
	RunID     string    `json:"run_id,omitempty"`
}

type bypassRecord struct {
	ID     string       `json:"id"`
	By     string       `json:"by"`
	Reason BypassReason `json:"reason"`
	At     time.Time    `json:"at"`
	Commit string       `json:"commit,omitempty"`
	Path   string       `json:"path,omitempty"`
	Line   int          `json:"line,omitempty"`
	Source string       `json:"source,omitempty"`
	Ref    string       `json:"ref,omitempty"`
}

type eventRecord struct {
	ID         string     `json:"id"`
	At         time.Time  `json:"at"`
	By         string     `json:"by"`
	State      State      `json:"state"`
	Resolution Resolution `json:"resolution,omitempty"`
	Comment    string     `json:"comment,omitempty"`
}

// place is the deduplication key of a location (see Location).
type place struct {
	blob   string
	path   string
	line   int
	column int
}

func (l *locationRecord) place() place { return place{l.BlobID, l.Path, l.Line, l.Column} }

// size is what the location adds to its record, about.
func (l *locationRecord) size() int {
	return 160 + len(l.Commit) + len(l.Path) + len(l.BlobID) + len(l.Ref) + len(l.RuleID) + len(l.Match) + len(l.RunID)
}

func (r *record) alert() Alert {
	a := Alert{
		Tenant: r.Tenant, RepoID: r.RepoID, Fingerprint: r.Fingerprint,
		RuleID: r.RuleID, Description: r.Description, Rules: slices.Clone(r.Rules), Redacted: r.Redacted,
		State: r.State, Resolution: r.Resolution, ResolvedBy: r.ResolvedBy, ResolvedAt: r.ResolvedAt, Comment: r.Comment,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		LocationsTruncated: r.Truncated,
		LocationCount:      len(r.Locations),
		HasSecret:          r.Secret != "",
	}
	a.Locations = make([]Location, 0, len(r.Locations))
	for _, l := range r.Locations {
		a.Locations = append(a.Locations, Location(l))
	}
	for _, b := range r.Bypasses {
		a.Bypasses = append(a.Bypasses, Bypass(b))
	}
	for _, e := range r.History {
		a.History = append(a.History, Event(e))
	}
	return a
}

func encodeRecord(r *record) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode alert record: %w", err)
	}
	if len(b) > maxRecordBytes {
		return nil, fmt.Errorf("alert record %s is %d bytes, more than the %d allowed", r.Fingerprint, len(b), maxRecordBytes)
	}
	return b, nil
}

// decodeRecord parses and checks a stored alert. It refuses anything a
// writer of this package could not have written, so that a corrupt or
// hand-edited record is reported rather than served: an unknown version,
// state or resolution, a malformed fingerprint, duplicate locations.
func decodeRecord(b []byte) (*record, error) {
	if len(b) > maxRecordBytes {
		return nil, fmt.Errorf("alert record of %d bytes, more than the %d allowed", len(b), maxRecordBytes)
	}
	var hdr struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(b, &hdr); err != nil {
		return nil, err
	}
	if hdr.V != recordVersion {
		return nil, fmt.Errorf("alert record version %d, this build reads %d", hdr.V, recordVersion)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	return &r, nil
}

// check validates a decoded record's invariants.
func (r *record) check() error {
	if !validFingerprint(r.Fingerprint) {
		return fmt.Errorf("fingerprint %q: want 64 lowercase hex digits", r.Fingerprint)
	}
	if r.Tenant == "" || r.RepoID == "" || r.RuleID == "" {
		return fmt.Errorf("alert %s lacks its tenant, repository or rule", r.Fingerprint)
	}
	switch r.State {
	case StateOpen:
		if r.Resolution != "" {
			return fmt.Errorf("alert %s is open with resolution %q", r.Fingerprint, r.Resolution)
		}
	case StateResolved:
		if !r.Resolution.valid() {
			return fmt.Errorf("alert %s is resolved with resolution %q", r.Fingerprint, r.Resolution)
		}
	default:
		return fmt.Errorf("alert %s has state %q", r.Fingerprint, r.State)
	}
	if len(r.Locations) > MaxLocations || len(r.History) > MaxHistory || len(r.Bypasses) > MaxHistory {
		return fmt.Errorf("alert %s holds more locations or history than allowed", r.Fingerprint)
	}
	seen := make(map[place]bool, len(r.Locations))
	for i := range r.Locations {
		switch r.Locations[i].Source {
		case SourceFile, SourceCommitMessage, SourceTagMessage:
		default:
			return fmt.Errorf("alert %s has a location of source %q", r.Fingerprint, r.Locations[i].Source)
		}
		p := r.Locations[i].place()
		if seen[p] {
			return fmt.Errorf("alert %s lists the location %s:%d:%d twice", r.Fingerprint, p.path, p.line, p.column)
		}
		seen[p] = true
	}
	for _, e := range r.History {
		if e.ID == "" || (e.State != StateOpen && e.State != StateResolved) {
			return fmt.Errorf("alert %s has a malformed history event", r.Fingerprint)
		}
	}
	for _, by := range r.Bypasses {
		if by.ID == "" || !by.Reason.valid() {
			return fmt.Errorf("alert %s has a malformed bypass", r.Fingerprint)
		}
	}
	return nil
}

// validFingerprint reports whether s is the hex of a SHA-256 HMAC, in
// lowercase, the one spelling keys use.
func validFingerprint(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
