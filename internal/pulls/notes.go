package pulls

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/ghost-scm/ghost/internal/ids"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
)

// A pull request's conversation is notes: comments, reviews and line
// comments, each a record of its own (docs/adr/0127-pull-request-reviews.md):
//
//	meta/pullnotes/<repoID>/<n>/<kind>/<id>   the note, the truth
//	meta/pullnoteids/<repoID>/<kind>/<id>,<n> which pull request an id is on
//
// <kind> is c (a comment), r (a review) or l (a line comment); <id> is
// the note's number, 19 digits, so that a LIST reads the oldest first.
// Ids are made from the creating node's clock (microseconds, times 1000,
// plus a random 0-999) and created by a write conditional on absence, so
// that two nodes never share one; a node whose clock is behind files its
// notes a little earlier, which only reorders them.
const (
	notesPrefix  = "meta/pullnotes/"
	noteIDPrefix = "meta/pullnoteids/"
)

// NoteKind is what a note is.
type NoteKind string

// The kinds.
const (
	// KindComment is a comment on the conversation (GitHub's issue
	// comment).
	KindComment NoteKind = "c"
	// KindReview is a review: approve, request changes or comment.
	KindReview NoteKind = "r"
	// KindLineComment is a comment on a line of the diff (GitHub's
	// review comment).
	KindLineComment NoteKind = "l"
)

func (k NoteKind) valid() bool { return k == KindComment || k == KindReview || k == KindLineComment }

// ReviewState is a review's verdict, as GitHub's API names it.
type ReviewState string

// The verdicts.
const (
	Approved         ReviewState = "APPROVED"
	ChangesRequested ReviewState = "CHANGES_REQUESTED"
	Commented        ReviewState = "COMMENTED"
	Dismissed        ReviewState = "DISMISSED"
)

// Sides of a line comment: the head's version of the file (RIGHT) or the
// merge base's (LEFT), as GitHub names them.
const (
	SideRight = "RIGHT"
	SideLeft  = "LEFT"
)

// Bounds of notes.
const (
	// MaxNotePage is the most notes a page lists.
	MaxNotePage = 100
	// MaxPathBytes bounds a line comment's path.
	MaxPathBytes = 4096
	// MaxReviewComments bounds the line comments one review carries.
	MaxReviewComments = 50
	// MaxVerdicts bounds the reviewers whose verdict a pull request
	// keeps: a review by one more is refused.
	MaxVerdicts = 100
)

// Note is one comment, review or line comment of a pull request.
type Note struct {
	Kind NoteKind
	// ID is the note's number, unique in its repository.
	ID uint64
	// Number is the pull request's.
	Number uint64
	Author string
	// Body is Markdown.
	Body      string
	CreatedAt time.Time
	UpdatedAt time.Time

	// State is a review's verdict.
	State ReviewState
	// CommitID is the head a review reviewed, or the commit a line
	// comment's line was read from.
	CommitID string
	// Writer says the reviewer could push to the base when the review
	// was given: only writers' verdicts count toward required approvals.
	Writer bool
	// DismissedBy and DismissMessage say who dismissed a review, and why.
	DismissedBy    string
	DismissMessage string

	// Path, Line and Side place a line comment; Anchor is the commit
	// whose version of Path it was read from (CommitID for RIGHT, the
	// merge base then for LEFT). ReviewID is the review that carried it
	// (0: none), InReplyTo the line comment it answers (0: none).
	Path      string
	Line      int
	Side      string
	Anchor    string
	ReviewID  uint64
	InReplyTo uint64
	// Outdated is set by the Service when the line changed since.
	Outdated bool
}

// Verdict is a reviewer's latest approval or change request, kept on the
// pull request's record so that a merge decides from one read.
type Verdict struct {
	User   string      `json:"user"`
	State  ReviewState `json:"state"`
	Commit string      `json:"commit"`
	Review uint64      `json:"review"`
	Writer bool        `json:"writer,omitempty"`
	At     time.Time   `json:"at"`
}

