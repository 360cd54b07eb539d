package gitsvc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/gitsvc/pktline"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/pushprotect"
	"github.com/ghost-scm/ghost/internal/secretscan"
	"github.com/ghost-scm/ghost/internal/wal"
)

// receiveCaps are the capabilities ghost's receive-pack advertises; each
// is implemented here. report-status is the reply format; side-band-64k
// wraps it; delete-refs and ofs-delta are what git index-pack and the log
// support anyway; atomic costs nothing because every push is one log
// commit; quiet has no progress to suppress; push-options carries push
// protection's bypass (docs/adr/0031-push-protection.md). Deliberately
// absent: report-status-v2 (needs per-ref option lines), push-cert.
const receiveCaps = "report-status delete-refs side-band-64k quiet atomic ofs-delta push-options object-format=sha1 agent=ghost"

// maxPushOptions bounds the push options of one request; more make it
// malformed. git sends one per -o.
const maxPushOptions = 1000

// replacePrefix is the namespace of replace refs, which pushes may create
// or move only where the repository allows it (Request.AllowReplaceRefs).
const replacePrefix = "refs/replace/"

// writeReceiveAdvertisement writes the v0 receive-pack advertisement of
// refs (the service line is the caller's).
func writeReceiveAdvertisement(w io.Writer, refs []wal.Ref) {
	if len(refs) == 0 {
		pktline.WriteString(w, wal.ZeroID+" capabilities^{}\x00"+receiveCaps+"\n")
	}
	for i, r := range refs {
		line := r.ID + " " + r.Name
		if i == 0 {
			line += "\x00" + receiveCaps
		}
		pktline.WriteString(w, line+"\n")
	}
	pktline.WriteFlush(w)
}

// command is one "<old> <new> <ref>" line of a push.
type command struct {
	Old, New, Ref string
}

func (c command) isDelete() bool { return wal.IsZero(c.New) }

// pushRequest is the parsed head of a receive-pack request.
type pushRequest struct {
	cmds []command
	caps map[string]bool
	// shallow is set when the client's repository is shallow (it sent
	// "shallow" lines). Such a push is fine as long as it is complete
	// against what the server has: the connectivity check decides, and
	// ghost never records new shallow roots.
	shallow bool
	// options are the push options (git push -o), sent after the
	// command list when the client asked for push-options.
	options    []string
	packOffset int64 // where the pack (if any) starts in the body
}

// errMalformed marks a request that is not a receive-pack request at all:
// it is answered with 400 rather than a report-status.
var errMalformed = errors.New("malformed receive-pack request")

// errOptionsUnterminated is a request whose push options have not ended
// (yet: a stream reads them next).
var errOptionsUnterminated = fmt.Errorf("%w: the request ends before the push options' flush packet", errMalformed)

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, args...))
}

// parseCommands reads the command list up to its flush packet.
func parseCommands(r io.Reader) (*pushRequest, error) {
	pr := pktline.NewReader(r)
	req := &pushRequest{caps: map[string]bool{}}
	for {
		kind, p, err := pr.Next()
		if err == io.EOF {
			return nil, malformed("the request ends before the command list's flush packet")
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errMalformed, err)
		}
		if kind == pktline.Flush {
			break
		}
		if kind != pktline.Data {
			return nil, malformed("unexpected special packet in the command list")
		}
		line := string(p)
		if id, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "shallow "); ok && len(req.cmds) == 0 {
			if !isOID(id) {
				return nil, malformed("bad shallow line %q", line)
			}
			req.shallow = true
			continue
		}
		if len(req.cmds) == 0 {
			if i := strings.IndexByte(line, 0); i >= 0 {
				for _, c := range strings.Fields(line[i+1:]) {
					req.caps[c] = true
				}
				line = line[:i]
			}
		}
		line = strings.TrimSuffix(line, "\n")
		f := strings.Split(line, " ")
		if len(f) != 3 || !isOID(f[0]) || !isOID(f[1]) || f[2] == "" {
			return nil, malformed("bad command %q (want \"<old-id> <new-id> <ref>\")", truncate(line, 200))
		}
		req.cmds = append(req.cmds, command{Old: f[0], New: f[1], Ref: f[2]})
	}
	if len(req.cmds) == 0 {
		return nil, malformed("no commands")
	}
	if req.caps["push-options"] {
		// The options section: pkt-lines up to a flush, before the pack.
		for {
			kind, p, err := pr.Next()
			if err == io.EOF {
				return nil, errOptionsUnterminated
			}
			if err != nil {
				return nil, fmt.Errorf("%w: %w", errMalformed, err)
			}
			if kind == pktline.Flush {
				break
			}
			if kind != pktline.Data {
				return nil, malformed("unexpected special packet in the push options")
			}
			if len(req.options) == maxPushOptions {
				return nil, malformed("more than %d push options", maxPushOptions)
			}
			req.options = append(req.options, strings.TrimSuffix(string(p), "\n"))
		}
	}
	req.packOffset = pr.Consumed()
	return req, nil
}

