package scanner

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/secretscan"
	"github.com/ghost-scm/ghost/internal/wal"
)

// Defaults of Options.
const (
	// DefaultInitialShards is the number of shards a full run starts
	// with (docs/adr/0032-scan-runs.md).
	DefaultInitialShards = 16
	// DefaultLeaseDuration is how long a shard lease lasts without renewal:
	// a killed worker's shard is claimable again this long after its last
	// heartbeat.
	DefaultLeaseDuration = 30 * time.Second
	// DefaultMaxRetries is how many re-acquisitions a shard gets before
	// coord parks it: none, because a shard is acquired again whenever
	// its worker was killed, lost its lease or met an outage, and none of
	// those may park it (docs/adr/0033-scan-coverage.md). A failure that
	// repeats on the same input parks it instead (WorkerOptions.MaxFailures).
	DefaultMaxRetries = 0
	// DefaultStartTimeout bounds the coordinator calls of Start.
	DefaultStartTimeout = 10 * time.Second
)

// ErrNoCoordinator reports that the coordination store is not available;
// the run's descriptor was written, and workers or the reconciler create
// its coord run once the store is back.
var ErrNoCoordinator = errors.New("scanner: coordination store unavailable")

// Options configure a Scanner.
type Options struct {
	Store  objstore.Store
	Log    *wal.Log
	Alerts *alerts.Store
	// Coord returns the coordination backend, or nil while it is not
	// available (serve opens etcd in the background, ADR 0025).
	Coord func() coord.Backend
	// Rules are the scanning rules; nil means secretscan.DefaultConfig.
	Rules *secretscan.Config
	// InitialShards of a full run; 0 means DefaultInitialShards.
	InitialShards int
	// LeaseDuration of shard leases; 0 means DefaultLeaseDuration.
	LeaseDuration time.Duration
	// MaxRetries, when positive, makes coord park a shard acquired more
	// than 1 + MaxRetries times, whatever the reason; 0 means
	// DefaultMaxRetries (no such cap).
	MaxRetries uint32
	// StartTimeout bounds the coordinator calls of Start; when etcd does
	// not answer in time the run is left queued for the workers. 0 means
	// DefaultStartTimeout.
	StartTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// Metrics, when set, receives the scan-lag and run-state figures
	// (NewMetrics).
	Metrics *Metrics
	// Tracer, when set, records a span per shard a worker scans
	// (internal/tracing); nil records none.
	Tracer trace.Tracer
	// RunDone, when set, hears of each run that completes, once, after
	// its record says so (webhooks' scan_run event). The process that
	// marks the run done tells it; one that dies first tells nothing.
	RunDone func(ctx context.Context, r Run)
}

// Scanner starts runs, reports their progress, and reconciles the runs
// the log says should exist with those that do. It is safe for
// concurrent use.
type Scanner struct {
	*Coverage
	opts    Options
	recs    records
	backoff backoff
	gate    gate
	rules   *secretscan.Config
	logger  *slog.Logger
	now     func() time.Time
	nshards int
}

