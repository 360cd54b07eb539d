package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// Leader runs fn while this process leads name among those sharing the
// coordination store (etcdcoord.Backend.Lead), until ctx ends.
type Leader func(ctx context.Context, name string, ttl time.Duration, fn func(ctx context.Context)) error

// ReconcileOptions configure RunReconciler.
type ReconcileOptions struct {
	// Every is the time between passes over the pending marks (default
	// 10 s): how long an event whose node died before it woke the
	// dispatcher waits at most.
	Every time.Duration
	// SweepRate is how many streams a second the safety sweep looks at;
	// 0 turns it off. SweepEvery is the least time between two sweeps'
	// starts (default 10 min).
	SweepRate  float64
	SweepEvery time.Duration
	// LeaderTTL is how long a reconciler that died keeps others from
	// taking over (default 30 s).
	LeaderTTL time.Duration
	// MarkGrace is how long a mark stays after it was written even when
	// its stream looks done (default 2 min): a push writes its mark before
	// its commit point, and a pass between the two must not take the mark
	// from a push about to land.
	MarkGrace time.Duration
}

// RunReconciler hands the pending marks to the dispatchers until ctx
// ends, one process at a time (lead, when set, elects it; without, it
// runs here). A mark is written before a push's commit point and before
// an event is queued; a pass posts the mark's hooks on the board, so that
// an event whose node died before waking a dispatcher goes out within
// Every, and removes the mark once every hook of the stream is past the
// head of its log and its queue is empty. A sweep over every stream with
// hooks, paced at SweepRate, marks what a lost mark would have hidden.
func (d *Dispatcher) RunReconciler(ctx context.Context, lead Leader, o ReconcileOptions) error {
	if o.Every <= 0 {
		o.Every = 10 * time.Second
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = 10 * time.Minute
	}
	if o.LeaderTTL <= 0 {
		o.LeaderTTL = 30 * time.Second
	}
	if o.MarkGrace <= 0 {
		o.MarkGrace = DefaultMarkGrace
	}
	if lead == nil {
		d.reconcileLoop(ctx, o)
		return ctx.Err()
	}
	return lead(ctx, "webhook-reconciler", o.LeaderTTL, func(ctx context.Context) { d.reconcileLoop(ctx, o) })
}

