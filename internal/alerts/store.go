package alerts

import (
	"bytes"
	"context"
	"crypto/hmac"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ghost-scm/ghost/internal/ids"
	"github.com/ghost-scm/ghost/internal/objstore"
	pkgrecord "github.com/ghost-scm/ghost/internal/record"
)

const (
	alertsPrefix = "meta/alerts/"
	keysPrefix   = "meta/alertkeys/"
)

// maxAttempts bounds one alert's read-modify-write loop. Racing recorders
// of the same secret each win in turn, so the bound is well above the
// number of workers that plausibly record one secret at once.
const maxAttempts = 64

// Store is the alert store. It is safe for concurrent use. It caches only
// the tenants' fingerprint keys, which never change once written.
type Store struct {
	objects objstore.Store
	now     func() time.Time
	newID   func() string
	// The bounds of one List call (see List); fields so tests can make
	// them small.
	maxExamined  int
	maxListed    int
	maxReadBytes int64
	maxPageBytes int64

	mu   sync.Mutex
	keys map[string][]byte // tenant -> fingerprint key

	states stateIndex

	// notify, when set, hears of every alert created, resolved or
	// reopened, and of every push-protection bypass (SetNotify).
	notify func(ctx context.Context, n Notice)
}

// Notice is a change of an alert that others are told of (webhooks:
// GitHub's secret_scanning_alert event). Alert never carries the secret.
type Notice struct {
	// Action is GitHub's: "created", "resolved" or "reopened"; a bypass
	// of push protection on an alert that existed already is
	// "push_protection_bypassed" (a new one is "created", with Bypass set).
	Action string
	Alert  Alert
	// By is who made the change ("" for a scan's finding).
	By string
	// Bypass is the push-protection bypass that caused the notice, if one did.
	Bypass *Bypass
	// ID names the change, the same however often it is told.
	ID string
}

// SetNotify makes fn hear of alert changes from now on, once each, after
// they landed. Call it before the store is shared. A change whose write's
// outcome could not be learned is not told.
func (s *Store) SetNotify(fn func(ctx context.Context, n Notice)) { s.notify = fn }

func (s *Store) tell(ctx context.Context, n Notice) {
	if s.notify == nil {
		return
	}
	n.Alert.Locations, n.Alert.History = nil, nil // not needed, and bounded elsewhere
	s.notify(ctx, n)
}

// New returns a Store keeping alerts in objects, normally the store that
// holds the logs and the metadata.
func New(objects objstore.Store) *Store {
	return &Store{
		objects: objects,
		now:     func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) },
		newID: func() string {
			var b [16]byte
			_, _ = crand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
			return hex.EncodeToString(b[:])
		},
		keys:         make(map[string][]byte),
		maxExamined:  defaultMaxExamined,
		maxListed:    defaultMaxListed,
		maxReadBytes: defaultMaxReadBytes,
		maxPageBytes: defaultMaxPageBytes,
	}
}

// tenantKey checks and lowercases a tenant name: keys use the lowercase
// form, as meta's do (docs/adr/0020-meta-namespace.md).
func tenantKey(tenant string) (string, error) {
	if err := ids.ValidateName(tenant); err != nil {
		return "", fmt.Errorf("%w: tenant %q: %w", ErrInvalidArgument, tenant, err)
	}
	return strings.ToLower(tenant), nil
}

func checkRepoID(repoID string) error {
	if err := ids.CheckRepoID(repoID); err != nil {
		return fmt.Errorf("%w: repository id: %w", ErrInvalidArgument, err)
	}
	return nil
}

func repoPrefix(t, repoID string) string { return alertsPrefix + t + "/" + repoID + "/" }

func alertKey(t, repoID, fp string) string { return repoPrefix(t, repoID) + fp }

// ref is a checked (tenant, repository, fingerprint).
type ref struct{ tenant, repo, fp string }

func (r ref) key() string { return alertKey(r.tenant, r.repo, r.fp) }

