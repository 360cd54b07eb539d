package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
	"github.com/ghost-scm/ghost/internal/webhook"
)

// Board is what the dispatcher needs of the coordination store: named
// work that one process at a time holds (etcdcoord.Board is one). Items
// are "<hookKey>/<stream>", holds are hook keys.
type Board interface {
	Post(ctx context.Context, items []coord.BoardItem) error
	Work(ctx context.Context, prefix string) ([]coord.BoardItem, error)
	Done(ctx context.Context, it coord.BoardItem) (bool, error)
	// TryHoldWork takes a name if nobody holds it, and returns the work
	// under prefix read in the same request; ReleaseWork gives a hold up
	// and returns the work posted meanwhile, in one request too.
	TryHoldWork(ctx context.Context, name, prefix string) (coord.Hold, []coord.BoardItem, bool, error)
	ReleaseWork(ctx context.Context, h coord.Hold, prefix string) ([]coord.BoardItem, error)
	Watch(ctx context.Context, fn func(coord.BoardEvent)) error
}

// Defaults of DispatchOptions.
const (
	DefaultRetryBase    = 10 * time.Second
	DefaultRetryMax     = time.Hour
	DefaultRetryFor     = 24 * time.Hour
	DefaultDisableAfter = 5
	DefaultMaxHeld      = 256
	DefaultTakeJitter   = 50 * time.Millisecond
)

// DispatchOptions configure a Dispatcher.
type DispatchOptions struct {
	// Board returns the coordination store's board, or nil while it is
	// not open: nothing is delivered then, and the pending marks wait.
	Board func() Board
	// Sender options: the SSRF policy, dialer, resolver, timeout
	// (webhook.Options). A hook with insecure_ssl gets a sender that does
	// not verify certificates.
	Sender webhook.Options
	// Cache materializes repositories for the commits of push payloads;
	// Git runs git there (nil: the cache's). Without a cache, push
	// payloads carry no commits.
	Cache *repocache.Cache
	Git   *gitexec.Runner
	// RetryBase is the pause after a first failed attempt; it doubles
	// with each attempt, up to RetryMax, with jitter. RetryFor is how long
	// an event is retried before it is given up. DisableAfter is how many
	// events in a row may be given up before the hook is turned off; while
	// a hook is failing, each event gets one attempt.
	RetryBase, RetryMax, RetryFor time.Duration
	DisableAfter                  int
	// MaxHeld bounds the hooks this process delivers for at once; others
	// take the rest.
	MaxHeld int
	// TakeJitter is the longest pause before this process tries to take a
	// hook whose work another process posted, so that the poster, which
	// tries at once, usually delivers its own events.
	TakeJitter time.Duration
	// SetTTL is how long this process reuses a hook set it read for the
	// dispatchers of its hooks (default 1 s): the thousand hooks of one
	// repository read it once per push, not a thousand times. A change of
	// a hook reaches its deliveries within it.
	SetTTL time.Duration
	// Now is the clock; nil is time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// Metrics, when set, receives what deliveries do.
	Metrics *Metrics
}

// Dispatcher delivers the events of hooks: one process of those sharing
// the coordination store delivers for a hook at a time, holding it on
// the board; per hook and stream, events go out in order
// (docs/adr/0105-webhook-delivery.md).
type Dispatcher struct {
	store    *Store
	opts     DispatchOptions
	logger   *slog.Logger
	git      *gitexec.Runner
	strict   *webhook.Sender
	insecure *webhook.Sender
	headers  *lru[*header]
	bodies   *memo
	sets     *fresh[*setRecord]
	repos    *fresh[webhook.Repository]

	mu      sync.Mutex
	ctx     context.Context // Run's, once it runs
	running map[string]*worker
	work    map[string]map[string]bool // hook -> streams with work, as the board's watch says
	held    map[string]bool            // hooks held by any process
	wg      sync.WaitGroup
}