func (d *Dispatcher) reconcileLoop(ctx context.Context, o ReconcileOptions) {
	var wg sync.WaitGroup
	defer wg.Wait()
	if o.SweepRate > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				start := time.Now()
				if n, err := d.Sweep(ctx, o.SweepRate); err != nil && ctx.Err() == nil {
					d.logger.WarnContext(ctx, "webhook sweep failed for some streams; the next sweep retries", "err", err, "marked", n)
				} else if n > 0 {
					d.logger.WarnContext(ctx, "webhook sweep found streams with undelivered events and no mark", "streams", n)
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
	}
	r := &reconciler{every: o.Every, grace: o.MarkGrace, backoff: map[string]markBackoff{}}
	t := time.NewTicker(o.Every)
	defer t.Stop()
	for {
		if err := d.reconcilePending(ctx, r); err != nil && ctx.Err() == nil {
			d.logger.WarnContext(ctx, "webhook reconcile failed for some streams; it runs again next interval", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// DefaultMarkGrace is ReconcileOptions.MarkGrace's default.
const DefaultMarkGrace = 2 * time.Minute

// markBackoff spaces the looks at a mark whose stream stays behind (a
// receiver down for hours): the leader's memory only, which saves reads.
type markBackoff struct {
	next time.Time
	wait time.Duration
}

// reconciler is the leader's state between passes.
type reconciler struct {
	every, grace time.Duration
	backoff      map[string]markBackoff
}

// ReconcilePending does one pass over the pending marks, with the
// default grace and no backoff. It needs the board: without one it does
// nothing.
func (d *Dispatcher) ReconcilePending(ctx context.Context) error {
	return d.reconcilePending(ctx, &reconciler{every: 10 * time.Second, grace: DefaultMarkGrace})
}

func (d *Dispatcher) reconcilePending(ctx context.Context, r *reconciler) error {
	backoff := r.backoff
	b := d.opts.Board()
	if b == nil {
		return nil
	}
	var streams []string
	err := objstore.Walk(ctx, d.store.opts.Store, pendingPrefix, func(o objstore.Info) error {
		streams = append(streams, strings.TrimPrefix(o.Key, pendingPrefix))
		return nil
	})
	if err != nil {
		return fmt.Errorf("hooks: list the pending marks: %w", err)
	}
	now := d.opts.Now()
	var errs []error
	for _, stream := range streams {
		if bo, ok := backoff[stream]; ok && now.Before(bo.next) {
			continue
		}
		m, ok, err := d.store.readMark(ctx, stream)
		if err != nil || !ok {
			errs = append(errs, err)
			continue
		}
		done, err := d.reconcile(ctx, b, stream, m.Tenant, m.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", stream, err))
			continue
		}
		if !done || now.Sub(m.At) < r.grace {
			if backoff != nil {
				bo := backoff[stream]
				bo.wait = min(max(2*bo.wait, r.every), 10*time.Minute)
				bo.next = now.Add(bo.wait)
				backoff[stream] = bo
			}
			continue
		}
		delete(backoff, stream)
		// A push that marks the stream between our look and this delete
		// wakes its dispatcher itself; were its node to die in that very
		// moment as well, the sweep finds it.
		if err := d.store.opts.Store.Delete(ctx, pendingKey(stream)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// reconcile posts the stream's hooks on the board and reports whether
// every one of them is done with it: past the head of the log, and no
// queued event left.
func (d *Dispatcher) reconcile(ctx context.Context, b Board, stream, tenant, name string) (bool, error) {
	work, done, err := d.check(ctx, stream, tenant, name)
	if err != nil {
		return false, err
	}
	if len(work) > 0 {
		items := make([]coord.BoardItem, 0, len(work))
		for _, w := range work {
			v, _ := json.Marshal(workValue{Tenant: w.Tenant, Name: w.Name})
			items = append(items, coord.BoardItem{Key: itemKey(w.Hook, w.Stream), Value: v})
		}
		if err := b.Post(ctx, items); err != nil {
			return false, err
		}
	}
	return done, nil
}

// check returns the stream's active hooks as work, and whether they are
// all done with it.
func (d *Dispatcher) check(ctx context.Context, stream, tenant, name string) ([]Work, bool, error) {
	s := d.store
	if tenant == "" {
		return nil, true, nil
	}
	var sets []*setRecord
	if !strings.HasPrefix(stream, "~") {
		rs, err := s.readSet(ctx, setsPrefix+"r/"+stream)
		if err != nil {
			return nil, false, err
		}
		sets = append(sets, rs)
	}
	ts, err := s.readSet(ctx, Scope{Tenant: tenant}.setKey())
	if err != nil {
		return nil, false, err
	}
	sets = append(sets, ts)
	var work []Work
	var follow []*hookRecord
	var keys []string
	for _, set := range sets {
		if set.Tenant == "" {
			continue
		}
		for i := range set.Hooks {
			h := &set.Hooks[i]
			if !h.Active {
				continue
			}
			k := hookKey(set.scope(), h.ID)
			work = append(work, Work{Hook: k, Stream: stream, Tenant: tenant, Name: name})
			if !strings.HasPrefix(stream, "~") && followsLog(h.Events) {
				follow, keys = append(follow, h), append(keys, k)
			}
		}
	}
	q, err := s.opts.Store.List(ctx, queuePrefix+stream+"/", "", 1)
	if err != nil {
		return nil, false, err
	}
	done := len(q) == 0
	if done && len(follow) > 0 {
		x, err := s.opts.Log.Head(ctx, stream)
		switch {
		case errors.Is(err, wal.ErrRepoDeleted):
		case err != nil:
			return nil, false, err
		default:
			for i, h := range follow {
				st, err := s.readState(ctx, stream, keys[i])
				if err != nil {
					return nil, false, err
				}
				// A hook with no state yet is not done: its state, once
				// written, is what compaction reads after the mark goes.
				if st == nil || st.Epoch != h.Epoch || st.Seq < x.Seq || st.Cur != nil {
					done = false
					break
				}
			}
		}
	}
	return work, done, nil
}

// Sweep looks at every stream that has hooks, perSecond at most, and
// marks pending any whose hooks are not done with it: the safety net
// under the marks (one lost in a race with a node's death). A tenant's
// hooks are looked at on each of its repositories. It returns how many
// streams it marked.
func (d *Dispatcher) Sweep(ctx context.Context, perSecond float64) (int, error) {
	if perSecond <= 0 {
		return 0, fmt.Errorf("%w: sweep rate %v", ErrInvalid, perSecond)
	}
	s := d.store
	t := time.NewTicker(time.Duration(float64(time.Second) / perSecond))
	defer t.Stop()
	marked := 0
	var errs []error
	look := func(stream, tenant, name string) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if _, ok, err := s.readMark(ctx, stream); err != nil || ok {
			return err // marked already: the reconciler looks at it
		}
		_, done, err := d.check(ctx, stream, tenant, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", stream, err))
			return nil
		}
		if !done {
			if err := s.MarkPending(ctx, stream, tenant, name); err != nil {
				errs = append(errs, err)
				return nil
			}
			marked++
		}
		return nil
	}
	err := objstore.Walk(ctx, s.opts.Store, setsPrefix, func(o objstore.Info) error {
		rest := strings.TrimPrefix(o.Key, setsPrefix)
		set, err := s.readSet(ctx, o.Key)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		if len(set.Hooks) == 0 || set.Tenant == "" {
			return nil
		}
		if strings.HasPrefix(rest, "r/") {
			return look(set.Repo, set.Tenant, set.Name)
		}
		if s.opts.Meta == nil {
			return nil
		}
		after := ""
		for {
			page, next, err := s.opts.Meta.ListRepoPage(ctx, set.Tenant, after, meta.MaxPageSize, false)
			if err != nil {
				errs = append(errs, err)
				return nil
			}
			for _, r := range page {
				if err := look(r.ID, set.Tenant, r.Name); err != nil {
					return err
				}
			}
			if next == "" {
				return nil
			}
			after = next
		}
	})
	if err != nil {
		errs = append(errs, err)
	}
	return marked, errors.Join(errs...)
}