func newRef(tenant, repoID, fp string) (ref, error) {
	t, err := tenantKey(tenant)
	if err != nil {
		return ref{}, err
	}
	if err := checkRepoID(repoID); err != nil {
		return ref{}, err
	}
	fp = strings.ToLower(fp)
	if !validFingerprint(fp) {
		return ref{}, fmt.Errorf("%w: alert id %q: want 64 hex digits", ErrNotFound, fp)
	}
	return ref{t, repoID, fp}, nil
}

// FingerprintKey returns the tenant's HMAC key for fingerprints, creating
// it on first use. A per-tenant key makes a fingerprint stable within a
// tenant (so equal secrets in its repositories share an id) while equal
// secrets of two tenants cannot be correlated (docs/design.md §10.1). A
// scan worker hands it to the engine.
//
// The key is created with PutIfAbsent; after any failure the stored key is
// read back and used, whoever wrote it, so racing creators agree. The
// caller gets its own copy.
func (s *Store) FingerprintKey(ctx context.Context, tenant string) ([]byte, error) {
	t, err := tenantKey(tenant)
	if err != nil {
		return nil, err
	}
	k, err := s.fingerprintKey(ctx, t)
	return bytes.Clone(k), err
}

// fingerprintKey is FingerprintKey for a checked, lowercase tenant,
// without the copy.
func (s *Store) fingerprintKey(ctx context.Context, t string) ([]byte, error) {
	s.mu.Lock()
	k, ok := s.keys[t]
	s.mu.Unlock()
	if ok {
		return k, nil
	}
	key := keysPrefix + t
	kp, _, err := pkgrecord.Get(ctx, s.objects, keyCodec, key)
	if errors.Is(err, objstore.ErrNotFound) {
		// Absent: write ours; whoever wrote first, ours or another
		// node's, is the tenant's key.
		var fresh [32]byte
		_, _ = crand.Read(fresh[:])
		f := fresh[:]
		kp, err = pkgrecord.CreateOnce(ctx, s.objects, keyCodec, key, &f)
	}
	if err != nil {
		return nil, fmt.Errorf("fingerprint key of %s: %w", t, err)
	}
	s.mu.Lock()
	s.keys[t] = *kp
	s.mu.Unlock()
	return *kp, nil
}

// keyCodec stores a fingerprint key as its 32 raw bytes.
var keyCodec = pkgrecord.Codec[[]byte]{
	Encode: func(k *[]byte) ([]byte, error) { return *k, nil },
	Decode: func(b []byte, k *[]byte) error {
		if len(b) != 32 {
			return fmt.Errorf("%w: fingerprint key is %d bytes, want 32", ErrCorrupt, len(b))
		}
		*k = b
		return nil
	},
	Max: 1 << 10,
}

// Fingerprint returns the hex HMAC-SHA256 of secret under the tenant's
// key: the id of its alerts.
func (s *Store) Fingerprint(ctx context.Context, tenant, secret string) (string, error) {
	t, err := tenantKey(tenant)
	if err != nil {
		return "", err
	}
	k, err := s.fingerprintKey(ctx, t)
	if err != nil {
		return "", err
	}
	return fingerprint(k, secret), nil
}

func fingerprint(key []byte, secret string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(secret))
	return hex.EncodeToString(m.Sum(nil))
}

// read returns the record at key and its ETag; objstore.ErrNotFound
// (wrapped) when absent.
func (s *Store) read(ctx context.Context, key string) (*record, string, error) {
	b, info, err := objstore.ReadAll(ctx, s.objects, key, maxRecordBytes)
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", key, err)
	}
	r, err := decodeRecord(b)
	if err != nil {
		return nil, "", fmt.Errorf("%w %s: %w", ErrCorrupt, key, err)
	}
	return r, info.ETag, nil
}

