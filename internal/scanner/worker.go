package scanner

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/secretscan"
)

// Defaults of WorkerOptions.
const (
	DefaultCheckpointBlobs = 256
	DefaultCheckpointBytes = 8 << 20
	DefaultSliceTime       = 20 * time.Second
	DefaultMinSplitBlobs   = 64
	DefaultIdle            = time.Second
	DefaultMaxFailures     = 3
)

// WorkerOptions configure a Worker.
type WorkerOptions struct {
	// Cache materializes repositories; a worker needs its own cache
	// directory (or one it shares with serve on the same node).
	Cache *repocache.Cache
	// ID identifies the worker to coord; 0 picks a random one.
	ID coord.WorkerID
	// CheckpointBlobs and CheckpointBytes end a batch: the cursor is
	// checkpointed after every batch, so a killed worker's successor
	// rescans at most one batch. Defaults 256 blobs, 8 MiB.
	CheckpointBlobs int
	CheckpointBytes int64
	// SliceTime is how long a worker scans a shard before it splits off
	// half of what is left for idle workers (split_residual), and before a
	// full run's shard yields to waiting push runs. Default 20 s; negative
	// means "after every batch" (tests).
	SliceTime time.Duration
	// MinSplitBlobs: a shard with fewer blobs left than twice this is
	// not split. Default 64.
	MinSplitBlobs int
	// Idle is how long Run waits when there is nothing to claim and the
	// coordination store cannot wake it. Default 1 s.
	Idle time.Duration
	// SafetyPoll is how often one of the process's idle workers looks for
	// work when the coordination store wakes them on new work (the first
	// worker to wait sets it for the process). Default DefaultSafetyPoll.
	SafetyPoll time.Duration
	// MaxFailures parks a shard whose attempts failed this many times at
	// the same position for a reason a retry cannot be expected to cure
	// (not an outage, a lost lease or a killed worker), with the input
	// and the last error as its reason. Default 3.
	MaxFailures int
	// RetryDelay is the first pause before a worker retries, itself, an
	// attempt that failed transiently; it doubles for each of the
	// TransientRetries retries. Default 1 s.
	RetryDelay time.Duration
	// TransientRetries is how many times a worker retries a transient
	// failure while it holds the shard's lease, before it leaves the
	// shard to its lease and the run to its backoff. Default 3.
	TransientRetries int
	// EngineWorkers is the scan engine's parallelism; 0 means NumCPU.
	EngineWorkers int
	// Background, when set, makes the worker yield to serving: it pauses
	// before each batch while git requests are served, its git processes
	// run within the node's background budget at a lower priority, and
	// it scans on threads of lower priority
	// (docs/adr/0051-geometric-checkpoints.md). serve sets it for its
	// in-process workers; nil scans at full priority (ghost worker, which
	// lowers its whole process instead).
	Background *gitexec.Background

	// LFS opens the repositories' Git LFS objects: the object of each
	// pointer blob a batch reads, of any size, is scanned as the
	// pointer's content (larger ones as a stream, in bounded memory), so
	// a secret in a file LFS tracks is found where the pointer was added
	// (docs/adr/0130-lfs-push-protection.md). nil scans only what git
	// holds.
	LFS LFSObjects
	// MaxLFSObject, when positive, is the largest LFS object scanned;
	// larger ones are counted as skipped. 0 (the default) scans all.
	MaxLFSObject int64

	// OnClaim and OnBatch observe the worker (tests, metrics): a shard
	// claimed, a batch of blobs scanned, recorded and checkpointed, and a
	// shard completed (with its final range).
	OnClaim    func(Spec, coord.Lease)
	OnBatch    func(Spec, coord.Lease, []string)
	OnComplete func(Spec, coord.Shard)
}

// Worker claims shards and scans them. Run it in a goroutine; a process
// may run several.
type Worker struct {
	s      *Scanner
	o      WorkerOptions
	id     coord.WorkerID
	logger *slog.Logger

	mu      sync.Mutex
	rr      int
	engines map[string]*secretscan.Engine
}

