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

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/coord"
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
	// Idle is how long Run waits when there is nothing to claim.
	Idle time.Duration
	// MaxFailures parks a shard that failed this many attempts, with the
	// last error as its reason. Default 3.
	MaxFailures int
	// EngineWorkers is the scan engine's parallelism; 0 means NumCPU.
	EngineWorkers int

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
	id := o.ID
	for id == 0 {
		id = coord.WorkerID(rand.Uint64() >> 1)
	}
	return &Worker{s: s, o: o, id: id, logger: s.logger.With("worker", uint64(id)), engines: map[string]*secretscan.Engine{}}, nil
}

// ID returns the worker's coord id.
func (w *Worker) ID() coord.WorkerID { return w.id }

// Run claims and scans shards until ctx ends, waiting Idle between polls
// when there is nothing to do.
func (w *Worker) Run(ctx context.Context) error {
	for {
		did, err := w.Step(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case errors.Is(err, ErrNoCoordinator):
			// serve opens etcd in the background: wait for it quietly.
		case err != nil:
			w.logger.Warn("scan worker step failed", "err", err)
		}
		if did && err == nil {
			continue
		}
		t := time.NewTimer(w.o.Idle)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
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

// claim leases a shard of some active run.
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
		for try := 0; try < 2; try++ {
			req := coord.ClaimRequest{Tenant: TenantID(spec.Tenant), Run: spec.RunID(), Worker: w.id, Op: randomOp()}
			lease, err := b.ClaimNext(ctx, w.s.coordNow(), req)
			if err == nil {
				return spec, lease, true, nil
			}
			if ctx.Err() != nil {
				return Spec{}, coord.Lease{}, false, ctx.Err()
			}
			retry := false
			switch {
			case errors.Is(err, coord.ErrNoShardAvailable):
				if r, gerr := w.s.Get(ctx, spec); gerr == nil {
					if ferr := w.s.finish(ctx, &r); ferr != nil {
						w.logger.Debug("finishing a run failed", "run", spec.String(), "err", ferr)
					}
				}
			case errors.Is(err, coord.ErrRunTerminal):
				if r, gerr := w.s.Get(ctx, spec); gerr == nil {
					if ferr := w.s.finish(ctx, &r); ferr != nil {
						w.logger.Warn("finishing a run failed", "run", spec.String(), "err", ferr)
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
			default:
				w.logger.Warn("claim failed", "run", spec.String(), "err", err)
			}
			if !retry {
				break
			}
		}
	}
	return Spec{}, coord.Lease{}, false, nil
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
	e, err = secretscan.New(w.s.rules, secretscan.Options{FingerprintKey: key, Workers: w.o.EngineWorkers, Messages: true})
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
// every batch, splitting and yielding as the slice time passes, and
// completes it.
func (w *Worker) process(ctx context.Context, spec Spec, lease coord.Lease) error {
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

	err = w.scanShard(ctx, b, spec, lease)
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && errors.Is(cause, errLeaseLost) {
		return fmt.Errorf("%v shard %v: %w", spec, lease.Shard, cause)
	}
	if ctx.Err() != nil {
		return err // stopping: the lease expires, a successor resumes
	}
	sh, gerr := b.GetShard(ctx, lease.Tenant, lease.Run, lease.Shard)
	if gerr == nil && int(sh.Attempts) >= w.o.MaxFailures {
		reason := fmt.Sprintf("failed %d attempts; last: %v", sh.Attempts, err)
		if len(reason) > 512 {
			reason = reason[:512]
		}
		if _, perr := b.Park(ctx, w.s.coordNow(), coord.ParkRequest{Lease: lease, Op: op(u64(uint64(lease.Run)), u64(uint64(lease.Shard)), u64(lease.Fence), "park"), Reason: reason}); perr != nil {
			w.logger.Warn("parking a failing shard failed", "run", spec.String(), "shard", lease.Shard, "err", perr)
		} else {
			w.logger.Warn("shard parked", "run", spec.String(), "shard", lease.Shard, "reason", reason)
		}
	}
	// Otherwise the lease runs out and another attempt claims the shard.
	return err
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

func (w *Worker) scanShard(ctx context.Context, b coord.Backend, spec Spec, lease coord.Lease) error {
	sh, err := b.GetShard(ctx, lease.Tenant, lease.Run, lease.Shard)
	if err != nil {
		return err
	}
	snap, err := w.o.Cache.Materialize(ctx, spec.RepoID)
	if err != nil {
		return fmt.Errorf("materialize %s: %w", spec.RepoID, err)
	}
	if snap.Index.Seq < spec.Seq {
		return fmt.Errorf("cache of %s is at seq %d, before the run's %d", spec.RepoID, snap.Index.Seq, spec.Seq)
	}
	blobs, err := w.listBlobs(ctx, snap, spec, sh.Start, sh.End, sh.Cursor.Key, sh.Cursor.HasKey)
	if err != nil {
		return err
	}
	eng, err := w.engine(ctx, spec.Tenant)
	if err != nil {
		return err
	}
	tk := parseToken(sh.Cursor.Token)
	repo := secretscan.Repo{Dir: snap.Dir, Git: w.o.Cache.Git()}
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
		scan, err := eng.ScanObjects(ctx, repo, ids, nil)
		if err != nil {
			return err
		}
		fs, err := findings(ctx, repo, scan)
		if err != nil {
			return err
		}
		if err := w.record(ctx, spec, ref, fs); err != nil {
			return err
		}
		tk.Blobs += int64(len(ids))
		tk.Bytes += size
		tk.Findings += int64(len(fs))
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
	if w.o.OnComplete != nil {
		w.o.OnComplete(spec, done)
	}
	r, err := w.s.Get(ctx, spec)
	if err != nil {
		return err
	}
	return w.s.finish(ctx, &r)
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
