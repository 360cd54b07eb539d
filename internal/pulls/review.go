package pulls

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/meta"
	"golang.org/x/sync/errgroup"
)

// Review and conversation errors.
var (
	// ErrForbidden is a change of a note by someone it is not theirs to
	// make (an edit by another than its author).
	ErrForbidden = errors.New("not allowed")
	// ErrReviewRequired is a merge the base's branch rule holds until
	// enough writers approve (docs/adr/0127-pull-request-reviews.md).
	ErrReviewRequired = errors.New("review required")
)

// Review events, as GitHub's API names them.
const (
	EventApprove        = "APPROVE"
	EventRequestChanges = "REQUEST_CHANGES"
	EventComment        = "COMMENT"
)

// maxCommentedBlob bounds the file a line comment is placed in: its
// lines are counted, and compared to tell an outdated comment.
const maxCommentedBlob = 4 << 20

// maxOutdatedRead bounds what telling a page's comments outdated reads
// of files: past it a comment whose file changed is called outdated.
const maxOutdatedRead = 16 << 20

// Comment adds a comment to pull request n's conversation (GitHub's
// issue comment); any state of the pull request takes comments.
func (s *Service) Comment(ctx context.Context, base meta.Repo, n uint64, author, body string) (Note, error) {
	if err := CheckNoteBody(body, false); err != nil {
		return Note{}, err
	}
	pr, err := s.opts.Store.Get(ctx, base.ID, n)
	if err != nil {
		return Note{}, err
	}
	c, err := s.opts.Store.createNote(ctx, &noteRecord{Kind: KindComment, Number: n, RepoID: base.ID, Author: author, Body: body})
	if err != nil {
		return Note{}, err
	}
	s.noteEvent(ctx, NoteEvent{Action: ActionCreated, Note: c, PullRequest: pr, Sender: author})
	return c, nil
}

// LineComment is a comment on a line of a pull request's diff.
type LineComment struct {
	Author string
	Body   string
	// CommitID is the head commit the line is read from ("" the current
	// head); an earlier commit of the head may be named.
	CommitID string
	Path     string
	Line     int
	// Side is RIGHT (the head's version, the default) or LEFT (the merge
	// base's).
	Side string
	// InReplyTo answers a line comment: the place is the one it has.
	InReplyTo uint64
}

// placed is a line comment checked against the repository.
type placed struct {
	LineComment
	anchor string
}

// place checks where the line comments lcs go in pr, and that review
// (if set: the commit a review reviewed) is a commit of its head: each
// path a file of its commit's version with that many lines. One scratch
// area serves them all.
func (s *Service) place(ctx context.Context, base meta.Repo, pr PullRequest, review string, lcs []LineComment) ([]placed, error) {
	var out []placed
	err := s.onTips(ctx, base, pr, func(ctx context.Context, w *work, b, h string) (err error) {
		out, err = placeIn(ctx, w, b, h, review, lcs)
		return err
	})
	return out, err
}

