// Package compact folds a repository's log into checkpoints
// (docs/design.md §3.7, docs/adr/0050-compaction.md).
//
// A compactor reads the index at seq S, builds a scratch bare repository
// from the log at S, packs every object reachable from the refs at S into
// one pack with git's delta search, stores it as an immutable checkpoint
// named after S and its sha256, and CASes the index so that the
// checkpoint replaces the layers through S. Pushes only append, so one
// that lands meanwhile makes the CAS retry and stays a layer; a push is
// never blocked. Two compactors racing for one repository either write
// the same checkpoint, or one of them loses the CAS and leaves an
// unreferenced checkpoint for garbage collection. The compactor never
// deletes anything.
package compact

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/gitexec"
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
	return &Compactor{log: log, cache: cache, git: cache.Git(), opts: opts}
}

// ErrNothingToCompact means the log has no layer after its last
// checkpoint.
var ErrNothingToCompact = errors.New("nothing to compact: no layers since the last checkpoint")

// Result describes one compaction that landed.
type Result struct {
	wal.CompactResult
	// Objects is the number of objects in the checkpoint.
	Objects int
}

func (c *Compactor) progress(format string, args ...any) {
	if c.opts.Progress != nil {
		c.opts.Progress(fmt.Sprintf(format, args...))
	}
}

// Compact folds every layer of repo's log up to the current head into a
// checkpoint. Errors: ErrNothingToCompact, wal.ErrRepoDeleted,
// wal.ErrAlreadyCompacted (another compactor covered the same seq first:
// harmless), wal.ErrOutcomeUnknown (the index write's outcome could not
// be learned; the next run, or any read of the index, tells), or a
// failure to build or store the checkpoint, after which the index is
// untouched. Whatever the failure, the repository stays consistent and
// the next run starts over.
func (c *Compactor) Compact(ctx context.Context, repo string) (Result, error) {
	// 1. The seq to cover: the head now.
	x, err := c.log.Head(ctx, repo)
	if err != nil {
		return Result{}, err
	}
	if len(x.Layers) == 0 {
		return Result{}, fmt.Errorf("%s at seq %d: %w", repo, x.Seq, ErrNothingToCompact)
	}
	c.progress("compacting %s: seq %d, %d layers since checkpoint %d", repo, x.Seq, len(x.Layers), x.CompactedThroughSeq)

	// 2. A scratch repository at that seq.
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
	packs, err := c.cache.Build(ctx, repo, x, dir)
	if err != nil {
		return Result{}, err
	}
	c.progress("built seq %d in a scratch repository", x.Seq)

	// 3. One pack of everything the refs reach, plus recent strays and
	// every object of the pushes not scanned yet.
	scanned := x.Seq
	if c.opts.Coverage != nil {
		if scanned, err = c.opts.Coverage.ScannedThrough(ctx, repo); err != nil {
			return Result{}, fmt.Errorf("compact %s: %w", repo, err)
		}
	}
	base, n, err := c.pack(ctx, dir, x, packs, scanned)
	if err != nil {
		return Result{}, fmt.Errorf("compact %s: %w", repo, err)
	}
	sum, size, err := hashFile(base + ".pack")
	if err != nil {
		return Result{}, fmt.Errorf("compact %s: %w", repo, err)
	}
	c.progress("packed %d objects, %d bytes", n, size)
	if err := c.preserve(ctx, repo, dir, x, packs, scanned); err != nil {
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
		At: x, Pack: pf, Size: size, SHA256: sum, PackIndex: xf, PackIndexSize: xi.Size(),
	})
	if err != nil {
		return Result{CompactResult: res, Objects: n}, err
	}
	c.progress("checkpoint at seq %d replaced %d layers; the index is at seq %d with %d layers after it", res.Checkpoint.Seq, res.Folded, res.Seq, res.Seq-res.Checkpoint.Seq)
	return Result{CompactResult: res, Objects: n}, nil
}

// pack writes the checkpoint pack into dir and returns its path without
// extension and its object count. The objects are those `git rev-list
// --objects --all` names (everything the refs at the seq reach, with the
// path names git's delta search sorts by), every object of the layers
// younger than KeepRecent (and of the previous checkpoint, while the
// newest layer it folded is), and every object of the layers above
// scanned (and of the previous checkpoint, while it folded any such
// layer). pack-objects reuses the deltas the layers already hold and
// searches for new ones, as `git repack -a` does.
func (c *Compactor) pack(ctx context.Context, dir string, x *wal.Index, packs map[ulid.ULID]string, scanned uint64) (string, int, error) {
	var recent []string
	cutoff := c.opts.Now().Add(-c.opts.KeepRecent)
	keepAll := func(newest time.Time, seq uint64) bool {
		return c.opts.KeepRecent > 0 && !newest.Before(cutoff) || seq > scanned
	}
	// The previous checkpoint kept the strays of the layers it folded
	// that were recent or unscanned then; while any of them still is,
	// keep all of its objects, or this compaction would drop them.
	if ck := x.Checkpoint; ck != nil && packs[ulid.ULID{}] != "" && keepAll(time.UnixMilli(ck.Newest), ck.Seq) {
		recent = append(recent, packs[ulid.ULID{}])
	}
	for i, l := range x.Layers {
		if p := packs[l.ULID]; p != "" && keepAll(ulid.Time(l.ULID.Time()), x.CompactedThroughSeq+uint64(i)+1) {
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
func (c *Compactor) preserve(ctx context.Context, repo, dir string, x *wal.Index, packs map[ulid.ULID]string, scanned uint64) error {
	if c.opts.Coverage == nil {
		return nil
	}
	for i, l := range x.Layers {
		seq := x.CompactedThroughSeq + uint64(i) + 1
		if seq <= scanned {
			continue
		}
		if err := c.preserveOne(ctx, repo, dir, seq, l, packs[l.ULID]); err != nil {
			return err
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