// readSized is read for List: the record and the bytes it took.
func (s *Store) readSized(ctx context.Context, key string) (*record, int64, error) {
	b, _, err := objstore.ReadAll(ctx, s.objects, key, maxRecordBytes)
	if err != nil {
		return nil, int64(len(b)), fmt.Errorf("read %s: %w", key, err)
	}
	r, err := decodeRecord(b)
	if err != nil {
		return nil, int64(len(b)), fmt.Errorf("%w %s: %w", ErrCorrupt, key, err)
	}
	return r, int64(len(b)), nil
}

// mutation changes rec in place (rec is nil for an absent alert) and
// returns the record to write, or nil when there is nothing to change.
// It must be idempotent: applied to a record that already holds its
// change, it returns nil. That is what makes a resent write, and a
// re-read after a write of unknown outcome, safe
// (docs/adr/0006-write-outcomes.md).
type mutation func(rec *record) (*record, error)

// update runs one alert's read-modify-write loop and returns the alert as
// it stands after the change.
//
// A lost compare-and-swap (ErrPreconditionFailed) certainly did not
// apply: re-read and try again. Any other write error may have applied:
// the loop re-reads too, and the idempotent mutation finds its change
// there (done) or not (send it again). A resend is conditional on what
// was just read, so a copy that lands late can only land over that same
// state, and then the resend loses: at most one copy applies, and either
// is ours. When the attempts run out after an ambiguous write, a last
// read settles it if it can; otherwise the error matches
// objstore.ErrOutcomeUnknown. Only when every write certainly failed is
// the answer ErrContention, "nothing applied".
//
// Every write raises the record's Gen; a write that creates the record
// or changes its state puts the state's hint first (states.go), and
// fails without writing the record if it cannot. Once the change is in,
// the hint of the state it left is deleted (best effort: a lister deletes
// a stale hint it meets).
func (s *Store) update(ctx context.Context, key string, mut mutation) (*record, error) {
	opts := pkgrecord.Options{Attempts: maxAttempts, Backoff: backoffDelay}
	type hint struct {
		state State
		gen   uint64
	}
	var left []hint // the hints of states an attempt left
	indexed := func(cur *record) (*record, error) {
		var gen, stateGen uint64
		var state State
		had := commitsOf(cur) // read before mut, which may change cur in place
		if cur != nil {
			gen, stateGen, state = cur.Gen, cur.StateGen, cur.State
		}
		next, err := mut(cur)
		if err != nil || next == nil {
			return next, err
		}
		if err := s.putCommitKeys(ctx, key, had, next); err != nil {
			return nil, err
		}
		next.Gen, next.StateGen = gen+1, stateGen
		if cur == nil || next.State != state {
			next.StateGen = next.Gen
			if err := s.putHint(ctx, key, next.State, next.StateGen); err != nil {
				return nil, err
			}
			if cur != nil {
				left = append(left, hint{state, stateGen})
			}
		}
		return next, nil
	}
	r, err := pkgrecord.Update(ctx, s.objects, recordCodec, key, opts, indexed)
	if err == nil && r != nil {
		for _, h := range left {
			// Stale once the record reached its generation in another
			// state or since another change: it can never name the
			// record's state again (StateGen only grows).
			if r.Gen >= h.gen && (r.State != h.state || r.StateGen != h.gen) {
				if k, err := hintKey(key, h.state, h.gen); err == nil {
					_ = s.objects.Delete(ctx, k)
				}
			}
		}
	}
	if errors.Is(err, pkgrecord.ErrContention) {
		return nil, fmt.Errorf("%w: %w", ErrContention, err)
	}
	return r, err
}

// recordCodec stores alert records (encodeRecord, decodeRecord); a record
// that does not decode is ErrCorrupt.
var recordCodec = pkgrecord.Codec[record]{
	Encode: encodeRecord,
	Decode: func(b []byte, r *record) error {
		got, err := decodeRecord(b)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		*r = *got
		return nil
	},
	Max: maxRecordBytes,
}

// backoffDelay is the short, jittered, growing pause before another
// attempt, so racing recorders spread out.
func backoffDelay(attempt int) time.Duration {
	return time.Duration(min(attempt, 6))*time.Millisecond + time.Duration(mrand.Int64N(int64(2*time.Millisecond)))
}