// NewWorker returns a worker of s.
func (s *Scanner) NewWorker(o WorkerOptions) (*Worker, error) {
	if o.Cache == nil {
		return nil, errors.New("scanner: a worker needs a cache")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.CheckpointBlobs, DefaultCheckpointBlobs)
	def(&o.MinSplitBlobs, DefaultMinSplitBlobs)
	def(&o.MaxFailures, DefaultMaxFailures)
	if o.CheckpointBytes <= 0 {
		o.CheckpointBytes = DefaultCheckpointBytes
	}
	if o.SliceTime == 0 {
		o.SliceTime = DefaultSliceTime
	}
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	if o.SafetyPoll <= 0 {
		o.SafetyPoll = DefaultSafetyPoll
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = time.Second
	}
	if o.TransientRetries == 0 {
		o.TransientRetries = 3
	}
	id := o.ID
	for id == 0 {
		id = coord.WorkerID(rand.Uint64() >> 1)
	}
	return &Worker{s: s, o: o, id: id, logger: s.logger.With("worker", uint64(id)), engines: map[string]*secretscan.Engine{}}, nil
}

// git returns the runner of the worker's git processes: background work
// within the node's budget when the worker has a Background
// (docs/adr/0051-geometric-checkpoints.md).
func (w *Worker) git() *gitexec.Runner { return w.o.Background.Runner(w.o.Cache.Git()) }

// ID returns the worker's coord id.
func (w *Worker) ID() coord.WorkerID { return w.id }

