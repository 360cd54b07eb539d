package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/hooks"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/pulls"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/wal"
	"github.com/ghost-scm/ghost/internal/webhook"
)

// WebhookOptions configure webhook delivery
// (docs/adr/0105-webhook-delivery.md). The zero value delivers with the
// default address policy (no loopback, private or link-local address),
// 10 s per attempt, retries for 24 h.
type WebhookOptions struct {
	// Policy says which addresses deliveries may connect to (serve's
	// --webhook-allow-private and --webhook-allow-cidr).
	Policy webhook.Policy
	// Dialer and Resolver replace the system's (tests inject a dialer
	// that refuses every address but 127.0.0.1).
	Dialer   webhook.Dialer
	Resolver webhook.Resolver
	// Timeout bounds one attempt (default 10 s).
	Timeout time.Duration
	// Retries (hooks.DispatchOptions): the first pause, its cap, how long
	// an event is retried, and how many given-up events in a row turn a
	// hook off.
	RetryBase, RetryMax, RetryFor time.Duration
	DisableAfter                  int
	// HoldTTL is how long a dead node keeps its hooks from the others
	// (default 30 s).
	HoldTTL time.Duration
	// Reconcile tunes the pass over the pending marks and the sweep.
	Reconcile hooks.ReconcileOptions
	// BaseURL is the server's public URL, for the URLs in payloads
	// (default http://localhost).
	BaseURL string
	// TakeJitter is how long a node waits before taking a hook another
	// node posted (hooks.DispatchOptions); negative: none.
	TakeJitter time.Duration
	// Off turns delivery off on this node: hooks are still kept and their
	// events queued, and other nodes deliver them.
	Off bool
}

// boards makes the coordination store's board of hooks, once per backend.
type boards struct {
	c   Coordination
	ttl time.Duration

	mu      sync.Mutex
	backend coord.Backend
	board   *etcdcoord.Board
}

// boarder is what a coordination backend that can hold boards offers
// (etcdcoord.Backend).
type boarder interface {
	Board(name string, ttl time.Duration) (*etcdcoord.Board, error)
}

func (b *boards) get() hooks.Board {
	if b.c == nil {
		return nil
	}
	be, ok := b.c.Backend()
	if !ok {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.backend == be && b.board != nil {
		return b.board
	}
	bb, ok := be.(boarder)
	if !ok {
		return nil
	}
	bd, err := bb.Board("hooks", b.ttl)
	if err != nil {
		return nil
	}
	b.backend, b.board = be, bd
	return bd
}

func (b *boards) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.board != nil {
		_ = b.board.Close()
		b.board = nil
	}
}

// setupWebhooks builds the hook store and the dispatcher, and wires the
// event sources: alerts (created, resolved, reopened, bypassed) and scan
// runs (completed). Pushes are read from the log, and repository events
// come from the API.
func (s *Server) setupWebhooks(opts WebhookOptions) {
	if opts.BaseURL == "" {
		opts.BaseURL = "http://localhost"
	}
	if opts.HoldTTL <= 0 {
		opts.HoldTTL = 30 * time.Second
	}
	s.hooks = hooks.New(hooks.Options{Store: s.opts.Store, Log: s.log, Meta: s.meta, Policy: opts.Policy, BaseURL: opts.BaseURL, Logger: s.logger})
	s.boards = &boards{c: s.opts.Coordination, ttl: opts.HoldTTL}
	s.webhookOpts = opts
	s.dispatcher = hooks.NewDispatcher(s.hooks, hooks.DispatchOptions{
		Board: s.boards.get,
		Sender: webhook.Options{
			Policy: opts.Policy, Dialer: opts.Dialer, Resolver: opts.Resolver, Timeout: opts.Timeout,
		},
		Cache: s.cache, Git: s.bgWork.Runner(s.cache.Git()),
		RetryBase: opts.RetryBase, RetryMax: opts.RetryMax, RetryFor: opts.RetryFor, DisableAfter: opts.DisableAfter,
		TakeJitter: opts.TakeJitter, Logger: s.logger, Metrics: hooks.NewMetrics(s.registry),
	})
	if !opts.Off {
		s.hooks.SetWake(s.dispatcher.Notify)
	}
	s.alerts.SetNotify(s.alertEvent)
}

