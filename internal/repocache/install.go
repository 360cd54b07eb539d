package repocache

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// apply brings the repository in dir, whose recorded state is st, to x:
// install the checkpoint when the cache lacks layers it folded (only an
// empty repository can: check rebuilds any other), index the missing
// layers, reconcile refs, set HEAD, and consolidate the packs when there
// are too many.
func (c *Cache) apply(ctx context.Context, repo string, x *wal.Index, dir string, st *state, ev *Event) error {
	if err := c.applyObjects(ctx, repo, x, dir, st, ev); err != nil {
		return err
	}
	if err := c.reconcileRefs(ctx, c.git, dir, x.Refs); err != nil {
		return err
	}
	if err := c.setHead(ctx, repo, dir, x.Refs); err != nil {
		return err
	}
	if c.bg == nil {
		c.consolidate(ctx, repo, x, dir, st, ev)
	} else if (c.maxPks >= 0 && len(recordedNames(st)) > c.maxPks) || (c.wantsBitmap(dir) && c.bitmapDue(repo)) {
		c.consolidateLater(repo)
	}
	return nil
}

// bitmapRetry is how long after starting to write a repository's bitmap
// the cache tries again when the repository still has none: a git that
// fails to write one, or writes none (a repository without commits),
// must not make every request start the work again.
const bitmapRetry = time.Hour

// bitmapDue reports whether a bitmap for repo may be started now, and if
// so notes that it was. The notes are bounded: past 4096 of them, those
// older than bitmapRetry are dropped, and while 4096 are younger no
// bitmap starts.
func (c *Cache) bitmapDue(repo string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if t, ok := c.bitmapTried[repo]; ok && now.Sub(t) < bitmapRetry {
		return false
	}
	if len(c.bitmapTried) >= 4096 {
		for r, t := range c.bitmapTried {
			if now.Sub(t) >= bitmapRetry {
				delete(c.bitmapTried, r)
			}
		}
		if len(c.bitmapTried) >= 4096 {
			return false // thousands of repositories in an hour: later
		}
	}
	c.bitmapTried[repo] = now
	return true
}

// wantsBitmap reports whether the repository in dir has no reachability
// bitmap although its packs hold at least bitmapMin bytes: then every
// clone counts every object, which on git.git costs a clone 1.3 to 1.5
// times its time with one (docs/design.md §3.8). A cold node that
// installed checkpoints, or a warm one that never held MaxPacks packs,
// is in that state.
func (c *Cache) wantsBitmap(dir string) bool {
	if c.bitmapMin < 0 {
		return false
	}
	ents, err := os.ReadDir(filepath.Join(dir, "objects", "pack"))
	if err != nil {
		return false
	}
	var size int64
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".bitmap") {
			return false
		}
		if strings.HasPrefix(name, "pack-") && strings.HasSuffix(name, ".pack") {
			if info, err := e.Info(); err == nil {
				size += info.Size()
			}
		}
	}
	return size >= c.bitmapMin
}

// applyObjects installs what the cache lacks of x's objects: the
// checkpoints that end after st.seq when st predates x's last one, then
// each missing layer in seq order.
//
// A repository behind the log's oldest checkpoint must be empty (check
// rebuilds any other): it installs every checkpoint, as a cold node does.
// One that is at or past the oldest checkpoint but behind the last one
// installs only the checkpoints that end after its seq: each of those
// holds every object of every layer in its range
// (docs/adr/0051-geometric-checkpoints.md), so the repository then holds
// every object the log does, at the cost of what was rolled up since it
// last caught up rather than of the whole repository.
func (c *Cache) applyObjects(ctx context.Context, repo string, x *wal.Index, dir string, st *state, ev *Event) error {
	if st.seq < x.CompactedThroughSeq {
		first := 0
		for first < len(x.Checkpoints) && x.Checkpoints[first].Seq <= st.seq {
			first++
		}
		if first == 0 && (st.seq != 0 || len(st.base.packs) > 0) {
			return fmt.Errorf("cache at seq %d predates the checkpoint at seq %d", st.seq, x.Checkpoints[0].Seq)
		}
		packs := slices.Clone(st.base.packs)
		for _, l := range st.layers {
			if l.pack != "" {
				packs = append(packs, l.pack)
			}
		}
		for _, ck := range x.Checkpoints[first:] {
			pack, installed, err := c.installPack(ctx, c.git, dir, repo, checkpointSource(c.log, repo, ck))
			if installed {
				ev.Installed++
			}
			if err != nil {
				return fmt.Errorf("checkpoint at seq %d: %w", ck.Seq, err)
			}
			ev.Checkpoint = true
			packs = append(packs, pack)
		}
		last := x.LastCheckpoint()
		*st = state{seq: last.Seq, base: stateBase{seq: last.Seq, checkpoint: last.SHA256, packs: packs}}
		if err := writeState(dir, st); err != nil {
			return err
		}
	}
	for seq := st.seq + 1; seq <= x.Seq; seq++ {
		layer := x.Layers[seq-x.CompactedThroughSeq-1]
		pack, installed, err := c.indexLayer(ctx, c.git, dir, repo, layer)
		if installed {
			ev.Installed++
		}
		if err != nil {
			return fmt.Errorf("layer seq %d (%s): %w", seq, layer.ULID, err)
		}
		st.layers = append(st.layers, stateLayer{id: layer.ULID, pack: pack})
		st.seq = seq
		ev.Layers++
		if err := writeState(dir, st); err != nil {
			return err
		}
	}
	return writeState(dir, st)
}

