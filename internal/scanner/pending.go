package scanner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// pendingPrefix holds one key per repository with pushes its scans may
// not have seen: scans/pending/<tenant>/<repoID>. The push path writes it
// before the commit point, and the reconciler reads only this set
// (issue 22): it costs what changed, not what exists.
const pendingPrefix = "scans/pending/"

func pendingKey(tenant, repoID string) string { return pendingPrefix + tenant + "/" + repoID }

func parsePendingKey(key string) (RepoRef, bool) {
	rest, ok := strings.CutPrefix(key, pendingPrefix)
	if !ok {
		return RepoRef{}, false
	}
	tenant, repoID, ok := strings.Cut(rest, "/")
	if !ok || tenant == "" || repoID == "" || strings.Contains(repoID, "/") || wal.CheckRepoID(repoID) != nil {
		return RepoRef{}, false
	}
	return RepoRef{Tenant: tenant, RepoID: repoID}, true
}

// MarkPending records that tenant's repository has a push its scans must
// see. The push path calls it before the commit point, so a node that
// dies between the commit and starting the push's run leaves the mark
// behind for the reconciler. A mark for a push that then failed costs
// the reconciler one look.
func (c *Coverage) MarkPending(ctx context.Context, tenant, repoID string) error {
	if _, err := c.store.Put(ctx, pendingKey(tenant, repoID), strings.NewReader(""), 0); err != nil {
		return fmt.Errorf("scanner: mark %s/%s pending: %w", tenant, repoID, err)
	}
	return nil
}