// checkFinding validates a finding on its own and returns its
// fingerprint. Free text longer than the store keeps (path, match,
// description, ref) is cut in place and marked with TruncatedMarker;
// anything that cannot be cut (a missing or malformed identifier, a
// negative line, an unknown source, a secret beyond MaxSecretBytes, a
// fingerprint that is not the secret's) makes the finding invalid.
func checkFinding(key []byte, f *Finding) (string, error) {
	switch {
	case f.RuleID == "" || len(f.RuleID) > maxField:
		return "", fmt.Errorf("%w: finding without a rule id of at most %d bytes", ErrInvalidArgument, maxField)
	case !ids.IsObjectID(f.BlobID):
		return "", fmt.Errorf("%w: finding's object id %q: want 40 or 64 lowercase hex digits", ErrInvalidArgument, clip(f.BlobID, 80))
	case f.Commit != "" && !ids.IsObjectID(f.Commit):
		return "", fmt.Errorf("%w: finding's commit %q: want 40 or 64 lowercase hex digits", ErrInvalidArgument, clip(f.Commit, 80))
	case f.Line < 0 || f.Column < 0:
		return "", fmt.Errorf("%w: finding at line %d, column %d", ErrInvalidArgument, f.Line, f.Column)
	case len(f.Secret) > MaxSecretBytes:
		return "", fmt.Errorf("%w: secret longer than %d bytes", ErrInvalidArgument, MaxSecretBytes)
	}
	switch f.Source {
	case SourceFile, SourceCommitMessage, SourceTagMessage:
	default:
		return "", fmt.Errorf("%w: finding's source %q: want %q, %q or none", ErrInvalidArgument, clip(f.Source, 80), SourceCommitMessage, SourceTagMessage)
	}
	for _, s := range []*string{&f.Path, &f.Match, &f.Description, &f.Ref} {
		*s = truncateField(*s)
	}
	fp := strings.ToLower(f.Fingerprint)
	if f.Secret != "" {
		want := fingerprint(key, f.Secret)
		if fp != "" && fp != want {
			// A fingerprint made under another key would file the
			// secret under an id no other finding of it shares.
			return "", fmt.Errorf("%w: finding's fingerprint is not its secret's under the tenant's key", ErrInvalidArgument)
		}
		return want, nil
	}
	if !validFingerprint(fp) {
		return "", fmt.Errorf("%w: finding needs its secret or a fingerprint of 64 hex digits", ErrInvalidArgument)
	}
	return fp, nil
}

// truncateField cuts s to maxField bytes, at a character boundary, ending
// in TruncatedMarker.
func truncateField(s string) string {
	if len(s) <= maxField {
		return s
	}
	n := maxField - len(TruncatedMarker)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + TruncatedMarker
}

// clip shortens s for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// RejectedError reports the findings Record refused, each for a reason no
// retry mends (it matches ErrInvalidArgument), next to any other error of
// the same call (Rest, which a retry may mend). Every finding it does not
// list was recorded, or is in Rest's failures.
type RejectedError struct {
	Rejected []Rejected
	Rest     error
}

// Rejected is one refused finding: its index in Record's input, and why.
type Rejected struct {
	Index  int
	RuleID string
	Err    error
}

func (e *RejectedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d finding(s) refused", len(e.Rejected))
	for i, r := range e.Rejected {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Rejected)-i)
			break
		}
		fmt.Fprintf(&b, "; finding %d (%s): %v", r.Index, clip(r.RuleID, 80), r.Err)
	}
	if e.Rest != nil {
		fmt.Fprintf(&b, "; and: %v", e.Rest)
	}
	return b.String()
}

// Unwrap makes the error match ErrInvalidArgument and whatever Rest
// matches.
func (e *RejectedError) Unwrap() []error {
	if e.Rest == nil {
		return []error{ErrInvalidArgument}
	}
	return []error{ErrInvalidArgument, e.Rest}
}