// indexLayer streams one layer's pack from the log into git index-pack and
// returns the pack's name ("" for a layer without objects, e.g. a
// delete-only push).
func (c *Cache) indexLayer(ctx context.Context, git *gitexec.Runner, dir, repo string, layer wal.Layer) (name string, installed bool, err error) {
	if layer.Size == 0 {
		return "", false, nil
	}
	return c.installPack(ctx, git, dir, repo, layerSource(c.log, repo, layer))
}

// packSource is where a pack of the log and its stored .idx are read
// from: a layer's entry, or a checkpoint.
type packSource struct {
	what     string
	openPack func(ctx context.Context) (io.ReadCloser, error) // verifies size and sha256
	openIdx  func(ctx context.Context) (io.ReadCloser, error) // objstore.ErrNotFound when none
}

func layerSource(log *wal.Log, repo string, layer wal.Layer) packSource {
	return packSource{
		what: "layer " + layer.ULID.String(),
		openPack: func(ctx context.Context) (io.ReadCloser, error) {
			rc, _, err := log.OpenPack(ctx, repo, layer)
			return rc, err
		},
		openIdx: func(ctx context.Context) (io.ReadCloser, error) {
			rc, _, err := log.OpenPackIndex(ctx, repo, layer)
			return rc, err
		},
	}
}

func checkpointSource(log *wal.Log, repo string, ck wal.Checkpoint) packSource {
	return packSource{
		what:     fmt.Sprintf("checkpoint %d", ck.Seq),
		openPack: func(ctx context.Context) (io.ReadCloser, error) { return log.OpenCheckpoint(ctx, repo, ck) },
		openIdx:  func(ctx context.Context) (io.ReadCloser, error) { return log.OpenCheckpointIndex(ctx, repo, ck) },
	}
}

// installPack adds one pack of the log to the repository in dir: by
// copying it with its stored .idx when that fits, otherwise by streaming
// it into git index-pack. It returns the pack's name and whether the
// stored index was used.
func (c *Cache) installPack(ctx context.Context, git *gitexec.Runner, dir, repo string, src packSource) (name string, installed bool, err error) {
	name, err = c.installStoredIndex(ctx, dir, src)
	switch {
	case err == nil:
		return name, true, nil
	case ctx.Err() != nil:
		return "", false, err
	case !errors.Is(err, objstore.ErrNotFound):
		// A damaged or mismatched stored index costs an index-pack run,
		// nothing more.
		c.logger.Warn("stored pack index unusable; indexing the pack instead", "repo", repo, "pack", src.what, "err", err)
	}
	rc, err := src.openPack(ctx)
	if err != nil {
		return "", false, &logError{err}
	}
	defer rc.Close()
	lr := &logReader{r: rc}
	cmd := git.Command(ctx, dir, nil, "index-pack", "--stdin")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", false, err
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		return "", false, cmd.Wrap(err)
	}
	_, cpErr := io.Copy(stdin, lr)
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		if lr.err != nil {
			// index-pack failed because the log's pack did not read
			// or verify (git usually notices first).
			return "", false, &logError{errors.Join(cmd.Wrap(err), lr.err)}
		}
		return "", false, cmd.Wrap(errors.Join(err, cpErr))
	}
	if cpErr != nil {
		// The pack did not verify against the index (or the read broke):
		// never record it as applied.
		if lr.err != nil {
			return "", false, &logError{lr.err}
		}
		return "", false, cpErr
	}
	name, err = parsePackName(out.String())
	return name, false, err
}

