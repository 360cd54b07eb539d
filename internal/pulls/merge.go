package pulls

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ghost-scm/ghost/internal/meta"
)

// MergeOptions are a merge's parameters (GitHub's PUT .../merge body).
type MergeOptions struct {
	// Method is the strategy; "" is merge.
	Method Method
	// SHA, when set, is the head the caller reviewed: a head at another
	// commit is ErrHeadChanged.
	SHA string
	// CommitTitle and CommitMessage replace the merge or squash commit's
	// default message.
	CommitTitle   string
	CommitMessage string
	// DeleteBranch deletes the head branch once merged: in the same log
	// commit as the merge when the head is the base repository's, after
	// it in a fork.
	DeleteBranch bool
	// By is the merging tenant: the committer of what the merge writes.
	By string
}

// MergeError is a refused merge with what to show for it: the
// conflicting files, or push protection's message.
type MergeError struct {
	Err       error // ErrNotMergeable, ErrHeld, ...
	Conflicts []string
	Message   []string
}

func (e *MergeError) Error() string {
	msg := e.Err.Error()
	if len(e.Conflicts) > 0 {
		msg += ": " + strings.Join(e.Conflicts, ", ")
	}
	return msg
}

// Unwrap returns the kind of refusal.
func (e *MergeError) Unwrap() error { return e.Err }