// placeIn is place's work in w, between base tip b and head tip h.
func placeIn(gctx context.Context, w *work, b, h, review string, lcs []LineComment) ([]placed, error) {
	checkCommit := func(commit string) error {
		if !isOID(commit) {
			return fmt.Errorf("%w: commit_id %q: want a full commit id", ErrInvalid, commit)
		}
		if commit != h {
			ok, err := w.isAncestor(gctx, commit, h)
			if err != nil || !ok {
				return fmt.Errorf("%w: commit %s is not a commit of the pull request's head", ErrInvalid, commit)
			}
		}
		return nil
	}
	if review != "" {
		if err := checkCommit(review); err != nil {
			return nil, err
		}
	}
	out := make([]placed, 0, len(lcs))
	var specs []string
	for _, lc := range lcs {
		if err := CheckNoteBody(lc.Body, false); err != nil {
			return nil, err
		}
		if err := CheckPath(lc.Path); err != nil {
			return nil, err
		}
		if lc.Line < 1 {
			return nil, fmt.Errorf("%w: line %d: lines count from 1", ErrInvalid, lc.Line)
		}
		switch lc.Side {
		case "":
			lc.Side = SideRight
		case SideRight, SideLeft:
		default:
			return nil, fmt.Errorf("%w: side %q: want RIGHT or LEFT", ErrInvalid, lc.Side)
		}
		if lc.CommitID == "" {
			lc.CommitID = h
		}
		if err := checkCommit(lc.CommitID); err != nil {
			return nil, err
		}
		anchor := lc.CommitID
		if lc.Side == SideLeft {
			var err error
			if anchor, err = w.mergeBase(gctx, b, lc.CommitID); err != nil {
				return nil, err
			}
		}
		out = append(out, placed{LineComment: lc, anchor: anchor})
		specs = append(specs, anchor+":"+lc.Path)
	}
	files, err := w.files(gctx, specs, maxCommentedBlob, int64(len(specs))*maxCommentedBlob)
	if err != nil {
		return nil, err
	}
	for i, p := range out {
		f := files[i]
		switch {
		case !f.found:
			return nil, fmt.Errorf("%w: %s is not a file of %s", ErrInvalid, p.Path, short(p.anchor))
		case f.text == nil:
			return nil, fmt.Errorf("%w: %s is too large for line comments", ErrInvalid, p.Path)
		case p.Line > lineCount(f.text):
			return nil, fmt.Errorf("%w: %s has %d lines, not %d", ErrInvalid, p.Path, lineCount(f.text), p.Line)
		}
	}
	return out, nil
}

func short(id string) string { return id[:min(len(id), 12)] }

// AddLineComment comments on a line of pull request n's diff, or answers
// a line comment (GitHub's review comment outside a review).
func (s *Service) AddLineComment(ctx context.Context, base meta.Repo, n uint64, lc LineComment) (Note, error) {
	pr, err := s.opts.Store.Get(ctx, base.ID, n)
	if err != nil {
		return Note{}, err
	}
	var r *noteRecord
	if lc.InReplyTo != 0 {
		if err := CheckNoteBody(lc.Body, false); err != nil {
			return Note{}, err
		}
		parent, err := s.opts.Store.GetNote(ctx, base.ID, n, KindLineComment, lc.InReplyTo)
		if err != nil {
			return Note{}, fmt.Errorf("in_reply_to: %w", err)
		}
		if parent.InReplyTo != 0 { // answers go to the thread's first comment
			lc.InReplyTo = parent.InReplyTo
		}
		r = &noteRecord{Kind: KindLineComment, Number: n, RepoID: base.ID, Author: lc.Author, Body: lc.Body,
			CommitID: parent.CommitID, Path: parent.Path, Line: parent.Line, Side: parent.Side, Anchor: parent.Anchor, InReplyTo: lc.InReplyTo}
	} else {
		ps, err := s.place(ctx, base, pr, "", []LineComment{lc})
		if err != nil {
			return Note{}, err
		}
		r = ps[0].record(base.ID, n, 0)
	}
	c, err := s.opts.Store.createNote(ctx, r)
	if err != nil {
		return Note{}, err
	}
	s.noteEvent(ctx, NoteEvent{Action: ActionCreated, Note: c, PullRequest: pr, Sender: lc.Author})
	return c, nil
}

func (p placed) record(repoID string, n, review uint64) *noteRecord {
	return &noteRecord{Kind: KindLineComment, Number: n, RepoID: repoID, Author: p.Author, Body: p.Body,
		CommitID: p.CommitID, Path: p.Path, Line: p.Line, Side: p.Side, Anchor: p.anchor, ReviewID: review}
}

// NewReview is a review to submit.
type NewReview struct {
	Author string
	// Writer says the reviewer can push to the base repository: only
	// writers' verdicts count toward a branch rule's approvals.
	Writer bool
	// Event is APPROVE, REQUEST_CHANGES or COMMENT.
	Event string
	Body  string
	// CommitID is the head reviewed ("": the current head).
	CommitID string
	// Comments are line comments the review carries (their Author is the
	// review's).
	Comments []LineComment
}