// NewDispatcher returns a dispatcher of store's hooks. It delivers once
// Run runs.
func NewDispatcher(store *Store, opts DispatchOptions) *Dispatcher {
	if opts.RetryBase <= 0 {
		opts.RetryBase = DefaultRetryBase
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = DefaultRetryMax
	}
	if opts.RetryFor <= 0 {
		opts.RetryFor = DefaultRetryFor
	}
	if opts.DisableAfter <= 0 {
		opts.DisableAfter = DefaultDisableAfter
	}
	if opts.MaxHeld <= 0 {
		opts.MaxHeld = DefaultMaxHeld
	}
	if opts.TakeJitter < 0 {
		opts.TakeJitter = 0
	} else if opts.TakeJitter == 0 {
		opts.TakeJitter = DefaultTakeJitter
	}
	if opts.Now == nil {
		opts.Now = store.now
	}
	if opts.SetTTL <= 0 {
		opts.SetTTL = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = store.logger
	}
	if opts.Board == nil {
		opts.Board = func() Board { return nil }
	}
	git := opts.Git
	if git == nil && opts.Cache != nil {
		git = opts.Cache.Git()
	}
	insecure := opts.Sender
	insecure.InsecureSkipVerify = true
	d := &Dispatcher{
		store: store, opts: opts, logger: opts.Logger, git: git,
		strict: webhook.NewSender(opts.Sender), insecure: webhook.NewSender(insecure),
		headers: newLRU[*header](4096), bodies: newMemo(512), sets: newFresh[*setRecord](opts.SetTTL, 1024), repos: newFresh[webhook.Repository](opts.SetTTL, 1024),
		running: make(map[string]*worker), work: make(map[string]map[string]bool), held: make(map[string]bool),
	}
	return d
}

// workValue is what an item on the board says of its stream.
type workValue struct {
	Tenant string `json:"tenant"`
	Name   string `json:"name,omitempty"`
}

func itemKey(hook, stream string) string { return hook + "/" + stream }

// Notify posts work on the board and tries to take its hooks here at
// once: the node that committed a push, or enqueued an event, delivers
// it unless it is busy. Without a board it does nothing: the pending
// mark written before is the reconciler's to find.
func (d *Dispatcher) Notify(ctx context.Context, works []Work) {
	b := d.opts.Board()
	if b == nil || len(works) == 0 {
		return
	}
	items := make([]coord.BoardItem, 0, len(works))
	for _, w := range works {
		v, _ := json.Marshal(workValue{Tenant: w.Tenant, Name: w.Name})
		items = append(items, coord.BoardItem{Key: itemKey(w.Hook, w.Stream), Value: v})
	}
	if err := b.Post(ctx, items); err != nil {
		d.logger.WarnContext(ctx, "posting webhook work failed; the reconciler finds it", "err", err)
		return
	}
	seen := map[string]bool{}
	for _, w := range works {
		if !seen[w.Hook] {
			seen[w.Hook] = true
			d.consider(w.Hook, false)
		}
	}
}

// Run delivers until ctx ends: it follows the board and takes the hooks
// with work that nobody holds, up to MaxHeld.
func (d *Dispatcher) Run(ctx context.Context) error {
	d.mu.Lock()
	d.ctx = ctx
	d.mu.Unlock()
	defer d.wg.Wait()
	for ctx.Err() == nil {
		b := d.opts.Board()
		if b == nil {
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
			continue
		}
		_ = b.Watch(ctx, d.observe)
	}
	return ctx.Err()
}

// observe keeps the process's view of the board and acts on it.
func (d *Dispatcher) observe(ev coord.BoardEvent) {
	var consider []string
	d.mu.Lock()
	switch ev.Kind {
	case coord.BoardSnapshot:
		d.work, d.held = make(map[string]map[string]bool), make(map[string]bool)
		for _, it := range ev.Items {
			d.addWork(it.Key)
		}
		for _, h := range ev.Held {
			d.held[h] = true
		}
		for h := range d.work {
			consider = append(consider, h)
		}
	case coord.BoardPosted:
		if h := d.addWork(ev.Key); h != "" {
			consider = append(consider, h)
		}
	case coord.BoardDone:
		if hook, stream, ok := strings.Cut(ev.Key, "/"); ok {
			delete(d.work[hook], stream)
			if len(d.work[hook]) == 0 {
				delete(d.work, hook)
			}
		}
	case coord.BoardHeld:
		d.held[ev.Key] = true
	case coord.BoardReleased:
		delete(d.held, ev.Key)
		if len(d.work[ev.Key]) > 0 {
			consider = append(consider, ev.Key)
		}
	}
	d.mu.Unlock()
	for _, h := range consider {
		d.consider(h, true)
	}
}

