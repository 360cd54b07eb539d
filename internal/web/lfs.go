package web

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ghost-scm/ghost/internal/lfs/pointer"
)

// A file tracked by Git LFS is, in the repository, a pointer: the page
// shows the object it points to (its size, whether it was uploaded, a
// download link), and raw serves the object's bytes, not the pointer
// text (issue 23 §7).

// lfsFile is a pointer file's object.
type lfsFile struct {
	OID  string
	Size int64
	// Stored: the repository holds the object (its upload came).
	Stored bool
}

// pointer reads the blob obj (size bytes) and returns the object it
// points to, or nil when it is no LFS pointer or LFS is not served here.
// It reads the blob's first pointer.PrefixSize bytes, whatever its size:
// git-lfs smudges a longer blob whose prefix is a pointer, and the page
// shows what a clone checks out.
func (h *Handler) pointer(cf *catFile, obj string, size int64) (*lfsFile, error) {
	if h.opts.LFS == nil || size == 0 {
		return nil, nil
	}
	b, err := cf.prefix(obj, pointer.PrefixSize)
	if err != nil {
		return nil, err
	}
	p, err := pointer.Decode(b)
	if err != nil {
		return nil, nil
	}
	return &lfsFile{OID: p.OID, Size: p.Size}, nil
}

// lfsFile tells the blob page about a pointer file's object: one read of
// the repository's reference to it.
func (h *Handler) lfsFile(ctx context.Context, rv *repoView, cf *catFile, obj string, size int64) (*lfsFile, error) {
	f, err := h.pointer(cf, obj, size)
	if f == nil || err != nil {
		return nil, err
	}
	rc, n, err := h.opts.LFS.Open(ctx, rv.Repo, f.OID)
	switch {
	case errors.Is(err, ErrLFSMissing):
		return f, nil
	case err != nil:
		return nil, err
	}
	rc.Close()
	f.Stored, f.Size = true, n
	return f, nil
}

// rawLFS serves a pointer file's object as the file's bytes, and reports
// whether it did; a pointer whose object is missing is served as the
// pointer text (served false).
func (h *Handler) rawLFS(w http.ResponseWriter, r *http.Request, rv *repoView, cf *catFile, obj string, size int64, name string) (bool, error) {
	f, err := h.pointer(cf, obj, size)
	if f == nil || err != nil {
		return false, err
	}
	rc, n, err := h.opts.LFS.Open(r.Context(), rv.Repo, f.OID)
	switch {
	case errors.Is(err, ErrLFSMissing):
		return false, nil
	case err != nil:
		return true, err
	}
	defer rc.Close()
	hd := w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(name))
	hd.Set("Content-Length", strconv.FormatInt(n, 10))
	if _, err := io.Copy(w, rc); err != nil {
		h.opts.Logger.WarnContext(r.Context(), "web: LFS download cut", "path", r.URL.Path, "err", err)
	}
	return true, nil
}
