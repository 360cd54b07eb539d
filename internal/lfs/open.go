package lfs

import (
	"context"
	"errors"
	"io"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/objstore"
)

// OpenFor opens oid's bytes as repository repoID of tenant holds them,
// or ErrNoObject: for the server's own readers after their own
// authorization (push protection scanning a push's LFS objects, the web
// UI serving an LFS file). The caller closes the reader.
func (h *Handler) OpenFor(ctx context.Context, tenant, repoID, oid string) (io.ReadCloser, int64, error) {
	return h.Repo(access.Grant{RepoID: repoID, Tenant: tenant, Level: access.Read}).Open(ctx, oid)
}

// OpenLFS is OpenFor for the scanners (scanner.LFSObjects): ok is false,
// with no error, when the repository holds no such object, which a
// mirror's history may name (allow_missing_lfs) and a scan counts rather
// than fails on.
func (h *Handler) OpenLFS(ctx context.Context, tenant, repoID, oid string) (io.ReadCloser, int64, bool, error) {
	rc, n, err := h.OpenFor(ctx, tenant, repoID, oid)
	if errors.Is(err, ErrNoObject) || errors.Is(err, ErrBadOID) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	return rc, n, true, nil
}

// NewReader returns a Handler that only reads objects, for a process
// that serves no LFS request but reads what repositories hold: ghost
// worker's scan workers. It authorizes nothing.
func NewReader(store objstore.Store) (*Handler, error) {
	return New(Options{Store: store, Auth: denyAll{}})
}

// denyAll refuses every request: a reader serves none.
type denyAll struct{}

func (denyAll) Authorize(context.Context, string, string, string) (access.Grant, error) {
	return access.Grant{}, errors.New("lfs: this handler serves no request")
}