// Merge merges pull request n of base (docs/adr/0119-server-side-merge.md).
// It brings refs/pull/<n>/head to the head branch, makes the merge in a
// scratch area beside this node's copy of base (git merge-tree
// --write-tree, no work tree), records the merge as in flight on the
// pull request, and commits the base's new tip through the push path
// with the base's old tip as the compare-and-swap's precondition: a base
// a push or another merge moved meanwhile is ErrBaseChanged and nothing
// is written; push protection refuses (ErrHeld) a merge that adds a
// secret. Then the pull request is marked merged. A merge whose commit's
// outcome is unknown stays recorded as in flight, and Get settles it.
func (s *Service) Merge(ctx context.Context, base meta.Repo, n uint64, o MergeOptions) (PullRequest, error) {
	if o.Method == "" {
		o.Method = MethodMerge
	}
	if !o.Method.Valid() {
		return PullRequest{}, fmt.Errorf("%w: merge_method %q: want merge, squash or rebase", ErrInvalid, o.Method)
	}
	if !base.AllowsMerge(string(o.Method)) {
		return PullRequest{}, fmt.Errorf("%w: %s does not allow %s merges", ErrMethodNotAllowed, base.FullName(), o.Method)
	}
	if o.CommitTitle != "" {
		if err := CheckTitle(o.CommitTitle); err != nil {
			return PullRequest{}, err
		}
	}
	if err := CheckBody(o.CommitMessage); err != nil {
		return PullRequest{}, err
	}
	if o.SHA != "" && !isOID(o.SHA) {
		return PullRequest{}, fmt.Errorf("%w: sha %q: want a full commit id", ErrInvalid, o.SHA)
	}
	pr, err := s.opts.Store.Get(ctx, base.ID, n)
	if err != nil {
		return PullRequest{}, err
	}
	if pr.Merging != nil {
		if pr, err = s.settle(ctx, base, pr); err != nil {
			return PullRequest{}, err
		}
	}
	// A merge still in flight is refused when this one records its own
	// (below), by the same compare-and-swap that serializes them.
	if pr.State != Open {
		return PullRequest{}, fmt.Errorf("%w: pull request #%d is %s", ErrState, n, pr.State)
	}
	head, err := s.sync(ctx, base, pr, true)
	if err != nil {
		return PullRequest{}, err
	}
	if o.SHA != "" && o.SHA != head {
		return PullRequest{}, fmt.Errorf("%w: the head is %s, not %s", ErrHeadChanged, head, o.SHA)
	}
	// Checked here before any work, and again below on the record the
	// merge is recorded in flight on, so that a dismissal or a change
	// request that races the merge is honoured.
	// Who pushed head is read once: the merge merges head, whatever
	// is pushed to the branch after (docs/adr/0134-last-push-approval.md).
	pusher, err := s.lastPusher(ctx, base, pr, head, true)
	if err != nil {
		return PullRequest{}, err
	}
	if d := Decide(pr, base.BranchRules, head, pusher); !d.Satisfied() {
		return PullRequest{}, &MergeError{Err: ErrReviewRequired, Message: []string{d.Reason()}}
	}
	bc, err := s.opts.Copies.Materialize(ctx, base.ID)
	if err != nil {
		return PullRequest{}, err
	}
	old := bc.Refs[branchRef(pr.Base)]
	if old == "" {
		return PullRequest{}, fmt.Errorf("%w: base branch %q", ErrNotFound, pr.Base)
	}
	gctx, cancel := context.WithTimeout(ctx, s.opts.GitTimeout)
	defer cancel()
	w, err := newWork(s.opts.Git, s.tmp(), bc.Dir)
	if err != nil {
		return PullRequest{}, err
	}
	defer w.close()
	spec, err := s.mergeSpec(gctx, w, base, pr, o, old, head)
	if err != nil {
		return PullRequest{}, err
	}
	commit, conflicts, err := w.merge(gctx, spec)
	if err != nil {
		if errors.Is(err, ErrNotMergeable) {
			return PullRequest{}, &MergeError{Err: err, Conflicts: conflicts}
		}
		return PullRequest{}, fmt.Errorf("make the merge: %w", err)
	}
	pack, err := w.pack(gctx, commit, []string{old, head})
	if err != nil {
		return PullRequest{}, fmt.Errorf("pack the merge: %w", err)
	}
	push := Push{Repo: base, By: o.By + " (merge of pull request #" + fmt.Sprint(n) + ")", Pack: pack,
		Updates: []Update{{Ref: branchRef(pr.Base), Old: old, New: commit}}}
	headBranch := branchRef(pr.Head.Ref)
	if o.DeleteBranch && pr.Head.RepoID == base.ID && bc.Refs[headBranch] == head && headBranch != bc.Head {
		// One commit: the branch goes with the merge, or neither happens.
		push.Updates = append(push.Updates, Update{Ref: headBranch, Old: head, New: ZeroID})
	}

	// Recorded before the commit: a merge that lands and is not marked
	// (a crash, an unknown outcome) is recognised by its commit.
	inFlight := &Merging{Commit: commit, Old: old, Head: head, Method: o.Method, By: o.By, At: s.now()}
	if _, err := s.opts.Store.Update(ctx, base.ID, n, func(cur *PullRequest) (bool, error) {
		switch {
		case cur.Merging != nil:
			return false, fmt.Errorf("%w (#%d)", ErrInProgress, n)
		case cur.State != Open:
			return false, fmt.Errorf("%w: pull request #%d is %s", ErrState, n, cur.State)
		case cur.Base != pr.Base:
			return false, fmt.Errorf("%w: its base was changed to %q", ErrBaseChanged, cur.Base)
		}
		if d := Decide(*cur, base.BranchRules, head, pusher); !d.Satisfied() {
			return false, &MergeError{Err: ErrReviewRequired, Message: []string{d.Reason()}}
		}
		cur.Merging = inFlight
		return true, nil
	}); err != nil {
		return PullRequest{}, err
	}
	res, err := s.opts.Pusher.Push(ctx, push)
	switch {
	case err != nil && errors.Is(err, ErrOutcomeUnknown):
		// Left in flight: the next read of the pull request settles it.
		return PullRequest{}, fmt.Errorf("merge of #%d: %w", n, ErrOutcomeUnknown)
	case err != nil:
		s.clearMerging(base.ID, n, commit)
		return PullRequest{}, fmt.Errorf("merge of #%d: %w", n, err)
	case !res.Committed:
		s.clearMerging(base.ID, n, commit)
		switch {
		case res.Blocked:
			return PullRequest{}, &MergeError{Err: ErrHeld, Message: res.Message}
		case res.Moved == branchRef(pr.Base):
			return PullRequest{}, fmt.Errorf("merge of #%d: %w", n, ErrBaseChanged)
		case res.Moved == headBranch:
			return PullRequest{}, fmt.Errorf("merge of #%d: %w", n, ErrHeadChanged)
		}
		return PullRequest{}, &MergeError{Err: fmt.Errorf("%w: the push path refused it: %v", ErrNotMergeable, res.Reasons), Message: res.Message}
	}
	merged, err := s.markMerged(ctx, base.ID, n, inFlight)
	if err != nil {
		// The merge is committed: that is the answer. The record says
		// in flight until the next read finds the commit and settles it.
		s.log.Warn("pull request: merged, but marking it merged failed; the next read does", "repo", base.FullName(), "number", n, "err", err)
		merged = pr
		merged.State, merged.MergeCommit, merged.MergeMethod, merged.MergedBy = Merged, commit, o.Method, o.By
		merged.MergedAt, merged.BaseSHA, merged.HeadSHA = inFlight.At, old, head
	}
	if o.DeleteBranch && pr.Head.RepoID != base.ID {
		s.deleteForkBranch(ctx, base, pr, head, o.By)
	}
	s.event(ctx, ActionClosed, merged, o.By)
	return merged, nil
}