func (d *Dispatcher) addWork(key string) string {
	hook, stream, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	if d.work[hook] == nil {
		d.work[hook] = make(map[string]bool)
	}
	d.work[hook][stream] = true
	return hook
}

// consider takes hook here if it is free and there is room; a hook this
// process delivers for already is told of new work instead. jitter
// delays the attempt, so that the process that posted the work usually
// takes it first.
func (d *Dispatcher) consider(hook string, jitter bool) {
	d.mu.Lock()
	ctx := d.ctx
	if w, ok := d.running[hook]; ok {
		d.mu.Unlock()
		w.poke()
		return
	}
	if ctx == nil || ctx.Err() != nil || len(d.running) >= d.opts.MaxHeld || (jitter && d.held[hook]) {
		d.mu.Unlock()
		return
	}
	w := &worker{d: d, hook: hook, wake: make(chan struct{}, 1), started: make(chan struct{})}
	d.running[hook] = w
	d.wg.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.wg.Done()
		w.run(ctx, jitter)
	}()
}

// worker delivers one hook's events while it holds the hook.
type worker struct {
	d       *Dispatcher
	hook    string
	wake    chan struct{}
	started chan struct{}
}

func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *worker) run(ctx context.Context, jitter bool) {
	d := w.d
	defer func() {
		d.mu.Lock()
		delete(d.running, w.hook)
		// The room this worker leaves goes to hooks with work that
		// nobody holds: those this process had no room for, this one
		// again if work came while it held it.
		var next []string
		if len(d.work[w.hook]) > 0 && !d.held[w.hook] {
			next = append(next, w.hook)
		}
		room := d.opts.MaxHeld - len(d.running) - len(next)
		for h := range d.work {
			if room <= 0 {
				break
			}
			if _, busy := d.running[h]; !busy && !d.held[h] && h != w.hook {
				next = append(next, h)
				room--
			}
		}
		d.mu.Unlock()
		if ctx.Err() == nil {
			for _, h := range next {
				d.consider(h, true)
			}
		}
	}()
	if jitter && d.opts.TakeJitter > 0 {
		t := time.NewTimer(time.Duration(rand.Int64N(int64(d.opts.TakeJitter))))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	b := d.opts.Board()
	if b == nil {
		return
	}
	for ctx.Err() == nil {
		hold, items, ok, err := b.TryHoldWork(ctx, w.hook, w.hook+"/")
		if err != nil || !ok {
			return // held elsewhere, or etcd away: the watch says when to look again
		}
		d.opts.Metrics.held(1)
		w.serve(ctx, b, hold, items)
		d.opts.Metrics.held(-1)
		// Work posted while we held the hook, by a process that found it
		// held, is ours to see now that it is free.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		left, err := b.ReleaseWork(rctx, hold, w.hook+"/")
		cancel()
		if err != nil || len(left) == 0 {
			return
		}
	}
}

// serve delivers the hook's work, items first, until there is none, or
// the hold ends.
func (w *worker) serve(ctx context.Context, b Board, hold coord.Hold, items []coord.BoardItem) {
	d := w.d
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-hold.Lost():
			cancel()
		case <-ctx.Done():
		}
	}()
	failing := 0
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			var err error
			if items, err = b.Work(ctx, w.hook+"/"); err != nil {
				return
			}
		}
		if len(items) == 0 {
			return
		}
		set, h, err := d.hookOf(ctx, w.hook)
		if err != nil {
			d.logger.WarnContext(ctx, "reading a webhook failed; retrying", "hook", w.hook, "err", err)
			failing++
			if !w.sleep(ctx, time.Now().Add(min(time.Second<<min(failing, 6), time.Minute))) {
				return
			}
			continue
		}
		failing = 0
		var next time.Time
		finished := 0 // items done at the revision read: nothing more to look at
		for _, it := range items {
			_, stream, _ := strings.Cut(it.Key, "/")
			if h == nil || !h.Active {
				// Gone or off: nothing to deliver, ever, for this epoch.
				if h == nil {
					d.store.removeStream(ctx, stream, w.hook)
				}
				_, _ = b.Done(ctx, it)
				continue
			}
			var wv workValue
			_ = json.Unmarshal(it.Value, &wv)
			if wv.Tenant == "" {
				wv.Tenant = set.Tenant
			}
			when, err := d.serveStream(ctx, hold.Fence(), set, h, stream, wv)
			switch {
			case errors.Is(err, errStale):
				return
			case errors.Is(err, errDisabled):
				h.Active = false
				_, _ = b.Done(ctx, it)
				continue
			case err != nil:
				if ctx.Err() != nil {
					return
				}
				d.logger.WarnContext(ctx, "webhook delivery stopped on an error; retrying", "hook", w.hook, "stream", stream, "err", err)
				when = time.Now().Add(10 * time.Second)
			case when.IsZero():
				if ok, err := b.Done(ctx, it); ok && err == nil {
					finished++
				} // else posted again meanwhile: the next round serves it
				continue
			}
			if next.IsZero() || when.Before(next) {
				next = when
			}
		}
		if finished == len(items) {
			return // the release reads what was posted meanwhile
		}
		if !next.IsZero() && !w.sleep(ctx, next) {
			return
		}
	}
}

