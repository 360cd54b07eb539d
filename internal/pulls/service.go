package pulls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/meta"
)

// ZeroID is the id of an absent ref in a ref update.
const ZeroID = "0000000000000000000000000000000000000000"

// Copy is a repository's copy on this node, brought up to the log.
type Copy struct {
	// Dir is the bare repository; pulls only reads it.
	Dir string
	// Refs maps each ref of the log to its id.
	Refs map[string]string
	// Head is the branch HEAD points at (refs/heads/...), or "".
	Head string
}

// Copies brings repositories' copies on this node up to the log
// (the node's cache, docs/design.md §5).
type Copies interface {
	Materialize(ctx context.Context, repoID string) (Copy, error)
}

// Update is one ref change of a Push: Old is the id the ref must have
// (ZeroID: absent), New the id it gets (ZeroID: deleted).
type Update struct {
	Ref, Old, New string
}

// Push is a change pulls makes to a repository: it goes through the push
// path as a client's push does (validation, push protection, the commit
// to the log with each Old as the compare-and-swap's precondition).
type Push struct {
	Repo meta.Repo
	// By names who made it, for the log's pushed-by field.
	By      string
	Updates []Update
	// Pack is a pack file with the objects the updates need that the
	// repository lacks, or "".
	Pack string
}

// PushResult is what became of a Push that was answered.
type PushResult struct {
	// Committed is true when the log took it.
	Committed bool
	// Moved is the ref that was not at its update's Old any more.
	Moved string
	// Blocked is a push push protection refused; Message says why.
	Blocked bool
	Message []string
	// Reasons are each refused ref's reason.
	Reasons map[string]string
}

// Pusher commits Pushes (the git service's server-side push). An error
// matching ErrOutcomeUnknown means the push may or may not have been
// committed; any other error means it was not.
type Pusher interface {
	Push(ctx context.Context, p Push) (PushResult, error)
}

// PushLog tells who pushed a commit to a branch (wal.Log.PushedBy): the
// pusher of a head's last commit, whose own approval does not count where
// a rule requires approval of the most recent push.
type PushLog interface {
	// PushedBy returns the pushed-by field of the newest of repoID's
	// recent pushes that set ref to commit, "" when none of them did.
	PushedBy(ctx context.Context, repoID, ref, commit string) (string, error)
}

// RepoLookup resolves repository names (meta.Store).
type RepoLookup interface {
	Repo(ctx context.Context, owner, name string) (meta.Repo, error)
}

// Options configure a Service.
type Options struct {
	Store  *Store          // required
	Repos  RepoLookup      // required
	Copies Copies          // required
	Pusher Pusher          // required
	Git    *gitexec.Runner // required
	// TempDir returns a scratch directory on the copies' file system.
	TempDir func() (string, error) // required
	// Refs reads a repository's refs from the log (one GET of its
	// index, wal.Log.Head), for the tips a list shows; nil leaves them
	// out of lists.
	Refs func(ctx context.Context, repoID string) (map[string]string, error)
	// Pushes tells who pushed a head's commits. Nil: nobody can be told,
	// so a rule that requires approval of the most recent push holds
	// every merge it governs (fail closed).
	Pushes PushLog
	// Events receives pull-request events (nil: none).
	Events Events
	Logger *slog.Logger
	// Email is the email of the commits a merge writes for a tenant
	// (default "<tenant>@users.noreply.ghost").
	Email func(tenant string) string
	// MergeWindow is how long a merge recorded as in flight may still
	// land: longer than the push path's own bound (gitsvc.Limits
	// PushTimeout). Default 30 minutes.
	MergeWindow time.Duration
	// GitTimeout bounds the git work of one request (mergeability,
	// commits, files, the making of a merge). Default 60 s.
	GitTimeout time.Duration
}

// Service is pull requests: their records, refs/pull/<n>/head and
// merges. It is safe for concurrent use.
type Service struct {
	opts Options
	log  *slog.Logger
	now  func() time.Time
}