// ReconcilePending reconciles every repository marked pending, and drops
// the mark of each whose every push is scanned (or that is deleted). A
// repository whose scans lag keeps its mark, so each pass looks at it
// again (and its lag metrics stay current) until they catch up. It
// returns how many runs it started.
//
// A mark written by a push that commits between this pass's look at the
// log and the mark's removal is lost; that push's own hook starts its
// run, and were its node to die in that instant as well, the sweep finds
// the gap (Sweep).
func (s *Scanner) ReconcilePending(ctx context.Context) (int, error) {
	var refs []RepoRef
	var keys []string
	err := objstore.Walk(ctx, s.opts.Store, pendingPrefix, func(o objstore.Info) error {
		if r, ok := parsePendingKey(o.Key); ok {
			refs = append(refs, r)
			keys = append(keys, o.Key)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	started := 0
	var errs []error
	for i, r := range refs {
		n, lag, err := s.reconcile(ctx, r.Tenant, r.RepoID)
		started += n
		switch {
		case errors.Is(err, wal.ErrRepoDeleted):
		case err != nil:
			errs = append(errs, fmt.Errorf("%s/%s: %w", r.Tenant, r.RepoID, err))
			continue
		case lag.Seqs > 0:
			continue
		}
		if err := s.opts.Store.Delete(ctx, keys[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if s.opts.Metrics != nil {
		if err := s.observeRuns(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return started, errors.Join(errs...)
}

// RepoPager lists repositories a page at a time: up to limit after the
// cursor ("" from the start), and the next cursor ("" after the last).
type RepoPager func(ctx context.Context, after string, limit int) ([]RepoRef, string, error)

// Sweep reconciles every repository, perSecond at most, from the first
// page to the last, and marks pending the ones whose scans lag, so that
// ReconcilePending watches them from then on. It is the slow safety net
// under the pending marks: a gap whose mark was lost is found within one
// sweep. It returns when the last page is done or ctx ends.
func (s *Scanner) Sweep(ctx context.Context, pages RepoPager, perSecond float64) (int, error) {
	if perSecond <= 0 {
		return 0, fmt.Errorf("%w: sweep rate %v", ErrInvalid, perSecond)
	}
	every := time.Duration(float64(time.Second) / perSecond)
	t := time.NewTicker(every)
	defer t.Stop()
	started, cursor := 0, ""
	var errs []error
	for {
		refs, next, err := pages(ctx, cursor, 100)
		if err != nil {
			return started, errors.Join(append(errs, err)...)
		}
		for _, r := range refs {
			select {
			case <-ctx.Done():
				return started, ctx.Err()
			case <-t.C:
			}
			n, lag, err := s.reconcile(ctx, r.Tenant, r.RepoID)
			started += n
			switch {
			case errors.Is(err, wal.ErrRepoDeleted):
			case err != nil:
				errs = append(errs, fmt.Errorf("%s/%s: %w", r.Tenant, r.RepoID, err))
			case lag.Seqs > 0:
				if err := s.MarkPending(ctx, r.Tenant, r.RepoID); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if next == "" {
			return started, errors.Join(errs...)
		}
		cursor = next
	}
}

// leader is what a coordination backend offers when it can elect one
// process of many to do a job (etcdcoord.Backend does).
type leader interface {
	Lead(ctx context.Context, name string, ttl time.Duration, fn func(ctx context.Context)) error
}

// ReconcilerOptions configure RunReconciler.
type ReconcilerOptions struct {
	// Every is the time between passes over the pending marks. Default 1 min.
	Every time.Duration
	// SweepRate is how many repositories a second the sweep reconciles;
	// 0 turns the sweep off.
	SweepRate float64
	// SweepEvery is the least time between the starts of two sweeps.
	// Default 10 min.
	SweepEvery time.Duration
	// Pages lists the repositories for the sweep (nil: no sweep).
	Pages RepoPager
	// LeaderTTL is how long a reconciler that died keeps others from
	// taking over. Default 30 s.
	LeaderTTL time.Duration
	// Logger receives what a pass did; nil uses the scanner's.
	Logger interface {
		Info(msg string, args ...any)
		Warn(msg string, args ...any)
	}
}

// RunReconciler reconciles until ctx ends: the pending marks every Every,
// and a sweep of every repository at SweepRate. Only one process of those
// sharing the coordination store runs it at a time, under an election,
// and another takes over within LeaderTTL when it dies; a backend that
// cannot elect (tests) runs it here. Without a coordination store it
// waits for one: runs queued meanwhile wait for it anyway.
func (s *Scanner) RunReconciler(ctx context.Context, o ReconcilerOptions) error {
	if o.Every <= 0 {
		o.Every = time.Minute
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = 10 * time.Minute
	}
	if o.LeaderTTL <= 0 {
		o.LeaderTTL = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = s.logger
	}
	for ctx.Err() == nil {
		b := s.opts.Coord()
		if b == nil {
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
			continue
		}
		if l, ok := b.(leader); ok {
			return l.Lead(ctx, "scan-reconciler", o.LeaderTTL, func(ctx context.Context) { s.reconcileLoop(ctx, o) })
		}
		s.reconcileLoop(ctx, o)
	}
	return ctx.Err()
}

// reconcileLoop is the leader's work, until ctx ends.
func (s *Scanner) reconcileLoop(ctx context.Context, o ReconcilerOptions) {
	defer s.opts.Metrics.resetLag() // another node's figures are the ones now
	o.Logger.Info("leading the scan reconciler")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if o.SweepRate <= 0 || o.Pages == nil {
			return
		}
		for ctx.Err() == nil {
			start := time.Now()
			n, err := s.Sweep(ctx, o.Pages, o.SweepRate)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				o.Logger.Warn("scan sweep failed for some repositories; the next sweep retries", "err", err, "started", n)
			case n > 0:
				o.Logger.Warn("scan sweep found pushes no run covered, and started runs for them", "runs", n)
			}
			t := time.NewTimer(max(o.SweepEvery-time.Since(start), time.Second))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	t := time.NewTicker(o.Every)
	defer t.Stop()
	for {
		n, err := s.ReconcilePending(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			o.Logger.Warn("scan reconcile failed for some repositories; it runs again next interval", "err", err)
		case n > 0:
			o.Logger.Info("scan reconcile started missing runs", "runs", n)
		}
		select {
		case <-ctx.Done():
			<-done
			return
		case <-t.C:
		}
	}
}
