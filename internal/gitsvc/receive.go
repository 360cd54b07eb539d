package gitsvc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/lfs/pointer"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// ReceivePack serves a push (docs/design.md §4, the commit point of a
// push): spool, parse, validate in a quarantine, commit through the log,
// bring the cache forward, report. With Request.Stream set it first
// writes the ref advertisement, as git receive-pack does over SSH.
//
// What it does not answer in report-status it returns as an *Error:
// BodyError, TooLarge (when the client did not ask for report-status),
// BadRequest, Busy, Contention, NotFound, Internal.
func (s *Service) ReceivePack(ctx context.Context, req Request) error {
	if req.Stream {
		if err := s.advertiseReceive(ctx, req); err != nil {
			return err
		}
	}
	start := time.Now()
	var steps pushSteps
	spool, size, err := s.spool(req.Body, req.Stream)
	steps.spool = time.Since(start)
	if spool != nil {
		defer func() {
			spool.Close()
			os.Remove(spool.Name())
		}()
	}
	s.opts.Metrics.addReceived(size)
	if errors.Is(err, errPushTooLarge) {
		return s.tooLarge(req, spool, size)
	}
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return e
		}
		return &Error{Kind: BodyError, Msg: "reading the push", Err: err}
	}
	if size == 4 {
		var b [4]byte
		if _, err := spool.ReadAt(b[:], 0); err == nil && string(b[:]) == "0000" {
			return nil
		}
	}
	pr, err := parseCommands(io.NewSectionReader(spool, 0, size))
	if err != nil {
		s.opts.Metrics.pushResult("invalid")
		return &Error{Kind: BadRequest, Msg: err.Error(), Err: err}
	}
	release, err := s.admit(ctx, req.Repo)
	if err != nil {
		return err
	}
	defer release()

	// From here the push runs to its end even if the client goes away: it
	// must land whole or not at all, and an in-flight push survives a
	// graceful shutdown.
	var cancel context.CancelFunc
	if s.opts.PushTimeout > 0 {
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), s.opts.PushTimeout)
	} else { // switched off
		ctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
	}
	defer cancel()
	rep, res, err := s.push(ctx, req, pr, spool, size, &steps)
	logAttrs := []any{"repo", req.Repo, "by", req.Principal, "refs", len(pr.cmds), "bytes", size, "duration", time.Since(start), steps.attr()}
	if err != nil {
		s.logger.Warn("push failed", append(logAttrs, "err", err)...)
		return s.pushError(err)
	}
	if rep.failed() {
		s.opts.Metrics.pushResult("rejected")
		s.logger.Info("push rejected", append(logAttrs, "unpack", rep.unpack, "reasons", rep.reasons)...)
	} else {
		s.opts.Metrics.pushResult("ok")
		s.logger.Info("push committed", append(logAttrs, "seq", res.Seq, "entry", res.ULID.String(), "attempts", res.Attempts)...)
		if s.opts.OnCommit != nil && res.Seq > 0 {
			s.opts.OnCommit(req, res)
		}
	}
	if pr.caps["report-status"] {
		writeReport(req.Out, rep, pr.caps["side-band-64k"])
	}
	return nil
}

// pushError is the *Error of a push that failed outside report-status,
// counted in the push metrics.
func (s *Service) pushError(err error) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
	case errors.Is(err, wal.ErrContention):
		e = &Error{Kind: Contention, Msg: "the repository is busy (too many concurrent pushes); nothing was changed, retry the push", Err: err, RetryAfter: 1}
		s.opts.Metrics.pushResult("contention")
	case errors.Is(err, wal.ErrRepoDeleted):
		e = &Error{Kind: NotFound, Msg: "repository not found", Err: err}
		s.opts.Metrics.pushResult("rejected")
	case errors.Is(err, wal.ErrOutcomeUnknown), errors.As(err, new(*wal.CorruptError)):
		// The only failures after which the push may have landed
		// (docs/design.md §4.3): the index write's outcome could not
		// be learned, or the index could not be read to learn it.
		e = &Error{Kind: Internal, Msg: "internal error: the push may or may not have been applied; fetch to check", Err: err}
		s.opts.Metrics.pushResult("error")
	case errors.Is(err, objstore.ErrUnavailable):
		e = &Error{Kind: Busy, Msg: "storage is temporarily unavailable; nothing was changed, retry the push", Err: err, RetryAfter: 1}
		s.opts.Metrics.pushResult("error")
	default:
		// Everything else failed before the commit point or was a
		// definite refusal of the index write: nothing landed.
		e = &Error{Kind: Internal, Msg: "internal error: the push was not applied; nothing was changed", Err: err}
		s.opts.Metrics.pushResult("error")
	}
	return e
}

