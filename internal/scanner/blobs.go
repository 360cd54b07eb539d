package scanner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// blob is one object to scan: its id, its key in the shard's key space
// (the id's bytes) and its size. Most are blobs; commits and tags are
// scanned too, headers and message (docs/adr/0032-scan-runs.md).
type blob struct {
	id   string
	key  []byte
	size int64
}

// inShard keeps the blobs with start <= key < end and key > after (when
// hasAfter), sorted by key.
func inShard(bs []blob, start, end, after []byte, hasAfter bool) []blob {
	out := bs[:0]
	for _, b := range bs {
		if bytes.Compare(b.key, start) < 0 || len(end) > 0 && bytes.Compare(b.key, end) >= 0 {
			continue
		}
		if hasAfter && bytes.Compare(b.key, after) <= 0 {
			continue
		}
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b blob) int { return bytes.Compare(a.key, b.key) })
	return slices.CompactFunc(out, func(a, b blob) bool { return a.id == b.id })
}

// batchCheck runs git cat-file --batch-check over ids (all objects when
// ids is nil) and returns the blobs, commits and tags among them (what a
// scan reads: blobs, and commit and tag objects for their messages), and
// how many of ids the repository lacks.
func batchCheck(ctx context.Context, git *gitexec.Runner, dir string, ids []string) ([]blob, int, error) {
	args := []string{"-C", dir, "cat-file", "--batch-check=%(objecttype) %(objectname) %(objectsize)"}
	var stdin io.Reader
	if ids == nil {
		args = append(args, "--batch-all-objects", "--unordered")
	} else {
		stdin = strings.NewReader(strings.Join(ids, "\n") + "\n")
	}
	cmd := git.Command(ctx, "", nil, args...)
	cmd.Stdin = stdin
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, err
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("start git cat-file: %w", err)
	}
	var bs []blob
	missing := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[1] == "missing" {
			missing++
			continue
		}
		if len(f) != 3 || f[0] != "blob" && f[0] != "commit" && f[0] != "tag" {
			continue // trees
		}
		k, err := hex.DecodeString(f[1])
		if err != nil {
			continue
		}
		n, _ := strconv.ParseInt(f[2], 10, 64)
		bs = append(bs, blob{id: f[1], key: k, size: n})
	}
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		return nil, 0, fmt.Errorf("git cat-file: %w: %s", err, strings.TrimSpace(cmd.StderrText()))
	}
	return bs, missing, nil
}

// layerObjects lists the object ids of one layer's pack from its stored
// pack index (git show-index). ok is false when the layer has no stored
// index: the caller then lists every blob of its range instead, which
// over-scans but never misses (alerts are idempotent).
func layerObjects(ctx context.Context, git *gitexec.Runner, log *wal.Log, repo string, layer wal.Layer) (ids []string, ok bool, err error) {
	if layer.Size == 0 {
		return nil, true, nil
	}
	rc, _, err := log.OpenPackIndex(ctx, repo, layer)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer rc.Close()
	ids, err = showIndex(ctx, git, rc)
	return ids, err == nil, err
}

// showIndex lists the object ids of a git pack index (git show-index).
func showIndex(ctx context.Context, git *gitexec.Runner, idx io.Reader) ([]string, error) {
	cmd := git.Command(ctx, "", nil, "show-index")
	cmd.Stdin = idx
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("git show-index: %w: %s", err, strings.TrimSpace(cmd.StderrText()))
	}
	var ids []string
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) >= 2 {
			ids = append(ids, f[1])
		}
	}
	return ids, nil
}

// preservedObjects lists the object ids of a preserved object list
// (Coverage.PreserveLayer).
func (c *Coverage) preservedObjects(ctx context.Context, p preserved) ([]string, error) {
	if p.size == 0 {
		return nil, nil
	}
	rc, _, err := c.store.Get(ctx, p.key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return showIndex(ctx, &gitexec.Runner{}, rc)
}

// errSuperseded reports a push run whose layer was folded by a
// compaction that preserved no object list for it: a catch-up full run
// covers it (docs/adr/0033-scan-coverage.md).
var errSuperseded = errors.New("the push's layer was folded without a preserved object list")

// listBlobs returns the blobs the shard [start, end) of run spec has left
// after the cursor, in id order. A push run reads its layer's object
// list: from the log while the index lists the layer, from the list a
// compaction preserved once it is folded, and none when the watermark is
// already past it (a full run covered it). It fails with errSuperseded
// when the layer is folded and nothing preserved its list.
func (w *Worker) listBlobs(ctx context.Context, snap *repocache.Snapshot, spec Spec, start, end, after []byte, hasAfter bool) ([]blob, error) {
	var ids []string // nil: all objects
	if spec.Kind == KindPush {
		wm, err := w.s.Watermark(ctx, spec.RepoID)
		if err != nil {
			return nil, err
		}
		if spec.Seq <= wm {
			return nil, nil
		}
		x := snap.Index
		var objs []string
		ok := true
		if spec.Seq > x.CompactedThroughSeq {
			i := int(spec.Seq - x.CompactedThroughSeq - 1)
			if i >= len(x.Layers) {
				return nil, fmt.Errorf("%w: seq %d is past the log's head %d", ErrInvalid, spec.Seq, x.Seq)
			}
			objs, ok, err = layerObjects(ctx, w.git(), w.s.opts.Log, spec.RepoID, x.Layers[i])
		} else {
			var p preserved
			p, ok, err = w.s.preservedAt(ctx, spec.RepoID, spec.Seq)
			if err == nil && !ok {
				return nil, errSuperseded
			}
			if err == nil {
				objs, err = w.s.preservedObjects(ctx, p)
			}
		}
		if err != nil {
			return nil, err
		}
		if ok {
			if len(objs) == 0 {
				return nil, nil
			}
			ids = objs
		}
	}
	bs, missing, err := batchCheck(ctx, w.git(), snap.Dir, ids)
	if err != nil {
		return nil, err
	}
	if missing > 0 {
		// Compaction keeps every object of an unscanned push, so a
		// missing one is a hole in what the scan would cover: say so
		// rather than report the push clean.
		return nil, fmt.Errorf("%d of the push's %d objects are missing from the repository at seq %d", missing, len(ids), snap.Index.Seq)
	}
	return inShard(bs, start, end, after, hasAfter), nil
}
