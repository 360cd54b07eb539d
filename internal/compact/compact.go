// Package compact folds a repository's log into checkpoints
// (docs/design.md §3.8, docs/adr/0050-compaction.md,
// docs/adr/0051-geometric-checkpoints.md).
//
// A log's checkpoints form a geometric progression by size, oldest and
// largest first. A compaction reads the index at seq S and rolls the
// layers since the last checkpoint, with the newest checkpoints that
// would break the progression, into one new checkpoint holding every
// object of what it rolls up: its cost follows what it rolls up, not the
// repository. When the roll-up would take in the oldest checkpoint, the
// compaction is a full repack instead: everything the refs at S reach,
// plus what the keep rules keep, into one checkpoint that replaces them
// all, which is where unreachable objects are dropped. Either way the
// pack is stored as an immutable checkpoint named after S and its
// sha256, and the index CAS makes it replace what it covers. Pushes only
// append, so one that lands meanwhile makes the CAS retry and stays a
// layer; a push is never blocked. Two compactors racing for one
// repository either write the same checkpoint, or one of them loses the
// CAS and leaves an unreferenced checkpoint for garbage collection. The
// compactor never deletes anything.
package compact

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// Options tune a Compactor. The zero value is usable.
type Options struct {
	// KeepRecent keeps in the checkpoint the unreachable objects of
	// layers younger than this (by their ULID time; default 1 h, negative
	// keeps none). A client that saw a ref before it was force-pushed away
	// may still send a push whose pack leaves out objects only that old
	// history holds; a node whose cache still has them accepts the push,
	// and the log must keep them until such pushes are over
	// (docs/adr/0050-compaction.md).
	KeepRecent time.Duration
	// Now is the clock KeepRecent is measured with (default time.Now).
	Now func() time.Time
	// Progress, when set, receives one line per step.
	Progress func(msg string)
	// Logger receives notices; nil discards them.
	Logger *slog.Logger
	// Coverage, when set, is secret scanning's claim on the log: a
	// compaction keeps every object of the layers above its watermark and
	// preserves their object lists before folding them, so no pending
	// scan becomes impossible and no unscanned object is dropped
	// (docs/adr/0033-scan-coverage.md). Nil folds without regard to scans.
	Coverage Coverage
	// Events, when set, is webhooks' claim on the log: a compaction keeps
	// every object of the layers above the seq through which every hook
	// delivered its events, and keeps the headers of those layers before
	// folding them, so that no push is lost to a hook that has not
	// delivered it yet (docs/adr/0105-webhook-delivery.md). Nil folds
	// without regard to hooks.
	Events Events
	// Factor is the geometric progression's factor: a checkpoint stays
	// only while it is at least Factor times the size of everything a
	// compaction would roll up after it (default 2, as `git repack
	// --geometric=2`; negative makes every compaction a full repack)
	// (docs/adr/0051-geometric-checkpoints.md).
	Factor int
	// Git runs the compactor's git processes; nil means the cache's
	// runner. serve passes one that yields to serving
	// (gitexec.Background, docs/adr/0051-geometric-checkpoints.md).
	Git *gitexec.Runner
}

// Coverage is what compaction needs from secret scanning
// (scanner.Coverage implements it).
type Coverage interface {
	// ScannedThrough returns the seq through which every push of repo
	// has been scanned.
	ScannedThrough(ctx context.Context, repo string) (uint64, error)
	// PreserveLayer stores the object list (git pack index, size bytes;
	// nil for a layer without objects) of the layer at seq, which is
	// about to be folded unscanned.
	PreserveLayer(ctx context.Context, repo string, seq uint64, layer wal.Layer, idx io.Reader, size int64) error
}

// Events is what compaction needs from webhook delivery
// (hooks.Store implements it).
type Events interface {
	// DeliveredThrough returns the seq through which every hook of repo
	// has delivered (or given up) the log's events.
	DeliveredThrough(ctx context.Context, repo string) (uint64, error)
	// PreserveEvents keeps what hooks need of the layer at seq (its
	// entry's header), which is about to be folded undelivered.
	PreserveEvents(ctx context.Context, repo string, seq uint64, layer wal.Layer) error
}

// Compactor writes checkpoints for repositories of one log. It is safe for
// concurrent use; it keeps no per-repository state.
type Compactor struct {
	log   *wal.Log
	cache *repocache.Cache
	git   *gitexec.Runner
	opts  Options
}