// webhookTimeout bounds what a push or an alert change does for hooks
// after it landed, off the request's path.
const webhookTimeout = time.Minute

// beforeCommitHooks is the push path's step before the commit point: the
// repository's pending mark, when it has hooks that follow the log.
func (s *Server) beforeCommitHooks(ctx context.Context, req gitsvc.Request) error {
	if req.Tenant == "" {
		return nil
	}
	return s.hooks.BeforePush(ctx, req.Tenant, req.Repo, req.Name)
}

// afterCommitHooks wakes the dispatcher for a committed push, in the
// background: the push's answer never waits for it.
func (s *Server) afterCommitHooks(req gitsvc.Request, _ wal.Result) {
	if req.Tenant == "" || s.webhookOpts.Off {
		return
	}
	s.background(webhookTimeout, func(ctx context.Context) { s.dispatcher.AfterPush(ctx, req.Tenant, req.Repo, req.Name) })
}

// alertEvent queues GitHub's secret_scanning_alert event for an alert
// change. The change has landed: a failure to queue is logged.
func (s *Server) alertEvent(ctx context.Context, n alerts.Notice) {
	a := n.Alert
	wa := webhook.Alert{
		ID: a.Fingerprint, RuleID: a.RuleID, Description: a.Description, State: string(a.State),
		Resolution: string(a.Resolution), ResolvedBy: a.ResolvedBy, ResolvedAt: a.ResolvedAt, Comment: a.Comment,
		CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, Repo: webhook.Repository{ID: a.RepoID, Owner: a.Tenant, BaseURL: s.webhookOpts.BaseURL},
	}
	if b := n.Bypass; b != nil {
		wa.BypassedBy, wa.BypassedAt, wa.BypassReason = b.By, b.At, string(b.Reason)
	}
	payload, err := webhook.AlertPayload(n.Action, wa)
	if err == nil {
		sender := n.By
		if i := indexByte(sender, ' '); i > 0 {
			sender = sender[:i] // "alice (token ...)": the tenant
		}
		err = s.hooks.Enqueue(ctx, hooks.Event{
			Name: hooks.EventAlert, Repo: hooks.RepoRef{Tenant: a.Tenant, ID: a.RepoID},
			Payload: payload, Sender: sender, ID: "alert/" + a.Fingerprint + "/" + n.ID, At: a.UpdatedAt,
		})
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.logger.WarnContext(ctx, "queueing a secret_scanning_alert webhook event failed; it is lost", "tenant", a.Tenant, "repo", a.RepoID, "action", n.Action, "err", err)
	}
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// scanRunEvent queues ghost's scan_run event for a run that completed.
func (s *Server) scanRunEvent(ctx context.Context, r scanner.Run) {
	wr := webhook.ScanRun{ID: r.ID, Kind: string(r.Kind), Seq: r.Seq, CreatedAt: r.CreatedAt}
	if f := r.Final; f != nil {
		wr.Shards, wr.Blobs, wr.Bytes, wr.Found, wr.FinishedAt = f.Shards, f.Blobs, f.Bytes, f.Findings, f.At
	}
	payload, err := webhook.ScanRunPayload(wr)
	if err == nil {
		err = s.hooks.Enqueue(ctx, hooks.Event{
			Name: hooks.EventScanRun, Repo: hooks.RepoRef{Tenant: r.Tenant, ID: r.RepoID}, Payload: payload,
			ID: fmt.Sprintf("scan/%d", r.ID), At: wr.FinishedAt,
		})
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.logger.WarnContext(ctx, "queueing a scan_run webhook event failed; it is lost", "tenant", r.Tenant, "repo", r.RepoID, "run", r.ID, "err", err)
	}
}

// Hooks returns the webhook store.
func (s *Server) Hooks() *hooks.Store { return s.hooks }

// Dispatcher returns the webhook dispatcher.
func (s *Server) Dispatcher() *hooks.Dispatcher { return s.dispatcher }

// leader is what a coordination backend offers when it can elect one
// process of many (etcdcoord.Backend).
type leader interface {
	Lead(ctx context.Context, name string, ttl time.Duration, fn func(ctx context.Context)) error
}

// lead runs fn while this node leads name among the nodes of its
// coordination store (etcdcoord's election, which campaigns again when
// fn returns or leadership is lost), waiting for the store to open
// first; a backend that cannot elect (tests) runs fn here. The caller
// must have a coordination store.
func (s *Server) lead(ctx context.Context, name string, ttl time.Duration, fn func(ctx context.Context)) error {
	for ctx.Err() == nil {
		b, ok := s.opts.Coordination.Backend()
		if !ok {
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
			continue
		}
		if l, ok := b.(leader); ok {
			return l.Lead(ctx, name, ttl, fn)
		}
		fn(ctx)
	}
	return ctx.Err()
}

// RunWebhooks delivers webhook events until ctx ends: the dispatcher,
// and the reconciler of pending marks under an election. Without a
// coordination store nothing is delivered, and events wait in the object
// store for one.
func (s *Server) RunWebhooks(ctx context.Context) error {
	if s.webhookOpts.Off || s.opts.Coordination == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = s.dispatcher.Run(ctx)
	}()
	_ = s.dispatcher.RunReconciler(ctx, s.lead, s.webhookOpts.Reconcile)
	wg.Wait()
	s.boards.close()
	return ctx.Err()
}

