package pulls

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ghost-scm/ghost/internal/ids"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
)

// Bounds of a pull request's fields, GitHub's where it has them.
const (
	// MaxTitleBytes bounds a title.
	MaxTitleBytes = 1024
	// MaxBodyBytes bounds a body: GitHub's 65,536 characters, in bytes.
	MaxBodyBytes = 65536
	// maxRecord bounds a record read: a body and a few hundred bytes.
	maxRecord = 256 << 10
)

// recordVersion is written into every record; a reader refuses others.
const recordVersion = 1

// prRecord is the stored pull request. Gen and Nonce are the write's:
// Gen one higher at every write, Nonce fresh at every write, so that a
// write whose outcome was unknown is recognised by its nonce. StateGen,
// StateNonce and StateAt name the write that put the pull request into
// its current list (open, or closed), whose listing keys are the live
// ones (docs/adr/0118-pull-request-records.md).
type prRecord struct {
	V          int    `json:"v"`
	Nonce      string `json:"nonce"`
	Gen        uint64 `json:"gen"`
	StateGen   uint64 `json:"state_gen"`
	StateNonce string `json:"state_nonce"`
	StateAt    int64  `json:"state_at"`

	Number      uint64    `json:"number"`
	RepoID      string    `json:"repo_id"`
	BaseRepo    string    `json:"base_repo"`
	Title       string    `json:"title"`
	Body        string    `json:"body,omitempty"`
	Author      string    `json:"author"`
	HeadRepoID  string    `json:"head_repo_id"`
	HeadRepo    string    `json:"head_repo"`
	HeadRef     string    `json:"head_ref"`
	BaseRef     string    `json:"base_ref"`
	State       State     `json:"state"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	ClosedAt    time.Time `json:"closed_at,omitzero"`
	MergedAt    time.Time `json:"merged_at,omitzero"`
	MergedBy    string    `json:"merged_by,omitempty"`
	MergeCommit string    `json:"merge_commit,omitempty"`
	MergeMethod Method    `json:"merge_method,omitempty"`
	BaseSHA     string    `json:"base_sha,omitempty"`
	HeadSHA     string    `json:"head_sha,omitempty"`
	Merging     *Merging  `json:"merging,omitempty"`
	Verdicts    []Verdict `json:"verdicts,omitempty"`
	HeadPush    *HeadPush `json:"head_push,omitempty"`
}

func (r *prRecord) pull() PullRequest {
	return PullRequest{
		Number: r.Number, RepoID: r.RepoID, BaseRepo: r.BaseRepo, Title: r.Title, Body: r.Body, Author: r.Author,
		Head: Branch{RepoID: r.HeadRepoID, Repo: r.HeadRepo, Ref: r.HeadRef}, Base: r.BaseRef,
		State: r.State, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, ClosedAt: r.ClosedAt,
		MergedAt: r.MergedAt, MergedBy: r.MergedBy, MergeCommit: r.MergeCommit, MergeMethod: r.MergeMethod,
		BaseSHA: r.BaseSHA, HeadSHA: r.HeadSHA, Merging: r.Merging, Verdicts: slices.Clone(r.Verdicts), Gen: r.Gen,
		HeadPush: r.HeadPush.clone(),
	}
}

// setPull copies what a change may change from pr into r.
func (r *prRecord) setPull(pr PullRequest) {
	r.Title, r.Body, r.BaseRef, r.State = pr.Title, pr.Body, pr.Base, pr.State
	r.UpdatedAt, r.ClosedAt, r.MergedAt, r.MergedBy = pr.UpdatedAt, pr.ClosedAt, pr.MergedAt, pr.MergedBy
	r.MergeCommit, r.MergeMethod, r.BaseSHA, r.HeadSHA = pr.MergeCommit, pr.MergeMethod, pr.BaseSHA, pr.HeadSHA
	r.Merging = pr.Merging
	r.Verdicts = slices.Clone(pr.Verdicts)
	r.HeadPush = pr.HeadPush.clone()
}

// liveKey is the state key of the write that put r into its list.
func (r *prRecord) liveKey() stateKey {
	return stateKey{number: r.Number, gen: r.StateGen, nonce: r.StateNonce, at: r.StateAt}
}

// keys are the listing keys r's list state has: its list key and, while
// it is open, its head key.
func (r *prRecord) keys() []string {
	k := r.liveKey()
	out := []string{k.listKey(r.RepoID, listClass(r.State))}
	if r.State == Open {
		out = append(out, k.headKey(r.HeadRepoID, r.HeadRef, r.RepoID))
	}
	return out
}

func (r *prRecord) validate() error {
	if r.V != recordVersion {
		return fmt.Errorf("record version %d, this build reads %d", r.V, recordVersion)
	}
	switch {
	case r.Number == 0 || r.Number > MaxNumber:
		return fmt.Errorf("number %d out of range", r.Number)
	case r.Nonce == "" || r.StateNonce == "" || r.Gen == 0 || r.StateGen == 0 || r.StateGen > r.Gen:
		return errors.New("missing write stamps")
	case r.State != Open && r.State != Closed && r.State != Merged:
		return fmt.Errorf("unknown state %q", r.State)
	case ids.CheckRepoID(r.RepoID) != nil || ids.CheckRepoID(r.HeadRepoID) != nil:
		return errors.New("bad repository id")
	case checkBranch(r.HeadRef) != nil || checkBranch(r.BaseRef) != nil:
		return errors.New("bad branch name")
	case len(r.Verdicts) > MaxVerdicts:
		return fmt.Errorf("%d verdicts", len(r.Verdicts))
	}
	return nil
}

var prCodec = record.Codec[prRecord]{
	Encode: func(r *prRecord) ([]byte, error) { return json.Marshal(r) },
	Decode: func(b []byte, r *prRecord) error {
		if err := json.Unmarshal(b, r); err != nil {
			return err
		}
		return r.validate()
	},
	Max: maxRecord,
}

// counter is a repository's next pull-request number.
type counter struct {
	V     int    `json:"v"`
	Next  uint64 `json:"next"`
	Nonce string `json:"nonce"`
}

var counterCodec = record.JSON[counter]()

// Store keeps pull requests in the object store. It is safe for
// concurrent use and caches nothing: every node reads the same records.
type Store struct {
	objects objstore.Store
	now     func() time.Time
	// maxKeyAge is how long a key that no record explains is kept: a
	// write in flight is done well within it (docs/adr/0027-listing-keys.md's
	// day, for the same reasons).
	maxKeyAge time.Duration
	// lastNoteID is the last note id made here (notes.go).
	lastNoteID atomic.Uint64
}

// NewStore returns a Store over objects, normally the store that holds
// the logs and the other metadata.
func NewStore(objects objstore.Store) *Store {
	return &Store{
		objects:   objects,
		now:       func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) },
		maxKeyAge: 24 * time.Hour,
	}
}

func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// checkBranch checks a branch name (without refs/heads/).
func checkBranch(name string) error {
	if name == "" || strings.HasPrefix(name, "refs/") {
		return fmt.Errorf("%w: branch %q: give the branch's name, without refs/heads/", ErrInvalid, name)
	}
	if err := ids.CheckRefName("refs/heads/" + name); err != nil {
		return fmt.Errorf("%w: branch: %w", ErrInvalid, err)
	}
	return nil
}

// CheckTitle checks a title: 1 to MaxTitleBytes bytes of UTF-8, on one
// line.
func CheckTitle(t string) error {
	switch {
	case strings.TrimSpace(t) == "":
		return fmt.Errorf("%w: a title is required", ErrInvalid)
	case len(t) > MaxTitleBytes:
		return fmt.Errorf("%w: the title is longer than %d bytes", ErrInvalid, MaxTitleBytes)
	case !utf8.ValidString(t) || strings.ContainsAny(t, "\x00\r\n"):
		return fmt.Errorf("%w: the title must be one line of UTF-8", ErrInvalid)
	}
	return nil
}

// CheckBody checks a body: up to MaxBodyBytes of UTF-8.
func CheckBody(b string) error {
	switch {
	case len(b) > MaxBodyBytes:
		return fmt.Errorf("%w: the body is longer than %d bytes", ErrInvalid, MaxBodyBytes)
	case !utf8.ValidString(b) || strings.ContainsRune(b, 0):
		return fmt.Errorf("%w: the body must be UTF-8 text", ErrInvalid)
	}
	return nil
}

// Get reads pull request n of repoID.
func (s *Store) Get(ctx context.Context, repoID string, n uint64) (PullRequest, error) {
	if err := checkNumber(repoID, n); err != nil {
		return PullRequest{}, err
	}
	r, _, err := record.Get(ctx, s.objects, prCodec, recordKey(repoID, n))
	if errors.Is(err, objstore.ErrNotFound) {
		return PullRequest{}, fmt.Errorf("pull request #%d: %w", n, ErrNotFound)
	}
	if err != nil {
		return PullRequest{}, fmt.Errorf("pull request #%d: %w", n, err)
	}
	return r.pull(), nil
}

func checkNumber(repoID string, n uint64) error {
	if err := ids.CheckRepoID(repoID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if n == 0 || n > MaxNumber {
		return fmt.Errorf("pull request #%d: %w", n, ErrNotFound)
	}
	return nil
}

// Create stores a new open pull request with the next number of
// pr.RepoID and returns it as stored. Title, body, author, head and base
// come from pr; the rest is set here.
//
// The number comes from the repository's counter record, taken by
// compare-and-swap (record.Update) under a nonce of this call, so that a
// counter write that landed and then reported an error is recognised as
// ours when it is read back: the number is used, not lost. The record is
// then created where no record is (PutIfAbsent): the number is ours alone,
// and if a record is somehow there already the next number is taken.
// A counter write whose outcome cannot be learned at all costs a number
// (a gap in the numbering) and creates nothing; the caller is told to
// retry (ErrContention). A record write whose outcome cannot be learned
// is ErrOutcomeUnknown: the listing keys written before it stay, so that
// lists read the record and show it if it landed.
func (s *Store) Create(ctx context.Context, pr PullRequest) (PullRequest, error) {
	if err := CheckTitle(pr.Title); err != nil {
		return PullRequest{}, err
	}
	if err := CheckBody(pr.Body); err != nil {
		return PullRequest{}, err
	}
	if err := checkBranch(pr.Head.Ref); err != nil {
		return PullRequest{}, err
	}
	if err := checkBranch(pr.Base); err != nil {
		return PullRequest{}, err
	}
	for _, id := range []string{pr.RepoID, pr.Head.RepoID} {
		if err := ids.CheckRepoID(id); err != nil {
			return PullRequest{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	if pr.Author == "" || pr.BaseRepo == "" || pr.Head.Repo == "" {
		return PullRequest{}, fmt.Errorf("%w: no author or repository name", ErrInvalid)
	}
	// Before any head key: a push to the head repository looks for this
	// marker before it lists head keys.
	if err := s.putKeys(ctx, []string{headRepoKey(pr.Head.RepoID)}); err != nil {
		return PullRequest{}, fmt.Errorf("create pull request: %w", err)
	}
	for range 4 {
		n, err := s.allocate(ctx, pr.RepoID)
		if err != nil {
			return PullRequest{}, err
		}
		now := s.now()
		nonce := newNonce()
		r := &prRecord{
			V: recordVersion, Nonce: nonce, Gen: 1, StateGen: 1, StateNonce: nonce, StateAt: now.UnixMilli(),
			Number: n, RepoID: pr.RepoID, BaseRepo: pr.BaseRepo, Title: pr.Title, Body: pr.Body, Author: pr.Author,
			HeadRepoID: pr.Head.RepoID, HeadRepo: pr.Head.Repo, HeadRef: pr.Head.Ref, BaseRef: pr.Base,
			State: Open, CreatedAt: now, UpdatedAt: now,
		}
		keys := r.keys()
		if err := s.putKeys(ctx, keys); err != nil {
			s.deleteKeys(keys)
			return PullRequest{}, fmt.Errorf("create pull request: %w", err)
		}
		_, err = record.Create(ctx, s.objects, prCodec, recordKey(pr.RepoID, n), r)
		switch {
		case err == nil:
			return r.pull(), nil
		case errors.Is(err, record.ErrExists):
			// Not ours: the counter was behind (restored from a backup,
			// say). Our keys name a write that never landed.
			s.deleteKeys(keys)
			continue
		case errors.Is(err, objstore.ErrOutcomeUnknown):
			return PullRequest{}, fmt.Errorf("create pull request #%d: %w: %v", n, ErrOutcomeUnknown, err)
		}
		s.deleteKeys(keys)
		return PullRequest{}, fmt.Errorf("create pull request: %w", err)
	}
	return PullRequest{}, fmt.Errorf("create pull request: %w: the numbers the counter handed out were taken", ErrContention)
}

// allocate takes the next number of repoID from its counter.
func (s *Store) allocate(ctx context.Context, repoID string) (uint64, error) {
	nonce := newNonce()
	c, err := record.Update(ctx, s.objects, counterCodec, nextKey(repoID), record.Options{}, func(cur *counter) (*counter, error) {
		if cur != nil && cur.Nonce == nonce {
			return nil, nil // ours landed: the number is cur.Next-1
		}
		next := uint64(1)
		if cur != nil {
			next = max(cur.Next, 1)
		}
		if next > MaxNumber {
			return nil, fmt.Errorf("%w: repository has used up its %d pull-request numbers", ErrInvalid, uint64(MaxNumber))
		}
		return &counter{V: 1, Next: next + 1, Nonce: nonce}, nil
	})
	switch {
	case err == nil:
		return c.Next - 1, nil
	case errors.Is(err, ErrInvalid):
		return 0, err
	}
	// Not applied, or unknown: either way no record was written, so the
	// caller can be told that nothing was created; an unknown write may
	// have used up a number.
	return 0, fmt.Errorf("%w: allocating a pull-request number: %v", ErrContention, err)
}

// putKeys writes listing keys (empty objects) in order, stopping at the
// first failure.
func (s *Store) putKeys(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if _, err := s.objects.Put(ctx, k, bytes.NewReader(nil), 0); err != nil {
			return err
		}
	}
	return nil
}

// deleteKeys deletes keys of writes that are certainly dead, best effort,
// on a context of its own. Every key is judged against its record when it
// is read, so the order does not matter and a key left behind is settled
// by the next reader of its list (docs/adr/0118-pull-request-records.md).
func (s *Store) deleteKeys(keys []string) {
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, k := range keys {
		_ = s.objects.Delete(ctx, k)
	}
}

// mutateError carries a change's own error through record.Update.
type mutateError struct{ err error }

func (e *mutateError) Error() string { return e.err.Error() }
func (e *mutateError) Unwrap() error { return e.err }

// Update applies change to pull request n of repoID by compare-and-swap
// and returns it as it then is. change edits its argument and reports
// whether it changed anything; it may run more than once (once per
// attempt) and must depend only on what it is given. A change that moves
// the pull request to another list (open to closed or merged, or back)
// writes the new list's keys before the record and deletes the old
// list's after it (docs/adr/0118-pull-request-records.md).
func (s *Store) Update(ctx context.Context, repoID string, n uint64, change func(pr *PullRequest) (bool, error)) (PullRequest, error) {
	if err := checkNumber(repoID, n); err != nil {
		return PullRequest{}, err
	}
	type attempt struct {
		nonce string
		keys  []string // the keys it wrote
		base  *prRecord
	}
	var (
		attempts []attempt
		mine     = map[string]bool{}
		lastBase string // the nonce of the record the last call saw
	)
	out, err := record.Update(ctx, s.objects, prCodec, recordKey(repoID, n), record.Options{}, func(cur *prRecord) (*prRecord, error) {
		if cur == nil {
			return nil, &mutateError{fmt.Errorf("pull request #%d: %w", n, ErrNotFound)}
		}
		lastBase = cur.Nonce
		if mine[cur.Nonce] {
			return nil, nil // one of ours landed
		}
		pr := cur.pull()
		changed, err := change(&pr)
		if err != nil {
			return nil, &mutateError{err}
		}
		if !changed {
			return nil, nil
		}
		next := *cur
		next.setPull(pr)
		next.Gen, next.Nonce = cur.Gen+1, newNonce()
		a := attempt{nonce: next.Nonce, base: cur}
		if listClass(next.State) != listClass(cur.State) {
			next.StateGen, next.StateNonce, next.StateAt = next.Gen, next.Nonce, s.now().UnixMilli()
			a.keys = next.keys()
			if err := s.putKeys(ctx, a.keys); err != nil {
				s.deleteKeys(a.keys)
				return nil, &mutateError{fmt.Errorf("pull request #%d: listing key: %w", n, err)}
			}
		}
		mine[next.Nonce] = true
		attempts = append(attempts, a)
		return &next, nil
	})
	var me *mutateError
	if err == nil {
		// The record as it is: ours, or one that needed no change. Our
		// other attempts can no longer land (a write conditional on a
		// record that changed never applies), unless one was sent on the
		// very record the last call saw, which needed no change then.
		var dead []string
		for _, a := range attempts {
			switch {
			case a.nonce == out.Nonce:
				if a.keys != nil { // moved lists: the old list's keys go
					dead = append(dead, a.base.keys()...)
				}
			case mine[out.Nonce] || a.base.Nonce != lastBase:
				dead = append(dead, a.keys...)
			}
		}
		s.deleteKeys(dead)
		return out.pull(), nil
	}
	// Nothing of ours landed. An attempt's keys are dead when its write
	// can no longer land: Update sent nothing that may still apply, or
	// the record has moved on from the attempt's base.
	pending := errors.Is(err, objstore.ErrOutcomeUnknown)
	var dead []string
	for _, a := range attempts {
		if !pending || a.base.Nonce != lastBase {
			dead = append(dead, a.keys...)
		}
	}
	s.deleteKeys(dead)
	switch {
	case errors.As(err, &me):
		return PullRequest{}, me.err
	case errors.Is(err, record.ErrContention):
		return PullRequest{}, fmt.Errorf("pull request #%d: %w", n, ErrContention)
	case pending:
		return PullRequest{}, fmt.Errorf("pull request #%d: %w: %v", n, ErrOutcomeUnknown, err)
	}
	return PullRequest{}, fmt.Errorf("pull request #%d: %w", n, err)
}

// HasHeads reports whether any pull request has ever had its head in
// repoID: one GET of a marker written before the first one's head key
// and never removed. When it is false, a push to repoID moves no
// refs/pull/<n>/head and need not list head keys.
func (s *Store) HasHeads(ctx context.Context, repoID string) (bool, error) {
	rc, _, err := s.objects.Get(ctx, headRepoKey(repoID))
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	rc.Close()
	return true, nil
}
