package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/lfs"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/sshd"
)

// SSHGitService returns the git service for an SSH transport
// (sshd.Options.Git): the same authorization as HTTP's (docs/design.md
// §7.4) and the same gitsvc.Service, in its full-duplex flavour
// (docs/design.md §6.6). SSHServer serves it.
func (s *Server) SSHGitService() sshd.GitService {
	return sshGit{auth: metaAuth{s.meta}, svc: s.git, tracer: s.opts.Tracer, lfsTokens: s.lfsTokens, baseURL: s.webhookOpts.BaseURL, lfs: s.lfs, logger: s.opts.Logger}
}

type sshGit struct {
	auth   metaAuth
	svc    *gitsvc.Service
	tracer trace.Tracer
	// lfsTokens mints git-lfs-authenticate's tokens for the Batch API at
	// baseURL, the server's public HTTP URL.
	lfsTokens *lfs.Tokens
	baseURL   string
	// lfs holds the LFS objects and locks git-lfs-transfer serves.
	lfs    *lfs.Handler
	logger *slog.Logger
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
func (g sshGit) run(ctx context.Context, req sshd.Request, write bool, serve func(context.Context, gitsvc.Request) error) (err error) {
	ctx, span := traceSSH(ctx, g.tracer, write, req.Owner, req.Repo)
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	acc, err := g.authorize(ctx, req, write)
	if err != nil {
		return err
	}
	gr := gitsvc.GrantRequest(acc)
	gr.Body, gr.Out, gr.GitProtocol, gr.Stream = req.Stdin, req.Stdout, req.GitProtocol, true
	err = serve(ctx, gr)
	var e *gitsvc.Error
	switch {
	case errors.As(err, &e) && e.Kind == gitsvc.NotFound:
		return fmt.Errorf("%w: %w", meta.ErrNotFound, err)
	case errors.As(err, &e) && e.Kind == gitsvc.Refused:
		return fmt.Errorf("%w: %s", sshd.ErrRefused, e.Msg)
	}
	return err
}

// authorize decides req for reading or writing as HTTP does, in the
// words sshd tells its clients.
func (g sshGit) authorize(ctx context.Context, req sshd.Request, write bool) (access.Grant, error) {
	anonymous := req.Principal == nil
	var acc access.Grant
	if !(write && anonymous) {
		var err error
		acc, err = g.auth.grant(ctx, req.Principal, req.Owner, req.Repo)
		switch {
		case errors.Is(err, access.ErrNotFound):
			acc = access.Grant{} // decided as None, like a private repository
		case err != nil:
			return access.Grant{}, err // a storage outage wraps meta.ErrUnavailable
		}
	}
	// SSH has no credential prompt: an anonymous read of what it may
	// not read is not found, an anonymous push unauthenticated.
	switch err := access.Decide(acc.Level, anonymous, write); {
	case errors.Is(err, access.ErrUnauthenticated) && write:
		return access.Grant{}, meta.ErrUnauthenticated
	case errors.Is(err, access.ErrForbidden):
		return access.Grant{}, meta.ErrForbidden
	case err != nil:
		return access.Grant{}, meta.ErrNotFound
	}
	return acc, nil
}
