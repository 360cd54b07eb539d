package gitsvc

import (
	"context"
	"errors"

	"github.com/ghost-scm/ghost/internal/lfs/pointer"
	"github.com/ghost-scm/ghost/internal/pushprotect"
	"github.com/ghost-scm/ghost/internal/secretscan"
)

// replacePrefix is the namespace of replace refs, which pushes may create
// or move only where the repository allows it (Request.AllowReplaceRefs).
const replacePrefix = "refs/replace/"

// protect runs push protection on the validated push in the quarantine
// (dir with env). A push with secrets, a bad push option or a bypass that
// could not be recorded fails every ref in rep; a bypassed push passes
// with the bypass in rep's message. A failure to decide is an error: the
// push is refused as Busy (retry), and nothing changes.
//
// lfsPointers are the push's Git LFS pointer blobs and their oids
// (checkLFS): their objects are scanned as the pointers' files.
func (s *Service) protect(ctx context.Context, r Request, req *pushRequest, dir string, env []string, lfsPointers map[string]pointer.Pointer, rep *report) error {
	updates := make([]pushprotect.Update, len(req.cmds))
	for i, c := range req.cmds {
		updates[i] = pushprotect.Update{Ref: c.Ref, Old: c.Old, New: c.New}
	}
	p := pushprotect.Push{
		Tenant: r.Tenant, RepoID: r.Repo, Pusher: r.Principal,
		Repo: secretscan.Repo{Dir: dir, Env: env, Git: s.opts.Git}, Updates: updates, Options: req.options,
	}
	if s.opts.LFS != nil && len(lfsPointers) > 0 {
		p.LFSPointers, p.LFS = lfsPointers, lfsRepo{s.opts.LFS, r.Tenant, r.Repo}
		p.LFSScanAfterPush = r.LFSScanAfterPush
	}
	v, err := s.opts.PushProtect.Check(ctx, p)
	var oe *pushprotect.OptionError
	switch {
	case errors.As(err, &oe):
		rep.failAll("invalid push option")
		rep.detail = append(rep.detail, "error: "+oe.Error())
		return nil
	case errors.Is(err, pushprotect.ErrBypassNotRecorded):
		s.logger.Warn("push protection: bypass not recorded; push refused", "repo", r.Repo, "by", r.Principal, "err", err)
		rep.failAll("push protection bypass could not be recorded, retry")
		return nil
	case err != nil:
		s.opts.Metrics.pushResult("error")
		return &Error{Kind: Busy, Msg: "push protection could not check the push; nothing was changed, retry the push", Err: err, RetryAfter: 1}
	}
	rep.message = v.Message
	attrs := []any{"repo", r.Repo, "by", r.Principal, "findings", len(v.Findings), "blobs", v.Stats.BlobsScanned, "bytes", v.Stats.BytesScanned, "lfs_unscanned", len(v.Unscanned), "duration", v.Duration}
	switch {
	case v.Blocked:
		reason := v.Reason
		if reason == "" {
			reason = pushprotect.Reason
		}
		rep.failAll(reason)
		s.logger.Info("push protection: push blocked", attrs...)
	case v.Bypass != "" && len(v.Findings) > 0:
		s.logger.Info("push protection: bypassed", append(attrs, "reason", v.Bypass)...)
	default:
		s.logger.Debug("push protection: clean", attrs...)
	}
	return nil
}