// sleep waits until t, a poke or the end of ctx; false means ctx ended.
func (w *worker) sleep(ctx context.Context, t time.Time) bool {
	dur := time.Until(t)
	if now := w.d.opts.Now(); !now.IsZero() {
		dur = t.Sub(now)
	}
	if dur <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(dur)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
	case <-w.wake:
	}
	return true
}

// hookOf reads the set of the hook key and the hook in it (nil when the
// hook is gone).
func (d *Dispatcher) hookOf(ctx context.Context, key string) (*setRecord, *hookRecord, error) {
	setKey, id, ok := parseHookKey(key)
	if !ok {
		return &setRecord{}, nil, nil
	}
	read := func(ctx context.Context) (*setRecord, error) { return d.store.readSet(ctx, setKey) }
	set, err := d.sets.get(ctx, setKey, read)
	if err != nil {
		return nil, nil, err
	}
	i := set.find(id)
	if i < 0 {
		// A hook younger than the copy in hand: look at the store itself
		// (not at a read that may have begun before the hook existed)
		// before taking the hook for gone.
		d.sets.forget(setKey)
		if set, err = read(ctx); err != nil {
			return nil, nil, err
		}
		if i = set.find(id); i < 0 {
			return set, nil, nil
		}
	}
	h := set.Hooks[i]
	return set, &h, nil
}

// errDisabled reports a hook the dispatcher just turned off.
var errDisabled = errors.New("hooks: the hook was disabled")

// next is the event a stream delivers next.
type next struct {
	guid, event string
	body        []byte
	log         *logEvent // a log event; else queue names the queued object
	parts       int       // a log event's seq has this many events
	queue       string
	redelivery  bool
}

// stream is one round of a hook's deliveries on one stream.
type stream struct {
	d      *Dispatcher
	set    *setRecord
	h      *hookRecord
	hk     string
	id     string // the stream: a repository id, or "~<tenant>"
	st     *streamState
	etag   string // st's ETag on the store, when known
	dirty  bool   // st differs from what the store holds
	stored bool   // the store's state names an event in retry
	// follows is whether the hook reads the repository's log.
	follows    bool
	x          *wal.Index
	indexFresh bool
	repo       *webhook.Repository
	queue      []objstore.Info
	queueEmpty bool // a listing of the queue came back empty
	redelivery bool // st.Cur is a redelivery
}

