package lfs

import (
	"context"
	"io"

	"github.com/ghost-scm/ghost/internal/access"
)

// OpenFor opens oid's bytes as repository repoID of tenant holds them,
// or ErrNoObject: for the server's own readers after their own
// authorization (push protection scanning a push's LFS objects, the web
// UI serving an LFS file). The caller closes the reader.
func (h *Handler) OpenFor(ctx context.Context, tenant, repoID, oid string) (io.ReadCloser, int64, error) {
	return h.Repo(access.Grant{RepoID: repoID, Tenant: tenant, Level: access.Read}).Open(ctx, oid)
}