// isOID accepts SHA-1 object ids: the cache repositories are SHA-1.
func isOID(s string) bool { return len(s) == 40 && wal.IsObjectID(s) }

// report is the reply to a push, in report-status terms.
type report struct {
	unpack  string   // "ok" or the reason unpacking failed
	refs    []string // the commands' refs, in the client's order
	reasons []string // per command; "" = ok
	detail  []string // extra lines for the side-band progress channel
	// message is written verbatim (indentation and blank lines kept)
	// on the progress channel: push protection's explanation.
	message []string
}

func (rep *report) failed() bool {
	return rep.unpack != "ok" || slices.ContainsFunc(rep.reasons, func(s string) bool { return s != "" })
}

// atomic turns a partial failure into a total one: the log commits a push
// whole or not at all, so refs that were fine report that they were not
// updated either, with git's own wording for that.
func (rep *report) atomic() {
	if !rep.failed() {
		return
	}
	for i, r := range rep.reasons {
		if r == "" {
			rep.reasons[i] = "atomic push failure"
		}
	}
}

func (rep *report) failAll(reason string) {
	for i := range rep.reasons {
		rep.reasons[i] = reason
	}
}

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
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.PushTimeout)
	defer cancel()
	rep, res, err := s.push(ctx, req, pr, spool, size, &steps)
	logAttrs := []any{"repo", req.Repo, "by", req.Principal, "refs", len(pr.cmds), "bytes", size, "duration", time.Since(start), steps.attr()}
	if err != nil {
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
		s.logger.Warn("push failed", append(logAttrs, "err", err)...)
		return e
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

// advertiseReceive writes ghost's receive-pack advertisement (protocol
// v0/v1 only), from a copy brought forward first.
func (s *Service) advertiseReceive(ctx context.Context, req Request) error {
	co, release, err := s.admitCheckout(ctx, req.Repo)
	if err != nil {
		return err
	}
	defer release()
	var b bufferWriter
	writeReceiveAdvertisement(&b, co.Refs)
	if _, err := req.Out.Write(b.Bytes()); err != nil {
		return &Error{Kind: Broken, Msg: "advertisement not delivered", Err: err}
	}
	return flush(req.Out)
}

// maxDrain is how much of a refused push's body is read, at least, so
// that git gets to see the answer (tooLarge).
const maxDrain = 1 << 30

// errPushTooLarge is a push body beyond MaxPushBytes.
var errPushTooLarge = errors.New("push too large")

// spool copies the (decoded) body to a temporary file in the scratch
// directory: a pack is never held in memory. It stops one byte past
// MaxPushBytes with errPushTooLarge, so a body that decompresses to far
// more is never written out. A stream is read up to the command list's
// flush packet, and on to its end only when a pack follows (a push that
// only deletes sends none, and waits for the report).
func (s *Service) spool(body io.Reader, stream bool) (*os.File, int64, error) {
	dir, err := s.opts.TempDir()
	if err != nil {
		return nil, 0, &Error{Kind: Internal, Msg: "internal error: no scratch space", Err: err}
	}
	f, err := os.CreateTemp(dir, "push-*.spool")
	if err != nil {
		return nil, 0, &Error{Kind: Internal, Msg: "internal error: no scratch space", Err: err}
	}
	limit := s.opts.MaxPushBytes
	var n int64
	if stream {
		head, err := readCommandList(body, limit)
		if _, werr := f.Write(head); werr != nil && err == nil {
			err = werr
		}
		n = int64(len(head))
		if err != nil {
			return f, n, err
		}
		pr, perr := parseCommands(bytes.NewReader(head))
		if errors.Is(perr, errOptionsUnterminated) {
			// The push options come after the commands' flush: read
			// them too, up to their own flush, within what is left of
			// the limit.
			if limit > 0 && n >= limit {
				return f, n, errPushTooLarge
			}
			opts, err := readCommandList(body, limit-n)
			if _, werr := f.Write(opts); werr != nil && err == nil {
				err = werr
			}
			n += int64(len(opts))
			if err != nil {
				return f, n, err
			}
			head = append(head, opts...)
			pr, perr = parseCommands(bytes.NewReader(head))
		}
		if perr != nil || !slices.ContainsFunc(pr.cmds, func(c command) bool { return !c.isDelete() }) {
			return f, n, nil
		}
	}
	src := body
	if limit > 0 {
		src = io.LimitReader(body, limit+1-n)
	}
	m, err := io.Copy(f, src)
	n += m
	if err != nil {
		return f, n, err
	}
	if limit > 0 && n > limit {
		return f, n, errPushTooLarge
	}
	return f, n, nil
}

// readCommandList reads pkt-lines from r up to and including the first
// flush packet, byte by byte as they come, leaving the pack unread.
func readCommandList(r io.Reader, limit int64) ([]byte, error) {
	var b []byte
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return b, nil // parseCommands says what is missing
			}
			return b, err
		}
		b = append(b, hdr[:]...)
		n, err := strconv.ParseUint(string(hdr[:]), 16, 16)
		if err != nil {
			return b, nil
		}
		if n == 0 {
			return b, nil
		}
		if n < 4 {
			return b, nil
		}
		if limit > 0 && int64(len(b))+int64(n) > limit {
			return b, errPushTooLarge
		}
		p := make([]byte, n-4)
		if _, err := io.ReadFull(r, p); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return b, nil
			}
			return b, err
		}
		b = append(b, p...)
	}
}