// serveStream delivers hook h's events on stream id in order, until none
// is left (zero time) or one waits for its next attempt (its time).
func (d *Dispatcher) serveStream(ctx context.Context, fence int64, set *setRecord, h *hookRecord, id string, wv workValue) (time.Time, error) {
	s := &stream{d: d, set: set, h: h, hk: hookKey(set.scope(), h.ID), id: id}
	st, etag, err := d.store.readStateTag(ctx, id, s.hk)
	if err != nil {
		return time.Time{}, err
	}
	s.etag = etag
	if st != nil && st.Fence > fence {
		return time.Time{}, errStale
	}
	s.follows = !strings.HasPrefix(id, "~") && followsLog(h.Events)
	if st == nil || st.Epoch != h.Epoch {
		st = &streamState{V: stateVersion, Hook: s.hk, Stream: id, Tenant: wv.Tenant, Name: wv.Name, Epoch: h.Epoch, Fence: fence}
		if s.follows {
			if err := s.readIndex(ctx); err != nil {
				return time.Time{}, err
			}
			if s.follows {
				if st.Seq, err = d.startSeq(ctx, id, s.x, h.ActiveSince); err != nil {
					return time.Time{}, err
				}
			}
		}
		s.dirty = true
	}
	s.st, s.stored = st, st.Cur != nil
	if st.Fence != fence {
		st.Fence, s.dirty = fence, true
	}
	if st.Name == "" && wv.Name != "" {
		st.Name, s.dirty = wv.Name, true
	}
	for {
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
		if c := st.Cur; c != nil {
			if d.opts.Now().Before(c.Next) {
				return c.Next, s.flush(ctx)
			}
		} else {
			ev, ok, err := s.next(ctx)
			if err != nil {
				return time.Time{}, err
			}
			if !ok {
				return time.Time{}, s.flush(ctx)
			}
			st.Cur = &attempt{GUID: ev.guid, Event: ev.event, Body: ev.body, First: d.opts.Now(), Queue: ev.queue}
			if ev.log != nil {
				st.Cur.Log, st.Cur.Seq, st.Cur.Part, st.Cur.Parts = true, ev.log.Seq, ev.log.Part, ev.parts
			}
			s.redelivery = ev.redelivery
		}
		when, err := s.attempt(ctx)
		if err != nil || !when.IsZero() {
			return when, err
		}
	}
}

func (s *stream) readIndex(ctx context.Context) error {
	s.indexFresh = true
	x, err := s.d.store.opts.Log.Head(ctx, s.id)
	if errors.Is(err, wal.ErrRepoDeleted) {
		s.follows = false // a deleted repository has no more events in its log
		return nil
	}
	if err != nil {
		return err
	}
	s.x = x
	return nil
}

// flush writes the state if it changed.
func (s *stream) flush(ctx context.Context) error {
	if !s.dirty {
		return nil
	}
	etag, err := s.d.store.writeState(ctx, s.st, s.etag)
	s.etag = etag
	if err != nil {
		return err
	}
	s.dirty, s.stored = false, s.st.Cur != nil
	return nil
}

func (s *stream) describe(ctx context.Context) (webhook.Repository, error) {
	if s.repo == nil {
		ref := RepoRef{Tenant: s.st.Tenant, ID: s.id, Name: s.st.Name}
		// What payloads say of a repository (its name, visibility, default
		// branch) is read once a SetTTL for all the hooks of this node.
		r, err := s.d.repos.get(ctx, s.id, func(ctx context.Context) (webhook.Repository, error) { return s.d.store.describe(ctx, ref) })
		if err != nil {
			return r, err
		}
		if s.st.Name == "" && r.Name != "" {
			s.st.Name, s.dirty = r.Name, true
		}
		s.repo = &r
	}
	return *s.repo, nil
}

// nextLog returns the next log event the hook subscribes to, moving the
// watermark past those it does not and past pushes folded before it
// could see them.
func (s *stream) nextLog(ctx context.Context) (*logEvent, error) {
	st := s.st
	for s.follows {
		if s.x == nil {
			if err := s.readIndex(ctx); err != nil {
				return nil, err
			}
			s.indexFresh = true
			continue
		}
		seq := st.Seq + 1
		if seq > s.x.Seq {
			if s.indexFresh {
				return nil, nil
			}
			if err := s.readIndex(ctx); err != nil {
				return nil, err
			}
			s.indexFresh = true
			continue
		}
		hdr, ok, err := s.d.readHeader(ctx, s.id, s.x, seq)
		if err != nil {
			return nil, err
		}
		if !ok {
			s.d.logger.WarnContext(ctx, "a push was folded by compaction before this hook delivered it; its events are lost", "hook", s.hk, "repo", s.id, "seq", seq)
			s.d.opts.Metrics.lost()
			st.Seq, st.Part, s.dirty = seq, 0, true
			continue
		}
		evs := eventsOf(seq, hdr)
		if st.Part >= len(evs) {
			st.Seq, st.Part, s.dirty = seq, 0, true
			continue
		}
		e := evs[st.Part]
		if !subscribed(s.h.Events, e.Event) {
			st.Part, s.dirty = st.Part+1, true
			continue
		}
		return &e, nil
	}
	return nil, nil
}