// Run claims and scans shards until ctx ends. With nothing to do it
// waits: for the coordination store to say that a shard became claimable,
// or for the process's safety poll (every SafetyPoll, one idle worker of
// the process), or, when the store cannot wake it, Idle. With a
// Background it runs on a thread of lower priority, which ends with it.
func (w *Worker) Run(ctx context.Context) error {
	if w.o.Background != nil {
		w.o.Background.LowerThread()
	}
	for {
		watching := w.s.watch(ctx, w.o.SafetyPoll) // before the step: what comes during it wakes the next wait
		did, err := w.Step(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case errors.Is(err, ErrNoCoordinator):
			// serve opens etcd in the background, or it is down: wait
			// for it quietly.
		case err != nil && transient(err):
			w.logger.Info("scan worker step failed; retrying", "err", err)
		case err != nil:
			w.logger.Warn("scan worker step failed", "err", err)
		}
		if did && err == nil {
			w.s.gate.signal() // there may be more: let another worker look
			continue
		}
		wait := w.o.Idle
		if err == nil && watching {
			wait = 0 // the watch, or the process's safety poll, wakes it
		}
		w.s.gate.wait(ctx, wait)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// Step claims one shard and scans it to its end (or to a yield). It
// reports false when there was nothing to claim.
func (w *Worker) Step(ctx context.Context) (bool, error) {
	spec, lease, ok, err := w.claim(ctx)
	if err != nil || !ok {
		return false, err
	}
	if w.o.OnClaim != nil {
		w.o.OnClaim(spec, lease)
	}
	return true, w.process(ctx, spec, lease)
}

// order returns the active runs in the order this worker tries them: push
// runs before full runs, and within each kind the tenants in a rotation
// that moves on at every claim, each tenant's runs oldest first. See
// docs/adr/0032-scan-runs.md on fairness.
func (w *Worker) order(specs []Spec) []Spec {
	w.mu.Lock()
	w.rr++
	rr := w.rr
	w.mu.Unlock()
	var out []Spec
	for _, k := range []Kind{KindPush, KindFull} {
		var tenants []string
		by := map[string][]Spec{}
		for _, sp := range specs {
			if sp.Kind != k {
				continue
			}
			if _, ok := by[sp.Tenant]; !ok {
				tenants = append(tenants, sp.Tenant)
			}
			by[sp.Tenant] = append(by[sp.Tenant], sp)
		}
		for i := range tenants {
			out = append(out, by[tenants[(i+rr)%len(tenants)]]...)
		}
	}
	return out
}

func randomOp() coord.OpID { return coord.OpID(rand.Uint64()>>1 | 1) }

// claim leases a shard of some active run. Runs in backoff here (an
// attempt at them failed) are skipped, so a failing run costs no other
// run its turn; a run with nothing to claim is offered to finish at most
// once per finishEvery; an unavailable coordination store ends the pass.
func (w *Worker) claim(ctx context.Context) (Spec, coord.Lease, bool, error) {
	b, err := w.s.backend()
	if err != nil {
		return Spec{}, coord.Lease{}, false, err
	}
	specs, err := w.s.Active(ctx)
	if err != nil {
		return Spec{}, coord.Lease{}, false, err
	}
	for _, spec := range w.order(specs) {
		id := spec.RunID()
		if w.s.backoff.waiting(id) {
			continue
		}
		for try := 0; try < 2; try++ {
			req := coord.ClaimRequest{Tenant: TenantID(spec.Tenant), Run: id, Worker: w.id, Op: randomOp()}
			lease, err := b.ClaimNext(ctx, w.s.coordNow(), req)
			if err == nil {
				return spec, lease, true, nil
			}
			if ctx.Err() != nil {
				return Spec{}, coord.Lease{}, false, ctx.Err()
			}
			retry := false
			switch {
			case errors.Is(err, coord.ErrNoShardAvailable), errors.Is(err, coord.ErrRunTerminal):
				// Every shard is leased, parked or done. Finishing is
				// normally the last shard's worker's job; this catches a
				// worker that died between its last shard and the end.
				if w.s.backoff.finishDue(id) {
					r := runOf(spec)
					if ferr := w.s.finish(ctx, &r); ferr != nil {
						w.logger.Debug("finishing a run failed", "run", spec.String(), "err", ferr)
					}
				}
			case errors.Is(err, coord.ErrNotFound), errors.Is(err, coord.ErrRunNotActive):
				// Created while etcd was down, or queued at the tenant's
				// shard cap: create and register now.
				r, gerr := w.s.Get(ctx, spec)
				if gerr != nil {
					break
				}
				if r.Done {
					_ = w.s.opts.Store.Delete(ctx, activeKey(spec))
					break
				}
				if eerr := w.s.ensureCoord(ctx, &r); eerr == nil {
					retry = true
				}
			case transient(err):
				// etcd is down: every other claim would wait for it too.
				return Spec{}, coord.Lease{}, false, fmt.Errorf("%w: claim: %w", ErrNoCoordinator, err)
			default:
				w.logger.Warn("claim failed", "run", spec.String(), "err", err)
				w.s.backoff.fail(id)
			}
			if !retry {
				break
			}
		}
	}
	return Spec{}, coord.Lease{}, false, nil
}

// runOf is the descriptor of spec as far as finishing it needs: its
// identity and coord run id.
func runOf(spec Spec) Run {
	return Run{Tenant: spec.Tenant, RepoID: spec.RepoID, Kind: spec.Kind, Seq: spec.Seq, ID: uint64(spec.RunID())}
}

// engine returns the scan engine of tenant: the rules, keyed with the
// tenant's fingerprint key so fingerprints agree with the alert store.
func (w *Worker) engine(ctx context.Context, tenant string) (*secretscan.Engine, error) {
	w.mu.Lock()
	e := w.engines[tenant]
	w.mu.Unlock()
	if e != nil {
		return e, nil
	}
	key, err := w.s.opts.Alerts.FingerprintKey(ctx, tenant)
	if err != nil {
		return nil, err
	}
	opts := secretscan.Options{FingerprintKey: key, Workers: w.o.EngineWorkers, Messages: true}
	if w.o.Background != nil {
		opts.WorkerSetup = w.o.Background.LowerThread
	}
	e, err = secretscan.New(w.s.rules, opts)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.engines[tenant] = e
	w.mu.Unlock()
	return e, nil
}

// errLeaseLost ends a shard whose lease could not be renewed.
var errLeaseLost = errors.New("scanner: shard lease lost")

// process scans the leased shard from its cursor, checkpointing after
// every batch, splitting and yielding as the slice time passes, completes
// it and finishes the run when it was the last. A failed attempt is
// judged by its cause (docs/adr/0033-scan-coverage.md): a transient one
// (an outage, a lost lease) is retried here while the lease lasts, then
// left to the lease and to this process's backoff, and never counts; any
// other is recorded in the shard's token at the cursor's position, and
// the shard is parked once MaxFailures attempts failed there.
func (w *Worker) process(ctx context.Context, spec Spec, lease coord.Lease) (err error) {
	ctx, span := w.s.opts.Tracer.Start(ctx, "scan shard", trace.WithAttributes(
		attribute.String("ghost.scan.run", spec.String()), attribute.String("ghost.scan.kind", string(spec.Kind)),
		attribute.Int64("ghost.scan.seq", int64(spec.Seq)), attribute.String("ghost.repo_id", spec.RepoID),
		attribute.String("ghost.scan.shard", fmt.Sprint(lease.Shard))))
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	b, err := w.s.backend()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		w.heartbeat(ctx, b, lease, cancel)
	}()
	defer func() { cancel(nil); <-hbDone }()

	for attempt := 0; ; attempt++ {
		err = w.scanShard(ctx, b, spec, lease)
		if err == nil {
			w.s.backoff.ok(lease.Run)
			r, gerr := w.s.Get(ctx, spec)
			if gerr != nil {
				return gerr
			}
			// The shard is done whatever happens next: a failure to
			// finish the run is left to the next claim pass.
			return w.s.finish(ctx, &r)
		}
		if cause := context.Cause(ctx); cause != nil && errors.Is(cause, errLeaseLost) {
			w.s.opts.Metrics.failure(true)
			return fmt.Errorf("%v shard %v: %w", spec, lease.Shard, cause)
		}
		if ctx.Err() != nil {
			return err // stopping: the lease expires, a successor resumes
		}
		if transient(err) {
			w.s.opts.Metrics.failure(true)
			if attempt < w.o.TransientRetries {
				d := w.o.RetryDelay << attempt
				w.logger.Info("scan attempt failed transiently; retrying", "run", spec.String(), "shard", lease.Shard, "in", d, "err", err)
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return err
				case <-t.C:
				}
				continue
			}
			d := w.s.backoff.fail(lease.Run)
			w.logger.Warn("scan attempt failed transiently; leaving the shard to its lease", "run", spec.String(), "shard", lease.Shard, "backoff", d, "err", err)
			return err
		}
		w.s.opts.Metrics.failure(false)
		w.failed(ctx, b, spec, lease, err)
		w.s.backoff.fail(lease.Run)
		return err
	}
}