// advertiseReceive writes ghost's receive-pack advertisement (protocol
// v0/v1 only), from a copy brought forward first.
func (s *Service) advertiseReceive(ctx context.Context, req Request) error {
	co, release, err := s.admitCheckout(ctx, req)
	if err != nil {
		return err
	}
	defer release()
	var b bufferWriter
	writeReceiveAdvertisement(&b, pushableRefs(co.Refs))
	if _, err := req.Out.Write(b.Bytes()); err != nil {
		return &Error{Kind: Broken, Msg: "advertisement not delivered", Err: err}
	}
	return flush(req.Out)
}

// push validates and commits. It returns the report for the client, or an
// error for failures not answered in report-status.
func (s *Service) push(ctx context.Context, r Request, req *pushRequest, spool *os.File, size int64, steps *pushSteps) (*report, wal.Result, error) {
	rep := &report{unpack: "ok", reasons: make([]string, len(req.cmds))}
	for _, c := range req.cmds {
		rep.refs = append(rep.refs, c.Ref)
	}
	var res wal.Result

	// 1. Each command on its own.
	seen := map[string]bool{}
	for i, c := range req.cmds {
		switch {
		case wal.CheckRefName(c.Ref) != nil:
			rep.reasons[i] = "funny refname"
		case seen[c.Ref]:
			rep.reasons[i] = "duplicate ref update"
		case c.Old == c.New:
			rep.reasons[i] = "old and new ids are equal"
		case strings.HasPrefix(c.Ref, replacePrefix) && !c.isDelete() && !r.AllowReplaceRefs:
			rep.reasons[i] = "replace refs are refused on this repository"
		case strings.HasPrefix(c.Ref, PullRefPrefix) && !req.server:
			rep.reasons[i] = reasonPullRef
		}
		seen[c.Ref] = true
	}
	if slices.Contains(rep.reasons, "replace refs are refused on this repository") {
		rep.detail = append(rep.detail,
			"error: refs/replace/* refs are refused here: a replace ref makes clients that honour it",
			"error: show another object in place of the one in history. The repository's owner may",
			"error: allow them (ghost repo set <owner>/<name> --allow-replace-refs on).")
	}
	if slices.Contains(rep.reasons, reasonPullRef) {
		rep.detail = append(rep.detail,
			"error: refs/pull/* is kept by the server: refs/pull/<n>/head follows the head of",
			"error: pull request <n>. Push the pull request's branch instead.")
	}
	if rep.failed() {
		rep.atomic()
		return rep, res, nil
	}

	// 2. The repository as the log has it now.
	snap, err := s.opts.Repos.Materialize(ctx, r.Repo, r.DefaultBranch)
	if err != nil {
		if errors.Is(err, wal.ErrRepoDeleted) {
			return nil, res, err
		}
		return nil, res, fmt.Errorf("materialize: %w", err)
	}
	checkDF(snap.Refs, req.cmds, rep)
	denyDeleteCurrent(snap.Head, req.cmds, rep)
	checkBranchRules(r, req.server, req.cmds, rep)

	// The pack goes to the store while it is validated: a staged entry
	// that nothing references until the commit point, deleted if the
	// push fails (docs/adr/0019-staged-entries.md).
	needPack := slices.ContainsFunc(req.cmds, func(c command) bool { return !c.isDelete() })
	var stg *staging
	if needPack && size > req.packOffset && !rep.failed() {
		stg = s.startStaging(ctx, r, req.cmds, spool, req.packOffset, size)
		defer stg.stop()
	}

	// 3. The pack, indexed against the repository's objects in a
	// quarantine: nothing reaches the cache before the commit.
	tmp, err := s.opts.TempDir()
	if err != nil {
		return nil, res, err
	}
	q, err := os.MkdirTemp(tmp, "quarantine-")
	if err != nil {
		return nil, res, fmt.Errorf("quarantine: %w", err)
	}
	defer os.RemoveAll(q)
	if err := os.Mkdir(filepath.Join(q, "pack"), 0o755); err != nil {
		return nil, res, fmt.Errorf("quarantine: %w", err)
	}
	env := []string{
		"GIT_OBJECT_DIRECTORY=" + q,
		"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + filepath.Join(snap.Dir, "objects"),
		"GIT_QUARANTINE_PATH=" + q,
	}
	packHash := ""
	if needPack && size > req.packOffset {
		t := time.Now()
		packHash, err = s.indexPack(ctx, snap.Dir, env, spool, req.packOffset, size)
		steps.index = time.Since(t)
		var ue *unpackError
		if errors.As(err, &ue) {
			rep.unpack = ue.reason
			rep.detail = append(rep.detail, ue.detail...)
			rep.failAll("unpacker error")
			return rep, res, nil
		}
		if err != nil {
			return nil, res, err
		}
	}

	// 4. Every new id exists, branches point at commits, and everything
	// they reach is present.
	if needPack && !rep.failed() {
		t := time.Now()
		err := s.checkObjects(ctx, snap.Dir, env, req.cmds, req.shallow, rep)
		if err == nil && !rep.failed() {
			err = s.checkForcePushes(ctx, r, snap.Dir, env, req.cmds, rep)
		}
		steps.checks = time.Since(t)
		if err != nil {
			return nil, res, err
		}
	}
	if rep.failed() {
		rep.atomic()
		return rep, res, nil
	}

	// 4a. Git LFS: the objects the push's pointers name were uploaded
	// (docs/design.md §7.10).
	var lfsPointers map[string]pointer.Pointer
	if s.opts.LFS != nil && packHash != "" {
		if lfsPointers, err = s.checkLFS(ctx, r, snap.Dir, env, filepath.Join(q, "pack", "pack-"+packHash+".idx"), rep); err != nil {
			return nil, res, err
		}
		if rep.failed() {
			return rep, res, nil
		}
	}

	// 4b. Push protection: the secrets the push adds, before anything
	// is committed (docs/adr/0031-push-protection.md).
	if r.PushProtection && s.opts.PushProtect != nil {
		t := time.Now()
		err := s.protect(ctx, r, req, snap.Dir, env, lfsPointers, rep)
		steps.protect = time.Since(t)
		if err != nil {
			return nil, res, err
		}
		if rep.failed() {
			return rep, res, nil
		}
	}

	// 5. The commit point.
	ts := make([]wal.Transition, len(req.cmds))
	for i, c := range req.cmds {
		ts[i] = wal.Transition{Ref: c.Ref, Old: c.Old, New: c.New}
	}
	p := wal.Push{Transitions: ts, PushedBy: r.Principal, Pack: strings.NewReader("")}
	packDir := filepath.Join(q, "pack")
	if packHash != "" {
		f, err := os.Open(filepath.Join(packDir, "pack-"+packHash+".pack"))
		if err != nil {
			return nil, res, fmt.Errorf("open validated pack: %w", err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return nil, res, fmt.Errorf("open validated pack: %w", err)
		}
		p.Pack, p.PackSize = f, st.Size()
		// git's index of that very pack goes beside the entry, so a cold
		// node installs the layer without running index-pack.
		idx, err := os.Open(filepath.Join(packDir, "pack-"+packHash+".idx"))
		if err != nil {
			return nil, res, fmt.Errorf("open validated pack index: %w", err)
		}
		defer idx.Close()
		ist, err := idx.Stat()
		if err != nil {
			return nil, res, fmt.Errorf("open validated pack index: %w", err)
		}
		p.PackIndex, p.PackIndexSize = idx, ist.Size()
	}
	t := time.Now()
	if s.opts.BeforeCommit != nil {
		if err := s.opts.BeforeCommit(ctx, r); err != nil {
			return nil, res, fmt.Errorf("before the commit point: %w", err)
		}
	}
	res, err = s.commit(ctx, r.Repo, p, stg, spool, req.packOffset, size, packHash, steps)
	steps.commit = time.Since(t)
	s.opts.Metrics.observeAttempts(res.Attempts)
	var nff *wal.NonFastForwardError
	var rc *wal.RefConflictError
	switch {
	case errors.As(err, &nff):
		rep.reasons[indexOf(req.cmds, nff.Ref)] = "fetch first"
		rep.atomic()
		return rep, res, nil
	case errors.As(err, &rc):
		rep.reasons[indexOf(req.cmds, rc.Ref)] = "ref conflicts with " + rc.Conflict
		rep.atomic()
		return rep, res, nil
	case errors.Is(err, wal.ErrInvalid):
		rep.failAll(oneLine(err.Error()))
		return rep, res, nil
	case err != nil:
		return nil, res, err
	}

	// 6. Bring this node's cache forward, reusing the quarantine's pack
	// when the push is the very next layer.
	t = time.Now()
	if err := s.opts.Commits.Adopt(ctx, r.Repo, res, packDir, packHash); err != nil {
		s.logger.Warn("adopting a pushed pack into the cache failed", "repo", r.Repo, "err", err)
	}
	if _, err := s.opts.Repos.Materialize(ctx, r.Repo, r.DefaultBranch); err != nil {
		s.logger.Warn("materializing after a push failed; the next request retries", "repo", r.Repo, "err", err)
	}
	steps.adopt = time.Since(t)
	return rep, res, nil
}

// pushSteps are the durations of a push's steps, for its log line: where
// a push spends its time (issue 12 §5). A step that did not run is zero.
type pushSteps struct {
	spool   time.Duration // receiving the body into the spool
	index   time.Duration // git index-pack --fix-thin --strict
	checks  time.Duration // object types and connectivity
	protect time.Duration // push protection
	commit  time.Duration // the commit point: entry and index PUTs, then the CAS
	upload  time.Duration // of commit, waiting for the staged entry's upload
	adopt   time.Duration // bringing this node's cache forward
}

// attr is the steps as one log group, "steps".
func (p *pushSteps) attr() slog.Attr {
	return slog.Group("steps",
		"spool", p.spool, "index", p.index, "checks", p.checks,
		"protect", p.protect, "commit", p.commit, "upload", p.upload, "adopt", p.adopt)
}

// commit commits the validated push p: through its staged entry when
// the staged pack is the validated one and its upload succeeded, else
// with a fresh upload of the validated pack (Committer.Commit), after
// discarding what was staged. Its errors are Committer.Commit's.
func (s *Service) commit(ctx context.Context, repo string, p wal.Push, stg *staging, spool *os.File, off, size int64, packHash string, steps *pushSteps) (wal.Result, error) {
	if stg != nil && packHash != "" {
		same, err := spooledIsValidated(spool, off, size, packHash, p.PackSize)
		if err != nil {
			return wal.Result{}, fmt.Errorf("compare the spooled pack with the validated one: %w", err)
		}
		if same {
			t := time.Now()
			st, err := stg.wait()
			steps.upload = time.Since(t)
			if err == nil {
				stg.committing = true
				return stg.stager.CommitStaged(ctx, st, p.PackIndex, p.PackIndexSize)
			}
			s.logger.Warn("staging the pushed pack failed; uploading it again", "repo", repo, "err", err)
		}
	}
	stg.stop()
	return s.opts.Commits.Commit(ctx, repo, p)
}