// nextQueued returns the first object of the hook's queue on the stream
// (listing a page when it has none in hand).
func (s *stream) nextQueued(ctx context.Context) (*objstore.Info, error) {
	if len(s.queue) == 0 {
		if s.queueEmpty {
			return nil, nil
		}
		page, err := s.d.store.opts.Store.List(ctx, queuePrefix+s.id+"/"+s.hk+"/", "", 100)
		if err != nil {
			return nil, err
		}
		// An event queued after an empty listing posts work again, and
		// the next round serves it.
		s.queue, s.queueEmpty = page, len(page) == 0
		if len(page) == 0 {
			return nil, nil
		}
	}
	return &s.queue[0], nil
}

// next picks the stream's next event: of the next log event and the
// first queued one, the one that happened first.
func (s *stream) next(ctx context.Context) (next, bool, error) {
	d := s.d
	for {
		le, err := s.nextLog(ctx)
		if err != nil {
			return next{}, false, err
		}
		q, err := s.nextQueued(ctx)
		if err != nil {
			return next{}, false, err
		}
		if le == nil && q == nil {
			return next{}, false, nil
		}
		// Times are milliseconds of different nodes' clocks: a tie goes to
		// the queue (a hook's ping before a push of the same instant).
		if le != nil && (q == nil || le.Hdr.CreatedAt.Before(queuedAt(q.Key))) {
			r, err := s.describe(ctx)
			if err != nil {
				return next{}, false, err
			}
			body, err := d.bodies.do(fmt.Sprintf("%s/%d/%d/%t", s.id, le.Seq, le.Part, r.Private), func() ([]byte, error) {
				if le.Event == EventPush {
					return d.pushBody(ctx, r, le.Hdr, le.T)
				}
				_, b, _, err := webhook.RefEvent(webhook.Push{Ref: le.T.Ref, Before: le.T.Old, After: le.T.New, Pusher: pusher(le.Hdr.PushedBy), Repo: r})
				return b, err
			})
			if err != nil {
				return next{}, false, err
			}
			return next{guid: guid(s.hk, s.id, strconv.FormatUint(le.Seq, 10), strconv.Itoa(le.Part)), event: le.Event, body: body, log: le, parts: len(eventsOf(le.Seq, le.Hdr))}, true, nil
		}
		s.queue = s.queue[1:]
		qv, ok, err := d.store.readQueued(ctx, q.Key)
		if err != nil {
			return next{}, false, err
		}
		if !ok {
			continue // delivered by a dispatcher before us, and removed
		}
		if qv.Epoch != s.h.Epoch || !subscribed(s.h.Events, qv.Event) {
			_ = d.store.opts.Store.Delete(ctx, q.Key) // queued for an earlier life of the hook
			continue
		}
		ev := next{guid: qv.GUID, event: qv.Event, body: qv.Body, queue: q.Key, redelivery: qv.Redelivery}
		if len(ev.body) == 0 && qv.Seq > 0 {
			if ev.body, err = d.testBody(ctx, s.id, qv.Seq, func() (webhook.Repository, error) { return s.describe(ctx) }); err != nil {
				return next{}, false, err
			}
			if ev.body == nil {
				_ = d.store.opts.Store.Delete(ctx, q.Key)
				continue
			}
		}
		return ev, true, nil
	}
}