// Review submits a review of pull request n: the review's record, then
// its line comments, then, for an approval or a change request, the
// reviewer's verdict on the pull request's record by compare-and-swap.
// Everything is checked before anything is written. If a later write
// fails, what was written stays (the review shows in the conversation)
// and the error says so; submitting again records the verdict.
func (s *Service) Review(ctx context.Context, base meta.Repo, n uint64, nr NewReview) (Note, []Note, error) {
	var state ReviewState
	switch nr.Event {
	case EventApprove:
		state = Approved
	case EventRequestChanges:
		state = ChangesRequested
	case EventComment:
		state = Commented
	default:
		return Note{}, nil, fmt.Errorf("%w: event %q: want APPROVE, REQUEST_CHANGES or COMMENT", ErrInvalid, nr.Event)
	}
	if err := CheckNoteBody(nr.Body, state == Approved || len(nr.Comments) > 0); err != nil {
		return Note{}, nil, fmt.Errorf("%w (a review that does not approve needs a body or line comments)", err)
	}
	if len(nr.Comments) > MaxReviewComments {
		return Note{}, nil, fmt.Errorf("%w: %d line comments: at most %d in one review", ErrInvalid, len(nr.Comments), MaxReviewComments)
	}
	pr, err := s.opts.Store.Get(ctx, base.ID, n)
	if err != nil {
		return Note{}, nil, err
	}
	if state != Commented {
		switch {
		case pr.State != Open:
			return Note{}, nil, fmt.Errorf("%w: pull request #%d is %s", ErrState, n, pr.State)
		case strings.EqualFold(nr.Author, pr.Author):
			return Note{}, nil, fmt.Errorf("%w: the author of a pull request cannot approve it or request changes to it", ErrInvalid)
		}
	}
	head, err := s.sync(ctx, base, pr, true)
	if err != nil {
		return Note{}, nil, err
	}
	commit := nr.CommitID
	if commit == "" {
		commit = head
	}
	lcs := slices.Clone(nr.Comments)
	for i := range lcs {
		lcs[i].Author = nr.Author
		if lcs[i].CommitID == "" {
			lcs[i].CommitID = commit
		}
		if lcs[i].InReplyTo != 0 {
			return Note{}, nil, fmt.Errorf("%w: a review's line comments cannot answer others; answer with a line comment", ErrInvalid)
		}
	}
	ps, err := s.place(ctx, base, pr, commit, lcs)
	if err != nil {
		return Note{}, nil, err
	}
	rv, err := s.opts.Store.createNote(ctx, &noteRecord{Kind: KindReview, Number: n, RepoID: base.ID, Author: nr.Author,
		Body: nr.Body, State: state, CommitID: commit, Writer: nr.Writer})
	if err != nil {
		return Note{}, nil, err
	}
	comments := make([]Note, 0, len(ps))
	for _, p := range ps {
		c, err := s.opts.Store.createNote(ctx, p.record(base.ID, n, rv.ID))
		if err != nil {
			return rv, comments, fmt.Errorf("review %d was recorded, but a line comment was not: %w", rv.ID, err)
		}
		comments = append(comments, c)
	}
	if state != Commented {
		v := Verdict{User: nr.Author, State: state, Commit: commit, Review: rv.ID, Writer: nr.Writer, At: rv.CreatedAt}
		pr, err = s.opts.Store.Update(ctx, base.ID, n, func(cur *PullRequest) (bool, error) {
			i := slices.IndexFunc(cur.Verdicts, func(x Verdict) bool { return strings.EqualFold(x.User, v.User) })
			switch {
			case i >= 0 && cur.Verdicts[i] == v:
				return false, nil
			case i >= 0:
				cur.Verdicts[i] = v
			case len(cur.Verdicts) >= MaxVerdicts:
				return false, fmt.Errorf("%w: pull request #%d has %d reviewers' verdicts already", ErrInvalid, n, MaxVerdicts)
			default:
				cur.Verdicts = append(cur.Verdicts, v)
			}
			return true, nil
		})
		if err != nil {
			return rv, comments, fmt.Errorf("review %d was recorded, but its verdict was not (submit it again): %w", rv.ID, err)
		}
	}
	s.noteEvent(ctx, NoteEvent{Action: ActionSubmitted, Note: rv, PullRequest: pr, Sender: nr.Author})
	for _, c := range comments {
		s.noteEvent(ctx, NoteEvent{Action: ActionCreated, Note: c, PullRequest: pr, Sender: nr.Author})
	}
	return rv, comments, nil
}