// logError marks a failure to read the log (as opposed to a failure of
// the local repository), which rebuilding the cache cannot cure.
type logError struct{ err error }

func (e *logError) Error() string { return e.err.Error() }

func (e *logError) Unwrap() error { return e.err }

// logReader remembers the error its reader returned, so that a failed
// copy into git can be attributed to the log or to git.
type logReader struct {
	r   io.Reader
	err error
}

func (l *logReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if err != nil && err != io.EOF {
		l.err = err
	}
	return n, err
}

// installStoredIndex installs a layer's pack together with the pack index
// stored beside its entry (wal.PackIndexKey), which saves running git
// index-pack: a cold node then only copies bytes. Both files are written
// to a scratch directory and checked before they enter the repository:
// the pack's sha256 and size against the log's index (wal.OpenPack), the
// index's own trailing SHA-1, and the structural checks of checkPack,
// which tie the index to this very pack by its checksum. The pack is
// renamed into place before its index, because git finds packs through
// their index. It returns an error matching objstore.ErrNotFound when the
// entry has no stored index.
func (c *Cache) installStoredIndex(ctx context.Context, dir string, src packSource) (string, error) {
	irc, err := src.openIdx(ctx)
	if err != nil {
		return "", err
	}
	defer irc.Close()
	scratch, err := c.TempDir()
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(scratch, "incoming-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	idxSum, err := copyToFile(filepath.Join(tmp, "idx"), irc, sha1.New())
	if err != nil {
		return "", fmt.Errorf("stored pack index: %w", err)
	}
	prc, err := src.openPack(ctx)
	if err != nil {
		return "", err
	}
	defer prc.Close()
	packSum, err := copyToFile(filepath.Join(tmp, "pack"), prc, nil)
	if err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	if len(idxSum.tail) != sha1.Size || !bytes.Equal(idxSum.sum, idxSum.tail) {
		return "", errors.New("stored pack index fails its own checksum")
	}
	if len(packSum.tail) != sha1.Size {
		return "", errors.New("pack too short for a checksum")
	}
	name := hex.EncodeToString(packSum.tail)
	base := filepath.Join(tmp, "pack-"+name)
	if err := os.Rename(filepath.Join(tmp, "pack"), base+".pack"); err != nil {
		return "", err
	}
	if err := os.Rename(filepath.Join(tmp, "idx"), base+".idx"); err != nil {
		return "", err
	}
	if err := checkPack(tmp, name); err != nil {
		return "", fmt.Errorf("stored pack index does not fit the pack: %w", err)
	}
	final := filepath.Join(dir, "objects", "pack", "pack-"+name)
	if _, err := os.Stat(final + ".idx"); err == nil {
		return name, nil // the same pack is already installed (an identical earlier layer)
	}
	for _, ext := range []string{".pack", ".idx"} {
		if err := os.Rename(base+ext, final+ext); err != nil {
			return "", fmt.Errorf("install pack: %w", err)
		}
	}
	return name, nil
}

// fileSum is what copyToFile saw: the hash of all but the last 20 bytes
// (when a hash was asked for) and those last 20 bytes.
type fileSum struct {
	sum, tail []byte
}

// copyToFile streams r into a new file at path, fsyncs it, and returns the
// hash (h, over everything but the trailing sha1.Size bytes) and that
// trailer, the layout of git's pack and index checksums.
func copyToFile(path string, r io.Reader, h hash.Hash) (fileSum, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o444)
	if err != nil {
		return fileSum{}, err
	}
	t := &trailerWriter{h: h}
	_, err = io.Copy(io.MultiWriter(f, t), r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fileSum{}, err
	}
	out := fileSum{tail: t.tail}
	if h != nil {
		out.sum = h.Sum(nil)
	}
	return out, nil
}

// trailerWriter hashes what it is given except the last sha1.Size bytes,
// which it keeps.
type trailerWriter struct {
	h    hash.Hash
	tail []byte
}

func (t *trailerWriter) Write(p []byte) (int, error) {
	if len(p) >= sha1.Size {
		// What was held back, and all of p but its last bytes, is body:
		// only the trailer-sized tail is ever copied.
		t.hash(t.tail)
		t.hash(p[:len(p)-sha1.Size])
		t.tail = append(t.tail[:0], p[len(p)-sha1.Size:]...)
		return len(p), nil
	}
	t.tail = append(t.tail, p...)
	if over := len(t.tail) - sha1.Size; over > 0 {
		t.hash(t.tail[:over])
		t.tail = append(t.tail[:0], t.tail[over:]...)
	}
	return len(p), nil
}

