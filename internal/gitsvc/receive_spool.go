package gitsvc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

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