// pullEvents is the pull-request service's hook point (pulls.Events): it
// queues GitHub's pull_request webhook event for each change, in the
// background (the change has landed; its request never waits for hooks),
// and tells Options.PullEvents too when set.
type pullEvents struct{ s *Server }

func (p pullEvents) PullRequest(ctx context.Context, e pulls.Event) {
	s := p.s
	if s.opts.PullEvents != nil {
		s.opts.PullEvents.PullRequest(ctx, e)
	}
	if s.hooks == nil {
		return
	}
	s.background(webhookTimeout, func(ctx context.Context) { s.pullEvent(ctx, e) })
}

// pullEvent queues the pull_request event of e. A failure is logged:
// the event is lost, as other queued events are
// (docs/adr/0105-webhook-delivery.md).
func (s *Server) pullEvent(ctx context.Context, e pulls.Event) {
	pr := e.PullRequest
	err := func() error {
		wp, base, err := s.hookPull(ctx, pr)
		if err != nil {
			return err
		}
		payload, err := webhook.PullRequestPayload(e.Action, wp)
		if err != nil {
			return err
		}
		id := fmt.Sprintf("pull/%s/%d/%d/%s", pr.RepoID, pr.Number, pr.Gen, e.Action)
		if e.Action == pulls.ActionSynchronize {
			id += "/" + wp.Head.SHA // a head push does not write the record
		}
		return s.hooks.Enqueue(ctx, hooks.Event{
			Name: hooks.EventPullRequest, Repo: hooks.RepoRef{Tenant: base.Owner, ID: pr.RepoID, Name: base.Name},
			Payload: payload, Sender: e.Sender, ID: id, Repository: &base,
		})
	}()
	if err != nil && !errors.Is(err, context.Canceled) {
		owner, _, _ := strings.Cut(pr.BaseRepo, "/")
		s.logger.WarnContext(ctx, "queueing a pull_request webhook event failed; it is lost", "tenant", owner, "repo", pr.RepoID, "number", pr.Number, "action", e.Action, "err", err)
	}
}

func (p pullEvents) Note(ctx context.Context, e pulls.NoteEvent) {
	s := p.s
	if s.opts.PullEvents != nil {
		s.opts.PullEvents.Note(ctx, e)
	}
	if s.hooks == nil {
		return
	}
	s.background(webhookTimeout, func(ctx context.Context) { s.noteEvent(ctx, e) })
}

// noteKind names a kind of note as webhook.Note does.
func noteKind(k pulls.NoteKind) string {
	switch k {
	case pulls.KindComment:
		return "comment"
	case pulls.KindReview:
		return "review"
	}
	return "line"
}