// tooLarge refuses a push over MaxPushBytes in git's own terms: an unpack
// error in report-status, with a side-band message, so that the user sees
// the limit in git's output rather than a bare transport error. git reads
// the answer only after it has sent its whole body (cut off earlier, it
// reports only "Connection reset by peer"), so the rest of the raw, still
// compressed body (Request.Drain) is read and discarded first, never
// decoded or stored: up to maxDrain or MaxPushBytes more bytes, whichever
// is more. A client sending even more is cut off (Out's CloseAfter).
func (s *Service) tooLarge(req Request, spool *os.File, size int64) error {
	s.opts.Metrics.pushResult("too_large")
	limit := s.opts.MaxPushBytes
	msg := fmt.Sprintf("push exceeds the maximum allowed size of %s (%d bytes)", humanBytes(limit), limit)
	s.logger.Warn("push refused: too large", "repo", req.Repo, "limit", limit)
	pr, err := parseCommands(io.NewSectionReader(spool, 0, size))
	if err != nil || !pr.caps["report-status"] {
		return &Error{Kind: TooLarge, Msg: msg, Err: errPushTooLarge}
	}
	drain := req.Drain
	if drain == nil {
		drain = req.Body
	}
	most := max(limit, maxDrain)
	n, err := io.CopyN(io.Discard, drain, most)
	if c, ok := req.Out.(interface{ CloseAfter() }); ok && err == nil && n == most {
		c.CloseAfter()
	}
	rep := &report{unpack: msg, reasons: make([]string, len(pr.cmds)),
		detail: []string{"error: " + msg, "error: split the push into smaller ones, or ask the operator to raise --max-push-bytes"}}
	for _, c := range pr.cmds {
		rep.refs = append(rep.refs, c.Ref)
	}
	rep.failAll("unpacker error")
	writeReport(req.Out, rep, pr.caps["side-band-64k"])
	return nil
}