// failed records an attempt that failed for a reason a retry may not
// cure in the shard's token, at the cursor's current position, and parks
// the shard once MaxFailures attempts failed at that position. When the
// record cannot be written (etcd is down, or the run is older than
// CursorNonDecreasing), the attempt is not counted.
func (w *Worker) failed(ctx context.Context, b coord.Backend, spec Spec, lease coord.Lease, err error) {
	sh, gerr := b.GetShard(ctx, lease.Tenant, lease.Run, lease.Shard)
	if gerr != nil {
		w.logger.Warn("scan attempt failed; its failure could not be recorded", "run", spec.String(), "shard", lease.Shard, "err", err, "record_err", gerr)
		return
	}
	tk := parseToken(sh.Cursor.Token)
	at := hex.EncodeToString(sh.Cursor.Key)
	if tk.Fail == nil || tk.Fail.At != at {
		tk.Fail = &failure{At: at}
	}
	tk.Fail.N++
	tk.Fail.Input = clip(inputOf(err, "the shard"), 200)
	tk.Fail.Err = clip(err.Error(), 300)
	tb, _ := json.Marshal(tk)
	n := tk.Fail.N
	if _, cerr := b.Checkpoint(ctx, w.s.coordNow(), coord.CheckpointRequest{Lease: lease, Op: op(u64(uint64(lease.Run)), u64(uint64(lease.Shard)), u64(lease.Fence), "failed", at, u64(uint64(n))),
		Cursor: coord.Cursor{HasKey: sh.Cursor.HasKey, Key: sh.Cursor.Key, Token: tb}}); cerr != nil {
		w.logger.Warn("scan attempt failed; its failure could not be recorded", "run", spec.String(), "shard", lease.Shard, "err", err, "record_err", cerr)
		return
	}
	if n < w.o.MaxFailures {
		w.logger.Warn("scan attempt failed", "run", spec.String(), "shard", lease.Shard, "failures_here", n, "input", tk.Fail.Input, "err", err)
		return
	}
	reason := clip(fmt.Sprintf("failed %d times on %s; last: %v", n, tk.Fail.Input, err), 512)
	if _, perr := b.Park(ctx, w.s.coordNow(), coord.ParkRequest{Lease: lease, Op: op(u64(uint64(lease.Run)), u64(uint64(lease.Shard)), u64(lease.Fence), "park"), Reason: reason}); perr != nil {
		w.logger.Warn("parking a failing shard failed", "run", spec.String(), "shard", lease.Shard, "err", perr)
		return
	}
	w.s.opts.Metrics.parkedOne()
	w.logger.Warn("shard parked", "run", spec.String(), "shard", lease.Shard, "reason", reason)
}

