package scanner

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/ghost-scm/ghost/internal/secretscan"
)

// wholeLFSObject is the largest Git LFS object a scan holds whole; a
// larger one is scanned as a stream, in windows of bounded memory
// (secretscan.BlobScan.ScanLFSStream), so a scan reads objects of any
// size (docs/adr/0130-lfs-push-protection.md, "Bounds").
const wholeLFSObject = 1 << 20

// LFSObjects opens the Git LFS objects repositories hold (the server
// adapts lfs.Handler).
type LFSObjects interface {
	// OpenLFS opens oid's bytes as repository repoID of tenant holds
	// them, with their size; ok is false, with no error, when the
	// repository holds no such object. The caller closes the reader.
	OpenLFS(ctx context.Context, tenant, repoID, oid string) (rc io.ReadCloser, size int64, ok bool, err error)
}

// scanLFS scans the objects of the Git LFS pointers among a batch's
// blobs as the pointers' content, one at a time: those up to
// wholeLFSObject held whole (secretscan.BlobScan.ScanLFS), larger ones as
// a stream (ScanLFSStream), so memory holds at most one window whatever
// the object's size. An object the repository does not hold (a mirror's
// history may name some), or over WorkerOptions.MaxLFSObject when that
// is set, is counted as skipped (deferred, not dropped: the metric says
// how much); an object that cannot be read fails the batch, which is
// retried like any other input: a scan never reports a pointer scanned
// whose object it did not read whole.
func (w *Worker) scanLFS(ctx context.Context, spec Spec, scan *secretscan.BlobScan) error {
	ptrs := scan.LFSPointers()
	if w.o.LFS == nil || len(ptrs) == 0 {
		return nil
	}
	limit := w.o.MaxLFSObject
	ids := make([]string, 0, len(ptrs))
	for id := range ptrs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var st secretscan.Stats
	missing := 0
	for _, id := range ids {
		oid := ptrs[id]
		rc, size, ok, err := w.o.LFS.OpenLFS(ctx, spec.Tenant, spec.RepoID, oid)
		if err != nil {
			return fmt.Errorf("git lfs object %s of %s: %w", oid, id, err)
		}
		if !ok {
			missing++
			continue
		}
		got, err := w.scanLFSObject(scan, id, oid, rc, size, limit)
		rc.Close()
		if err != nil {
			return err
		}
		st.Add(got)
	}
	w.s.opts.Metrics.lfs(st, missing)
	if missing > 0 {
		w.logger.Info("git lfs objects the repository does not hold were not scanned", "run", spec.String(), "missing", missing)
	}
	return nil
}

// scanLFSObject scans one object of size bytes from rc as pointer blob
// id's content, or counts it as skipped when it is over a positive limit.
func (w *Worker) scanLFSObject(scan *secretscan.BlobScan, id, oid string, rc io.Reader, size, limit int64) (secretscan.Stats, error) {
	if limit > 0 && size > limit {
		return secretscan.Stats{Blobs: 1, Bytes: size, LargeSkipped: 1, LargeBytes: size}, nil
	}
	body := io.LimitReader(rc, size+1)
	if size > wholeLFSObject {
		cr := &countReader{r: body}
		st, err := scan.ScanLFSStream(id, cr)
		switch {
		case err != nil:
			return st, fmt.Errorf("read git lfs object %s: %w", oid, err)
		case cr.n > size || cr.n < size && st.BinarySkipped == 0:
			// A binary object that is skipped is not read to its end.
			return st, fmt.Errorf("git lfs object %s is %d bytes, not %d", oid, cr.n, size)
		}
		return st, nil
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return secretscan.Stats{}, fmt.Errorf("read git lfs object %s: %w", oid, err)
	}
	if int64(len(b)) != size {
		return secretscan.Stats{}, fmt.Errorf("git lfs object %s is %d bytes, not %d", oid, len(b), size)
	}
	return scan.ScanLFS(id, b), nil
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
