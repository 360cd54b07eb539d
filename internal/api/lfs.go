package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/ghost-scm/ghost/internal/meta"
)

// LFSObject is one Git LFS object a repository references.
type LFSObject struct {
	OID  string `json:"oid"`
	Size int64  `json:"size"`
}

// LFSLister lists a repository's Git LFS objects (the server adapts the
// LFS handler).
type LFSLister interface {
	// LFSObjects returns a page of repoID's objects by oid after after,
	// and the after of the next page ("" when none).
	LFSObjects(ctx context.Context, repoID, after string, limit int) ([]LFSObject, string, error)
	// LFSUsage is the bytes tenant stores, each object once.
	LFSUsage(ctx context.Context, tenant string) (int64, error)
}

// WithLFS serves GET /api/repos/{owner}/{name}/lfs/objects from l.
// Without it the endpoint answers 501.
func WithLFS(l LFSLister) Option {
	return func(h *handler) { h.lfs = l }
}

func (h *handler) routeLFS() {
	h.route("GET /api/repos/{owner}/{name}/lfs/objects", h.listLFS)
}

// listLFS answers a page of the repository's Git LFS objects, by oid
// (?per_page= up to 100, ?after=<oid>, the next page in a Link header),
// with the page's bytes and the bytes its owner stores in all (each
// object once, as the quota counts them). Reading needs read access.
func (h *handler) listLFS(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	if h.lfs == nil {
		return 0, nil, fmt.Errorf("git LFS is not served here: %w", errors.ErrUnsupported)
	}
	repo, err := h.readable(r, p)
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	limit, err := perPage(q, 30, 100)
	if err != nil {
		return 0, nil, err
	}
	objs, next, err := h.lfs.LFSObjects(r.Context(), repo.ID, q.Get("after"), limit)
	if err != nil {
		return 0, nil, err
	}
	usage, err := h.lfs.LFSUsage(r.Context(), repo.Owner)
	if err != nil {
		return 0, nil, err
	}
	if next != "" {
		linkNext(w, r, next)
	}
	out := struct {
		Objects     []LFSObject `json:"objects"`
		PageBytes   int64       `json:"page_bytes"`
		OwnerStored int64       `json:"owner_stored_bytes"`
	}{Objects: objs, OwnerStored: usage}
	if out.Objects == nil {
		out.Objects = []LFSObject{}
	}
	for _, o := range objs {
		out.PageBytes += o.Size
	}
	return http.StatusOK, out, nil
}