// DismissReview dismisses review id of pull request n (a writer's act):
// the reviewer's verdict stops counting first, by compare-and-swap on
// the pull request, then the review is marked dismissed, so that a
// dismissal cut in the middle never leaves an approval counting.
func (s *Service) DismissReview(ctx context.Context, base meta.Repo, n, id uint64, by, message string) (Note, error) {
	if err := CheckNoteBody(message, false); err != nil {
		return Note{}, fmt.Errorf("%w (a dismissal needs a message)", err)
	}
	rv, err := s.opts.Store.GetNote(ctx, base.ID, n, KindReview, id)
	if err != nil {
		return Note{}, err
	}
	if rv.State != Approved && rv.State != ChangesRequested {
		return Note{}, fmt.Errorf("%w: review %d is %s; only approvals and change requests are dismissed", ErrState, id, rv.State)
	}
	pr, err := s.opts.Store.Update(ctx, base.ID, n, func(cur *PullRequest) (bool, error) {
		i := slices.IndexFunc(cur.Verdicts, func(x Verdict) bool { return x.Review == id })
		if i < 0 {
			return false, nil
		}
		cur.Verdicts = slices.Delete(cur.Verdicts, i, i+1)
		return true, nil
	})
	if err != nil {
		return Note{}, err
	}
	rv, err = s.opts.Store.updateNote(ctx, base.ID, n, KindReview, id, func(r *noteRecord) (bool, error) {
		if r.State == Dismissed {
			return false, nil
		}
		r.State, r.DismissedBy, r.DismissMessage = Dismissed, by, message
		return true, nil
	})
	if err != nil {
		return Note{}, err
	}
	s.noteEvent(ctx, NoteEvent{Action: ActionDismissed, Note: rv, PullRequest: pr, Sender: by})
	return rv, nil
}

// EditNote replaces the body of a comment or line comment, or of a
// review; only its author may.
func (s *Service) EditNote(ctx context.Context, base meta.Repo, n uint64, kind NoteKind, id uint64, by, body string) (Note, error) {
	if err := CheckNoteBody(body, kind == KindReview); err != nil {
		return Note{}, err
	}
	c, err := s.opts.Store.updateNote(ctx, base.ID, n, kind, id, func(r *noteRecord) (bool, error) {
		if !strings.EqualFold(r.Author, by) {
			return false, fmt.Errorf("%w: only its author edits a comment", ErrForbidden)
		}
		if r.Body == body {
			return false, nil
		}
		r.Body = body
		return true, nil
	})
	if err != nil {
		return Note{}, err
	}
	if pr, err := s.opts.Store.Get(ctx, base.ID, n); err == nil {
		s.noteEvent(ctx, NoteEvent{Action: ActionEdited, Note: c, PullRequest: pr, Sender: by})
	}
	return c, nil
}