// humanBytes renders a size in binary units for messages.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
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
		}
		seen[c.Ref] = true
	}
	if slices.Contains(rep.reasons, "replace refs are refused on this repository") {
		rep.detail = append(rep.detail,
			"error: refs/replace/* refs are refused here: a replace ref makes clients that honour it",
			"error: show another object in place of the one in history. The repository's owner may",
			"error: allow them (ghost repo set <owner>/<name> --allow-replace-refs on).")
	}
	if rep.failed() {
		rep.atomic()
		return rep, res, nil
	}

	// 2. The repository as the log has it now.
	snap, err := s.opts.Repos.Materialize(ctx, r.Repo)
	if err != nil {
		if errors.Is(err, wal.ErrRepoDeleted) {
			return nil, res, err
		}
		return nil, res, fmt.Errorf("materialize: %w", err)
	}
	checkDF(snap.Refs, req.cmds, rep)
	denyDeleteCurrent(snap.Head, req.cmds, rep)

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
		steps.checks = time.Since(t)
		if err != nil {
			return nil, res, err
		}
	}
	if rep.failed() {
		rep.atomic()
		return rep, res, nil
	}

	// 4b. Push protection: the secrets the push adds, before anything
	// is committed (docs/adr/0031-push-protection.md).
	if r.PushProtection && s.opts.PushProtect != nil {
		t := time.Now()
		err := s.protect(ctx, r, req, snap.Dir, env, rep)
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
	if _, err := s.opts.Repos.Materialize(ctx, r.Repo); err != nil {
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

// protect runs push protection on the validated push in the quarantine
// (dir with env). A push with secrets, a bad push option or a bypass that
// could not be recorded fails every ref in rep; a bypassed push passes
// with the bypass in rep's message. A failure to decide is an error: the
// push is refused as Busy (retry), and nothing changes.
func (s *Service) protect(ctx context.Context, r Request, req *pushRequest, dir string, env []string, rep *report) error {
	updates := make([]pushprotect.Update, len(req.cmds))
	for i, c := range req.cmds {
		updates[i] = pushprotect.Update{Ref: c.Ref, Old: c.Old, New: c.New}
	}
	v, err := s.opts.PushProtect.Check(ctx, pushprotect.Push{
		Tenant: r.Tenant, RepoID: r.Repo, Pusher: r.Principal,
		Repo: secretscan.Repo{Dir: dir, Env: env, Git: s.opts.Git}, Updates: updates, Options: req.options,
	})
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
	attrs := []any{"repo", r.Repo, "by", r.Principal, "findings", len(v.Findings), "blobs", v.Stats.BlobsScanned, "bytes", v.Stats.BytesScanned, "duration", v.Duration}
	switch {
	case v.Blocked:
		rep.failAll(pushprotect.Reason)
		s.logger.Info("push protection: push blocked", attrs...)
	case v.Bypass != "" && len(v.Findings) > 0:
		s.logger.Info("push protection: bypassed", append(attrs, "reason", v.Bypass)...)
	default:
		s.logger.Debug("push protection: clean", attrs...)
	}
	return nil
}

func indexOf(cmds []command, ref string) int {
	for i, c := range cmds {
		if c.Ref == ref {
			return i
		}
	}
	return 0
}

// denyDeleteCurrent refuses to delete the branch HEAD points at, as git's
// receive.denyDeleteCurrent does by default: HEAD would otherwise move to
// another branch without anyone asking (Checkout.Head).
func denyDeleteCurrent(head string, cmds []command, rep *report) {
	for i, c := range cmds {
		if c.isDelete() && c.Ref == head && rep.reasons[i] == "" {
			rep.reasons[i] = "deletion of the current branch prohibited"
		}
	}
}

// checkDF refuses a push that would leave both "a" and "a/b", naming
// each command that would (wal.CheckDF).
func checkDF(refs []wal.Ref, cmds []command, rep *report) {
	final := make(map[string]string, len(refs)+len(cmds))
	for _, r := range refs {
		final[r.Name] = r.ID
	}
	for _, c := range cmds {
		if c.isDelete() {
			delete(final, c.Ref)
		} else {
			final[c.Ref] = c.New
		}
	}
	next := make([]wal.Ref, 0, len(final))
	for name, id := range final {
		next = append(next, wal.Ref{Name: name, ID: id})
	}
	slices.SortFunc(next, func(a, b wal.Ref) int { return strings.Compare(a.Name, b.Name) })
	for i, c := range cmds {
		if c.isDelete() || rep.reasons[i] != "" {
			continue
		}
		var rc *wal.RefConflictError
		if errors.As(wal.CheckDF(next, []wal.Transition{{Ref: c.Ref, Old: c.Old, New: c.New}}), &rc) {
			rep.reasons[i] = "ref conflicts with " + rc.Conflict
		}
	}
}

// unpackError is a pack that does not index: reported as "unpack <reason>".
type unpackError struct {
	reason string
	detail []string
}

func (e *unpackError) Error() string { return "unpack failed: " + e.reason }

// indexPack runs git index-pack --fix-thin --strict on the pack in the
// spool, writing into the quarantine, and returns the pack's name, or ""
// for a pack without objects. --fix-thin appends the bases a thin pack
// left out, so what the log stores is self-contained.
func (s *Service) indexPack(ctx context.Context, dir string, env []string, spool *os.File, off, size int64) (string, error) {
	var hdr [12]byte
	if size-off < int64(len(hdr)) {
		return "", &unpackError{reason: "pack is truncated: no pack header"}
	}
	if _, err := spool.ReadAt(hdr[:], off); err != nil {
		return "", fmt.Errorf("read pack header: %w", err)
	}
	if string(hdr[:4]) != "PACK" {
		return "", &unpackError{reason: "bad pack header"}
	}
	if v := binary.BigEndian.Uint32(hdr[4:8]); v != 2 && v != 3 {
		return "", &unpackError{reason: fmt.Sprintf("unsupported pack version %d", v)}
	}
	if binary.BigEndian.Uint32(hdr[8:12]) == 0 {
		return "", nil
	}
	// Delta resolution runs on every core: left to itself, index-pack
	// caps its threads at half the cores on machines with more than
	// three (pack.threads unset), and a push waits on it.
	threads := "--threads=" + strconv.Itoa(runtime.NumCPU())
	cmd := s.opts.Git.Command(ctx, dir, env, "index-pack", "--stdin", "--fix-thin", "--strict", threads)
	// index-pack reads the spool itself, from a descriptor of its own
	// at the pack's offset: no pipe, and no copy through this process.
	// The spool ends where the body did, at size.
	in, err := os.Open(spool.Name())
	if err != nil {
		return "", fmt.Errorf("reopen spool: %w", err)
	}
	defer in.Close()
	if _, err := in.Seek(off, io.SeekStart); err != nil {
		return "", fmt.Errorf("reopen spool: %w", err)
	}
	cmd.Stdin = in
	var out bufferWriter
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", cmd.Wrap(err)
		}
		msg := strings.TrimSpace(cmd.StderrText())
		lines := strings.Split(msg, "\n")
		reason := "index-pack abnormal exit"
		for _, l := range lines {
			if strings.HasPrefix(l, "fatal: ") || strings.HasPrefix(l, "error: ") {
				reason = oneLine(l)
				break
			}
		}
		return "", &unpackError{reason: reason, detail: lines}
	}
	return gitexec.ParsePackName(string(out.Bytes()))
}