// Record files findings in repository repoID of tenant: one alert per
// fingerprint, with every new location added. It is idempotent (a
// location already held is not added again, so a full-history scan over
// a repository already scanned adds nothing) and safe against racing
// recorders on any node. A new alert is open.
//
// Each finding is checked on its own (checkFinding): one that is invalid
// is left out and reported in a *RejectedError, and never keeps the
// others from being recorded. The alerts are written one after another;
// an error on one does not stop the others, and all errors are returned
// joined. Calling Record again with the same findings completes what
// failed.
func (s *Store) Record(ctx context.Context, tenant, repoID string, findings []Finding, run RunRef) error {
	t, err := tenantKey(tenant)
	if err != nil {
		return err
	}
	if err := checkRepoID(repoID); err != nil {
		return err
	}
	if len(findings) == 0 {
		return nil
	}
	k, err := s.fingerprintKey(ctx, t)
	if err != nil {
		return err
	}
	groups := make(map[string][]Finding)
	var order []string
	var rejected []Rejected
	for i := range findings {
		f := findings[i] // checkFinding truncates its own copy
		fp, err := checkFinding(k, &f)
		if err != nil {
			rejected = append(rejected, Rejected{Index: i, RuleID: f.RuleID, Err: err})
			continue
		}
		if _, ok := groups[fp]; !ok {
			order = append(order, fp)
		}
		groups[fp] = append(groups[fp], f)
	}
	var errs []error
	for _, fp := range order {
		r := ref{t, repoID, fp}
		now := s.now()
		created := false
		rec, err := s.update(ctx, r.key(), func(cur *record) (*record, error) {
			next := merge(cur, r, groups[fp], run, now)
			if next != nil {
				created = cur == nil // the write that lands decides
			}
			return next, nil
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if created {
			s.tell(ctx, Notice{Action: "created", Alert: rec.alert(), ID: "created/" + fp})
		}
	}
	if len(rejected) > 0 {
		return &RejectedError{Rejected: rejected, Rest: errors.Join(errs...)}
	}
	return errors.Join(errs...)
}

// merge adds fs to cur (nil: a new alert) and returns the result, or nil
// when cur already holds everything fs says.
func merge(cur *record, r ref, fs []Finding, run RunRef, now time.Time) *record {
	var next record
	changed := false
	if cur == nil {
		f := fs[0]
		next = record{
			V: recordVersion, Tenant: r.tenant, RepoID: r.repo, Fingerprint: r.fp,
			RuleID: f.RuleID, Description: f.Description, Redacted: f.Match,
			State: StateOpen, CreatedAt: now, UpdatedAt: now,
			Locations: []locationRecord{},
		}
		changed = true
	} else {
		next = *cur
		next.Rules = slices.Clone(cur.Rules)
		next.Locations = slices.Clone(cur.Locations)
	}
	have := make(map[place]bool, len(next.Locations))
	used := 0
	for i := range next.Locations {
		have[next.Locations[i].place()] = true
		used += next.Locations[i].size()
	}
	for _, f := range fs {
		if f.Secret != "" && next.Secret == "" {
			next.Secret = f.Secret
			changed = true
		}
		if !slices.Contains(next.Rules, f.RuleID) {
			next.Rules = append(next.Rules, f.RuleID)
			slices.Sort(next.Rules)
			changed = true
		}
		l := locationRecord{
			Commit: f.Commit, Path: f.Path, Line: f.Line, Column: f.Column, BlobID: f.BlobID,
			Source: f.Source, Ref: f.Ref,
			RuleID: f.RuleID, Match: f.Match, FirstSeen: now, Seq: run.Seq, RunID: run.ID,
		}
		p := l.place()
		if have[p] {
			continue
		}
		if len(next.Locations) >= MaxLocations || used+l.size() > maxLocationBytes {
			if !next.Truncated {
				next.Truncated = true
				changed = true
			}
			continue
		}
		have[p] = true
		used += l.size()
		next.Locations = append(next.Locations, l)
		changed = true
	}
	if !changed {
		return nil
	}
	next.UpdatedAt = now
	return &next
}

// SetState changes an alert's state: resolve it with a resolution, or
// reopen it. Who, when and the comment are kept on the alert and in its
// history. An invalid change is ErrInvalidArgument and changes nothing.
func (s *Store) SetState(ctx context.Context, tenant, repoID, fp string, c Change) (Alert, error) {
	if err := c.check(); err != nil {
		return Alert{}, err
	}
	r, err := newRef(tenant, repoID, fp)
	if err != nil {
		return Alert{}, err
	}
	ev := eventRecord{ID: s.newID(), At: s.now(), By: c.By, State: c.State, Resolution: c.Resolution, Comment: c.Comment}
	changed := false
	rec, err := s.update(ctx, r.key(), func(cur *record) (*record, error) {
		if cur == nil {
			return nil, fmt.Errorf("alert %s: %w", r.fp, ErrNotFound)
		}
		if slices.ContainsFunc(cur.History, func(e eventRecord) bool { return e.ID == ev.ID }) {
			return nil, nil // our change landed on an earlier attempt
		}
		changed = cur.State != c.State
		next := *cur
		next.State, next.Resolution, next.Comment = c.State, c.Resolution, c.Comment
		if c.State == StateResolved {
			next.ResolvedBy, next.ResolvedAt = c.By, ev.At
		} else {
			next.ResolvedBy, next.ResolvedAt = "", time.Time{}
		}
		next.History = appendBounded(cur.History, ev)
		next.UpdatedAt = ev.At
		return &next, nil
	})
	if err != nil {
		return Alert{}, err
	}
	a := rec.alert()
	if changed {
		action := "reopened"
		if c.State == StateResolved {
			action = "resolved"
		}
		s.tell(ctx, Notice{Action: action, Alert: a, By: c.By, ID: "state/" + ev.ID})
	}
	return a, nil
}

// RecordBypass records that by pushed finding's secret past push
// protection, giving reason. It creates the alert if needed (resolved as
// false_positive or used_in_tests for those reasons, open for
// will_fix_later, as GitHub does) or adds the location and the bypass to
// an existing one, whose state it leaves alone: a bypass must not reopen
// or close what someone decided.
func (s *Store) RecordBypass(ctx context.Context, tenant, repoID string, f Finding, by string, reason BypassReason) (Alert, error) {
	if !reason.valid() {
		return Alert{}, fmt.Errorf("%w: bypass reason %q: want false_positive, used_in_tests or will_fix_later", ErrInvalidArgument, reason)
	}
	if by == "" || len(by) > maxField {
		return Alert{}, fmt.Errorf("%w: a bypass needs who made it", ErrInvalidArgument)
	}
	t, err := tenantKey(tenant)
	if err != nil {
		return Alert{}, err
	}
	if err := checkRepoID(repoID); err != nil {
		return Alert{}, err
	}
	k, err := s.fingerprintKey(ctx, t)
	if err != nil {
		return Alert{}, err
	}
	fp, err := checkFinding(k, &f)
	if err != nil {
		return Alert{}, err
	}
	r := ref{t, repoID, fp}
	now := s.now()
	bp := bypassRecord{ID: s.newID(), By: by, Reason: reason, At: now, Commit: f.Commit, Path: f.Path, Line: f.Line, Source: f.Source, Ref: f.Ref}
	created := false
	rec, err := s.update(ctx, r.key(), func(cur *record) (*record, error) {
		if cur != nil && slices.ContainsFunc(cur.Bypasses, func(b bypassRecord) bool { return b.ID == bp.ID }) {
			return nil, nil
		}
		created = cur == nil
		next := merge(cur, r, []Finding{f}, RunRef{}, now)
		if next == nil {
			c := *cur
			next = &c
		}
		if cur == nil {
			next.State, next.Resolution = reason.resolution()
			if next.State == StateResolved {
				next.ResolvedBy, next.ResolvedAt = by, now
				next.Comment = "push protection bypassed: " + string(reason)
			}
		}
		next.Bypasses = appendBounded(next.Bypasses, bp)
		next.UpdatedAt = now
		return next, nil
	})
	if err != nil {
		return Alert{}, err
	}
	a := rec.alert()
	action := "push_protection_bypassed"
	if created {
		action = "created"
	}
	b := Bypass(bp)
	s.tell(ctx, Notice{Action: action, Alert: a, By: by, Bypass: &b, ID: "bypass/" + bp.ID})
	return a, nil
}

// appendBounded appends e, dropping the oldest beyond MaxHistory.
func appendBounded[E any](s []E, e E) []E {
	out := append(slices.Clone(s), e)
	if len(out) > MaxHistory {
		out = out[len(out)-MaxHistory:]
	}
	return out
}

// Get returns one alert: ErrNotFound if there is none.
func (s *Store) Get(ctx context.Context, tenant, repoID, fp string) (Alert, error) {
	rec, err := s.get(ctx, tenant, repoID, fp)
	if err != nil {
		return Alert{}, err
	}
	return rec.alert(), nil
}

func (s *Store) get(ctx context.Context, tenant, repoID, fp string) (*record, error) {
	r, err := newRef(tenant, repoID, fp)
	if err != nil {
		return nil, err
	}
	rec, _, err := s.read(ctx, r.key())
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("alert %s: %w", r.fp, ErrNotFound)
	}
	return rec, err
}

// Reveal returns the alert's secret in clear. Callers check that the
// requester may see it, and log that they did (docs/adr/0070-alert-store.md).
func (s *Store) Reveal(ctx context.Context, tenant, repoID, fp string) (string, error) {
	rec, err := s.get(ctx, tenant, repoID, fp)
	if err != nil {
		return "", err
	}
	if rec.Secret == "" {
		return "", fmt.Errorf("alert %s: %w", rec.Fingerprint, ErrNoSecret)
	}
	return rec.Secret, nil
}

// MinIDPrefix is the fewest hex digits of an alert id Resolve takes, as
// git takes 7 of a commit id.
const MinIDPrefix = 7

// ErrAmbiguous reports an alert id prefix that more than one alert of
// the repository starts with.
var ErrAmbiguous = errors.New("ambiguous alert id")

// Resolve returns the full id of the repository's one alert whose id
// starts with id: all 64 hex digits, or a unique prefix of at least
// MinIDPrefix, in any case. It lists at most two keys, so its cost does
// not grow with the alerts a repository holds. A prefix no alert has is
// ErrNotFound, a shorter or non-hex one ErrInvalidArgument, one that two
// alerts share ErrAmbiguous (wrapping ErrInvalidArgument).
func (s *Store) Resolve(ctx context.Context, tenant, repoID, id string) (string, error) {
	t, err := tenantKey(tenant)
	if err != nil {
		return "", err
	}
	if err := checkRepoID(repoID); err != nil {
		return "", err
	}
	p := strings.ToLower(strings.TrimSpace(id))
	for i := 0; i < len(p); i++ {
		if c := p[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", fmt.Errorf("%w: alert id %q: want hex digits", ErrInvalidArgument, id)
		}
	}
	switch {
	case len(p) == 64:
		return p, nil
	case len(p) > 64:
		return "", fmt.Errorf("%w: alert id %q: longer than 64 hex digits", ErrInvalidArgument, id)
	case len(p) < MinIDPrefix:
		return "", fmt.Errorf("%w: alert id %q: give at least %d hex digits", ErrInvalidArgument, id, MinIDPrefix)
	}
	prefix := repoPrefix(t, repoID)
	infos, err := s.objects.List(ctx, prefix+p, "", 2)
	if err != nil {
		return "", err
	}
	switch len(infos) {
	case 0:
		return "", fmt.Errorf("alert %s: %w", p, ErrNotFound)
	case 1:
		return strings.TrimPrefix(infos[0].Key, prefix), nil
	}
	return "", fmt.Errorf("%w: %w: %q is the start of more than one alert's id; give more digits", ErrInvalidArgument, ErrAmbiguous, p)
}