// attempt sends st.Cur once and records what came of it: delivered (the
// watermark moves, or the queued object goes), retry later (its time),
// or given up.
func (s *stream) attempt(ctx context.Context) (time.Time, error) {
	d, st, h := s.d, s.st, s.h
	c := st.Cur
	sender := d.strict
	if h.InsecureSSL {
		sender = d.insecure
	}
	start := d.opts.Now()
	res, err := sender.Send(ctx, h.URL, []byte(h.Secret), webhook.Delivery{ID: c.GUID, Event: c.Event, Body: c.Body})
	if err != nil && ctx.Err() != nil {
		return time.Time{}, ctx.Err() // stopping: not the receiver's failure
	}
	c.Attempts++
	d.opts.Metrics.attempt(err == nil, res.Duration)
	code, status, respHeaders, excerpt := resultOf(res, err)
	dl := Delivery{
		GUID: c.GUID, Event: c.Event, Stream: st.Stream, At: start.UTC(), Redelivery: s.redelivery,
		Duration: res.Duration.Seconds(), StatusCode: code, Status: status, Attempt: c.Attempts,
		RequestHeaders: res.RequestHeaders, ResponseHeaders: respHeaders, ResponseBody: excerpt,
	}
	if err == nil {
		dl.Outcome = "delivered"
		d.store.logDelivery(ctx, st.Hook, dl, c.Body)
		d.trim(ctx, st.Hook)
		st.Delivered++
		if err := s.done(ctx); err != nil {
			return time.Time{}, err
		}
		if h.Failures > 0 {
			if err := d.store.setFailures(ctx, s.set.scope(), h.ID, 0, ""); err != nil {
				d.logger.WarnContext(ctx, "clearing a webhook's failure count failed", "hook", st.Hook, "err", err)
			} else {
				h.Failures = 0
				d.sets.forget(s.set.scope().setKey())
			}
		}
		return time.Time{}, nil
	}
	now := d.opts.Now()
	c.Error = status
	if now.Sub(c.First) < d.opts.RetryFor && h.Failures == 0 {
		c.Next = now.Add(d.backoff(c.Attempts))
		dl.Outcome = "retrying"
		d.store.logDelivery(ctx, st.Hook, dl, c.Body)
		d.trim(ctx, st.Hook)
		s.dirty = true
		if err := s.flush(ctx); err != nil {
			return time.Time{}, err
		}
		return c.Next, nil
	}
	// Given up: the event is marked failed in the log and the next one
	// goes; enough of them in a row turn the hook off.
	dl.Outcome = "failed"
	d.store.logDelivery(ctx, st.Hook, dl, c.Body)
	d.trim(ctx, st.Hook)
	d.opts.Metrics.failed()
	st.Failed++
	d.logger.WarnContext(ctx, "webhook event given up", "hook", st.Hook, "event", c.Event, "guid", c.GUID, "attempts", c.Attempts, "last", status)
	if err := s.done(ctx); err != nil {
		return time.Time{}, err
	}
	failures := h.Failures + 1
	reason := ""
	if failures >= d.opts.DisableAfter {
		reason = fmt.Sprintf("disabled after %d events in a row failed; the last: %s (%s)", failures, status, now.UTC().Format(time.RFC3339))
	}
	if err := d.store.setFailures(ctx, s.set.scope(), h.ID, failures, reason); err != nil {
		return time.Time{}, err
	}
	d.sets.forget(s.set.scope().setKey())
	h.Failures = failures
	if reason != "" {
		d.logger.WarnContext(ctx, "webhook disabled", "hook", st.Hook, "url", redact(h.URL), "reason", reason)
		return time.Time{}, errDisabled
	}
	return time.Time{}, nil
}

// done records that st.Cur is over (delivered or given up): a log event
// moves the watermark (one compare-and-swap of the state); a queued one
// is deleted, and the state written only if it named it.
//
// Outcome unknown (the state's write, or the queued object's delete): the
// event may go out again, with the same delivery id; nothing is skipped.
func (s *stream) done(ctx context.Context) error {
	st := s.st
	c := st.Cur
	st.Cur = nil
	if c.Log {
		st.Seq, st.Part = c.Seq-1, c.Part+1
		if c.Parts > 0 && st.Part >= c.Parts {
			st.Seq, st.Part = c.Seq, 0 // past the seq: one write, not two
		}
		s.dirty = true
	} else if s.stored {
		s.dirty = true
	}
	if c.Log || s.stored {
		if err := s.flush(ctx); err != nil {
			return err
		}
	}
	if c.Queue != "" {
		if err := s.d.store.opts.Store.Delete(ctx, c.Queue); err != nil {
			s.d.logger.WarnContext(ctx, "removing a delivered event from the webhook queue failed; it may go out again", "hook", st.Hook, "err", err)
		}
	}
	return nil
}

