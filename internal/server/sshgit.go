package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/ghost-scm/ghost/internal/githttp"
	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/sshd"
)

// SSHGitService returns the git service for an SSH transport
// (sshd.Options.Git): the same authorization as HTTP's (docs/design.md
// §7.4) and the same gitsvc.Service, in its full-duplex flavour
// (docs/design.md §6.6). SSHServer serves it.
func (s *Server) SSHGitService() sshd.GitService {
	return sshGit{auth: metaAuth{s.meta}, svc: s.git}
}

type sshGit struct {
	auth metaAuth
	svc  *gitsvc.Service
}

func (g sshGit) UploadPack(ctx context.Context, req sshd.Request) error {
	return g.run(ctx, req, false, g.svc.UploadPack)
}

func (g sshGit) ReceivePack(ctx context.Context, req sshd.Request) error {
	return g.run(ctx, req, true, g.svc.ReceivePack)
}

func (g sshGit) UploadArchive(context.Context, sshd.Request) error {
	return fmt.Errorf("git-upload-archive: %w", errors.ErrUnsupported)
}

// run authorizes as HTTP does (an anonymous push is unauthenticated, an
// unreadable repository absent, a read-only one forbidden to push) and
// serves the session's streams.
//
// An anonymous push is refused before the name is even looked up, as
// HTTP answers it 401 whether or not the repository exists
// (docs/design.md §7.4): a missing and a private repository must answer
// alike, or the answer tells anonymous callers which private names exist.
func (g sshGit) run(ctx context.Context, req sshd.Request, write bool, serve func(context.Context, gitsvc.Request) error) error {
	if write && req.Principal == nil {
		return meta.ErrUnauthenticated
	}
	acc, err := g.auth.access(ctx, req.Principal, req.Owner, req.Repo)
	switch {
	case errors.Is(err, githttp.ErrNotFound):
		return meta.ErrNotFound
	case err != nil:
		return err // a storage outage wraps meta.ErrUnavailable
	case !acc.Read:
		return meta.ErrNotFound
	case write && !acc.Write:
		return meta.ErrForbidden
	}
	err = serve(ctx, gitsvc.Request{
		Repo: acc.RepoID, Principal: acc.Principal, Tenant: acc.Tenant, PushProtection: acc.PushProtection,
		AllowReplaceRefs: acc.AllowReplaceRefs, Body: req.Stdin, Out: req.Stdout,
		GitProtocol: req.GitProtocol, Stream: true,
	})
	var e *gitsvc.Error
	switch {
	case errors.As(err, &e) && e.Kind == gitsvc.NotFound:
		return fmt.Errorf("%w: %w", meta.ErrNotFound, err)
	case errors.As(err, &e) && e.Kind == gitsvc.Refused:
		return fmt.Errorf("%w: %s", sshd.ErrRefused, e.Msg)
	}
	return err
}
