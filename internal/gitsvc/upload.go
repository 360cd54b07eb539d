package gitsvc

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/ghost-scm/ghost/internal/gitsvc/pktline"
	"github.com/ghost-scm/ghost/internal/wal"
)

// AdvertiseRefs writes the ref advertisement of service (UploadPackService
// or ReceivePackService) for a stateless client (HTTP's info/refs), from
// a copy brought forward first so that the client judges fast-forwards
// against the log's current refs. The transport adds its own framing.
func (s *Service) AdvertiseRefs(ctx context.Context, service string, req Request) error {
	if service == ReceivePackService {
		return s.advertiseReceive(ctx, req)
	}
	release, err := s.admit(ctx, req.Repo)
	if err != nil {
		return err
	}
	defer release()
	env := protocolEnv(req.GitProtocol)
	return s.serveGit(ctx, req, "upload-pack advertisement", false, func(ctx context.Context, co *LocalCopy, out io.Writer) error {
		cmd := s.opts.Git.Command(ctx, co.Dir, env, "upload-pack", "--stateless-rpc", "--advertise-refs", co.Dir)
		cmd.Stdout = out
		return cmd.Wrap(cmd.Run())
	})
}

// UploadPack serves a fetch by running git upload-pack against the
// materialized repository.
//
// A stateless request is read whole first (it is small, and bounded by
// MaxFetchRequestBytes), so that a client trickling it in holds no git
// process and so that it can be replayed once after the cache healed; the
// response streams out. A stream (Request.Stream) is connected to git
// upload-pack as it is: git advertises the refs and negotiates.
func (s *Service) UploadPack(ctx context.Context, req Request) error {
	if req.Stream {
		return s.uploadStream(ctx, req)
	}
	fr, err := readFetchRequest(req.Body, max(s.opts.MaxFetchRequestBytes, 0), s.opts.TempDir)
	if err != nil {
		return &Error{Kind: BodyError, Msg: "reading the request", Err: err}
	}
	defer fr.Close()
	if fr.size == 4 && string(fr.mem) == "0000" {
		// The probe git sends before a large request, to learn whether
		// authentication is needed.
		return nil
	}
	if err := checkPktLines(fr.Reader()); err != nil {
		return &Error{Kind: BadRequest, Msg: "malformed upload-pack request: " + err.Error(), Err: err}
	}
	sec, err := scanRequest(fr.Reader(), IsV2(req.GitProtocol))
	if err != nil {
		return &Error{Kind: BadRequest, Msg: "malformed upload-pack request: " + err.Error(), Err: err}
	}
	release, err := s.admit(ctx, req.Repo)
	if err != nil {
		return err
	}
	defer release()
	env := protocolEnv(req.GitProtocol)
	return s.serveGit(ctx, req, "upload-pack", true, func(ctx context.Context, co *LocalCopy, out io.Writer) error {
		// Only what the refs reach is served (docs/adr/0091-reachable-objects.md);
		// a refusal is git's own error packet, as for a wrong v0 want.
		if err := s.checkSection(ctx, co, sec); err != nil {
			if r, ok := errors.AsType[*refusal](err); ok {
				s.logger.Info("fetch refused", "repo", req.Repo, "err", r)
				return errPacket(out, r)
			}
			return err
		}
		cmd := s.opts.Git.Command(ctx, co.Dir, env, "upload-pack", "--stateless-rpc", co.Dir)
		cmd.Stdin = fr.Reader()
		cmd.Stdout = out
		return cmd.Wrap(cmd.Run())
	})
}

// uploadStream runs git upload-pack full-duplex on the request's streams.
// Nothing can be replayed, so a failure only marks the copy suspect.
func (s *Service) uploadStream(ctx context.Context, req Request) error {
	co, release, err := s.admitCheckout(ctx, req)
	if err != nil {
		return err
	}
	defer release()
	cmd := s.opts.Git.Command(ctx, co.Dir, protocolEnv(req.GitProtocol), "upload-pack", co.Dir)
	out := &lockedWriter{w: &flushWriter{w: req.Out}}
	// Each request of the stream is checked before git reads it: only
	// what the refs reach is served (docs/adr/0091-reachable-objects.md).
	in := newWantFilter(ctx, s, co, IsV2(req.GitProtocol), req.Body, out)
	cmd.Stdin = in
	cmd.Stdout = out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return &Error{Kind: Canceled, Msg: "canceled", Err: ctx.Err()}
		}
		if in.refused != nil {
			s.logger.Info("fetch refused", "repo", req.Repo, "err", in.refused)
			return &Error{Kind: Refused, Msg: in.refused.Error(), Err: in.refused}
		}
		s.opts.Repos.Suspect(req.Repo)
		return &Error{Kind: Internal, Msg: "internal error: upload-pack failed", Err: cmd.Wrap(err)}
	}
	return nil
}

// admitCheckout takes a git slot and materializes the request's
// repository.
func (s *Service) admitCheckout(ctx context.Context, req Request) (*LocalCopy, func(), error) {
	release, err := s.admit(ctx, req.Repo)
	if err != nil {
		return nil, nil, err
	}
	co, err := s.opts.Repos.Materialize(ctx, req.Repo, req.DefaultBranch)
	if err != nil {
		release()
		return nil, nil, materializeError(err)
	}
	return co, release, nil
}

func protocolEnv(proto string) []string {
	if proto == "" {
		return nil
	}
	return []string{"GIT_PROTOCOL=" + proto}
}

// IsV2 reports whether a GIT_PROTOCOL value asks for protocol v2.
func IsV2(proto string) bool {
	for _, f := range strings.Split(proto, ":") {
		if f == "version=2" {
			return true
		}
	}
	return false
}

// checkPktLines reports whether r is a well-formed sequence of pkt-lines
// with at least one packet, so that a malformed request is refused
// instead of reaching git (whose failure would look like the server's).
func checkPktLines(r io.Reader) error {
	pr := pktline.NewReader(r)
	for n := 0; ; n++ {
		_, _, err := pr.Next()
		if err == io.EOF {
			if n == 0 {
				return errors.New("empty request")
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// materializeError reports a failed materialization: a deleted repository
// is absent; anything else is the server's fault.
func materializeError(err error) error {
	if errors.Is(err, wal.ErrRepoDeleted) {
		return &Error{Kind: NotFound, Msg: "repository not found", Err: err}
	}
	return &Error{Kind: Internal, Msg: "internal error: materialize failed", Err: err}
}