// New returns a compactor that builds in cache's scratch directory with
// cache's git.
func New(log *wal.Log, cache *repocache.Cache, opts Options) *Compactor {
	if opts.KeepRecent == 0 {
		opts.KeepRecent = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Factor == 0 {
		opts.Factor = DefaultFactor
	}
	git := opts.Git
	if git == nil {
		git = cache.Git()
	}
	return &Compactor{log: log, cache: cache, git: git, opts: opts}
}

// DefaultFactor is the default Options.Factor: git's own
// (`git repack --geometric=2`).
const DefaultFactor = 2

// Plan returns how many of x's checkpoints, oldest first, a compaction of
// x keeps, given layers, the size of the pack the compaction made of x's
// layers: the newest checkpoints roll up, with that pack, while a
// checkpoint is smaller than factor times everything rolled up after it,
// as `git repack --geometric` decides which packs to merge. 0 means a
// full repack; a factor of 0 or less always plans one. The result leaves
// room for the new checkpoint under wal.MaxCheckpoints.
//
// The layers are weighed by their repacked size, not by the sizes the
// index records: a layer's pack carries the full bases of its deltas
// (design §3.2), several times what it adds to a repacked checkpoint.
// Each checkpoint that stays is thus at least factor times the one
// written after it, so a log holds about log_factor(size of the oldest
// over the smallest) checkpoints, and an object is rewritten only when
// the checkpoint holding it grows by a factor of at least 1 + 1/factor
// (docs/adr/0051-geometric-checkpoints.md).
func Plan(x *wal.Index, factor int, layers int64) int {
	if x == nil {
		return 0
	}
	keep, _ := PlanBy(x, factor, layers, func(i int) (int64, error) { return x.Checkpoints[i].Size, nil })
	return keep
}

// PlanBy is Plan with the checkpoints weighed by weight (called with a
// checkpoint's position, only for those the decision needs: the newest,
// back to the first that stays) and the layers by layers, in the same
// unit. The compactor weighs both by object count, as `git repack
// --geometric` does: a checkpoint's pack is made of deltas against its
// own objects while the layers' pack carries whole the bases its deltas
// need from the checkpoints, so bytes overweigh the layers and roll up,
// or fully repack, more than the progression asks
// (docs/adr/0121-checkpoints-weighed-by-objects.md). An error from
// weight is returned as is.
func PlanBy(x *wal.Index, factor int, layers int64, weight func(i int) (int64, error)) (int, error) {
	if factor <= 0 || x == nil {
		return 0, nil
	}
	total := layers
	keep := min(len(x.Checkpoints), wal.MaxCheckpoints-1)
	for i := keep; i < len(x.Checkpoints); i++ {
		w, err := weight(i)
		if err != nil {
			return 0, err
		}
		total += w
	}
	for keep > 0 {
		w, err := weight(keep - 1)
		if err != nil {
			return 0, err
		}
		if w/int64(factor) >= total {
			break
		}
		keep--
		total += w
	}
	return keep, nil
}

// ErrNothingToCompact means the log has no layer after its last
// checkpoint.
var ErrNothingToCompact = errors.New("nothing to compact: no layers since the last checkpoint")

// Result describes one compaction that landed.
type Result struct {
	wal.CompactResult
	// Objects is the number of objects in the checkpoint.
	Objects int
	// Full is set for a full repack, unset for a geometric roll-up.
	Full bool
	// Took is how long the compaction ran.
	Took time.Duration
}

func (c *Compactor) progress(format string, args ...any) {
	if c.opts.Progress != nil {
		c.opts.Progress(fmt.Sprintf(format, args...))
	}
}

// Compact folds every layer of repo's log up to the current head into a
// checkpoint: a geometric roll-up, or a full repack when the roll-up
// would take in the oldest checkpoint (Plan). Errors: ErrNothingToCompact,
// wal.ErrRepoDeleted, wal.ErrAlreadyCompacted (another compactor covered
// the same seq first, or replaced a checkpoint this one keeps: harmless),
// wal.ErrOutcomeUnknown (the index write's outcome could not be learned;
// the next run, or any read of the index, tells), or a failure to build
// or store the checkpoint, after which the index is untouched. Whatever
// the failure, the repository stays consistent and the next run starts
// over.
func (c *Compactor) Compact(ctx context.Context, repo string) (Result, error) {
	return c.compact(ctx, repo, false)
}

// CompactFull is Compact with a full repack, whatever the progression
// says: the one kind of compaction that drops unreachable objects
// (`ghost repo compact --full`).
func (c *Compactor) CompactFull(ctx context.Context, repo string) (Result, error) {
	return c.compact(ctx, repo, true)
}

func (c *Compactor) compact(ctx context.Context, repo string, full bool) (Result, error) {
	start := time.Now()
	// 1. The seq to cover: the head now.
	x, err := c.log.Head(ctx, repo)
	if err != nil {
		return Result{}, err
	}
	if len(x.Layers) == 0 {
		return Result{}, fmt.Errorf("%s at seq %d: %w", repo, x.Seq, ErrNothingToCompact)
	}
	full = full || c.opts.Factor < 0
	c.progress("compacting %s: seq %d, %d layers since checkpoint %d", repo, x.Seq, len(x.Layers), x.CompactedThroughSeq)

	// 2. A scratch repository with the layers; the checkpoints the plan
	// rolls up join them below.
	tmpRoot, err := c.cache.TempDir()
	if err != nil {
		return Result{}, err
	}
	scratch, err := os.MkdirTemp(tmpRoot, "compact-"+repo+"-")
	if err != nil {
		return Result{}, fmt.Errorf("compact %s: %w", repo, err)
	}
	defer os.RemoveAll(scratch)
	dir := filepath.Join(scratch, "repo.git")
	built, err := c.cache.BuildObjects(ctx, repo, nil, x.Layers, dir, c.git)
	if err != nil {
		return Result{}, err
	}
	c.progress("built seq %d in a scratch repository", x.Seq)
	scanned := x.Seq
	if c.opts.Coverage != nil {
		if scanned, err = c.opts.Coverage.ScannedThrough(ctx, repo); err != nil {
			return Result{}, fmt.Errorf("compact %s: %w", repo, err)
		}
	}
	delivered := x.Seq
	if c.opts.Events != nil {
		if delivered, err = c.opts.Events.DeliveredThrough(ctx, repo); err != nil {
			return Result{}, fmt.Errorf("compact %s: %w", repo, err)
		}
	}

	// 3. The pack. A roll-up first packs the layers, whose size decides
	// how many checkpoints roll up with it (Plan), and then those with
	// it: every object of what it rolls up. A full repack packs
	// everything the refs reach, plus recent strays and every object of
	// the pushes not scanned yet.
	keep := 0
	var base string
	var n int
	if !full {
		var lbase string
		lbase, n, err = c.rollUp(ctx, dir, slices.Collect(maps.Values(built.Layers)))
		if err != nil {
			return Result{}, fmt.Errorf("compact %s: %w", repo, err)
		}
		st, err := os.Stat(lbase + ".pack")
		if err != nil {
			return Result{}, fmt.Errorf("compact %s: %w", repo, err)
		}
		if keep, err = c.plan(ctx, repo, x, n, st.Size()); err != nil {
			return Result{}, fmt.Errorf("compact %s: %w", repo, err)
		}
		switch {
		case keep == len(x.Checkpoints):
			base = lbase
		case keep > 0:
			more, err := c.cache.AddObjects(ctx, repo, x.Checkpoints[keep:], nil, dir, c.git)
			if err != nil {
				return Result{}, err
			}
			base, n, err = c.rollUp(ctx, dir, append(more.Checkpoints, strings.TrimPrefix(filepath.Base(lbase), "pack-")))
			if err != nil {
				return Result{}, fmt.Errorf("compact %s: %w", repo, err)
			}
		}
	}
	if keep == 0 {
		c.progress("a full repack")
		more, err := c.cache.AddObjects(ctx, repo, x.Checkpoints, nil, dir, c.git)
		if err != nil {
			return Result{}, err
		}
		built.Checkpoints = more.Checkpoints
		if err := c.cache.SetRefs(ctx, dir, x.Refs, c.git); err != nil {
			return Result{}, fmt.Errorf("compact %s: %w", repo, err)
		}
		// The objects of what scanning or a hook has yet to read stay.
		if base, n, err = c.pack(ctx, dir, x, built, min(scanned, delivered)); err != nil {
			return Result{}, fmt.Errorf("compact %s: %w", repo, err)
		}
	} else {
		c.progress("a roll-up of the layers and %d checkpoints, after %d", len(x.Checkpoints)-keep, keep)
	}
	sum, size, err := hashFile(base + ".pack")
	if err != nil {
		return Result{}, fmt.Errorf("compact %s: %w", repo, err)
	}
	c.progress("packed %d objects, %d bytes", n, size)
	if err := c.preserve(ctx, repo, dir, x, built, scanned); err != nil {
		return Result{}, fmt.Errorf("compact %s: %w", repo, err)
	}
	if err := c.preserveEvents(ctx, repo, x, delivered); err != nil {
		return Result{}, fmt.Errorf("compact %s: %w", repo, err)
	}

	// 4. Store it and CAS the index.
	pf, err := os.Open(base + ".pack")
	if err != nil {
		return Result{}, fmt.Errorf("compact %s: %w", repo, err)
	}
	defer pf.Close()
	xf, err := os.Open(base + ".idx")
	if err != nil {
		return Result{}, fmt.Errorf("compact %s: %w", repo, err)
	}
	defer xf.Close()
	xi, err := xf.Stat()
	if err != nil {
		return Result{}, fmt.Errorf("compact %s: %w", repo, err)
	}
	res, err := c.log.Compact(ctx, repo, wal.CheckpointPack{
		At: x, Keep: keep, Pack: pf, Size: size, SHA256: sum, PackIndex: xf, PackIndexSize: xi.Size(),
	})
	out := Result{CompactResult: res, Objects: n, Full: keep == 0, Took: time.Since(start)}
	if err != nil {
		return out, err
	}
	c.progress("checkpoint at seq %d replaced %d layers and %d checkpoints; the index is at seq %d with %d checkpoints and %d layers after them",
		res.Checkpoint.Seq, res.Folded, res.Replaced, res.Seq, keep+1, res.Seq-res.Checkpoint.Seq)
	return out, nil
}

// plan decides how many checkpoints a roll-up keeps (PlanBy), weighing
// the layers' pack of objects objects and size bytes and the checkpoints
// by object count, read from their stored indexes. A checkpoint stored
// without one (none is today; the format allows it) has no count: then
// the plan weighs everything by bytes, as before ADR 0121.
func (c *Compactor) plan(ctx context.Context, repo string, x *wal.Index, objects int, size int64) (int, error) {
	keep, err := PlanBy(x, c.opts.Factor, int64(objects), func(i int) (int64, error) {
		return c.log.CheckpointObjects(ctx, repo, x.Checkpoints[i])
	})
	if errors.Is(err, objstore.ErrNotFound) {
		return Plan(x, c.opts.Factor, size), nil
	}
	return keep, err
}

// rollUp writes a pack of every object of the given packs of the scratch
// repository into it, and returns its path without extension and its
// object count. `git pack-objects --stdin-packs` is what `git repack
// --geometric` runs: it needs no reachability walk, reuses the packs'
// deltas where their bases roll up too, and searches for new ones among
// what it packs (docs/adr/0051-geometric-checkpoints.md).
func (c *Compactor) rollUp(ctx context.Context, dir string, packs []string) (string, int, error) {
	seen := map[string]bool{}
	var names strings.Builder
	for _, p := range slices.Sorted(slices.Values(packs)) {
		if p != "" && !seen[p] {
			seen[p] = true
			fmt.Fprintf(&names, "pack-%s.pack\n", p)
		}
	}
	out := filepath.Join(dir, "objects", "pack", "pack")
	po := c.git.Command(ctx, dir, nil, "pack-objects", "-q", "--delta-base-offset", "--stdin-packs", out)
	po.Stdin = strings.NewReader(names.String())
	stdout, err := po.Output()
	if err != nil {
		return "", 0, po.Wrap(err)
	}
	return packResult(out, stdout)
}

// pack writes a full repack's checkpoint pack into dir and returns its
// path without extension and its object count. The objects are those
// `git rev-list --objects --all` names (everything the refs at the seq
// reach, with the path names git's delta search sorts by), every object
// of the layers younger than KeepRecent (and of each checkpoint, while
// the newest layer it folded is), and every object of the layers above
// scanned (and of each checkpoint that folded any such layer).
// pack-objects reuses the deltas the packs already hold and searches for
// new ones, as `git repack -a` does.
func (c *Compactor) pack(ctx context.Context, dir string, x *wal.Index, built *repocache.Built, scanned uint64) (string, int, error) {
	var recent []string
	cutoff := c.opts.Now().Add(-c.opts.KeepRecent)
	keepAll := func(newest time.Time, seq uint64) bool {
		return c.opts.KeepRecent > 0 && !newest.Before(cutoff) || seq > scanned
	}
	// The checkpoints kept the strays of the layers they folded that were
	// recent or unscanned then (a roll-up kept every object); while any of
	// them still is, keep all of a checkpoint's objects, or this
	// compaction would drop them. A checkpoint folded an unscanned layer
	// when it ends above the watermark.
	for i, ck := range x.Checkpoints {
		if i < len(built.Checkpoints) && built.Checkpoints[i] != "" && keepAll(time.UnixMilli(ck.Newest), ck.Seq) {
			recent = append(recent, built.Checkpoints[i])
		}
	}
	for i, l := range x.Layers {
		if p := built.Layers[l.ULID]; p != "" && keepAll(ulid.Time(l.ULID.Time()), x.CompactedThroughSeq+uint64(i)+1) {
			recent = append(recent, p)
		}
	}
	list := filepath.Join(filepath.Dir(dir), "objects.list")
	lf, err := os.Create(list)
	if err != nil {
		return "", 0, err
	}
	defer lf.Close()
	rl := c.git.Command(ctx, dir, nil, "rev-list", "--objects", "--all")
	rl.Stdout = lf
	if err := rl.Run(); err != nil {
		return "", 0, rl.Wrap(err)
	}
	for _, p := range recent {
		// show-index prints "<offset> <oid> (<crc>)" per object.
		idx, err := os.Open(filepath.Join(dir, "objects", "pack", "pack-"+p+".idx"))
		if err != nil {
			return "", 0, err
		}
		si := c.git.Command(ctx, dir, nil, "show-index")
		si.Stdin = idx
		out, err := si.Output()
		idx.Close()
		if err != nil {
			return "", 0, si.Wrap(err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 {
				fmt.Fprintln(lf, f[1])
			}
		}
	}
	if _, err := lf.Seek(0, io.SeekStart); err != nil {
		return "", 0, err
	}
	out := filepath.Join(filepath.Dir(dir), "checkpoint")
	po := c.git.Command(ctx, dir, nil, "pack-objects", "-q", "--delta-base-offset", out)
	po.Stdin = lf
	stdout, err := po.Output()
	if err != nil {
		return "", 0, po.Wrap(err)
	}
	return packResult(out, stdout)
}

// packResult reads the name pack-objects printed for the pack it wrote
// at out-<name>.pack, and returns the pack's path without extension and
// its object count.
func packResult(out string, stdout []byte) (string, int, error) {
	name := strings.TrimSpace(string(stdout))
	if len(name) != 40 && len(name) != 64 {
		return "", 0, fmt.Errorf("unexpected pack-objects output %q", name)
	}
	base := out + "-" + name
	// The object count is the pack header's (bytes 8..12).
	f, err := os.Open(base + ".pack")
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	var hdr [12]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return "", 0, fmt.Errorf("read checkpoint pack header: %w", err)
	}
	n := int(hdr[8])<<24 | int(hdr[9])<<16 | int(hdr[10])<<8 | int(hdr[11])
	return base, n, nil
}

// preserve stores, for every layer above scanned that this compaction
// folds, its pack's index from the scratch repository, so that the push
// run of its seq can list its objects once the index no longer lists the
// layer (docs/adr/0033-scan-coverage.md). It runs before the index write:
// a compaction that could not preserve a list folds nothing.
func (c *Compactor) preserve(ctx context.Context, repo, dir string, x *wal.Index, built *repocache.Built, scanned uint64) error {
	if c.opts.Coverage == nil {
		return nil
	}
	for i, l := range x.Layers {
		seq := x.CompactedThroughSeq + uint64(i) + 1
		if seq <= scanned {
			continue
		}
		if err := c.preserveOne(ctx, repo, dir, seq, l, built.Layers[l.ULID]); err != nil {
			return err
		}
	}
	return nil
}

// preserveEvents keeps, for every layer above delivered that this
// compaction folds, what hooks need of it (docs/adr/0105-webhook-delivery.md).
// Like preserve, it runs before the index write: a compaction that could
// not keep a header folds nothing.
func (c *Compactor) preserveEvents(ctx context.Context, repo string, x *wal.Index, delivered uint64) error {
	if c.opts.Events == nil {
		return nil
	}
	for i, l := range x.Layers {
		if seq := x.CompactedThroughSeq + uint64(i) + 1; seq > delivered {
			if err := c.opts.Events.PreserveEvents(ctx, repo, seq, l); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Compactor) preserveOne(ctx context.Context, repo, dir string, seq uint64, l wal.Layer, pack string) error {
	if pack == "" {
		return c.opts.Coverage.PreserveLayer(ctx, repo, seq, l, nil, 0)
	}
	f, err := os.Open(filepath.Join(dir, "objects", "pack", "pack-"+pack+".idx"))
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	return c.opts.Coverage.PreserveLayer(ctx, repo, seq, l, f, st.Size())
}

func hashFile(path string) ([32]byte, int64, error) {
	var sum [32]byte
	f, err := os.Open(path)
	if err != nil {
		return sum, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return sum, 0, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, n, nil
}