// clip cuts s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// heartbeat renews the lease every third of its duration until ctx ends;
// a renewal refused for good (the lease was lost to expiry and taken
// over) cancels the scan with errLeaseLost.
func (w *Worker) heartbeat(ctx context.Context, b coord.Backend, lease coord.Lease, cancel context.CancelCauseFunc) {
	// The run's lease duration was fixed by whoever created it, maybe
	// with other options than ours: renew at a third of what the lease
	// has left now.
	every := max(time.Duration(lease.Deadline-w.s.coordNow())*time.Millisecond/3, 50*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := b.Renew(ctx, w.s.coordNow(), coord.RenewRequest{Lease: lease, Op: randomOp()})
		switch {
		case err == nil, ctx.Err() != nil:
		case errors.Is(err, coord.ErrStaleFence), errors.Is(err, coord.ErrNotOwner), errors.Is(err, coord.ErrLeaseExpired),
			errors.Is(err, coord.ErrShardTerminal), errors.Is(err, coord.ErrShardParked), errors.Is(err, coord.ErrRunTerminal):
			cancel(fmt.Errorf("%w: %w", errLeaseLost, err))
			return
		default:
			w.logger.Warn("lease renewal failed; retrying", "shard", lease.Shard, "err", err)
		}
	}
}