func (t *trailerWriter) hash(b []byte) {
	if t.h != nil {
		t.h.Write(b)
	}
}

// parsePackName reads index-pack's output line (gitexec.ParsePackName).
func parsePackName(out string) (string, error) { return gitexec.ParsePackName(out) }

// Adopt installs a pack the caller already indexed (a push's quarantine)
// as the layer at seq, when the cache holds exactly seq-1 layers; it
// saves re-reading the entry just written. It reports whether the pack
// was adopted; when not, the pack is left in place and a later
// Materialize indexes the layer from the log as usual. packHash "" means
// a layer without objects. Refs are not touched: call Materialize after.
func (c *Cache) Adopt(ctx context.Context, repo string, seq uint64, layer ulid.ULID, packDir, packHash string) (bool, error) {
	if err := wal.CheckRepoID(repo); err != nil {
		return false, err
	}
	s := c.slot(repo)
	select {
	case s.run <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-s.run }()
	lk, err := c.lockRepo(ctx, repo)
	if err != nil {
		return false, err
	}
	defer lk.unlock()
	dir := c.repoPath(repo)
	st, err := readState(dir)
	if err != nil || st.seq+1 != seq {
		return false, nil
	}
	if packHash != "" {
		// .idx last: git discovers packs by their index, so a reader never
		// sees an index without its pack.
		for _, ext := range []string{".pack", ".rev", ".idx"} {
			src := filepath.Join(packDir, "pack-"+packHash+ext)
			if _, err := os.Stat(src); err != nil && ext == ".rev" {
				continue
			}
			if err := os.Rename(src, filepath.Join(dir, "objects", "pack", "pack-"+packHash+ext)); err != nil {
				return false, fmt.Errorf("adopt pack: %w", err)
			}
		}
	}
	st.layers = append(st.layers, stateLayer{id: layer, pack: packHash})
	st.seq = seq
	if err := writeState(dir, st); err != nil {
		return false, err
	}
	// The pack is the very file the log committed: known good.
	c.trustNew(dir, st)
	return true, nil
}

// consolidate keeps the number of packs git sees small (docs/design.md
// §5.6). Every layer adds a pack; past MaxPacks recorded packs, a
// geometric repack (`git repack --geometric=2 -d`) rolls the small packs
// into larger ones, so a repository holds O(log n) packs, and writes a
// multi-pack index with a reachability bitmap. The repack packs every
// object of the packs it rolls up, reachable or not, so the repository
// still holds exactly the log's objects: the cache stays a function of
// the log. The state then records the resulting packs as its base.
//
// A failure is logged and otherwise ignored: the repository is still
// whole (git removes rolled-up packs only after writing their
// replacement), and a pack the state names that is gone makes the next
// check rebuild it.
func (c *Cache) consolidate(ctx context.Context, repo string, x *wal.Index, dir string, st *state, ev *Event) {
	n := len(st.base.packs)
	for _, l := range st.layers {
		if l.pack != "" {
			n++
		}
	}
	if c.maxPks < 0 || n <= c.maxPks {
		return
	}
	if _, err := c.git.Run(ctx, dir, nil, nil, "repack", "--geometric=2", "-d", "-q", "--write-midx", "--write-bitmap-index"); err != nil {
		c.logger.Warn("consolidating packs failed", "repo", repo, "err", err)
		return
	}
	packs, err := listPacks(filepath.Join(dir, "objects", "pack"))
	if err != nil {
		c.logger.Warn("consolidating packs: list packs", "repo", repo, "err", err)
		return
	}
	b := stateBase{seq: st.seq, packs: packs}
	switch ctc := x.CompactedThroughSeq; {
	case st.seq > ctc:
		b.last = x.Layers[st.seq-ctc-1].ULID
	case st.seq == ctc && ctc > 0:
		b.checkpoint = x.LastCheckpoint().SHA256
	}
	next := &state{seq: st.seq, base: b}
	if err := writeState(dir, next); err != nil {
		c.logger.Warn("consolidating packs: record state", "repo", repo, "err", err)
		return
	}
	*st = *next
	ev.Consolidated = true
}

// listPacks returns the names of the packs in a pack directory that have
// an index (git finds packs by their index).
func listPacks(packDir string) ([]string, error) {
	ents, err := os.ReadDir(packDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".idx")
		if !ok {
			continue
		}
		if h, ok := strings.CutPrefix(name, "pack-"); ok && isHex(h) {
			out = append(out, h)
		}
	}
	return out, nil
}
