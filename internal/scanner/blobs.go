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
// ids is nil) and returns the blobs, commits and tags among them: what a
// scan reads (blobs, and commit and tag objects for their messages).
func batchCheck(ctx context.Context, dir string, ids []string) ([]blob, error) {
	args := []string{"-C", dir, "cat-file", "--batch-check=%(objecttype) %(objectname) %(objectsize)"}
	var stdin io.Reader
	if ids == nil {
		args = append(args, "--batch-all-objects", "--unordered")
	} else {
		stdin = strings.NewReader(strings.Join(ids, "\n") + "\n")
	}
	cmd := (&gitexec.Runner{}).Command(ctx, "", nil, args...)
	cmd.Stdin = stdin
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start git cat-file: %w", err)
	}
	var bs []blob
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "blob" && f[0] != "commit" && f[0] != "tag" {
			continue // trees, and "<id> missing"
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
		return nil, fmt.Errorf("git cat-file: %w: %s", err, strings.TrimSpace(cmd.StderrText()))
	}
	return bs, nil
}

// layerObjects lists the object ids of one layer's pack from its stored
// pack index (git show-index). ok is false when the layer has no stored
// index: the caller then lists every blob of its range instead, which
// over-scans but never misses (alerts are idempotent).
func layerObjects(ctx context.Context, log *wal.Log, repo string, layer wal.Layer) (ids []string, ok bool, err error) {
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
	cmd := (&gitexec.Runner{}).Command(ctx, "", nil, "show-index")
	cmd.Stdin = rc
	out, err := cmd.Output()
	if err != nil {
		return nil, false, fmt.Errorf("git show-index: %w: %s", err, strings.TrimSpace(cmd.StderrText()))
	}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) >= 2 {
			ids = append(ids, f[1])
		}
	}
	return ids, true, nil
}

// listBlobs returns the blobs the shard [start, end) of run spec has left
// after the cursor, in id order.
func (w *Worker) listBlobs(ctx context.Context, snap *repocache.Snapshot, spec Spec, start, end, after []byte, hasAfter bool) ([]blob, error) {
	var ids []string // nil: all objects
	if spec.Kind == KindPush {
		x := snap.Index
		i := int(spec.Seq) - int(x.CompactedThroughSeq) - 1
		if i < 0 || i >= len(x.Layers) {
			return nil, fmt.Errorf("%w: seq %d is not a layer of the log (compacted through %d, head %d)", ErrInvalid, spec.Seq, x.CompactedThroughSeq, x.Seq)
		}
		objs, ok, err := layerObjects(ctx, w.s.opts.Log, spec.RepoID, x.Layers[i])
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
	bs, err := batchCheck(ctx, snap.Dir, ids)
	if err != nil {
		return nil, err
	}
	return inShard(bs, start, end, after, hasAfter), nil
}