// checkObjects verifies, with the quarantine's objects visible, that every
// new id exists, that branches point at commits, and that everything the
// new ids reach is present (the connectivity check git receive-pack does).
//
// A push from a shallow repository that is not complete would need the
// server to record shallow roots, which it never does; git words that
// "shallow update not allowed".
func (s *Service) checkObjects(ctx context.Context, dir string, env []string, cmds []command, shallow bool, rep *report) error {
	var in strings.Builder
	for _, c := range cmds {
		if !c.isDelete() {
			in.WriteString(c.New + "\n")
		}
	}
	out, err := s.opts.Git.Run(ctx, dir, env, strings.NewReader(in.String()), "cat-file", "--batch-check=%(objectname) %(objecttype)")
	if err != nil {
		return fmt.Errorf("check pushed objects: %w", err)
	}
	types := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if id, typ, ok := strings.Cut(l, " "); ok {
			types[id] = typ
		}
	}
	var reachable []int
	for i, c := range cmds {
		if c.isDelete() {
			continue
		}
		typ := types[c.New]
		switch {
		case typ == "" || typ == "missing":
			rep.reasons[i] = "missing necessary objects"
		case strings.HasPrefix(c.Ref, "refs/heads/") && typ != "commit":
			rep.reasons[i] = "branch must point to a commit, not a " + typ
		default:
			reachable = append(reachable, i)
		}
	}
	if len(reachable) == 0 {
		return nil
	}
	connected := func(ids ...string) (bool, error) {
		_, err := s.opts.Git.Run(ctx, dir, env, strings.NewReader(strings.Join(ids, "\n")+"\n"),
			"rev-list", "--objects", "--stdin", "--not", "--all", "--quiet")
		if err == nil {
			return true, nil
		}
		if ctx.Err() != nil {
			return false, err
		}
		return false, nil
	}
	ids := make([]string, len(reachable))
	for k, i := range reachable {
		ids[k] = cmds[i].New
	}
	ok, err := connected(ids...)
	if err != nil || ok {
		return err
	}
	incomplete := "missing necessary objects"
	if shallow {
		incomplete = "shallow update not allowed"
	}
	// Name the culprits (rare path: one walk per ref).
	for _, i := range reachable {
		ok, err := connected(cmds[i].New)
		if err != nil {
			return err
		}
		if !ok {
			rep.reasons[i] = incomplete
		}
	}
	if !rep.failed() {
		rep.failAll(incomplete)
	}
	return nil
}

