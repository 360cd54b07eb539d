package gitsvc

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/ghost-scm/ghost/internal/gitsvc/pktline"
	"github.com/ghost-scm/ghost/internal/pushprotect"
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
// malformed. git sends one per -o. It is push protection's limit, so
// that one number holds on every path: a push cannot carry options that
// protection would refuse to read.
const maxPushOptions = pushprotect.MaxOptions

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
	// server marks a push the server makes itself (ServerPush), which
	// may update refs/pull/*; a client's never is.
	server bool
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