// DeleteNote deletes a comment or line comment: its author's, or anyone's
// for a moderator (the caller says who is: the repository's admins).
// Reviews are not deleted: they are dismissed.
func (s *Service) DeleteNote(ctx context.Context, base meta.Repo, n uint64, kind NoteKind, id uint64, by string, moderator bool) error {
	if kind == KindReview {
		return fmt.Errorf("%w: a review is dismissed, not deleted", ErrInvalid)
	}
	c, err := s.opts.Store.GetNote(ctx, base.ID, n, kind, id)
	if err != nil {
		return err
	}
	if !moderator && !strings.EqualFold(c.Author, by) {
		return fmt.Errorf("%w: only its author or the repository's admins delete a comment", ErrForbidden)
	}
	if err := s.opts.Store.deleteNote(ctx, base.ID, n, kind, id); err != nil {
		return err
	}
	if pr, err := s.opts.Store.Get(ctx, base.ID, n); err == nil {
		s.noteEvent(ctx, NoteEvent{Action: ActionDeleted, Note: c, PullRequest: pr, Sender: by})
	}
	return nil
}

// Notes returns a page of pull request n's notes of kind, oldest first,
// and the after of the next page (0: none). Line comments come with
// Outdated set when their line changed since (docs/adr/0127-pull-request-reviews.md).
func (s *Service) Notes(ctx context.Context, base meta.Repo, pr PullRequest, kind NoteKind, after uint64, limit int) ([]Note, uint64, error) {
	notes, next, err := s.opts.Store.ListNotes(ctx, base.ID, pr.Number, kind, after, limit)
	if err != nil || kind != KindLineComment || len(notes) == 0 {
		return notes, next, err
	}
	if err := s.markOutdated(ctx, base, pr, notes); err != nil {
		return nil, 0, err
	}
	return notes, next, nil
}