// noteRecord is the stored note.
type noteRecord struct {
	V              int         `json:"v"`
	Nonce          string      `json:"nonce"`
	Gen            uint64      `json:"gen"`
	Kind           NoteKind    `json:"kind"`
	ID             uint64      `json:"id"`
	Number         uint64      `json:"number"`
	RepoID         string      `json:"repo_id"`
	Author         string      `json:"author"`
	Body           string      `json:"body,omitempty"`
	CreatedAt      time.Time   `json:"created_at"`
	UpdatedAt      time.Time   `json:"updated_at"`
	State          ReviewState `json:"state,omitempty"`
	CommitID       string      `json:"commit_id,omitempty"`
	Writer         bool        `json:"writer,omitempty"`
	DismissedBy    string      `json:"dismissed_by,omitempty"`
	DismissMessage string      `json:"dismiss_message,omitempty"`
	Path           string      `json:"path,omitempty"`
	Line           int         `json:"line,omitempty"`
	Side           string      `json:"side,omitempty"`
	Anchor         string      `json:"anchor,omitempty"`
	ReviewID       uint64      `json:"review_id,omitempty"`
	InReplyTo      uint64      `json:"in_reply_to,omitempty"`
}

func (r *noteRecord) note() Note {
	return Note{
		Kind: r.Kind, ID: r.ID, Number: r.Number, Author: r.Author, Body: r.Body, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		State: r.State, CommitID: r.CommitID, Writer: r.Writer, DismissedBy: r.DismissedBy, DismissMessage: r.DismissMessage,
		Path: r.Path, Line: r.Line, Side: r.Side, Anchor: r.Anchor, ReviewID: r.ReviewID, InReplyTo: r.InReplyTo,
	}
}

func (r *noteRecord) validate() error {
	if r.V != recordVersion {
		return fmt.Errorf("record version %d, this build reads %d", r.V, recordVersion)
	}
	switch {
	case !r.Kind.valid():
		return fmt.Errorf("unknown note kind %q", r.Kind)
	case r.ID == 0 || r.Number == 0 || r.Number > MaxNumber:
		return errors.New("bad id or number")
	case r.Nonce == "" || r.Gen == 0:
		return errors.New("missing write stamps")
	case ids.CheckRepoID(r.RepoID) != nil:
		return errors.New("bad repository id")
	case r.Kind == KindReview && r.State != Approved && r.State != ChangesRequested && r.State != Commented && r.State != Dismissed:
		return fmt.Errorf("unknown review state %q", r.State)
	case r.Kind == KindLineComment && (r.Line < 1 || (r.Side != SideRight && r.Side != SideLeft) || CheckPath(r.Path) != nil):
		return errors.New("bad line comment place")
	}
	return nil
}

var noteCodec = record.Codec[noteRecord]{
	Encode: func(r *noteRecord) ([]byte, error) { return json.Marshal(r) },
	Decode: func(b []byte, r *noteRecord) error {
		if err := json.Unmarshal(b, r); err != nil {
			return err
		}
		return r.validate()
	},
	Max: maxRecord,
}

func noteID19(id uint64) string { return fmt.Sprintf("%019d", id) }

func notesKindPrefix(repoID string, n uint64, kind NoteKind) string {
	return notesPrefix + repoID + "/" + strconv.FormatUint(n, 10) + "/" + string(kind) + "/"
}

func noteKey(repoID string, n uint64, kind NoteKind, id uint64) string {
	return notesKindPrefix(repoID, n, kind) + noteID19(id)
}

func noteIDKey(repoID string, kind NoteKind, id uint64, n uint64) string {
	return noteIDPrefix + repoID + "/" + string(kind) + "/" + noteID19(id) + "," + strconv.FormatUint(n, 10)
}

// newNoteID returns an id from the clock: microseconds times 1000 plus a
// random 0-999, which fits an int64 (GitHub's ids are int64) until 2262;
// above every id this Store made before, so that one node's notes list
// in the order it made them.
func (s *Store) newNoteID() uint64 {
	var b [2]byte
	_, _ = rand.Read(b[:])
	id := uint64(time.Now().UnixMicro())*1000 + uint64(binary.BigEndian.Uint16(b[:])%1000)
	for {
		last := s.lastNoteID.Load()
		if id <= last {
			id = last + 1
		}
		if s.lastNoteID.CompareAndSwap(last, id) {
			return id
		}
	}
}