// New returns a Scanner.
func New(opts Options) (*Scanner, error) {
	if opts.Store == nil || opts.Log == nil || opts.Alerts == nil || opts.Coord == nil {
		return nil, errors.New("scanner: Store, Log, Alerts and Coord are required")
	}
	s := &Scanner{Coverage: NewCoverage(opts.Store), opts: opts, recs: records{opts.Store}, rules: opts.Rules, logger: opts.Logger, now: opts.Now, nshards: opts.InitialShards}
	if s.rules == nil {
		cfg, err := secretscan.DefaultConfig()
		if err != nil {
			return nil, err
		}
		s.rules = cfg
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.opts.Tracer == nil {
		s.opts.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.nshards <= 0 {
		s.nshards = DefaultInitialShards
	}
	if s.nshards > 1<<16 {
		return nil, fmt.Errorf("%w: at most 65536 initial shards", ErrInvalid)
	}
	if s.opts.LeaseDuration <= 0 {
		s.opts.LeaseDuration = DefaultLeaseDuration
	}
	if s.opts.StartTimeout <= 0 {
		s.opts.StartTimeout = DefaultStartTimeout
	}
	if s.opts.MaxRetries == 0 {
		s.opts.MaxRetries = DefaultMaxRetries
	}
	s.backoff.now = s.now
	return s, nil
}

func (s *Scanner) coordNow() coord.Time { return coord.TimeOf(s.now()) }

func (s *Scanner) backend() (coord.Backend, error) {
	b := s.opts.Coord()
	if b == nil {
		return nil, ErrNoCoordinator
	}
	return b, nil
}

// runConfig is the coord configuration of new runs. Cursors may repeat
// their key so that a worker can record a failed attempt in the token
// without moving the cursor (docs/adr/0033-scan-coverage.md); the blob
// ids a worker checkpoints still only move forward.
func (s *Scanner) runConfig() coord.RunConfig {
	return coord.RunConfig{LeaseDuration: s.opts.LeaseDuration, Cursor: coord.CursorNonDecreasing, MaxRetries: s.opts.MaxRetries}
}

// manifest returns the root shards of a run: one shard over the whole id
// space for a push run (a layer's objects are few), n equal ranges of the
// first two bytes of the object id for a full run.
func manifest(k Kind, n int) []coord.ShardSpec {
	if k == KindPush || n <= 1 {
		return []coord.ShardSpec{{ID: 1}}
	}
	out := make([]coord.ShardSpec, n)
	bound := func(i int) []byte {
		if i == 0 || i == n {
			return nil
		}
		var b [2]byte
		binary.BigEndian.PutUint16(b[:], uint16(i*65536/n))
		return b[:]
	}
	for i := range n {
		out[i] = coord.ShardSpec{ID: coord.ShardID(i + 1), Start: bound(i), End: bound(i + 1)}
	}
	return out
}

// Start starts the run spec names, idempotently: a run that exists is
// returned as it is. The descriptor and the workers' marker go to the
// object store first, then the coord run is created and its shards
// registered. When the coordination store is unavailable, or the tenant
// is at its shard cap, the run is queued: Start returns the descriptor
// with a nil error (ErrNoCoordinator is logged), and workers create or
// register the coord run later.
func (s *Scanner) Start(ctx context.Context, spec Spec) (Run, error) {
	if err := spec.check(); err != nil {
		return Run{}, err
	}
	var cur Run
	_, err := s.recs.get(ctx, runKey(spec), &cur)
	switch {
	case err == nil && cur.Done:
		return cur, nil
	case err == nil:
	case errors.Is(err, objstore.ErrNotFound):
		n := s.nshards
		if spec.Kind == KindPush {
			n = 1
		}
		cur = Run{V: recordVersion, Tenant: spec.Tenant, RepoID: spec.RepoID, Kind: spec.Kind, Seq: spec.Seq,
			ID: uint64(spec.RunID()), Shards: n, CreatedAt: s.now().UTC()}
		if err := s.recs.create(ctx, runKey(spec), &cur); err != nil {
			return Run{}, err
		}
		// Re-read: a racing Start may have written first, with its own
		// CreatedAt; everyone must agree on the descriptor.
		if _, err := s.recs.get(ctx, runKey(spec), &cur); err != nil {
			return Run{}, err
		}
	default:
		return Run{}, err
	}
	if err := s.recs.create(ctx, activeKey(spec), &cur); err != nil {
		return Run{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	if err := s.ensureCoord(cctx, &cur); err != nil {
		// The marker makes workers retry; nothing is lost by waiting.
		s.logger.Info("scan run queued", "run", spec.String(), "reason", err)
	}
	return cur, nil
}

// ensureCoord creates the coord run of r and registers its shards, both
// idempotently. At the tenant's shard cap it returns the
// *coord.ShardLimitError and leaves the run Initializing: queued.
func (s *Scanner) ensureCoord(ctx context.Context, r *Run) error {
	b, err := s.backend()
	if err != nil {
		return err
	}
	spec := r.Spec()
	t, id := TenantID(spec.Tenant), coord.RunID(r.ID)
	_, err = b.CreateRun(ctx, s.coordNow(), coord.CreateRunRequest{Tenant: t, Run: id, Op: op(u64(r.ID), "create"), Config: s.runConfig()})
	if err != nil && !errors.Is(err, coord.ErrRunExists) {
		return fmt.Errorf("create %v: %w", spec, err)
	}
	_, err = b.RegisterShards(ctx, s.coordNow(), coord.RegisterShardsRequest{Tenant: t, Run: id, Op: op(u64(r.ID), "register"), Shards: manifest(spec.Kind, r.Shards)})
	if err != nil && !errors.Is(err, coord.ErrRunNotInitializing) && !errors.Is(err, coord.ErrRunTerminal) {
		return fmt.Errorf("register shards of %v: %w", spec, err)
	}
	return nil
}

// token is a shard's cursor token: what the shard has scanned so far,
// and the failures of attempts at the cursor's current position.
type token struct {
	Blobs    int64 `json:"b"`
	Bytes    int64 `json:"y"`
	Findings int64 `json:"f"`
	// Fail counts the attempts that failed, for a reason a retry cannot
	// be expected to cure, at the cursor position At (hex of the cursor
	// key; "" before the first checkpoint). It is reset when the cursor
	// moves.
	Fail *failure `json:"x,omitempty"`
}

// failure is a token's record of failed attempts at one position.
type failure struct {
	At    string `json:"at"`
	N     int    `json:"n"`
	Input string `json:"in,omitempty"`
	Err   string `json:"err,omitempty"`
}

func parseToken(b []byte) token {
	var t token
	if len(b) > 0 {
		_ = json.Unmarshal(b, &t) // a token we cannot read counts as nothing
	}
	return t
}

// finish completes the run once no shard is left to scan, then writes its
// follow-ups: the descriptor's statistics, the watermark of a push run,
// and the removal of its marker. Every step is idempotent, so any worker,
// or the same one again after a crash, may call it.
func (s *Scanner) finish(ctx context.Context, r *Run) error {
	b, err := s.backend()
	if err != nil {
		return err
	}
	spec := r.Spec()
	t, id := TenantID(spec.Tenant), coord.RunID(r.ID)
	now := s.coordNow()
	p, err := b.Progress(ctx, now, t, id) // one read of the run and its shards
	if err != nil {
		return err
	}
	switch p.State {
	case coord.RunActive:
		if p.Active > 0 || p.Parked > 0 {
			return nil
		}
		shards, err := b.ListShards(ctx, now, t, id, coord.ShardFilter{})
		if err != nil {
			return err
		}
		var f Final
		for i := range shards {
			if shards[i].State != coord.ShardSplit {
				f.Shards++
			}
			tk := parseToken(shards[i].Cursor.Token)
			f.Blobs += tk.Blobs
			f.Bytes += tk.Bytes
			f.Findings += tk.Findings
		}
		f.At = s.now().UTC()
		if err := update(ctx, s.recs, runKey(spec), func(cur *Run) *Run {
			if cur == nil || cur.Final != nil {
				return nil
			}
			cur.Final = &f
			return cur
		}); err != nil {
			return err
		}
		if _, err := b.CompleteRun(ctx, s.coordNow(), coord.CompleteRunRequest{Tenant: t, Run: id, Op: op(u64(r.ID), "complete")}); err != nil && !errors.Is(err, coord.ErrRunTerminal) {
			return fmt.Errorf("complete %v: %w", spec, err)
		}
	case coord.RunDone:
	default:
		return nil
	}
	marked := false
	var doneRun Run
	if err := update(ctx, s.recs, runKey(spec), func(cur *Run) *Run {
		if cur == nil || cur.Done {
			marked = false
			return nil
		}
		cur.Done, marked = true, true
		doneRun = *cur
		return cur
	}); err != nil {
		return err
	}
	if marked {
		s.opts.Metrics.runDone(spec.Kind, s.now().Sub(r.CreatedAt))
		if s.opts.RunDone != nil {
			s.opts.RunDone(ctx, doneRun)
		}
	}
	if spec.Kind == KindFull {
		// Every object of the repository at a seq at or above this one
		// was scanned, and compaction keeps every object of the pushes
		// above the watermark: every push through this seq is covered.
		if err := s.advanceTo(ctx, spec.Tenant, spec.RepoID, spec.Seq); err != nil {
			return err
		}
	}
	if err := s.advanceWatermark(ctx, spec.Tenant, spec.RepoID); err != nil {
		return err
	}
	return s.opts.Store.Delete(ctx, activeKey(spec))
}

// maxReconcile bounds the seqs one reconcile pass looks at per repository.
const maxReconcile = 1000

// Watermark returns the repository's "scanned through seq".
func (s *Scanner) Watermark(ctx context.Context, repoID string) (uint64, error) {
	return s.ScannedThrough(ctx, repoID)
}

// advanceWatermark moves the watermark over every push run after it that
// is done, contiguously, and drops the preserved object lists it passed.
// A run superseded by a full run holds it back until that run is done
// (which moves it past the superseded seqs itself).
func (s *Scanner) advanceWatermark(ctx context.Context, tenant, repoID string) error {
	w, err := s.Watermark(ctx, repoID)
	if err != nil {
		return err
	}
	next := w
	for range maxReconcile {
		var r Run
		_, err := s.recs.get(ctx, runKey(Spec{Tenant: tenant, RepoID: repoID, Kind: KindPush, Seq: next + 1}), &r)
		if errors.Is(err, objstore.ErrNotFound) {
			break
		}
		if err != nil {
			return err
		}
		if !r.Done || r.SupersededBy != 0 {
			break
		}
		next++
	}
	if err := s.advanceTo(ctx, tenant, repoID, next); err != nil {
		return err
	}
	return s.dropPreservedThrough(ctx, repoID, next)
}

// advanceTo raises the watermark to seq (never lowers it).
func (s *Scanner) advanceTo(ctx context.Context, tenant, repoID string, seq uint64) error {
	return update(ctx, s.recs, watermarkKey(repoID), func(cur *Watermark) *Watermark {
		if cur != nil && cur.Seq >= seq || cur == nil && seq == 0 {
			return nil
		}
		return &Watermark{V: recordVersion, Tenant: tenant, RepoID: repoID, Seq: seq}
	})
}

// Reconcile closes the gaps after the repository's watermark: it starts
// the push runs of the seqs after it that have no run (pushes whose run
// was never started: the node stopped right after the commit, or etcd and
// the push hook's bounded start both failed), and, when some of those
// seqs were folded by a compaction that preserved no object list for
// them, one catch-up full run at the checkpoint's seq
// (docs/adr/0033-scan-coverage.md). Runs that exist but have no coord run
// yet (etcd was down) are left to the workers, which create them from
// their marker. It returns how many runs it started.
func (s *Scanner) Reconcile(ctx context.Context, tenant, repoID string) (int, error) {
	n, _, err := s.reconcile(ctx, tenant, repoID)
	if errors.Is(err, wal.ErrRepoDeleted) {
		return n, nil // nothing to scan any more
	}
	return n, err
}

// reconcile is Reconcile, and also returns the lag it found (before the
// runs it started, if any, are done).
func (s *Scanner) reconcile(ctx context.Context, tenant, repoID string) (int, Lag, error) {
	x, err := s.opts.Log.Head(ctx, repoID)
	if err != nil {
		return 0, Lag{}, err
	}
	if x.Deleted {
		s.opts.Metrics.forget(tenant, repoID)
		return 0, Lag{}, wal.ErrRepoDeleted
	}
	w, err := s.Watermark(ctx, repoID)
	if err != nil {
		return 0, Lag{}, err
	}
	if w >= x.Seq {
		// Every push is scanned: no run after the watermark can exist,
		// so there is nothing to advance or start. This is what the sweep
		// meets almost always, at two reads (issue 22 §7).
		lag := Lag{Head: x.Seq, Watermark: w}
		s.opts.Metrics.observeLag(tenant, repoID, lag)
		return 0, lag, nil
	}
	if err := s.advanceWatermark(ctx, tenant, repoID); err != nil {
		return 0, Lag{}, err
	}
	if w, err = s.Watermark(ctx, repoID); err != nil {
		return 0, Lag{}, err
	}
	var pres map[uint64]preserved
	if w < x.CompactedThroughSeq {
		ps, err := s.preservedAfter(ctx, repoID, w, maxReconcile)
		if err != nil {
			return 0, Lag{}, err
		}
		pres = make(map[uint64]preserved, len(ps))
		for _, p := range ps {
			pres[p.seq] = p
		}
	}
	lag := s.lag(ctx, repoID, x, w, pres)
	s.opts.Metrics.observeLag(tenant, repoID, lag)
	started, catchUp := 0, false
	for seq := w + 1; seq <= x.Seq && seq <= w+maxReconcile; seq++ {
		spec := Spec{Tenant: tenant, RepoID: repoID, Kind: KindPush, Seq: seq}
		var r Run
		_, err := s.recs.get(ctx, runKey(spec), &r)
		if err == nil {
			// Make sure workers see it (a crash between descriptor and marker).
			if !r.Done {
				if err := s.recs.create(ctx, activeKey(spec), &r); err != nil {
					return started, lag, err
				}
			}
			continue
		}
		if !errors.Is(err, objstore.ErrNotFound) {
			return started, lag, err
		}
		if _, ok := pres[seq]; seq <= x.CompactedThroughSeq && !ok {
			catchUp = true // folded, and nothing says what it held
			continue
		}
		if _, err := s.Start(ctx, spec); err != nil {
			return started, lag, err
		}
		started++
	}
	if catchUp {
		_, created, err := s.startCatchUp(ctx, tenant, repoID, x.CompactedThroughSeq)
		if err != nil {
			return started, lag, err
		}
		if created {
			started++
		}
	}
	return started, lag, nil
}

// startCatchUp starts (idempotently) the full run at seq that covers the
// pushes through seq whose layers were folded without a preserved object
// list. It reports whether the run is new.
func (s *Scanner) startCatchUp(ctx context.Context, tenant, repoID string, seq uint64) (Run, bool, error) {
	spec := Spec{Tenant: tenant, RepoID: repoID, Kind: KindFull, Seq: seq}
	prev, err := s.Get(ctx, spec)
	existed := err == nil
	if existed && prev.Done {
		// Done before full runs moved the watermark: it covers the
		// gap all the same.
		return prev, false, s.advanceTo(ctx, tenant, repoID, seq)
	}
	r, err := s.Start(ctx, spec)
	if err == nil && !existed {
		s.logger.Info("scan catch-up: pushes folded without an object list are covered by a full run", "run", spec.String())
	}
	return r, !existed, err
}

// Lag is how far a repository's scans trail its pushes.
type Lag struct {
	// Head is the repository's newest seq, Watermark the seq through
	// which every push is scanned; Seqs is the difference.
	Head, Watermark, Seqs uint64
	// Oldest is when the oldest unscanned push landed (zero when none is
	// unscanned, or when its time is not known).
	Oldest time.Time
}

// Lag returns the repository's scan lag.
func (s *Scanner) Lag(ctx context.Context, repoID string) (Lag, error) {
	x, err := s.opts.Log.Head(ctx, repoID)
	if err != nil {
		return Lag{}, err
	}
	w, err := s.Watermark(ctx, repoID)
	if err != nil {
		return Lag{}, err
	}
	return s.lag(ctx, repoID, x, w, nil), nil
}

// lag computes Lag from an index and a watermark; pres, when not nil,
// holds the preserved object lists after the watermark.
func (s *Scanner) lag(ctx context.Context, repoID string, x *wal.Index, w uint64, pres map[uint64]preserved) Lag {
	l := Lag{Head: x.Seq, Watermark: w}
	if x.Deleted || w >= x.Seq {
		return l
	}
	l.Seqs = x.Seq - w
	next := w + 1
	switch {
	case next > x.CompactedThroughSeq:
		l.Oldest = ulid.Time(x.Layers[next-x.CompactedThroughSeq-1].ULID.Time())
	default:
		p, ok := pres[next]
		if !ok && pres == nil {
			var err error
			if p, ok, err = s.preservedAt(ctx, repoID, next); err != nil {
				ok = false
			}
		}
		if ok {
			l.Oldest = ulid.Time(p.id.Time())
		}
	}
	return l
}

// RepoRef names a repository to reconcile.
type RepoRef struct{ Tenant, RepoID string }

// ReconcileAll reconciles every repository, and returns how many runs it
// started. Errors of one repository do not stop the others.
func (s *Scanner) ReconcileAll(ctx context.Context, repos []RepoRef) (int, error) {
	var errs []error
	n := 0
	for _, r := range repos {
		k, err := s.Reconcile(ctx, r.Tenant, r.RepoID)
		n += k
		if err != nil && !errors.Is(err, wal.ErrRepoDeleted) {
			errs = append(errs, fmt.Errorf("%s/%s: %w", r.Tenant, r.RepoID, err))
		}
	}
	if s.opts.Metrics != nil {
		if err := s.observeRuns(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// observeRuns counts the runs not yet done by state, for the metrics.
func (s *Scanner) observeRuns(ctx context.Context) error {
	specs, err := s.Active(ctx)
	if err != nil {
		return err
	}
	counts := map[[2]string]int{}
	parked := 0
	b := s.opts.Coord()
	for _, sp := range specs {
		state := "queued"
		switch {
		case b == nil:
			state = "unknown"
		default:
			cctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
			p, err := b.Progress(cctx, s.coordNow(), TenantID(sp.Tenant), sp.RunID())
			cancel()
			switch {
			case errors.Is(err, coord.ErrNotFound):
			case err != nil:
				state = "unknown"
			case p.State == coord.RunInitializing:
			case p.State == coord.RunActive && p.Parked > 0:
				state = "parked"
				parked += p.Parked
			case p.State == coord.RunActive:
				state = "active"
			default:
				state = "finishing" // coord run ended; its follow-ups are pending
			}
		}
		counts[[2]string{string(sp.Kind), state}]++
	}
	s.opts.Metrics.observeRuns(counts, parked)
	return nil
}

// Active returns the runs workers should look at, push runs first.
func (s *Scanner) Active(ctx context.Context) ([]Spec, error) {
	var out []Spec
	for _, k := range []Kind{KindPush, KindFull} {
		err := objstore.Walk(ctx, s.opts.Store, activeKindPrefix(k), func(o objstore.Info) error {
			if sp, ok := parseActiveKey(o.Key); ok {
				out = append(out, sp)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Get returns a run's descriptor.
func (s *Scanner) Get(ctx context.Context, spec Spec) (Run, error) {
	var r Run
	_, err := s.recs.get(ctx, runKey(spec), &r)
	if errors.Is(err, objstore.ErrNotFound) {
		return Run{}, fmt.Errorf("%w: %v", ErrNotFound, spec)
	}
	return r, err
}

// ParkedShard is a shard that failed until it was parked.
type ParkedShard struct {
	Shard  string `json:"shard"`
	Reason string `json:"reason"`
}

// Status is a run with its progress.
type Status struct {
	Run
	// State is queued (no shards registered yet: etcd was unavailable or
	// the tenant is at its shard cap), active, done, unknown (etcd does
	// not answer now), or the coord state.
	State        string        `json:"state"`
	ShardsTotal  int           `json:"shards_total"`
	ShardsDone   int           `json:"shards_done"`
	ShardsLeased int           `json:"shards_leased"`
	Parked       []ParkedShard `json:"parked,omitempty"`
	Blobs        int64         `json:"blobs"`
	Bytes        int64         `json:"bytes"`
	Findings     int64         `json:"findings"`
	// Covered is the fraction of the object-id space scanned, from 0 to 1.
	Covered float64 `json:"covered"`
	// Rate is bytes scanned per second since the run was created.
	Rate float64 `json:"rate_bytes_per_second"`
	// ETA estimates the time left from Covered and the time spent; zero
	// when unknown or done.
	ETA time.Duration `json:"eta_ns"`
	// Note explains an unknown state.
	Note string `json:"note,omitempty"`
}

// Runs lists the repository's runs, newest first, at most limit (0: 100).
// It reads only what it returns: descriptors are keyed by seq, so it
// lists windows of seqs below the log's head, newest window first,
// growing the window while runs are sparse, and reads the descriptors of
// the page alone.
func (s *Scanner) Runs(ctx context.Context, repoID string, limit int) ([]Status, error) {
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, maxReconcile)
	x, err := s.opts.Log.Head(ctx, repoID)
	if err != nil && !errors.Is(err, wal.ErrRepoDeleted) {
		return nil, err
	}
	top := uint64(0)
	if x != nil {
		top = x.Seq
	}
	var keys []string // newest first
	window := uint64(2 * limit)
	for probes := 0; len(keys) < limit && probes < 40; probes++ {
		from := uint64(0)
		if top > window {
			from = top - window
		}
		start := ""
		if from > 0 {
			start = fmt.Sprintf("%s%020d~", runsPrefix(repoID), from) // past every key of seq from
		}
		var batch []string
		for len(batch) < 4*int(window)+8 {
			page, err := s.opts.Store.List(ctx, runsPrefix(repoID), start, 1000)
			if err != nil {
				return nil, err
			}
			done := len(page) == 0
			for _, o := range page {
				if seq, ok := runKeySeq(repoID, o.Key); ok && seq > top {
					done = true
					break
				}
				batch = append(batch, o.Key)
				start = o.Key
			}
			if done || len(page) < 1000 {
				break
			}
		}
		slices.Reverse(batch)
		keys = append(keys, batch...)
		if from == 0 {
			break
		}
		top, window = from, 2*window
	}
	if len(keys) > limit {
		keys = keys[:limit]
	}
	out := make([]Status, 0, len(keys))
	for _, k := range keys {
		var r Run
		if _, err := s.recs.get(ctx, k, &r); err != nil {
			if errors.Is(err, objstore.ErrNotFound) {
				continue
			}
			return nil, err
		}
		st, err := s.Status(ctx, r)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// runKeySeq is the seq a run key names.
func runKeySeq(repoID, key string) (uint64, bool) {
	rest, ok := strings.CutPrefix(key, runsPrefix(repoID))
	if !ok || len(rest) < 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(rest[:20], 10, 64)
	return seq, err == nil
}

// Status returns the progress of r.
func (s *Scanner) Status(ctx context.Context, r Run) (Status, error) {
	st := Status{Run: r, State: "queued", ShardsTotal: r.Shards}
	if r.Final != nil {
		st.Blobs, st.Bytes, st.Findings = r.Final.Blobs, r.Final.Bytes, r.Final.Findings
	}
	if r.Done {
		st.State, st.ShardsDone, st.Covered = "done", r.Shards, 1
		if r.Final != nil && r.Final.Shards > 0 {
			st.ShardsTotal, st.ShardsDone = r.Final.Shards, r.Final.Shards
		}
		if r.Final != nil {
			if d := r.Final.At.Sub(r.CreatedAt).Seconds(); d > 0 {
				st.Rate = float64(st.Bytes) / d
			}
		}
		return st, nil
	}
	b := s.opts.Coord()
	if b == nil {
		return st, nil
	}
	// A status must answer while etcd is down: bound the coord reads,
	// and report what the object store knows.
	ctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	t, id := TenantID(r.Tenant), coord.RunID(r.ID)
	cr, err := b.GetRun(ctx, t, id)
	if errors.Is(err, coord.ErrNotFound) {
		return st, nil
	}
	if err != nil {
		st.State = "unknown"
		st.Note = "coordination store unavailable: " + err.Error()
		return st, nil
	}
	switch cr.State {
	case coord.RunInitializing:
		return st, nil
	case coord.RunActive:
	default:
		st.State = cr.State.String()
		p := cr.Progress()
		st.ShardsTotal, st.ShardsDone = p.Total-p.Split, p.Done
		return st, nil
	}
	now := s.coordNow()
	shards, err := b.ListShards(ctx, now, t, id, coord.ShardFilter{})
	if err != nil {
		st.State = "unknown"
		st.Note = "coordination store unavailable: " + err.Error()
		return st, nil
	}
	st.State, st.ShardsTotal = "active", 0
	for i := range shards {
		sh := &shards[i]
		if sh.State == coord.ShardSplit {
			continue
		}
		st.ShardsTotal++
		tk := parseToken(sh.Cursor.Token)
		st.Blobs += tk.Blobs
		st.Bytes += tk.Bytes
		st.Findings += tk.Findings
		w := width(sh.Start, sh.End)
		switch sh.State {
		case coord.ShardDone:
			st.ShardsDone++
			st.Covered += w
		case coord.ShardParked:
			st.Parked = append(st.Parked, ParkedShard{Shard: sh.ID.String(), Reason: sh.ParkReason})
		case coord.ShardActive:
			if sh.LeaseLive(now) {
				st.ShardsLeased++
			}
			if sh.Cursor.HasKey {
				st.Covered += width(sh.Start, sh.Cursor.Key)
			}
		}
	}
	el := s.now().Sub(r.CreatedAt)
	if sec := el.Seconds(); sec > 0 {
		st.Rate = float64(st.Bytes) / sec
	}
	if st.Covered > 0 && st.Covered < 1 {
		st.ETA = time.Duration(float64(el) * (1 - st.Covered) / st.Covered)
	}
	return st, nil
}

// pos maps a key to [0, 1] by its first 8 bytes; empty end is 1.
func pos(k []byte, end bool) float64 {
	if len(k) == 0 {
		if end {
			return 1
		}
		return 0
	}
	var b [8]byte
	copy(b[:], k)
	return float64(binary.BigEndian.Uint64(b[:])) / (1 << 64)
}

func width(start, end []byte) float64 { return max(0, pos(end, true)-pos(start, false)) }

// StartFull starts a full-history run of the repository at its head seq.
// It reports whether the run is new (false: a run at this seq existed).
func (s *Scanner) StartFull(ctx context.Context, tenant, repoID string) (Run, bool, error) {
	x, err := s.opts.Log.Head(ctx, repoID)
	if err != nil {
		return Run{}, false, err
	}
	if x.Deleted {
		return Run{}, false, fmt.Errorf("%w: repository %s is deleted", ErrInvalid, repoID)
	}
	spec := Spec{Tenant: tenant, RepoID: repoID, Kind: KindFull, Seq: x.Seq}
	_, err = s.Get(ctx, spec)
	existed := err == nil
	r, err := s.Start(ctx, spec)
	return r, !existed, err
}