// Conversation returns a page of pull request pr's conversation: its
// reviews, comments and line comments with ids above after, merged in
// id (time) order, at most limit (MaxNotePage), and the after of the next
// page (0: none). It lists each kind's keys (three LISTs) and reads only
// the notes shown.
func (s *Service) Conversation(ctx context.Context, base meta.Repo, pr PullRequest, after uint64, limit int) ([]Note, uint64, error) {
	if limit <= 0 || limit > MaxNotePage {
		limit = MaxNotePage
	}
	type ref struct {
		id   uint64
		kind NoteKind
	}
	var refs []ref
	for _, k := range []NoteKind{KindReview, KindComment, KindLineComment} {
		ids, err := s.opts.Store.noteIDs(ctx, base.ID, pr.Number, k, after, limit+1)
		if err != nil {
			return nil, 0, err
		}
		for _, id := range ids {
			refs = append(refs, ref{id, k})
		}
	}
	slices.SortFunc(refs, func(a, b ref) int { return cmp.Compare(a.id, b.id) })
	var next uint64
	if len(refs) > limit {
		refs = refs[:limit]
		next = refs[limit-1].id
	}
	notes := make([]Note, len(refs))
	found := make([]bool, len(refs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readers)
	for i, r := range refs {
		g.Go(func() error {
			n, err := s.opts.Store.GetNote(gctx, base.ID, pr.Number, r.kind, r.id)
			switch {
			case errors.Is(err, ErrNotFound): // deleted meanwhile
				return nil
			case err != nil:
				return err
			}
			notes[i], found[i] = n, true
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	out := make([]Note, 0, len(notes))
	var lines []int
	for i, n := range notes {
		if found[i] {
			if n.Kind == KindLineComment {
				lines = append(lines, len(out))
			}
			out = append(out, n)
		}
	}
	if len(lines) > 0 {
		lc := make([]Note, len(lines))
		for j, i := range lines {
			lc[j] = out[i]
		}
		if err := s.markOutdated(ctx, base, pr, lc); err != nil {
			return nil, 0, err
		}
		for j, i := range lines {
			out[i] = lc[j]
		}
	}
	return out, next, nil
}

// markOutdated sets Outdated on the line comments whose line reads
// otherwise in the current version than where it was written: the
// head's for RIGHT, the merge base's for LEFT. A file gone, or too large
// to compare, makes its comments outdated when its blob changed.
func (s *Service) markOutdated(ctx context.Context, base meta.Repo, pr PullRequest, notes []Note) error {
	return s.onTips(ctx, base, pr, func(ctx context.Context, w *work, b, h string) error {
		return markOutdatedIn(ctx, w, b, h, notes)
	})
}

// markOutdatedIn is markOutdated's work in w, between base tip b and head
// tip h.
func markOutdatedIn(gctx context.Context, w *work, b, h string, notes []Note) error {
	var err error
	var mb string
	var specs []string
	for _, c := range notes {
		cur := h
		if c.Side == SideLeft {
			if mb == "" {
				if mb, err = w.mergeBase(gctx, b, h); err != nil {
					return err
				}
			}
			cur = mb
		}
		specs = append(specs, c.Anchor+":"+c.Path, cur+":"+c.Path)
	}
	files, err := w.files(gctx, specs, maxCommentedBlob, maxOutdatedRead)
	if err != nil {
		return err
	}
	for i := range notes {
		then, now := files[2*i], files[2*i+1]
		switch {
		case !then.found || !now.found:
			notes[i].Outdated = true
		case then.blob == now.blob:
		case then.text == nil || now.text == nil:
			notes[i].Outdated = true
		default:
			a, okA := lineAt(then.text, notes[i].Line)
			b, okB := lineAt(now.text, notes[i].Line)
			notes[i].Outdated = !okA || !okB || !bytes.Equal(a, b)
		}
	}
	return nil
}

// Decision is what a pull request's reviews say of its merge under a
// branch rule.
type Decision struct {
	// Required is the rule's required approvals (0: none).
	Required int
	// Approvers are the writers, other than the author (and the head's
	// last pusher, where the rule asks), whose verdict approves (the head
	// being merged, if stale ones are dismissed).
	Approvers []string
	// ChangesRequestedBy are the writers whose verdict requests changes.
	ChangesRequestedBy []string
	// Stale are the verdicts given on an earlier head, dismissed by the
	// rule.
	Stale []string
	// LastPusher is who pushed the head's last commit, where the rule
	// requires approval of the most recent push; LastPusherApproved says
	// their own approval was set aside. PusherUnknown says ghost could not
	// tell who pushed it, and holds the merge: an approval cannot be shown
	// to come from someone else (docs/adr/0134-last-push-approval.md).
	LastPusher         string
	LastPusherApproved bool
	PusherUnknown      bool
}

// Satisfied reports whether the reviews let the merge go ahead.
func (d Decision) Satisfied() bool {
	return d.Required == 0 || !d.PusherUnknown && len(d.Approvers) >= d.Required && len(d.ChangesRequestedBy) == 0
}

// Reason says why a merge is held, in GitHub's words where it has them.
func (d Decision) Reason() string {
	switch {
	case d.Satisfied():
		return ""
	case d.PusherUnknown:
		return "The most recent push must be approved by someone other than its pusher, and ghost cannot tell who pushed the head's last commit (it is older than the log's recent entries): push the head again."
	case len(d.ChangesRequestedBy) > 0:
		return "Changes were requested by " + strings.Join(d.ChangesRequestedBy, ", ") + "; their approval is needed."
	case d.LastPusherApproved:
		reviews := "reviews"
		if len(d.Approvers) == 1 {
			reviews = "review"
		}
		return fmt.Sprintf("The most recent push, by %s, must be approved by someone other than %s (%d other approving %s given, %d required).", d.LastPusher, d.LastPusher, len(d.Approvers), reviews, d.Required)
	case d.Required == 1:
		return fmt.Sprintf("At least 1 approving review is required by reviewers with write access (%d given).", len(d.Approvers))
	}
	return fmt.Sprintf("At least %d approving reviews are required by reviewers with write access (%d given).", d.Required, len(d.Approvers))
}

// Decide reads pr's verdicts under the rule of its base branch in rules,
// for a merge of head whose last commit pusher pushed ("" when unknown;
// read only where the rule requires approval of the most recent push).
func Decide(pr PullRequest, rules []access.BranchRule, head, pusher string) Decision {
	rule, ok := access.RuleFor(rules, pr.Base)
	if !ok || rule.RequiredApprovals <= 0 {
		return Decision{}
	}
	d := Decision{Required: rule.RequiredApprovals}
	if rule.LastPushApproval() {
		d.LastPusher, d.PusherUnknown = pusher, pusher == ""
	}
	for _, v := range pr.Verdicts {
		switch {
		case !v.Writer || strings.EqualFold(v.User, pr.Author):
		case rule.DismissStaleApprovals && v.Commit != head:
			d.Stale = append(d.Stale, v.User)
		case v.State == Approved && d.LastPusher != "" && strings.EqualFold(v.User, d.LastPusher):
			d.LastPusherApproved = true
		case v.State == Approved:
			d.Approvers = append(d.Approvers, v.User)
		case v.State == ChangesRequested:
			d.ChangesRequestedBy = append(d.ChangesRequestedBy, v.User)
		}
	}
	return d
}

// file is a blob read for line comments.
type file struct {
	found bool
	blob  string
	text  []byte // nil: larger than allowed
}

// files reads the blobs specs name ("<commit>:<path>") with one git
// cat-file --batch: each one's id and, within maxEach and a total of
// maxTotal, its bytes (the same blob is read once).
func (w *work) files(ctx context.Context, specs []string, maxEach, maxTotal int64) ([]file, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	for _, sp := range specs {
		if strings.ContainsAny(sp, "\n\r") {
			return nil, fmt.Errorf("%w: a path with a line break", ErrInvalid)
		}
	}
	cmd := w.git.Command(ctx, w.dir, w.env, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(strings.Join(specs, "\n") + "\n")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, cmd.Wrap(err)
	}
	out := make([]file, len(specs))
	seen := map[string][]byte{}
	br := bufio.NewReader(stdout)
	var total int64
	var rerr error
	for i := range specs {
		line, err := br.ReadString('\n')
		if err != nil {
			rerr = fmt.Errorf("cat-file: %w", err)
			break
		}
		f := strings.Fields(line)
		if len(f) == 2 && f[1] == "missing" || len(f) == 3 && f[1] == "ambiguous" {
			continue
		}
		if len(f) != 3 {
			rerr = fmt.Errorf("cat-file: %q", strings.TrimSpace(line))
			break
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || size < 0 {
			rerr = fmt.Errorf("cat-file: %q", strings.TrimSpace(line))
			break
		}
		keep := f[1] == "blob" && size <= maxEach && total+size <= maxTotal && seen[f[0]] == nil
		var buf []byte
		if keep {
			buf = make([]byte, size)
			_, err = io.ReadFull(br, buf)
			total += size
		} else {
			_, err = io.CopyN(io.Discard, br, size)
		}
		if err == nil {
			_, err = br.Discard(1) // the newline after the object
		}
		if err != nil {
			rerr = fmt.Errorf("cat-file: %w", err)
			break
		}
		if f[1] != "blob" {
			continue // a tree or a submodule: not a file
		}
		if keep {
			seen[f[0]] = buf
		}
		out[i] = file{found: true, blob: f[0], text: seen[f[0]]}
	}
	if rerr != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, rerr
	}
	if err := cmd.Wait(); err != nil {
		return nil, cmd.Wrap(err)
	}
	return out, nil
}

// lineCount is the number of lines of text (a last line without a
// newline counts).
func lineCount(text []byte) int {
	n := bytes.Count(text, []byte{'\n'})
	if len(text) > 0 && text[len(text)-1] != '\n' {
		n++
	}
	return n
}

// lineAt returns line n (from 1) of text, without its newline.
func lineAt(text []byte, n int) ([]byte, bool) {
	for i := 1; len(text) > 0; i++ {
		line, rest, _ := bytes.Cut(text, []byte{'\n'})
		if i == n {
			return line, true
		}
		text = rest
	}
	return nil, false
}