// New returns a Service.
func New(o Options) (*Service, error) {
	if o.Store == nil || o.Repos == nil || o.Copies == nil || o.Pusher == nil || o.Git == nil || o.TempDir == nil {
		return nil, errors.New("pulls: Store, Repos, Copies, Pusher, Git and TempDir are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Email == nil {
		o.Email = func(t string) string { return strings.ToLower(t) + "@users.noreply.ghost" }
	}
	if o.MergeWindow <= 0 {
		o.MergeWindow = 30 * time.Minute
	}
	if o.GitTimeout <= 0 {
		o.GitTimeout = 60 * time.Second
	}
	return &Service{opts: o, log: o.Logger, now: o.Store.now}, nil
}

// Store is the record store.
func (s *Service) Store() *Store { return s.opts.Store }

func (s *Service) event(ctx context.Context, action string, pr PullRequest, by string) {
	if s.opts.Events != nil {
		s.opts.Events.PullRequest(context.WithoutCancel(ctx), Event{Action: action, PullRequest: pr, Sender: by})
	}
}

func (s *Service) noteEvent(ctx context.Context, e NoteEvent) {
	if s.opts.Events != nil {
		s.opts.Events.Note(context.WithoutCancel(ctx), e)
	}
}

// PullRef is the ref a pull request keeps in its base repository.
func PullRef(n uint64) string { return "refs/pull/" + strconv.FormatUint(n, 10) + "/head" }

func branchRef(b string) string { return "refs/heads/" + b }

// headRepo resolves the repository of pr's head: base itself, or the
// fork it names, as long as that name still leads to the same log.
func (s *Service) headRepo(ctx context.Context, base meta.Repo, pr PullRequest) (meta.Repo, error) {
	if pr.Head.RepoID == base.ID {
		return base, nil
	}
	owner, name, _ := strings.Cut(pr.Head.Repo, "/")
	r, err := s.opts.Repos.Repo(ctx, owner, name)
	if errors.Is(err, meta.ErrNotFound) || err == nil && r.ID != pr.Head.RepoID {
		return meta.Repo{}, fmt.Errorf("head repository %s: %w", pr.Head.Repo, ErrNotFound)
	}
	return r, err
}

// NewPull is what opens a pull request.
type NewPull struct {
	// Head is the repository of the head branch: base itself, or a fork
	// of it.
	Head    meta.Repo
	HeadRef string
	BaseRef string
	Title   string
	Body    string
	Author  string
}

// Create opens a pull request of base: both branches must exist, the
// head must be base itself or a fork of it, and no open pull request
// may have the same head and base (checked, not locked: two creates
// racing can both pass, docs/adr/0118-pull-request-records.md). Its
// refs/pull/<n>/head is then set; if that fails it is set again by the
// next push to the head or read of the pull request.
func (s *Service) Create(ctx context.Context, base meta.Repo, np NewPull) (PullRequest, error) {
	if np.Head.ID != base.ID && np.Head.ForkedFrom != base.FullName() {
		return PullRequest{}, fmt.Errorf("%w: %s is not %s or a fork of it", ErrInvalid, np.Head.FullName(), base.FullName())
	}
	if np.Head.ID == base.ID && np.HeadRef == np.BaseRef {
		return PullRequest{}, fmt.Errorf("%w: head and base are the same branch", ErrInvalid)
	}
	for _, b := range []string{np.HeadRef, np.BaseRef} {
		if err := checkBranch(b); err != nil {
			return PullRequest{}, err
		}
	}
	if err := CheckTitle(np.Title); err != nil {
		return PullRequest{}, err
	}
	if err := CheckBody(np.Body); err != nil {
		return PullRequest{}, err
	}
	bc, err := s.opts.Copies.Materialize(ctx, base.ID)
	if err != nil {
		return PullRequest{}, err
	}
	if bc.Refs[branchRef(np.BaseRef)] == "" {
		return PullRequest{}, fmt.Errorf("%w: base branch %q", ErrNotFound, np.BaseRef)
	}
	hc := bc
	if np.Head.ID != base.ID {
		if hc, err = s.opts.Copies.Materialize(ctx, np.Head.ID); err != nil {
			return PullRequest{}, err
		}
	}
	if hc.Refs[branchRef(np.HeadRef)] == "" {
		return PullRequest{}, fmt.Errorf("%w: head branch %q of %s", ErrNotFound, np.HeadRef, np.Head.FullName())
	}
	open, err := s.opts.Store.OpenByHead(ctx, np.Head.ID, np.HeadRef)
	if err != nil {
		return PullRequest{}, err
	}
	for _, o := range open {
		if o.RepoID == base.ID && o.Base == np.BaseRef {
			return PullRequest{}, fmt.Errorf("%w for %s:%s into %s (#%d)", ErrExists, np.Head.Owner, np.HeadRef, np.BaseRef, o.Number)
		}
	}
	pr, err := s.opts.Store.Create(ctx, PullRequest{
		RepoID: base.ID, BaseRepo: base.FullName(), Title: np.Title, Body: np.Body, Author: np.Author,
		Head: Branch{RepoID: np.Head.ID, Repo: np.Head.FullName(), Ref: np.HeadRef}, Base: np.BaseRef,
	})
	if err != nil {
		return PullRequest{}, err
	}
	if _, err := s.sync(ctx, base, pr, false); err != nil {
		s.log.Warn("pull request: setting its head ref failed; the next push or read sets it", "repo", base.FullName(), "number", pr.Number, "err", err)
	}
	s.event(ctx, ActionOpened, pr, np.Author)
	return pr, nil
}

// Get reads pull request n of base. An open one's refs/pull/<n>/head is
// brought to its head branch if a push's update of it was missed, and a
// merge recorded as in flight is settled (it landed, or it can no
// longer), so that what Get returns is what the log says.
func (s *Service) Get(ctx context.Context, base meta.Repo, n uint64) (PullRequest, error) {
	pr, err := s.opts.Store.Get(ctx, base.ID, n)
	if err != nil {
		return PullRequest{}, err
	}
	if pr.Merging != nil {
		if pr, err = s.settle(ctx, base, pr); err != nil {
			return PullRequest{}, err
		}
	}
	if pr.State == Open && pr.Merging == nil {
		if _, err := s.sync(ctx, base, pr, true); err != nil && !errors.Is(err, ErrNotFound) {
			s.log.Warn("pull request: bringing its head ref forward failed", "repo", base.FullName(), "number", n, "err", err)
		}
	}
	return pr, nil
}

// List is Store.List over base, with the tips of the open pull requests
// (HeadSHA, BaseSHA: refs/pull/<n>/head and the base branch, read from
// the log once for the page) when Options.Refs is set.
func (s *Service) List(ctx context.Context, base meta.Repo, f Filter, before uint64, limit int) ([]PullRequest, uint64, error) {
	prs, next, err := s.opts.Store.List(ctx, base.ID, f, before, limit)
	if err != nil || s.opts.Refs == nil {
		return prs, next, err
	}
	var refs map[string]string
	for i, pr := range prs {
		if pr.State != Open {
			continue
		}
		if refs == nil {
			if refs, err = s.opts.Refs(ctx, base.ID); err != nil {
				return nil, 0, err
			}
		}
		prs[i].HeadSHA, prs[i].BaseSHA = refs[PullRef(pr.Number)], refs[branchRef(pr.Base)]
	}
	return prs, next, nil
}

// Edit is a change of a pull request by its PATCH: each non-nil field.
type Edit struct {
	Title *string
	Body  *string
	// State is open or closed: closing, or reopening a closed one.
	State *State
	// Base is another branch of the base repository to merge into.
	Base *string
	// By is the tenant making the change (the event's sender).
	By string
}

// Update changes pull request n of base. Closing records the tips it was
// closed at (its commits and files are read between them afterwards);
// reopening needs the head branch. A merged pull request does not change
// state.
func (s *Service) Update(ctx context.Context, base meta.Repo, n uint64, e Edit) (PullRequest, error) {
	if e.Title != nil {
		if err := CheckTitle(*e.Title); err != nil {
			return PullRequest{}, err
		}
	}
	if e.Body != nil {
		if err := CheckBody(*e.Body); err != nil {
			return PullRequest{}, err
		}
	}
	if e.State != nil && *e.State != Open && *e.State != Closed {
		return PullRequest{}, fmt.Errorf("%w: state %q: want open or closed", ErrInvalid, *e.State)
	}
	cur, err := s.Get(ctx, base, n)
	if err != nil {
		return PullRequest{}, err
	}
	var tips struct{ base, head string }
	if e.State != nil || e.Base != nil {
		bc, err := s.opts.Copies.Materialize(ctx, base.ID)
		if err != nil {
			return PullRequest{}, err
		}
		if e.Base != nil {
			if err := checkBranch(*e.Base); err != nil {
				return PullRequest{}, err
			}
			if bc.Refs[branchRef(*e.Base)] == "" {
				return PullRequest{}, fmt.Errorf("%w: base branch %q", ErrNotFound, *e.Base)
			}
			if cur.Head.RepoID == base.ID && *e.Base == cur.Head.Ref {
				return PullRequest{}, fmt.Errorf("%w: head and base are the same branch", ErrInvalid)
			}
		}
		tips.base, tips.head = bc.Refs[branchRef(cur.Base)], bc.Refs[PullRef(n)]
		if e.State != nil && *e.State == Open && cur.State == Closed {
			head, err := s.headRepo(ctx, base, cur)
			if err != nil {
				return PullRequest{}, fmt.Errorf("%w: cannot reopen: %w", ErrState, err)
			}
			hc, err := s.opts.Copies.Materialize(ctx, head.ID)
			if err != nil {
				return PullRequest{}, err
			}
			if hc.Refs[branchRef(cur.Head.Ref)] == "" {
				return PullRequest{}, fmt.Errorf("%w: cannot reopen: the head branch %q is gone", ErrState, cur.Head.Ref)
			}
		}
	}
	action := ActionEdited
	pr, err := s.opts.Store.Update(ctx, base.ID, n, func(pr *PullRequest) (bool, error) {
		changed := false
		if e.State != nil && *e.State != pr.State {
			switch {
			case pr.State == Merged:
				return false, fmt.Errorf("%w: pull request #%d is merged", ErrState, n)
			case pr.Merging != nil:
				return false, fmt.Errorf("%w (#%d)", ErrInProgress, n)
			case *e.State == Closed:
				pr.State, pr.ClosedAt, pr.BaseSHA, pr.HeadSHA = Closed, s.now(), tips.base, tips.head
				action = ActionClosed
			default:
				pr.State, pr.ClosedAt, pr.BaseSHA, pr.HeadSHA = Open, time.Time{}, "", ""
				action = ActionReopened
			}
			changed = true
		}
		if e.Title != nil && *e.Title != pr.Title {
			pr.Title, changed = *e.Title, true
		}
		if e.Body != nil && *e.Body != pr.Body {
			pr.Body, changed = *e.Body, true
		}
		if e.Base != nil && *e.Base != pr.Base {
			if pr.State != Open {
				return false, fmt.Errorf("%w: only an open pull request changes its base", ErrState)
			}
			pr.Base, changed = *e.Base, true
		}
		if changed {
			pr.UpdatedAt = s.now()
		}
		return changed, nil
	})
	if err != nil {
		return PullRequest{}, err
	}
	if pr.Gen != cur.Gen {
		if action == ActionReopened {
			if _, err := s.sync(ctx, base, pr, false); err != nil {
				s.log.Warn("pull request: setting its head ref failed", "repo", base.FullName(), "number", n, "err", err)
			}
		}
		s.event(ctx, action, pr, e.By)
	}
	return pr, nil
}

// sync moves refs/pull/<n>/head of an open pull request to its head
// branch's tip and returns that tip (docs/adr/0117-pull-request-refs.md):
// a server push to the base repository, with the head's objects the base
// lacks when the head is a fork's. A head branch that is gone leaves the
// ref where it is. Racing syncs converge: each moves the ref from what it
// read, and one that lost reads again.
//
// With notify, a move is a "synchronize" event (a push moved the head).
func (s *Service) sync(ctx context.Context, base meta.Repo, pr PullRequest, notify bool) (string, error) {
	head, err := s.headRepo(ctx, base, pr)
	if err != nil {
		return "", err
	}
	ref := PullRef(pr.Number)
	for range 4 {
		bc, err := s.opts.Copies.Materialize(ctx, base.ID)
		if err != nil {
			return "", err
		}
		hc := bc
		if head.ID != base.ID {
			if hc, err = s.opts.Copies.Materialize(ctx, head.ID); err != nil {
				return "", err
			}
		}
		tip, cur := hc.Refs[branchRef(pr.Head.Ref)], bc.Refs[ref]
		switch {
		case tip == "":
			return cur, nil // the branch is gone: the ref keeps the last head
		case tip == cur:
			return tip, nil
		}
		old := cur
		if old == "" {
			old = ZeroID
		}
		p := Push{Repo: base, By: "ghost (pull request #" + strconv.FormatUint(pr.Number, 10) + ")", Updates: []Update{{Ref: ref, Old: old, New: tip}}}
		var w *work
		if head.ID != base.ID {
			// The head's objects the base lacks go with it.
			if w, err = newWork(s.opts.Git, s.tmp(), hc.Dir, bc.Dir); err != nil {
				return "", err
			}
			p.Pack, err = w.pack(ctx, tip, refIDs(bc.Refs))
			if err != nil {
				w.close()
				return "", fmt.Errorf("pack the head's objects: %w", err)
			}
		}
		res, err := s.opts.Pusher.Push(ctx, p)
		if w != nil {
			w.close()
		}
		switch {
		case err != nil:
			return "", err
		case res.Committed:
			if notify {
				s.event(ctx, ActionSynchronize, pr, pr.Author)
			}
			return tip, nil
		case res.Blocked:
			return "", fmt.Errorf("%w: the head's new commits: %s", ErrHeld, strings.Join(res.Message, "\n"))
		case res.Moved == ref:
			continue // another sync moved it: read again
		}
		return "", fmt.Errorf("updating %s refused: %v", ref, res.Reasons)
	}
	return "", fmt.Errorf("updating %s: %w", ref, ErrContention)
}

func (s *Service) tmp() string {
	d, err := s.opts.TempDir()
	if err != nil {
		return ""
	}
	return d
}

// refIDs is the distinct ids of refs.
func refIDs(refs map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range refs {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// HeadPushed is the push hook: branches refs (refs/heads/...) of repoID
// were pushed, so the open pull requests whose head is one of them get
// their refs/pull/<n>/head moved (docs/adr/0117-pull-request-refs.md).
// It costs one LIST of head keys per branch, and a record GET and a sync
// per pull request found. Failures are logged: the next push or read of
// the pull request syncs again.
func (s *Service) HeadPushed(ctx context.Context, repoID string, refs []string) {
	for _, ref := range refs {
		branch, ok := strings.CutPrefix(ref, "refs/heads/")
		if !ok {
			continue
		}
		prs, err := s.opts.Store.OpenByHead(ctx, repoID, branch)
		if err != nil {
			s.log.Warn("pull requests of a pushed branch: listing failed", "repo", repoID, "branch", branch, "err", err)
			continue
		}
		for _, pr := range prs {
			owner, name, _ := strings.Cut(pr.BaseRepo, "/")
			base, err := s.opts.Repos.Repo(ctx, owner, name)
			if err != nil || base.ID != pr.RepoID {
				s.log.Warn("pull request of a pushed branch: base repository not found", "repo", pr.RepoID, "number", pr.Number, "err", err)
				continue
			}
			tip, err := s.sync(ctx, base, pr, true)
			if err != nil {
				s.log.Warn("pull request: moving its head ref failed", "repo", base.FullName(), "number", pr.Number, "err", err)
				continue
			}
			s.notePusher(ctx, base, pr, tip)
		}
	}
}

// lastPusher returns who pushed head, the tip of pr's head branch: the
// record's HeadPush when it is of head, else the head repository's log
// ("" when neither can tell). With fromLog (a merge) the log answers
// first: the record may name an earlier push of the same commit. Only a rule that requires approval of the
// most recent push asks (docs/adr/0134-last-push-approval.md).
func (s *Service) lastPusher(ctx context.Context, base meta.Repo, pr PullRequest, head string, fromLog bool) (string, error) {
	rule, ok := access.RuleFor(base.BranchRules, pr.Base)
	if !ok || !rule.LastPushApproval() || head == "" {
		return "", nil
	}
	recorded := ""
	if pr.HeadPush != nil && pr.HeadPush.Commit == head {
		recorded = pr.HeadPush.By
	}
	if recorded != "" && !fromLog || s.opts.Pushes == nil {
		return recorded, nil
	}
	by, err := s.opts.Pushes.PushedBy(ctx, pr.Head.RepoID, branchRef(pr.Head.Ref), head)
	if err != nil {
		return "", err
	}
	if by == "" {
		return recorded, nil
	}
	return pusherTenant(by), nil
}

// pusherTenant is the tenant of a log entry's pushed-by field: a merge
// pushes as "<tenant> (merge of pull request #<n>)".
func pusherTenant(by string) string {
	t, _, _ := strings.Cut(by, " (")
	return strings.TrimSpace(t)
}

// notePusher records on pr who pushed tip, its head's new commit, while
// the log still lists the push: a later merge or page then reads it from
// the record, even after compaction has folded the entry. Failures are
// logged; the merge looks in the log again.
func (s *Service) notePusher(ctx context.Context, base meta.Repo, pr PullRequest, tip string) {
	if tip == "" || pr.HeadPush != nil && pr.HeadPush.Commit == tip || s.opts.Pushes == nil {
		return
	}
	by, err := s.opts.Pushes.PushedBy(ctx, pr.Head.RepoID, branchRef(pr.Head.Ref), tip)
	if err != nil || by == "" {
		if err != nil {
			s.log.Warn("pull request: reading who pushed its head failed", "repo", base.FullName(), "number", pr.Number, "err", err)
		}
		return
	}
	hp := &HeadPush{Commit: tip, By: pusherTenant(by)}
	if _, err := s.opts.Store.Update(ctx, base.ID, pr.Number, func(cur *PullRequest) (bool, error) {
		if cur.State != Open || cur.HeadPush != nil && *cur.HeadPush == *hp {
			return false, nil
		}
		cur.HeadPush = hp
		return true, nil
	}); err != nil {
		s.log.Warn("pull request: recording who pushed its head failed", "repo", base.FullName(), "number", pr.Number, "err", err)
	}
}