// CheckPath checks a line comment's path: a path of the repository's
// tree, relative, without empty, "." or ".." elements or control
// characters, within MaxPathBytes.
func CheckPath(p string) error {
	if p == "" || len(p) > MaxPathBytes || !utf8.ValidString(p) {
		return fmt.Errorf("%w: path: 1 to %d bytes of UTF-8", ErrInvalid, MaxPathBytes)
	}
	for _, c := range p {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: path %q has a control character", ErrInvalid, p)
		}
	}
	for _, e := range strings.Split(p, "/") {
		if e == "" || e == "." || e == ".." {
			return fmt.Errorf("%w: path %q: want a relative path of the tree", ErrInvalid, p)
		}
	}
	return nil
}

// CheckNoteBody checks a note's body: UTF-8 within MaxBodyBytes; empty
// only where allowed.
func CheckNoteBody(b string, allowEmpty bool) error {
	if b == "" && !allowEmpty {
		return fmt.Errorf("%w: body is empty", ErrInvalid)
	}
	return CheckBody(b)
}

// createNote stores a new note of pull request r.Number: its id key
// first (so that the note can be found by id), then the record, by a
// write conditional on absence; a taken id takes another. An id key
// whose record never landed names nothing and is harmless: a lookup by
// id reads the record and finds none.
func (s *Store) createNote(ctx context.Context, r *noteRecord) (Note, error) {
	if err := checkNumber(r.RepoID, r.Number); err != nil {
		return Note{}, err
	}
	for range 4 {
		now := s.now()
		r.V, r.Gen, r.Nonce, r.ID = recordVersion, 1, newNonce(), s.newNoteID()
		r.CreatedAt, r.UpdatedAt = now, now
		if err := r.validate(); err != nil {
			return Note{}, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if err := s.putKeys(ctx, []string{noteIDKey(r.RepoID, r.Kind, r.ID, r.Number)}); err != nil {
			return Note{}, fmt.Errorf("create note: %w", err)
		}
		_, err := record.Create(ctx, s.objects, noteCodec, noteKey(r.RepoID, r.Number, r.Kind, r.ID), r)
		switch {
		case err == nil:
			return r.note(), nil
		case errors.Is(err, record.ErrExists):
			continue
		case errors.Is(err, objstore.ErrOutcomeUnknown):
			return Note{}, fmt.Errorf("create note: %w: %v", ErrOutcomeUnknown, err)
		}
		s.deleteKeys([]string{noteIDKey(r.RepoID, r.Kind, r.ID, r.Number)})
		return Note{}, fmt.Errorf("create note: %w", err)
	}
	return Note{}, fmt.Errorf("create note: %w: every id was taken", ErrContention)
}

// NoteNumber returns the pull request a note of kind with id is on: one
// LIST of its id key.
func (s *Store) NoteNumber(ctx context.Context, repoID string, kind NoteKind, id uint64) (uint64, error) {
	if !kind.valid() || id == 0 {
		return 0, fmt.Errorf("note %d: %w", id, ErrNotFound)
	}
	prefix := noteIDPrefix + repoID + "/" + string(kind) + "/" + noteID19(id) + ","
	infos, err := s.objects.List(ctx, prefix, "", 4)
	if err != nil {
		return 0, fmt.Errorf("note %d: %w", id, err)
	}
	for _, in := range infos {
		n, err := strconv.ParseUint(strings.TrimPrefix(in.Key, prefix), 10, 64)
		if err == nil && n > 0 && n <= MaxNumber {
			return n, nil
		}
	}
	return 0, fmt.Errorf("note %d: %w", id, ErrNotFound)
}

// GetNote reads a note of pull request n.
func (s *Store) GetNote(ctx context.Context, repoID string, n uint64, kind NoteKind, id uint64) (Note, error) {
	if err := checkNumber(repoID, n); err != nil {
		return Note{}, err
	}
	if !kind.valid() {
		return Note{}, fmt.Errorf("%w: note kind %q", ErrInvalid, kind)
	}
	r, _, err := record.Get(ctx, s.objects, noteCodec, noteKey(repoID, n, kind, id))
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return Note{}, fmt.Errorf("note %d: %w", id, ErrNotFound)
	case err != nil:
		return Note{}, fmt.Errorf("note %d: %w", id, err)
	}
	return r.note(), nil
}

