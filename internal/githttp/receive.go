package githttp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/githttp/pktline"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// receiveCaps are the capabilities ghost's receive-pack advertises; each
// is implemented here. report-status is the reply format; side-band-64k
// wraps it; delete-refs and ofs-delta are what git index-pack and the log
// support anyway; atomic costs nothing because every push is one log
// commit; quiet has no progress to suppress. Deliberately absent:
// report-status-v2 (needs per-ref option lines), push-options,
// push-cert.
const receiveCaps = "report-status delete-refs side-band-64k quiet atomic ofs-delta object-format=sha1 agent=ghost"

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
	shallow    bool
	packOffset int64 // where the pack (if any) starts in the body
}

// errMalformed marks a request that is not a receive-pack request at all:
// it is answered with 400 rather than a report-status.
var errMalformed = errors.New("malformed receive-pack request")

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
	req.packOffset = pr.Consumed()
	return req, nil
}

// isOID accepts SHA-1 object ids: the cache repositories are SHA-1.
func isOID(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// report is the reply to a push, in report-status terms.
type report struct {
	unpack  string   // "ok" or the reason unpacking failed
	refs    []string // the commands' refs, in the client's order
	reasons []string // per command; "" = ok
	detail  []string // extra lines for the side-band progress channel
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

// pushError is a failure answered with an HTTP status rather than a
// report-status: the push may be retried as a whole.
type pushError struct {
	status int
	msg    string
	err    error
}

func (e *pushError) Error() string { return e.msg + ": " + e.err.Error() }
func (e *pushError) Unwrap() error { return e.err }

// receivePack handles POST git-receive-pack (docs/design.md §4, the commit
// point of a push): spool, parse, validate in a quarantine, commit through
// the log, bring the cache forward, report.
func (h *Handler) receivePack(w http.ResponseWriter, r *http.Request, acc Access) {
	start := time.Now()
	body, err := requestBody(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	defer body.Close()
	spool, size, err := h.spool(body)
	if spool != nil {
		defer func() {
			spool.Close()
			os.Remove(spool.Name())
		}()
	}
	h.opts.Metrics.addReceived(size)
	if errors.Is(err, errPushTooLarge) {
		h.tooLarge(w, r, spool, size)
		return
	}
	if err != nil {
		var pe *pushError
		if errors.As(err, &pe) {
			httpError(w, pe.status, pe.msg)
			return
		}
		if status, msg, ok := bodyError(r, err); ok {
			w.Header().Set("Connection", "close")
			httpError(w, status, "reading the push: "+strings.TrimPrefix(msg, "reading the request: "))
		}
		return
	}
	if size == 4 {
		var b [4]byte
		if _, err := spool.ReadAt(b[:], 0); err == nil && string(b[:]) == "0000" {
			resultHeaders(w, svcReceive)
			w.WriteHeader(http.StatusOK)
			return
		}
	}
	req, err := parseCommands(io.NewSectionReader(spool, 0, size))
	if err != nil {
		h.opts.Metrics.pushResult("invalid")
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	release, ok := h.admit(w, r)
	if !ok {
		return
	}
	defer release()

	// From here the push runs to its end even if the client goes away: it
	// must land whole or not at all, and an in-flight push survives a
	// graceful shutdown.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.opts.PushTimeout)
	defer cancel()
	rep, res, err := h.push(ctx, acc, req, spool, size)
	logAttrs := []any{"repo", acc.RepoID, "by", acc.Principal, "refs", len(req.cmds), "bytes", size, "duration", time.Since(start)}
	if err != nil {
		var pe *pushError
		switch {
		case errors.As(err, &pe):
		case errors.Is(err, wal.ErrContention):
			pe = &pushError{http.StatusServiceUnavailable, "the repository is busy (too many concurrent pushes); nothing was changed, retry the push", err}
			w.Header().Set("Retry-After", "1")
			h.opts.Metrics.pushResult("contention")
		case errors.Is(err, wal.ErrRepoDeleted):
			pe = &pushError{http.StatusNotFound, "repository not found", err}
			h.opts.Metrics.pushResult("rejected")
		default:
			pe = &pushError{http.StatusInternalServerError, "internal error: the push may or may not have been applied; fetch to check", err}
			h.opts.Metrics.pushResult("error")
		}
		h.logger.Warn("push failed", append(logAttrs, "status", pe.status, "err", err)...)
		httpError(w, pe.status, pe.msg)
		return
	}
	if rep.failed() {
		h.opts.Metrics.pushResult("rejected")
		h.logger.Info("push rejected", append(logAttrs, "unpack", rep.unpack, "reasons", rep.reasons)...)
	} else {
		h.opts.Metrics.pushResult("ok")
		h.logger.Info("push committed", append(logAttrs, "seq", res.Seq, "entry", res.ULID.String(), "attempts", res.Attempts)...)
		if h.opts.OnCommit != nil && res.Seq > 0 {
			h.opts.OnCommit(acc, res)
		}
	}
	resultHeaders(w, svcReceive)
	if req.caps["report-status"] {
		writeReport(w, rep, req.caps["side-band-64k"])
	}
}

// maxDrain is how much of a refused push's body is read, at least, so
// that git gets to see the answer (tooLarge).
const maxDrain = 1 << 30

// errPushTooLarge is a push body beyond MaxPushBytes.
var errPushTooLarge = errors.New("push too large")

// spool copies the (decoded) body to a temporary file in the cache's
// scratch directory: a pack is never held in memory. It stops one byte
// past MaxPushBytes with errPushTooLarge, so a body that decompresses to
// far more is never written out.
func (h *Handler) spool(body io.Reader) (*os.File, int64, error) {
	dir, err := h.opts.Cache.TempDir()
	if err != nil {
		return nil, 0, &pushError{http.StatusInternalServerError, "internal error: no scratch space", err}
	}
	f, err := os.CreateTemp(dir, "push-*.spool")
	if err != nil {
		return nil, 0, &pushError{http.StatusInternalServerError, "internal error: no scratch space", err}
	}
	src := body
	if h.opts.MaxPushBytes > 0 {
		src = io.LimitReader(body, h.opts.MaxPushBytes+1)
	}
	n, err := io.Copy(f, src)
	if err != nil {
		return f, n, err
	}
	if h.opts.MaxPushBytes > 0 && n > h.opts.MaxPushBytes {
		return f, n, errPushTooLarge
	}
	return f, n, nil
}

// tooLarge refuses a push over MaxPushBytes in git's own terms: an unpack
// error in report-status, with a side-band message, so that the user sees
// the limit in git's output rather than a bare HTTP 413. git reads the
// answer only after it has sent its whole body (cut off earlier, it
// reports only "Connection reset by peer"), so the rest of the raw, still
// compressed body is read and discarded first, never decoded or stored:
// up to maxDrain or MaxPushBytes more bytes, whichever is more, while it
// keeps flowing (IOTimeout). A client sending even more is cut off.
func (h *Handler) tooLarge(w http.ResponseWriter, r *http.Request, spool *os.File, size int64) {
	h.opts.Metrics.pushResult("too_large")
	limit := h.opts.MaxPushBytes
	msg := fmt.Sprintf("push exceeds the maximum allowed size of %s (%d bytes)", humanBytes(limit), limit)
	h.logger.Warn("push refused: too large", "path", r.URL.Path, "limit", limit)
	req, err := parseCommands(io.NewSectionReader(spool, 0, size))
	if err != nil || !req.caps["report-status"] {
		httpError(w, http.StatusRequestEntityTooLarge, msg)
		return
	}
	drain := max(limit, maxDrain)
	n, err := io.CopyN(io.Discard, r.Body, drain)
	if err == nil && n == drain {
		w.Header().Set("Connection", "close")
	}
	rep := &report{unpack: msg, reasons: make([]string, len(req.cmds)),
		detail: []string{"error: " + msg, "error: split the push into smaller ones, or ask the operator to raise --max-push-bytes"}}
	for _, c := range req.cmds {
		rep.refs = append(rep.refs, c.Ref)
	}
	rep.failAll("unpacker error")
	resultHeaders(w, svcReceive)
	writeReport(w, rep, req.caps["side-band-64k"])
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
// error for failures answered with an HTTP status.
func (h *Handler) push(ctx context.Context, acc Access, req *pushRequest, spool *os.File, size int64) (*report, wal.Result, error) {
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
		}
		seen[c.Ref] = true
	}
	if rep.failed() {
		rep.atomic()
		return rep, res, nil
	}

	// 2. The repository as the log has it now.
	snap, err := h.opts.Cache.Materialize(ctx, acc.RepoID)
	if err != nil {
		if errors.Is(err, wal.ErrRepoDeleted) {
			return nil, res, err
		}
		return nil, res, fmt.Errorf("materialize: %w", err)
	}
	checkDF(snap.Index.Refs, req.cmds, rep)
	denyDeleteCurrent(snap.Index.Refs, req.cmds, rep)

	// 3. The pack, indexed against the repository's objects in a
	// quarantine: nothing reaches the cache before the commit.
	tmp, err := h.opts.Cache.TempDir()
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
	needPack := slices.ContainsFunc(req.cmds, func(c command) bool { return !c.isDelete() })
	packHash := ""
	if needPack && size > req.packOffset {
		packHash, err = h.indexPack(ctx, snap.Dir, env, spool, req.packOffset, size)
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
		if err := h.checkObjects(ctx, snap.Dir, env, req.cmds, req.shallow, rep); err != nil {
			return nil, res, err
		}
	}
	if rep.failed() {
		rep.atomic()
		return rep, res, nil
	}

	// 5. The commit point.
	ts := make([]wal.Transition, len(req.cmds))
	for i, c := range req.cmds {
		ts[i] = wal.Transition{Ref: c.Ref, Old: c.Old, New: c.New}
	}
	p := wal.Push{Transitions: ts, PushedBy: acc.Principal, Pack: strings.NewReader("")}
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
	res, err = h.opts.Log.Commit(ctx, acc.RepoID, p)
	h.opts.Metrics.observeAttempts(res.Attempts)
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
	if _, err := h.opts.Cache.Adopt(ctx, acc.RepoID, res.Seq, res.ULID, packDir, packHash); err != nil {
		h.logger.Warn("adopting a pushed pack into the cache failed", "repo", acc.RepoID, "err", err)
	}
	if _, err := h.opts.Cache.Materialize(ctx, acc.RepoID); err != nil {
		h.logger.Warn("materializing after a push failed; the next request retries", "repo", acc.RepoID, "err", err)
	}
	return rep, res, nil
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
// another branch without anyone asking (repocache.DefaultBranch).
func denyDeleteCurrent(refs []wal.Ref, cmds []command, rep *report) {
	head := repocache.DefaultBranch(refs)
	for i, c := range cmds {
		if c.isDelete() && c.Ref == head && rep.reasons[i] == "" {
			rep.reasons[i] = "deletion of the current branch prohibited"
		}
	}
}

// checkDF refuses a push that would leave both "a" and "a/b".
func checkDF(refs []wal.Ref, cmds []command, rep *report) {
	final := make(map[string]bool, len(refs)+len(cmds))
	for _, r := range refs {
		final[r.Name] = true
	}
	for _, c := range cmds {
		final[c.Ref] = !c.isDelete()
	}
	for i, c := range cmds {
		if c.isDelete() || rep.reasons[i] != "" {
			continue
		}
		for j := strings.LastIndexByte(c.Ref, '/'); j > 0; j = strings.LastIndexByte(c.Ref[:j], '/') {
			if final[c.Ref[:j]] {
				rep.reasons[i] = "ref conflicts with " + c.Ref[:j]
				break
			}
		}
		if rep.reasons[i] != "" {
			continue
		}
		for name, live := range final {
			if live && strings.HasPrefix(name, c.Ref+"/") {
				rep.reasons[i] = "ref conflicts with " + name
				break
			}
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
func (h *Handler) indexPack(ctx context.Context, dir string, env []string, spool *os.File, off, size int64) (string, error) {
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
	cmd := h.opts.Cache.Git().Command(ctx, dir, env, "index-pack", "--stdin", "--fix-thin", "--strict")
	cmd.Stdin = io.NewSectionReader(spool, off, size-off)
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
	return repocache.ParsePackName(string(out.Bytes()))
}

// checkObjects verifies, with the quarantine's objects visible, that every
// new id exists, that branches point at commits, and that everything the
// new ids reach is present (the connectivity check git receive-pack does).
//
// A push from a shallow repository that is not complete would need the
// server to record shallow roots, which it never does; git words that
// "shallow update not allowed".
func (h *Handler) checkObjects(ctx context.Context, dir string, env []string, cmds []command, shallow bool, rep *report) error {
	var in strings.Builder
	for _, c := range cmds {
		if !c.isDelete() {
			in.WriteString(c.New + "\n")
		}
	}
	out, err := h.opts.Cache.Git().Run(ctx, dir, env, strings.NewReader(in.String()), "cat-file", "--batch-check=%(objectname) %(objecttype)")
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
		_, err := h.opts.Cache.Git().Run(ctx, dir, env, strings.NewReader(strings.Join(ids, "\n")+"\n"),
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