// mergeSpec is the merge to make of pr with o, from base tip old and
// head tip head.
func (s *Service) mergeSpec(ctx context.Context, w *work, base meta.Repo, pr PullRequest, o MergeOptions, old, head string) (mergeSpec, error) {
	now := s.now()
	by := identity{name: cleanIdentity(o.By), email: s.opts.Email(cleanIdentity(o.By)), when: now}
	spec := mergeSpec{method: o.Method, base: old, head: head, author: by, committer: by}
	switch o.Method {
	case MethodMerge:
		headOwner, _, _ := strings.Cut(pr.Head.Repo, "/")
		spec.title = fmt.Sprintf("Merge pull request #%d from %s/%s", pr.Number, headOwner, pr.Head.Ref)
		spec.msg = pr.Title
	case MethodSquash:
		spec.author = identity{name: cleanIdentity(pr.Author), email: s.opts.Email(cleanIdentity(pr.Author)), when: now}
		spec.title = fmt.Sprintf("%s (#%d)", pr.Title, pr.Number)
		ids, _, err := w.revList(ctx, head, old, maxRebaseCommits)
		if err != nil {
			return mergeSpec{}, err
		}
		commits, err := w.readCommits(ctx, ids)
		if err != nil {
			return mergeSpec{}, err
		}
		var b strings.Builder
		for i, c := range commits {
			if i > 0 {
				b.WriteString("\n")
			}
			b.WriteString("* " + strings.TrimRight(c.message, "\n") + "\n")
			if b.Len() > MaxBodyBytes/2 {
				break
			}
		}
		spec.msg = b.String()
	}
	if o.CommitTitle != "" {
		spec.title = o.CommitTitle
	}
	if o.CommitMessage != "" {
		spec.msg = o.CommitMessage
	}
	return spec, nil
}

// markMerged records the merge in flight as done.
func (s *Service) markMerged(ctx context.Context, repoID string, n uint64, m *Merging) (PullRequest, error) {
	return s.opts.Store.Update(ctx, repoID, n, func(pr *PullRequest) (bool, error) {
		if pr.State == Merged {
			return false, nil
		}
		if pr.Merging == nil || pr.Merging.Commit != m.Commit {
			return false, fmt.Errorf("%w: pull request #%d is no longer merging %s", ErrState, n, m.Commit)
		}
		now := s.now()
		pr.State, pr.Merging = Merged, nil
		pr.MergedAt, pr.ClosedAt, pr.UpdatedAt = now, now, now
		pr.MergedBy, pr.MergeCommit, pr.MergeMethod = m.By, m.Commit, m.Method
		pr.BaseSHA, pr.HeadSHA = m.Old, m.Head
		return true, nil
	})
}

// clearMerging forgets a merge in flight that certainly did not land,
// best effort on a context of its own (Get settles one left behind).
func (s *Service) clearMerging(repoID string, n uint64, commit string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.GitTimeout)
	defer cancel()
	_, err := s.opts.Store.Update(ctx, repoID, n, func(pr *PullRequest) (bool, error) {
		if pr.Merging == nil || pr.Merging.Commit != commit {
			return false, nil
		}
		pr.Merging = nil
		return true, nil
	})
	if err != nil {
		s.log.Warn("pull request: clearing a failed merge failed; the next read clears it", "repo", repoID, "number", n, "err", err)
	}
}