// ListNotes returns up to limit (at most MaxNotePage) notes of kind of
// pull request n whose ids are above after, oldest first, and the id to
// pass as after for the next page (0: none): one LIST and a GET per note
// shown.
func (s *Store) ListNotes(ctx context.Context, repoID string, n uint64, kind NoteKind, after uint64, limit int) ([]Note, uint64, error) {
	if err := checkNumber(repoID, n); err != nil {
		return nil, 0, err
	}
	if !kind.valid() {
		return nil, 0, fmt.Errorf("%w: note kind %q", ErrInvalid, kind)
	}
	if limit <= 0 || limit > MaxNotePage {
		limit = MaxNotePage
	}
	prefix := notesKindPrefix(repoID, n, kind)
	start := ""
	if after > 0 {
		start = prefix + noteID19(after)
	}
	infos, err := s.objects.List(ctx, prefix, start, limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("notes of #%d: %w", n, err)
	}
	more := len(infos) > limit
	if more {
		infos = infos[:limit]
	}
	recs := make([]*noteRecord, len(infos))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readers)
	for i, in := range infos {
		g.Go(func() error {
			r, _, err := record.Get(gctx, s.objects, noteCodec, in.Key)
			switch {
			case errors.Is(err, objstore.ErrNotFound): // deleted meanwhile
				return nil
			case err != nil:
				return fmt.Errorf("notes of #%d: %w", n, err)
			}
			recs[i] = r
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	out := make([]Note, 0, len(recs))
	var last uint64
	for i, r := range recs {
		id, _ := strconv.ParseUint(strings.TrimPrefix(infos[i].Key, prefix), 10, 64)
		last = max(last, id)
		if r != nil && r.RepoID == repoID && r.Number == n && r.Kind == kind && r.ID == id {
			out = append(out, r.note())
		}
	}
	if !more {
		last = 0
	}
	return out, last, nil
}

// noteIDs lists up to limit ids of kind of pull request n above after,
// in order: one LIST, no record read.
func (s *Store) noteIDs(ctx context.Context, repoID string, n uint64, kind NoteKind, after uint64, limit int) ([]uint64, error) {
	prefix := notesKindPrefix(repoID, n, kind)
	start := ""
	if after > 0 {
		start = prefix + noteID19(after)
	}
	infos, err := s.objects.List(ctx, prefix, start, limit)
	if err != nil {
		return nil, fmt.Errorf("notes of #%d: %w", n, err)
	}
	out := make([]uint64, 0, len(infos))
	for _, in := range infos {
		if id, err := strconv.ParseUint(strings.TrimPrefix(in.Key, prefix), 10, 64); err == nil && id > 0 {
			out = append(out, id)
		}
	}
	return out, nil
}

// updateNote changes a note by compare-and-swap: change edits it and
// reports whether it changed anything.
func (s *Store) updateNote(ctx context.Context, repoID string, n uint64, kind NoteKind, id uint64, change func(*noteRecord) (bool, error)) (Note, error) {
	nonce := newNonce()
	out, err := record.Update(ctx, s.objects, noteCodec, noteKey(repoID, n, kind, id), record.Options{}, func(cur *noteRecord) (*noteRecord, error) {
		if cur == nil {
			return nil, &mutateError{fmt.Errorf("note %d: %w", id, ErrNotFound)}
		}
		if cur.Nonce == nonce {
			return nil, nil // ours landed
		}
		next := *cur
		changed, err := change(&next)
		if err != nil {
			return nil, &mutateError{err}
		}
		if !changed {
			return nil, nil
		}
		next.Gen, next.Nonce, next.UpdatedAt = cur.Gen+1, nonce, s.now()
		return &next, nil
	})
	var me *mutateError
	switch {
	case err == nil:
		return out.note(), nil
	case errors.As(err, &me):
		return Note{}, me.err
	case errors.Is(err, record.ErrContention):
		return Note{}, fmt.Errorf("note %d: %w", id, ErrContention)
	case errors.Is(err, objstore.ErrOutcomeUnknown):
		return Note{}, fmt.Errorf("note %d: %w: %v", id, ErrOutcomeUnknown, err)
	}
	return Note{}, fmt.Errorf("note %d: %w", id, err)
}

// deleteNote removes a note, then its id key. A delete whose outcome is
// unknown is repeated by the caller's retry (deleting a missing key is
// not an error).
func (s *Store) deleteNote(ctx context.Context, repoID string, n uint64, kind NoteKind, id uint64) error {
	if err := s.objects.Delete(ctx, noteKey(repoID, n, kind, id)); err != nil {
		return fmt.Errorf("delete note %d: %w", id, err)
	}
	s.deleteKeys([]string{noteIDKey(repoID, kind, id, n)})
	return nil
}