// scanShard scans the leased shard from its cursor and completes it.
// Its errors name the input they failed on (*inputError).
func (w *Worker) scanShard(ctx context.Context, b coord.Backend, spec Spec, lease coord.Lease) error {
	sh, err := b.GetShard(ctx, lease.Tenant, lease.Run, lease.Shard)
	if err != nil {
		return err
	}
	snap, err := w.o.Cache.Materialize(ctx, spec.RepoID)
	if err != nil {
		return &inputError{"the repository " + spec.RepoID, fmt.Errorf("materialize: %w", err)}
	}
	if snap.Index.Seq < spec.Seq {
		return &inputError{"the repository " + spec.RepoID, fmt.Errorf("cache of %s is at seq %d, before the run's %d", spec.RepoID, snap.Index.Seq, spec.Seq)}
	}
	blobs, err := w.listBlobs(ctx, snap, spec, sh.Start, sh.End, sh.Cursor.Key, sh.Cursor.HasKey)
	if errors.Is(err, errSuperseded) {
		if err := w.supersede(ctx, spec, snap.Index.CompactedThroughSeq); err != nil {
			return err
		}
		blobs, err = nil, nil
	}
	if err != nil {
		return &inputError{fmt.Sprintf("the blob listing of %v at seq %d", spec, snap.Index.Seq), err}
	}
	eng, err := w.engine(ctx, spec.Tenant)
	if err != nil {
		return err
	}
	tk := parseToken(sh.Cursor.Token)
	repo := secretscan.Repo{Dir: snap.Dir, Git: w.o.Cache.Git(), Background: w.git()}
	ref := alerts.RunRef{ID: u64(uint64(lease.Run)), Seq: spec.Seq}
	sliceStart := time.Now()
	shardOp := func(what string, extra string) coord.OpID {
		return op(u64(uint64(lease.Run)), u64(uint64(lease.Shard)), u64(lease.Fence), what, extra)
	}
	for i := 0; i < len(blobs); {
		j, size := i, int64(0)
		for j < len(blobs) && j-i < w.o.CheckpointBlobs && (j == i || size < w.o.CheckpointBytes) {
			size += blobs[j].size
			j++
		}
		ids := make([]string, 0, j-i)
		for _, bl := range blobs[i:j] {
			ids = append(ids, bl.id)
		}
		input := fmt.Sprintf("%d blobs %s..%s", len(ids), ids[0], ids[len(ids)-1])
		// Between batches, background work waits for the git requests
		// being served (docs/adr/0051-geometric-checkpoints.md).
		if err := w.o.Background.Pause(ctx); err != nil {
			return err
		}
		scan, err := eng.ScanObjects(ctx, repo, ids, nil)
		if err != nil {
			return &inputError{input, err}
		}
		if err := w.scanLFS(ctx, spec, scan); err != nil {
			return &inputError{input, err}
		}
		fs, err := findings(ctx, repo, scan)
		if err != nil {
			return &inputError{input, err}
		}
		if err := w.record(ctx, spec, ref, fs); err != nil {
			return &inputError{input, err}
		}
		tk.Blobs += int64(len(ids))
		tk.Bytes += size
		tk.Findings += int64(len(fs))
		w.s.opts.Metrics.scanned(len(ids), size, len(fs))
		tk.Fail = nil // the cursor moves on: failures before count no more
		last := blobs[j-1]
		tb, _ := json.Marshal(tk)
		if _, err := b.Checkpoint(ctx, w.s.coordNow(), coord.CheckpointRequest{Lease: lease, Op: shardOp("checkpoint", last.id), Cursor: coord.Cursor{HasKey: true, Key: last.key, Token: tb}}); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		i = j
		if i < len(blobs) && (w.o.SliceTime < 0 || time.Since(sliceStart) >= w.o.SliceTime) {
			blobs = w.endSlice(ctx, b, spec, lease, blobs, i, shardOp)
			sliceStart = time.Now()
		}
		if w.o.OnBatch != nil {
			w.o.OnBatch(spec, lease, ids)
		}
	}
	done, err := b.Complete(ctx, w.s.coordNow(), coord.CompleteRequest{Lease: lease, Op: shardOp("complete", "")})
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	w.s.opts.Metrics.shardDone()
	if w.o.OnComplete != nil {
		w.o.OnComplete(spec, done)
	}
	return nil
}

// supersede hands a push run whose layer was folded without a preserved
// object list to the catch-up full run at the checkpoint's seq, which
// covers every object the repository still holds through that seq. The
// push run then completes without scanning; the watermark passes it when
// the full run is done (docs/adr/0033-scan-coverage.md).
func (w *Worker) supersede(ctx context.Context, spec Spec, checkpoint uint64) error {
	if _, _, err := w.s.startCatchUp(ctx, spec.Tenant, spec.RepoID, checkpoint); err != nil {
		return err
	}
	w.s.opts.Metrics.superseded()
	w.logger.Info("push run superseded by a catch-up full run", "run", spec.String(), "full_seq", checkpoint)
	return update(ctx, w.s.recs, runKey(spec), func(cur *Run) *Run {
		if cur == nil || cur.SupersededBy != 0 {
			return nil
		}
		cur.SupersededBy = checkpoint
		return cur
	})
}

// endSlice ends a slice of a shard with blobs[i:] left to scan, and
// returns the blobs the worker keeps. A full run's shard yields to
// waiting push runs: it hands everything left to a residual shard (and
// the worker completes what it did, then claims again, push runs first).
// Otherwise it helps idle workers by splitting off half of what is left.
func (w *Worker) endSlice(ctx context.Context, b coord.Backend, spec Spec, lease coord.Lease, blobs []blob, i int, shardOp func(string, string) coord.OpID) []blob {
	if spec.Kind == KindFull && w.pushWaiting(ctx) && w.split(ctx, b, spec, lease, blobs[i].key, shardOp) {
		return blobs[:i]
	}
	if left := len(blobs) - i; left >= 2*w.o.MinSplitBlobs {
		mid := i + left/2
		if w.split(ctx, b, spec, lease, blobs[mid].key, shardOp) {
			return blobs[:mid]
		}
	}
	return blobs
}

