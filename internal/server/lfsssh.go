package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/api"
	"github.com/ghost-scm/ghost/internal/githttp"
	"github.com/ghost-scm/ghost/internal/lfs"
	"github.com/ghost-scm/ghost/internal/lfs/lfstransfer"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/sshd"
	"github.com/ghost-scm/ghost/internal/web"
)

// Git LFS over SSH (docs/adr/0124-lfs-over-ssh.md).

// LFSAuthenticate answers "git-lfs-authenticate <repo> <operation>":
// decided as a fetch (download) or a push (upload) over SSH, then the
// Batch API's URL and, for a caller with a key, a token for it, as
// git-lfs reads them ({"href", "header", "expires_in"}). An anonymous
// download of a public repository gets the URL alone.
func (g sshGit) LFSAuthenticate(ctx context.Context, req sshd.Request) error {
	write := req.Operation == "upload"
	acc, err := g.authorize(ctx, req, write)
	if err != nil {
		return err
	}
	href := strings.TrimRight(g.baseURL, "/") + "/" + req.Owner + "/" + req.Repo + ".git/info/lfs"
	answer := struct {
		Href      string            `json:"href"`
		Header    map[string]string `json:"header,omitempty"`
		ExpiresIn int               `json:"expires_in,omitempty"`
	}{Href: href}
	if p := req.Principal; p != nil {
		tok, ttl := g.lfsTokens.Mint(lfs.Claims{Tenant: p.Tenant, RepoID: acc.RepoID, Write: write && acc.Level >= access.Write, Credential: p.KeyFingerprint})
		answer.Header = map[string]string{"Authorization": "Bearer " + tok}
		answer.ExpiresIn = int(ttl.Seconds())
	}
	return json.NewEncoder(req.Stdout).Encode(answer)
}

// LFSTransfer serves "git-lfs-transfer <repo> <operation>", Git LFS's
// pure SSH protocol (docs/adr/0125-lfs-transfer-over-ssh.md): decided as
// a fetch (download) or a push (upload) over SSH, with the same grant,
// refusals and words as git and git-lfs-authenticate, then a session on
// the repository's LFS objects and locks, the same ones the HTTP APIs
// serve. A client that breaks the protocol is told why on stderr.
func (g sshGit) LFSTransfer(ctx context.Context, req sshd.Request) error {
	if g.lfs == nil {
		return fmt.Errorf("git-lfs-transfer: %w", errors.ErrUnsupported)
	}
	acc, err := g.authorize(ctx, req, req.Operation == "upload")
	if err != nil {
		return err
	}
	err = lfstransfer.Serve(ctx, req.Stdin, req.Stdout, g.lfs.Repo(acc), lfstransfer.Options{
		Operation:     lfstransfer.Operation(req.Operation),
		MaxBatchItems: g.lfs.MaxBatchItems(),
		Logger:        g.logger,
	})
	if errors.Is(err, lfstransfer.ErrProtocol) {
		return fmt.Errorf("%w: %s", sshd.ErrRefused, err.Error())
	}
	return err
}

// lfsAuth is the LFS handler's authorizer: a token minted over SSH is
// checked here (signature, expiry, the repository it names) and then
// decided as any caller of its tenant with a key, so a right lost since
// it was minted is lost at once; every other credential goes to the
// transport's authorizer.
type lfsAuth struct {
	githttp.Authorizer
	meta   metaAuth
	tokens *lfs.Tokens
}

func (a lfsAuth) Authorize(ctx context.Context, token, owner, name string) (access.Grant, error) {
	if !lfs.IsToken(token) {
		return a.Authorizer.Authorize(ctx, token, owner, name)
	}
	c, err := a.tokens.Verify(token)
	if err != nil {
		return access.Grant{}, fmt.Errorf("%w: %w", access.ErrUnauthenticated, err)
	}
	scope := meta.ScopeRead
	if c.Write {
		scope = meta.ScopeWrite
	}
	p := &meta.Principal{Tenant: c.Tenant, Scope: scope, KeyFingerprint: c.Credential, KeyTitle: "git-lfs-authenticate"}
	if p.KeyFingerprint == "" {
		p.KeyFingerprint = "unknown"
	}
	g, err := a.meta.grant(ctx, p, owner, name)
	if err != nil {
		return access.Grant{}, err
	}
	if g.RepoID != c.RepoID {
		// A token for another repository, or for one deleted since
		// whose name now holds another: not this one.
		return access.Grant{}, fmt.Errorf("%w: the token names another repository", access.ErrNotFound)
	}
	return g, nil
}

// lfsWeb lets the web UI show and serve the Git LFS objects pointer files
// name (web.LFSObjects), with the page's own read check already made.
type lfsWeb struct{ h *lfs.Handler }

func (l lfsWeb) Open(ctx context.Context, repo meta.Repo, oid string) (io.ReadCloser, int64, error) {
	rc, n, err := l.h.OpenFor(ctx, repo.Owner, repo.ID, oid)
	if errors.Is(err, lfs.ErrNoObject) {
		return nil, 0, fmt.Errorf("%w: %s", web.ErrLFSMissing, oid)
	}
	return rc, n, err
}

// lfsAPI lists a repository's LFS objects for the API (api.LFSLister).
type lfsAPI struct{ h *lfs.Handler }

func (l lfsAPI) LFSObjects(ctx context.Context, repoID, after string, limit int) ([]api.LFSObject, string, error) {
	objs, next, err := l.h.Objects(ctx, repoID, after, limit)
	if errors.Is(err, lfs.ErrBadOID) {
		return nil, "", fmt.Errorf("%w: %v", meta.ErrInvalidArgument, err)
	}
	out := make([]api.LFSObject, len(objs))
	for i, o := range objs {
		out[i] = api.LFSObject{OID: o.OID, Size: o.Size}
	}
	return out, next, err
}

func (l lfsAPI) LFSUsage(ctx context.Context, tenant string) (int64, error) {
	return l.h.Usage(ctx, tenant)
}