// backoff is the pause before attempt n+1: RetryBase doubling to
// RetryMax, times a uniform factor in [0.5, 1.5).
func (d *Dispatcher) backoff(n int) time.Duration {
	base := min(d.opts.RetryBase<<min(n-1, 30), d.opts.RetryMax)
	return base/2 + time.Duration(rand.Int64N(int64(base)))
}

// trim trims the hook's delivery log every trimEvery deliveries.
func (d *Dispatcher) trim(ctx context.Context, hook string) {
	if rand.IntN(trimEvery) == 0 {
		d.store.trimDeliveries(ctx, hook)
	}
}

// queuedAt is the time of a queued object, from its key.
func queuedAt(key string) time.Time {
	id := key[strings.LastIndexByte(key, '/')+1:]
	u, err := parseULID(id)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(int64(u.Time())).UTC()
}

// testBody is the push event of seq's first transition, for the test
// endpoint; nil when the log no longer has it.
func (d *Dispatcher) testBody(ctx context.Context, repoID string, seq uint64, describe func() (webhook.Repository, error)) ([]byte, error) {
	x, err := d.store.opts.Log.Head(ctx, repoID)
	if errors.Is(err, wal.ErrRepoDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	hdr, ok, err := d.readHeader(ctx, repoID, x, seq)
	if err != nil || !ok || len(hdr.Transitions) == 0 {
		return nil, err
	}
	r, err := describe()
	if err != nil {
		return nil, err
	}
	return d.pushBody(ctx, r, hdr, hdr.Transitions[0])
}

// startSeq is where a hook that starts on a repository's log begins: after
// the last push committed before since (the hook's creation, or its
// turning on again), by the entries' times.
func (d *Dispatcher) startSeq(ctx context.Context, repo string, x *wal.Index, since time.Time) (uint64, error) {
	for i := len(x.Layers) - 1; i >= 0; i-- {
		if time.UnixMilli(int64(x.Layers[i].ULID.Time())).Before(since) {
			return x.CompactedThroughSeq + uint64(i) + 1, nil
		}
	}
	c := x.LastCheckpoint()
	if c == nil || time.UnixMilli(c.Newest).Before(since) {
		return x.CompactedThroughSeq, nil
	}
	// Folded pushes may be newer than since: those hooks needed were kept.
	start := x.CompactedThroughSeq
	err := objstore.Walk(ctx, d.store.opts.Store, layersPrefix+repo+"/", func(o objstore.Info) error {
		seq, err := strconv.ParseUint(o.Key[strings.LastIndexByte(o.Key, '/')+1:], 10, 64)
		if err != nil || seq > x.CompactedThroughSeq {
			return nil
		}
		hdr, ok, err := d.readHeader(ctx, repo, x, seq)
		if err != nil {
			return err
		}
		if ok && !hdr.CreatedAt.Before(since) && seq-1 < start {
			start = seq - 1
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, err
	}
	return start, nil
}

var errStop = errors.New("stop")

// setFailures writes a hook's count of events given up in a row, and
// turns it off with reason when reason is set.
//
// Outcome unknown: record.Update settles it by reading the set back (the
// change is idempotent: the same count and reason); when it cannot, the
// error stops the stream, and the next attempt writes the same change.
func (s *Store) setFailures(ctx context.Context, sc Scope, id int64, failures int, reason string) error {
	_, err := s.updateSet(ctx, sc, func(cur *setRecord) (*setRecord, error) {
		i := cur.find(id)
		if i < 0 {
			return nil, nil // deleted meanwhile
		}
		h := &cur.Hooks[i]
		off := reason != ""
		if h.Failures == failures && h.Disabled == reason && (!off || !h.Active) {
			return nil, nil
		}
		h.Failures, h.Disabled = failures, reason
		if off {
			h.Active = false
		}
		h.UpdatedAt = s.now().UTC().Truncate(time.Millisecond)
		return cur, nil
	})
	return err
}