// noteEvent queues the issue_comment, pull_request_review or
// pull_request_review_comment event of e, as pullEvent does.
func (s *Server) noteEvent(ctx context.Context, e pulls.NoteEvent) {
	pr, n := e.PullRequest, e.Note
	err := func() error {
		wp, base, err := s.hookPull(ctx, pr)
		if err != nil {
			return err
		}
		name, payload, err := webhook.NotePayload(e.Action, webhook.Note{
			Kind: noteKind(n.Kind), ID: n.ID, Author: n.Author, Body: n.Body, State: string(n.State), CommitID: n.CommitID,
			CreatedAt: n.CreatedAt, UpdatedAt: n.UpdatedAt, Path: n.Path, Line: n.Line, Side: n.Side, ReviewID: n.ReviewID, InReplyTo: n.InReplyTo,
		}, wp)
		if err != nil {
			return err
		}
		return s.hooks.Enqueue(ctx, hooks.Event{
			Name: name, Repo: hooks.RepoRef{Tenant: base.Owner, ID: pr.RepoID, Name: base.Name},
			Payload: payload, Sender: e.Sender, ID: fmt.Sprintf("note/%s/%s/%d/%s/%d", pr.RepoID, n.Kind, n.ID, e.Action, n.UpdatedAt.UnixMilli()),
			Repository: &base,
		})
	}()
	if err != nil && !errors.Is(err, context.Canceled) {
		s.logger.WarnContext(ctx, "queueing a pull-request comment's webhook event failed; it is lost", "repo", pr.RepoID, "number", pr.Number, "action", e.Action, "err", err)
	}
}

// hookPull describes pr as payloads show it. The head's and base's tips
// of an open pull request are read from the base's log (one GET of its
// index): refs/pull/<n>/head and the base branch; a closed or merged one
// carries the tips its close or merge saw.
func (s *Server) hookPull(ctx context.Context, pr pulls.PullRequest) (webhook.PullRequest, webhook.Repository, error) {
	base, err := s.hookRepo(ctx, pr.RepoID, pr.BaseRepo)
	if err != nil {
		return webhook.PullRequest{}, base, err
	}
	head := base
	if pr.Head.RepoID != pr.RepoID {
		if head, err = s.hookRepo(ctx, pr.Head.RepoID, pr.Head.Repo); err != nil {
			return webhook.PullRequest{}, base, err
		}
	}
	headSHA, baseSHA := pr.HeadSHA, pr.BaseSHA
	if pr.State == pulls.Open {
		x, err := s.log.Head(ctx, pr.RepoID)
		if err != nil {
			return webhook.PullRequest{}, base, err
		}
		for _, r := range x.Refs {
			switch r.Name {
			case pulls.PullRef(pr.Number):
				headSHA = r.ID
			case "refs/heads/" + pr.Base:
				baseSHA = r.ID
			}
		}
	}
	return webhook.PullRequest{
		Number: pr.Number, Title: pr.Title, Body: pr.Body, Author: pr.Author, State: string(pr.State),
		CreatedAt: pr.CreatedAt, UpdatedAt: pr.UpdatedAt, ClosedAt: pr.ClosedAt, MergedAt: pr.MergedAt,
		MergedBy: pr.MergedBy, MergeCommit: pr.MergeCommit,
		Head: webhook.PullBranch{Ref: pr.Head.Ref, SHA: headSHA, Repo: head},
		Base: webhook.PullBranch{Ref: pr.Base, SHA: baseSHA, Repo: base},
	}, base, nil
}

// hookRepo describes repository id, named fullName ("owner/name") when
// the pull request was opened, as payloads show it: its name and
// visibility now, if that name still holds it; otherwise the old name,
// and private (it was renamed, or deleted).
func (s *Server) hookRepo(ctx context.Context, id, fullName string) (webhook.Repository, error) {
	owner, name, _ := strings.Cut(fullName, "/")
	r := webhook.Repository{ID: id, Owner: owner, Name: name, Private: true, BaseURL: s.webhookOpts.BaseURL}
	m, err := s.meta.Repo(ctx, owner, name)
	switch {
	case err == nil && m.ID == id:
		r.Owner, r.Name, r.Private, r.DefaultBranch = m.Owner, m.Name, !m.Public, m.DefaultBranch
	case err == nil, errors.Is(err, meta.ErrNotFound):
	default:
		return r, err
	}
	return r, nil
}