// settle decides a merge recorded as in flight: if its commit is in the
// base branch's history it landed and the pull request is marked merged;
// if not and it is older than MergeWindow it can no longer land and is
// forgotten; otherwise it is still in flight.
func (s *Service) settle(ctx context.Context, base meta.Repo, pr PullRequest) (PullRequest, error) {
	m := pr.Merging
	bc, err := s.opts.Copies.Materialize(ctx, base.ID)
	if err != nil {
		return PullRequest{}, err
	}
	landed := false
	if tip := bc.Refs[branchRef(pr.Base)]; tip != "" {
		w, err := newWork(s.opts.Git, s.tmp(), bc.Dir)
		if err != nil {
			return PullRequest{}, err
		}
		defer w.close()
		// The copy holds exactly the log's objects: a commit it lacks
		// never landed.
		if _, err := w.run(ctx, nil, "cat-file", "-e", m.Commit+"^{commit}"); err == nil {
			if landed, err = w.isAncestor(ctx, m.Commit, tip); err != nil {
				return PullRequest{}, err
			}
		}
	}
	switch {
	case landed:
		merged, err := s.markMerged(ctx, base.ID, pr.Number, m)
		if err != nil {
			return PullRequest{}, err
		}
		s.event(ctx, ActionClosed, merged, merged.MergedBy)
		return merged, nil
	case s.now().Sub(m.At) > s.opts.MergeWindow:
		return s.opts.Store.Update(ctx, base.ID, pr.Number, func(cur *PullRequest) (bool, error) {
			if cur.Merging == nil || cur.Merging.Commit != m.Commit {
				return false, nil
			}
			cur.Merging = nil
			return true, nil
		})
	}
	return pr, nil
}

// deleteForkBranch deletes a merged fork head's branch, best effort: the
// merge is done whatever becomes of it.
func (s *Service) deleteForkBranch(ctx context.Context, base meta.Repo, pr PullRequest, head, by string) {
	fork, err := s.headRepo(ctx, base, pr)
	if err == nil {
		var res PushResult
		res, err = s.opts.Pusher.Push(ctx, Push{Repo: fork, By: by, Updates: []Update{{Ref: branchRef(pr.Head.Ref), Old: head, New: ZeroID}}})
		if err == nil && !res.Committed {
			err = fmt.Errorf("refused: %v", res.Reasons)
		}
	}
	if err != nil {
		s.log.Info("pull request: the fork's head branch was not deleted", "repo", base.FullName(), "number", pr.Number, "err", err)
	}
}

// Status is what a pull request's page shows beside its record.
type Status struct {
	// HeadSHA and BaseSHA are the tips it is read between: the head ref
	// and the base branch while open, what it closed or merged at after.
	HeadSHA, BaseSHA string
	// Mergeable is nil when it is not open or cannot be told; Conflicts
	// are the conflicting files when it is false.
	Mergeable *bool
	// MergeableState is GitHub's: clean, dirty (conflicts) or unknown.
	MergeableState string
	Conflicts      []string
	// Reviews is what the reviews say under the base branch's rule
	// (docs/adr/0127-pull-request-reviews.md); a merge it does not
	// satisfy is held, and MergeableState is then GitHub's "blocked".
	Reviews Decision
}

// Status reads pr's tips and, while it is open, whether its head merges
// into its base cleanly (git merge-tree, in a scratch area: nothing is
// written).
func (s *Service) Status(ctx context.Context, base meta.Repo, pr PullRequest) (Status, error) {
	if pr.State != Open {
		return Status{HeadSHA: pr.HeadSHA, BaseSHA: pr.BaseSHA, MergeableState: "unknown"}, nil
	}
	bc, err := s.opts.Copies.Materialize(ctx, base.ID)
	if err != nil {
		return Status{}, err
	}
	st := Status{HeadSHA: bc.Refs[PullRef(pr.Number)], BaseSHA: bc.Refs[branchRef(pr.Base)], MergeableState: "unknown"}
	pusher, err := s.lastPusher(ctx, base, pr, st.HeadSHA, false)
	if err != nil {
		return Status{}, err
	}
	st.Reviews = Decide(pr, base.BranchRules, st.HeadSHA, pusher)
	if st.HeadSHA == "" || st.BaseSHA == "" || pr.Merging != nil {
		return st, nil
	}
	gctx, cancel := context.WithTimeout(ctx, s.opts.GitTimeout)
	defer cancel()
	w, err := newWork(s.opts.Git, s.tmp(), bc.Dir)
	if err != nil {
		return Status{}, err
	}
	defer w.close()
	_, conflicts, err := w.mergeTree(gctx, st.BaseSHA, st.HeadSHA)
	switch {
	case err == nil && !st.Reviews.Satisfied():
		st.Mergeable, st.MergeableState = ptr(true), "blocked"
	case err == nil:
		st.Mergeable, st.MergeableState = ptr(true), "clean"
	case errors.Is(err, ErrNotMergeable):
		st.Mergeable, st.MergeableState, st.Conflicts = ptr(false), "dirty", conflicts
	default:
		s.log.Warn("pull request: mergeability not computed", "repo", base.FullName(), "number", pr.Number, "err", err)
	}
	return st, nil
}

func ptr[T any](v T) *T { return &v }
