package server

import (
	"context"
	"fmt"

	"github.com/ghost-scm/ghost/internal/sshd"
)

// SSHServer returns the node's SSH transport (docs/design.md §6.6): the
// installation's host key, shared by every node through the object store
// (sshd.HostKey, created on the first start), keys from the metadata
// store, SSHGitService, and the node's limits: the idle deadline is
// Options.IOTimeout, counted as for HTTP, running commands get
// Options.ShutdownTimeout to finish when Serve's context ends, and the
// Options.SSH* caps on connections and sessions apply, with their
// metrics on the server's registry. The push
// size limit and the git slots come with the shared git service.
// anonymousRead lets clients without a registered key clone public
// repositories.
func (s *Server) SSHServer(ctx context.Context, anonymousRead bool) (*sshd.Server, error) {
	hk, err := sshd.HostKey(ctx, s.opts.Store)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	srv, err := sshd.New(sshd.Options{
		HostKey:         hk,
		Keys:            s.meta,
		Git:             s.SSHGitService(),
		AnonymousRead:   anonymousRead,
		IdleTimeout:     s.opts.Limits.WithDefaults().IOTimeout,
		ShutdownTimeout: s.opts.ShutdownTimeout,
		Logger:          s.logger,
		Metrics:         s.sshStats,

		HandshakeTimeout:            s.opts.SSHHandshakeTimeout,
		MaxUnauthenticated:          s.opts.SSHMaxUnauthenticated,
		MaxUnauthenticatedPerSource: s.opts.SSHMaxUnauthenticatedPerSource,
		MaxConnsPerPrincipal:        s.opts.SSHMaxConnsPerPrincipal,
		MaxSessions:                 s.opts.SSHMaxSessions,
		ExecTimeout:                 s.opts.SSHExecTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return srv, nil
}