// split hands [key, end) of the leased shard to a residual shard. At the
// tenant's shard cap it does not split (and the worker scans on).
func (w *Worker) split(ctx context.Context, b coord.Backend, spec Spec, lease coord.Lease, key []byte, shardOp func(string, string) coord.OpID) bool {
	_, res, err := b.SplitResidual(ctx, w.s.coordNow(), coord.SplitResidualRequest{Lease: lease, Op: shardOp("split", hex.EncodeToString(key)), Key: key})
	if err != nil {
		w.logger.Debug("not splitting", "run", spec.String(), "shard", lease.Shard, "err", err)
		return false
	}
	w.logger.Debug("split", "run", spec.String(), "shard", lease.Shard, "residual", res.ID)
	return true
}

// pushWaiting reports whether any push run is active: a full run's shard
// then yields at the end of its slice.
func (w *Worker) pushWaiting(ctx context.Context) bool {
	page, err := w.s.opts.Store.List(ctx, activeKindPrefix(KindPush), "", 1)
	return err == nil && len(page) > 0
}

// findings turns a batch's candidates into findings, none dropped: a
// blob's at the commit whose diff added it (merges against their first
// parent included), a blob's that no diff adds at its path under a ref
// that reaches it (a tag of a tree or blob) or at no ref (an object no
// ref reaches any more), and a commit's or tag's at its object.
func findings(ctx context.Context, repo secretscan.Repo, scan *secretscan.BlobScan) ([]secretscan.Finding, error) {
	a, err := scan.AttributeAll(ctx, repo, nil)
	if err != nil {
		return nil, err
	}
	fs := a.Findings
	if len(a.Unplaced) > 0 {
		refs, err := secretscan.TreeAndBlobRefs(ctx, repo)
		if err != nil {
			return nil, err
		}
		reach, err := secretscan.Locate(ctx, repo, refs, nil, a.Unplaced)
		if err != nil {
			return nil, err
		}
		fs = append(fs, scan.LocatedFindings(a.Unplaced, reach)...)
	}
	return append(fs, scan.MessageFindings()...), nil
}

// record files a batch's findings. A finding the alert store refuses for
// good (alerts.RejectedError: malformed, which the engine should never
// produce) is logged with its reason and does not hold up the shard;
// every other failure is returned, and the batch is scanned again.
func (w *Worker) record(ctx context.Context, spec Spec, ref alerts.RunRef, fs []secretscan.Finding) error {
	err := w.s.opts.Alerts.Record(ctx, spec.Tenant, spec.RepoID, convert(fs), ref)
	var rej *alerts.RejectedError
	if errors.As(err, &rej) {
		for _, r := range rej.Rejected {
			f := fs[r.Index]
			w.logger.Error("scan finding refused by the alert store", "run", spec.String(), "rule", f.RuleID, "object", f.BlobID, "err", r.Err)
		}
		err = rej.Rest
	}
	if err != nil {
		return fmt.Errorf("record alerts: %w", err)
	}
	return nil
}

// convert turns the engine's findings into the alert store's.
func convert(fs []secretscan.Finding) []alerts.Finding {
	out := make([]alerts.Finding, 0, len(fs))
	for _, f := range fs {
		out = append(out, alerts.Finding{
			RuleID: f.RuleID, Description: f.Description, Commit: f.Commit, Path: f.Path,
			Line: f.StartLine, Column: f.StartColumn, BlobID: f.BlobID, Match: f.Match, Fingerprint: f.Fingerprint,
			Source: string(f.Source), Ref: f.Ref,
		})
	}
	return out
}

// RunWorkers runs n workers and, when rec.Every > 0, the reconciler (one
// process at a time across those sharing the coordination store,
// docs/adr/0033-scan-coverage.md), until ctx ends. It is the scan farm of
// a process: serve runs it beside the git path, `ghost worker` alone.
func (s *Scanner) RunWorkers(ctx context.Context, n int, wo WorkerOptions, rec ReconcilerOptions) error {
	workers := make([]*Worker, 0, n)
	for range n {
		w, err := s.NewWorker(wo)
		if err != nil {
			return err
		}
		workers = append(workers, w)
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Run(ctx)
		}()
	}
	if rec.Every > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.RunReconciler(ctx, rec)
		}()
	}
	wg.Wait()
	return nil
}
