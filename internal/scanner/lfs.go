package scanner

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/ghost-scm/ghost/internal/secretscan"
)

// DefaultMaxLFSObject is the largest Git LFS object a scan reads by
// default: secrets sit in config files, which are small; the models,
// art and archives LFS mostly holds are neither small nor text. The same
// bound as push protection's.
const DefaultMaxLFSObject = 1 << 20

// LFSObjects opens the Git LFS objects repositories hold (the server
// adapts lfs.Handler).
type LFSObjects interface {
	// OpenLFS opens oid's bytes as repository repoID of tenant holds
	// them, with their size; ok is false, with no error, when the
	// repository holds no such object. The caller closes the reader.
	OpenLFS(ctx context.Context, tenant, repoID, oid string) (rc io.ReadCloser, size int64, ok bool, err error)
}

// scanLFS scans the objects of the Git LFS pointers among a batch's
// blobs as the pointers' content (secretscan.BlobScan.ScanLFS), one at a
// time, so memory holds one object. An object the repository does not
// hold (a mirror's history may name some) or over the size bound is
// counted as skipped; an object that cannot be read fails the batch,
// which is retried like any other input: a scan never reports a pointer
// scanned whose object it did not read.
func (w *Worker) scanLFS(ctx context.Context, spec Spec, scan *secretscan.BlobScan) error {
	ptrs := scan.LFSPointers()
	if w.o.LFS == nil || len(ptrs) == 0 {
		return nil
	}
	limit := w.o.MaxLFSObject
	if limit == 0 {
		limit = DefaultMaxLFSObject
	}
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
		if limit < 0 || size > limit {
			rc.Close()
			st.Blobs++
			st.Bytes += size
			st.LargeSkipped++
			st.LargeBytes += size
			continue
		}
		b, err := io.ReadAll(io.LimitReader(rc, size+1))
		rc.Close()
		if err != nil {
			return fmt.Errorf("read git lfs object %s: %w", oid, err)
		}
		if int64(len(b)) != size {
			return fmt.Errorf("git lfs object %s is %d bytes, not %d", oid, len(b), size)
		}
		st.Add(scan.ScanLFS(id, b))
	}
	w.s.opts.Metrics.lfs(st, missing)
	if missing > 0 {
		w.logger.Info("git lfs objects the repository does not hold were not scanned", "run", spec.String(), "missing", missing)
	}
	return nil
}