// writeReport writes report-status, inside side-band-64k when asked.
func writeReport(w io.Writer, rep *report, sideband bool) {
	var b bufferWriter
	pktline.WriteString(&b, "unpack "+oneLine(rep.unpack)+"\n")
	for i, reason := range rep.reasons {
		ref := rep.refs[i]
		if reason == "" {
			pktline.WriteString(&b, "ok "+ref+"\n")
		} else {
			pktline.WriteString(&b, "ng "+ref+" "+oneLine(reason)+"\n")
		}
	}
	pktline.WriteFlush(&b)
	if !sideband {
		w.Write(b.Bytes())
		return
	}
	var out bufferWriter
	for _, l := range rep.message {
		pktline.WriteSideband(&out, pktline.BandProgress, []byte(truncate(strings.TrimRight(l, " \t\r\n"), 1000)+"\n"))
	}
	for _, l := range rep.detail {
		if l = strings.TrimSpace(l); l != "" {
			pktline.WriteSideband(&out, pktline.BandProgress, []byte(truncate(l, 1000)+"\n"))
		}
	}
	pktline.WriteSideband(&out, pktline.BandData, b.Bytes())
	pktline.WriteFlush(&out)
	w.Write(out.Bytes())
}

func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.TrimSpace(s))
	return truncate(s, 500)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
