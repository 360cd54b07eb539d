// Package lfstransfer serves Git LFS's pure SSH transfer protocol, the
// server side of "ssh host git-lfs-transfer <repo> upload|download"
// (git-lfs 3.0 and later): pkt-line framed commands (version, batch,
// put-object, verify-object, get-object, lock, list-lock, unlock, quit)
// over the SSH session's streams, so that LFS objects and locks need no
// HTTP at all (docs/adr/0125-lfs-transfer-over-ssh.md).
//
// The package only speaks the protocol. The objects and locks are the
// Repo's, which is the same code the HTTP Batch and Locks APIs call
// (lfs.Repo), so the verification (size and sha256 before an object
// counts), the per-object size limit and the lock records are the same
// whichever transport a client uses. Authorization is the caller's: it
// decides the session as a fetch (download) or a push (upload) before
// Serve runs, and Serve refuses the commands the session's operation
// does not allow.
//
// Everything a client controls is bounded: one pkt-line (65520 bytes),
// the arguments of a request (MaxArgs, each at most maxTextLine bytes),
// the objects of a batch (Options.MaxBatchItems) and an object's size
// (Repo.MaxObjectSize, checked before a byte is stored). Object bytes are
// streamed both ways; memory does not grow with an object's size.
package lfstransfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/gitsvc/pktline"
	"github.com/ghost-scm/ghost/internal/lfs"
)

// Repo is one repository's objects and locks as the session's caller
// sees them. lfs.Repo implements it; its errors are lfs's.
type Repo interface {
	MaxObjectSize() int64
	// Owner names the caller on the locks it takes ("" when anonymous).
	Owner() string
	Size(ctx context.Context, oid string) (int64, error)
	Open(ctx context.Context, oid string) (io.ReadCloser, int64, error)
	Put(ctx context.Context, oid string, size int64, body io.Reader) error
	Locks(ctx context.Context) ([]lfs.Lock, error)
	CreateLock(ctx context.Context, path string) (lfs.Lock, error)
	Unlock(ctx context.Context, id string, force bool) (lfs.Lock, error)
}

// Operation is the session's, as the command line names it.
type Operation string

// The operations git-lfs asks for.
const (
	Download Operation = "download"
	Upload   Operation = "upload"
)

// Options configure one session.
type Options struct {
	// Operation decides what the session may do: a download session
	// batches downloads, gets objects and lists locks; an upload session
	// batches uploads, puts and verifies objects, and takes, lists and
	// releases locks. The caller authorized it: read for download, write
	// for upload.
	Operation Operation
	// MaxBatchItems bounds the objects of one batch (0: lfs's
	// DefaultMaxBatchItems).
	MaxBatchItems int
	// Logger receives storage errors; nil discards them.
	Logger *slog.Logger
}

// MaxArgs bounds the arguments of one request: git-lfs sends at most
// four.
const MaxArgs = 32

// maxTextLine bounds a text packet: a command, an argument or a batch
// line. The longest a real client sends is a lock's path (at most 4096
// bytes) with its key.
const maxTextLine = 4096 + 64

// ErrProtocol is matched by the errors that end a session because the
// client broke the protocol: framing, or a request the server could not
// read to its end. Their messages are meant for the client.
var ErrProtocol = errors.New("git-lfs-transfer protocol error")

// Serve runs one session on r and w until the client quits (nil), its
// input ends (nil when it ends between requests), or it breaks the
// protocol so that the stream cannot be followed any more (an error
// matching ErrProtocol, after the client has been answered when it can
// be). A malformed request that can be read to its end is answered with
// an error status and changes nothing; the session goes on.
func Serve(ctx context.Context, r io.Reader, w io.Writer, repo Repo, opts Options) error {
	if opts.Operation != Download && opts.Operation != Upload {
		return fmt.Errorf("lfstransfer: operation %q, want download or upload", opts.Operation)
	}
	if opts.MaxBatchItems <= 0 {
		opts.MaxBatchItems = lfs.DefaultMaxBatchItems
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &session{ctx: ctx, in: pktline.NewReader(r), out: bufio.NewWriterSize(w, 64<<10), repo: repo, opts: opts}
	// The capability advertisement: protocol version 1, with locking.
	if err := s.advertise("version=1", "locking"); err != nil {
		return err
	}
	for {
		err := s.next()
		if errors.Is(err, errQuit) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

var errQuit = errors.New("quit")

type session struct {
	ctx     context.Context
	in      *pktline.Reader
	out     *bufio.Writer
	repo    Repo
	opts    Options
	version bool // "version 1" was accepted
}

// A status is an answer: its code, its arguments and either its lines
// (after a delim packet) or nothing.
type status struct {
	code  int
	args  []string
	lines []string
}

// fail is an error answer: the code and one line of message.
func fail(code int, format string, a ...any) *status {
	return &status{code: code, lines: []string{fmt.Sprintf(format, a...)}}
}

// readFailure is a request that could not be read: answered with its
// status when the request was read to its end (resync), else answered
// and the session ended.
type readFailure struct {
	st     *status
	resync bool
}

func (e *readFailure) Error() string { return e.st.lines[0] }

func badRequest(resync bool, format string, a ...any) error {
	return &readFailure{st: fail(400, format, a...), resync: resync}
}

// next reads and answers one request.
func (s *session) next() error {
	kind, payload, err := s.in.Next()
	if errors.Is(err, io.EOF) {
		return errQuit // the client went away between requests
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	if kind != pktline.Data {
		return s.fatal(badRequest(false, "expected a command, got a %s packet", kindName(kind)))
	}
	line, err := text(payload)
	if err != nil {
		return s.fatal(badRequest(false, "command: %v", err))
	}
	cmd, arg, _ := strings.Cut(line, " ")
	st, err := s.dispatch(cmd, arg)
	var rf *readFailure
	switch {
	case errors.As(err, &rf) && rf.resync:
		st, err = rf.st, nil // read to its end: answer and go on
	case errors.As(err, &rf):
		return s.fatal(err)
	case err != nil && !errors.Is(err, errQuit):
		return err
	}
	if st != nil {
		if werr := s.send(st); werr != nil {
			return werr
		}
	}
	return err
}

// fatal answers a request the session cannot go on after, and ends it.
func (s *session) fatal(err error) error {
	var rf *readFailure
	if errors.As(err, &rf) {
		_ = s.send(rf.st) // the client may not be reading; the error says it all
	}
	return fmt.Errorf("%w: %w", ErrProtocol, err)
}

func kindName(k pktline.Kind) string {
	switch k {
	case pktline.Flush:
		return "flush"
	case pktline.Delim:
		return "delim"
	case pktline.ResponseEnd:
		return "response-end"
	}
	return "data"
}

// text returns a text packet's line without its LF, refusing what no
// client sends: an overlong line or a NUL.
func text(p []byte) (string, error) {
	if len(p) > maxTextLine {
		return "", fmt.Errorf("a text line of %d bytes, at most %d", len(p), maxTextLine)
	}
	s := strings.TrimSuffix(string(p), "\n")
	if strings.ContainsRune(s, 0) {
		return "", errors.New("a NUL in a text line")
	}
	return s, nil
}

func (s *session) dispatch(cmd, arg string) (*status, error) {
	if cmd != "version" && cmd != "quit" && !s.version {
		return nil, s.skip(fmt.Sprintf("%s before version: send \"version 1\" first", cmd))
	}
	write := s.opts.Operation == Upload
	switch cmd {
	case "version":
		return s.versionCmd(arg)
	case "quit":
		if _, err := s.args(false); err != nil {
			return nil, err
		}
		return &status{code: 200}, errQuit
	case "batch":
		return s.batch(arg)
	case "put-object":
		if !write {
			return nil, s.skip("put-object needs an upload session")
		}
		return s.putObject(arg)
	case "verify-object":
		if !write {
			return nil, s.skip("verify-object needs an upload session")
		}
		return s.verifyObject(arg)
	case "get-object":
		if write {
			return nil, s.skip("get-object needs a download session")
		}
		return s.getObject(arg)
	case "lock":
		if !write {
			return nil, s.skip("lock needs an upload session")
		}
		return s.lock(arg)
	case "list-lock", "list-locks": // git-lfs 3.3 sends "list-locks" to verify
		return s.listLocks(arg)
	case "unlock":
		if !write {
			return nil, s.skip("unlock needs an upload session")
		}
		return s.unlock(arg)
	}
	return nil, s.skip(fmt.Sprintf("unknown command %q", truncate(cmd, 64)))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// skip reads the rest of a request it refuses (to its flush, through at
// most one delim and MaxArgs+1 packets) so that the next one can be read,
// and returns the refusal.
func (s *session) skip(msg string) error {
	for n := 0; n <= 2*MaxArgs; n++ {
		kind, _, err := s.in.Next()
		if err != nil {
			return badRequest(false, "%s; then: %v", msg, err)
		}
		if kind == pktline.Flush {
			return badRequest(true, "%s", msg)
		}
	}
	return badRequest(false, "%s; and the request goes on past %d packets", msg, 2*MaxArgs)
}

type argMap map[string]string

// args reads a request's key=value arguments up to a flush (delim:
// false) or a delim (delim: true, a request with a body after it).

func (s *session) args(delim bool) (argMap, error) {
	end, endName := pktline.Flush, "flush"
	if delim {
		end, endName = pktline.Delim, "delim"
	}
	m := argMap{}
	for {
		kind, payload, err := s.in.Next()
		if err != nil {
			return nil, badRequest(false, "reading arguments: %v", err)
		}
		switch {
		case kind == end:
			return m, nil
		case kind == pktline.Flush:
			// A delim was wanted: the request ended early, but in sync.
			return nil, badRequest(true, "the request ended before its %s packet", endName)
		case kind != pktline.Data:
			return nil, s.drain(fmt.Sprintf("unexpected %s packet among the arguments", kindName(kind)), delim)
		}
		line, err := text(payload)
		if err != nil {
			return nil, s.drain("argument: "+err.Error(), delim)
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !validKey(k) {
			return nil, s.drain(fmt.Sprintf("argument %q is not key=value", truncate(line, 64)), delim)
		}
		if _, dup := m[k]; dup {
			return nil, s.drain(fmt.Sprintf("argument %q given twice", k), delim)
		}
		if len(m) == MaxArgs {
			return nil, s.drain(fmt.Sprintf("more than %d arguments", MaxArgs), delim)
		}
		m[k] = v
	}
}

// drain skips the rest of a request whose arguments were bad: to its
// flush when it has no body; a request with a body
// (put-object's data, batch's lines) cannot be skipped cheaply, so the
// session ends.
func (s *session) drain(msg string, hasBody bool) error {
	if hasBody {
		return badRequest(false, "%s", msg)
	}
	return s.skip(msg)
}

// validKey is the spec's key: 1*(ALPHA | DIGIT | "-" | "_").
func validKey(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// parseSize parses a decimal size: digits only, no sign, fits an int64.
func parseSize(v string) (int64, bool) {
	if v == "" || len(v) > 19 {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

func (s *session) versionCmd(arg string) (*status, error) {
	if _, err := s.args(false); err != nil {
		return nil, err
	}
	if arg != "1" {
		return fail(400, "unsupported protocol version %q: this server speaks version 1", truncate(arg, 16)), nil
	}
	s.version = true
	return &status{code: 200}, nil
}

// storeFailure answers an error from the repository that is not one the
// client caused: an outage (503, retry) or a fault (500, logged; its
// details stay in the log).
func (s *session) storeFailure(what string, err error) *status {
	if lfs.StoreUnavailable(err) {
		s.opts.Logger.ErrorContext(s.ctx, "git-lfs-transfer failed", "what", what, "err", err)
		return fail(503, "storage is temporarily unavailable; try again later")
	}
	s.opts.Logger.ErrorContext(s.ctx, "git-lfs-transfer failed", "what", what, "err", err)
	return fail(500, "internal error: %s failed", what)
}

func (s *session) batch(arg string) (*status, error) {
	if arg != "" {
		return nil, s.skip("batch takes no operand")
	}
	args, err := s.args(true)
	if err != nil {
		return nil, err
	}
	// The object lines, parsed as they come: at most MaxBatchItems, each
	// "<oid> <size> [key=value ...]". A bad line is remembered and the
	// rest read to the flush, so that the answer is in sync.
	type item struct {
		oid  string
		size int64
	}
	var (
		items []item
		bad   string
	)
	for {
		kind, payload, err := s.in.Next()
		if err != nil {
			return nil, badRequest(false, "reading the batch: %v", err)
		}
		if kind == pktline.Flush {
			break
		}
		if len(items) >= s.opts.MaxBatchItems {
			return nil, &readFailure{st: fail(413, "at most %d objects per batch", s.opts.MaxBatchItems)}
		}
		if bad != "" {
			items = append(items, item{}) // counted, still bounded
			continue
		}
		if kind != pktline.Data {
			bad = fmt.Sprintf("unexpected %s packet among the objects", kindName(kind))
			continue
		}
		line, err := text(payload)
		if err != nil {
			bad = "object line: " + err.Error()
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			bad = fmt.Sprintf("object line %q: want <oid> <size>", truncate(line, 80))
			continue
		}
		size, ok := parseSize(f[1])
		switch {
		case !lfs.ValidOID(f[0]):
			bad = fmt.Sprintf("object line %q: oid must be a sha256 in lowercase hex", truncate(line, 80))
		case !ok:
			bad = fmt.Sprintf("object line %q: size must be a non-negative decimal integer", truncate(line, 80))
		}
		items = append(items, item{f[0], size})
	}
	if bad != "" {
		return fail(400, "%s", bad), nil
	}
	if h := args["hash-algo"]; h != "" && h != "sha256" {
		return fail(409, "only the sha256 hash algorithm is supported, not %q", truncate(h, 32)), nil
	}
	if t := args["transfer"]; t != "" && t != "ssh" {
		return fail(400, "only the ssh transfer is served here, not %q", truncate(t, 32)), nil
	}
	max := s.repo.MaxObjectSize()
	for _, it := range items {
		if it.size > max {
			return fail(413, "object %s is %d bytes, over the limit of %d bytes", it.oid, it.size, max), nil
		}
	}
	lines := make([]string, 0, len(items))
	for _, it := range items {
		have, err := s.repo.Size(s.ctx, it.oid)
		present := err == nil
		if err != nil && !errors.Is(err, lfs.ErrNoObject) {
			return s.storeFailure("read reference", err), nil
		}
		switch {
		case s.opts.Operation == Download && present:
			lines = append(lines, fmt.Sprintf("%s %d download", it.oid, have))
		case s.opts.Operation == Download:
			// No such object: nothing to do, as other servers answer.
			lines = append(lines, fmt.Sprintf("%s %d noop", it.oid, it.size))
		case present && have == it.size:
			lines = append(lines, fmt.Sprintf("%s %d noop", it.oid, it.size))
		default:
			lines = append(lines, fmt.Sprintf("%s %d upload", it.oid, it.size))
		}
	}
	return &status{code: 200, args: []string{"hash-algo=sha256"}, lines: lines}, nil
}

// oidOperand checks the oid a command names; verify-object may add the
// size after it, as the spec writes it.
func oidOperand(cmd, arg string) (string, string) {
	oid, _, sized := strings.Cut(arg, " ")
	if !lfs.ValidOID(oid) || sized && cmd != "verify-object" {
		return "", fmt.Sprintf("%s %q: the oid must be a sha256 in lowercase hex", cmd, truncate(arg, 80))
	}
	return oid, ""
}

func (s *session) putObject(arg string) (*status, error) {
	oid, msg := oidOperand("put-object", arg)
	args, err := s.args(true)
	if err != nil {
		return nil, err
	}
	// From here the data follows: a refusal ends the session, since
	// skipping up to an object's worth of data is not worth the wait.
	if msg != "" {
		return nil, badRequest(false, "%s", msg)
	}
	size, ok := parseSize(args["size"])
	if !ok {
		return nil, badRequest(false, "put-object needs size=<bytes>, a non-negative decimal integer")
	}
	body := &dataReader{in: s.in}
	err = s.repo.Put(s.ctx, oid, size, body)
	var st *status
	switch {
	case err == nil:
		st = &status{code: 200}
	case errors.Is(err, lfs.ErrCut), errors.Is(err, lfs.ErrOverrun):
		st = fail(400, "upload of %s: %s", oid, putMessage(err))
	case errors.Is(err, lfs.ErrHashMismatch):
		st = fail(422, "upload of %s: %s", oid, putMessage(err))
	case errors.Is(err, lfs.ErrTooLarge):
		st = fail(413, "upload of %s: %s", oid, putMessage(err))
	case errors.Is(err, lfs.ErrReadOnly):
		st = fail(403, "upload of %s: %v", oid, err)
	case errors.Is(err, lfs.ErrQuota):
		st = fail(507, "upload of %s: %v", oid, err)
	case errors.Is(err, lfs.ErrCollecting):
		st = fail(503, "upload of %s: %v", oid, err)
	default:
		st = s.storeFailure("store upload", err)
	}
	if !body.done {
		// The data did not end where its size said, or was not read to
		// its end: the stream is lost. Answer, if the client listens,
		// and end the session.
		switch {
		case errors.Is(body.err, io.ErrUnexpectedEOF):
			st = fail(400, "upload of %s: %s: the input ended after %d of %d bytes", oid, lfs.ErrCut.Error(), body.n, size)
		case body.err != nil:
			st = fail(400, "upload of %s: malformed data: %v", oid, body.err)
		}
		return nil, &readFailure{st: st}
	}
	return st, nil
}

// putMessage is what a client is told of a refused upload: the reason
// without the store's own chain.
func putMessage(err error) string {
	if errors.Is(err, lfs.ErrHashMismatch) {
		return err.Error() // "... they hash to X, not Y"
	}
	for _, e := range []error{lfs.ErrCut, lfs.ErrOverrun, lfs.ErrTooLarge} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return "not stored"
}

// dataReader reads put-object's data packets up to their flush, which it
// consumes (done); any other packet is a protocol error.
type dataReader struct {
	in   *pktline.Reader
	buf  []byte
	n    int64 // bytes read
	done bool
	err  error
}

func (d *dataReader) Read(p []byte) (int, error) {
	for len(d.buf) == 0 {
		switch {
		case d.done:
			return 0, io.EOF
		case d.err != nil:
			return 0, d.err
		}
		kind, payload, err := d.in.Next()
		switch {
		case errors.Is(err, io.EOF):
			d.err = io.ErrUnexpectedEOF
		case err != nil:
			d.err = err
		case kind == pktline.Flush:
			d.done = true
		case kind != pktline.Data:
			d.err = fmt.Errorf("a %s packet in the data", kindName(kind))
		default:
			d.buf = payload // valid until the next Next, which drains it first
		}
	}
	n := copy(p, d.buf)
	d.buf = d.buf[n:]
	d.n += int64(n)
	return n, nil
}

func (s *session) verifyObject(arg string) (*status, error) {
	oid, msg := oidOperand("verify-object", arg)
	args, err := s.args(false)
	if err != nil {
		return nil, err
	}
	if msg != "" {
		return fail(400, "%s", msg), nil
	}
	sizeArg := args["size"]
	if _, v, ok := strings.Cut(arg, " "); ok { // "verify-object <oid> <size>", as the spec writes it
		sizeArg = v
	}
	size, ok := parseSize(sizeArg)
	if !ok {
		return fail(400, "verify-object needs the object's size, a non-negative decimal integer"), nil
	}
	have, err := s.repo.Size(s.ctx, oid)
	switch {
	case errors.Is(err, lfs.ErrNoObject):
		return fail(404, "object %s does not exist", oid), nil
	case err != nil:
		return s.storeFailure("read reference", err), nil
	case have != size:
		return fail(409, "object %s is %d bytes, not %d", oid, have, size), nil
	}
	return &status{code: 200}, nil
}

// getObject answers status 200, size=<n>, a delim, the object's bytes in
// data packets and a flush. A store that fails once the bytes have begun
// ends the session: the answer cannot be taken back, and the client,
// which hashes what it gets, must not mistake it for the object.
func (s *session) getObject(arg string) (*status, error) {
	oid, msg := oidOperand("get-object", arg)
	if _, err := s.args(false); err != nil {
		return nil, err
	}
	if msg != "" {
		return fail(400, "%s", msg), nil
	}
	rc, size, err := s.repo.Open(s.ctx, oid)
	switch {
	case errors.Is(err, lfs.ErrNoObject):
		return fail(404, "object %s does not exist", oid), nil
	case err != nil:
		return s.storeFailure("read object", err), nil
	}
	defer rc.Close()
	if err := s.writeStatusHead(200, []string{fmt.Sprintf("size=%d", size)}); err != nil {
		return nil, err
	}
	if err := pktline.WriteDelim(s.out); err != nil {
		return nil, err
	}
	buf := make([]byte, pktline.MaxData)
	var sent int64
	for {
		n, rerr := io.ReadFull(rc, buf)
		if n > 0 {
			sent += int64(n)
			if err := pktline.Write(s.out, buf[:n]); err != nil {
				return nil, err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			s.opts.Logger.ErrorContext(s.ctx, "git-lfs-transfer download cut", "oid", oid, "err", rerr)
			return nil, fmt.Errorf("lfstransfer: reading object %s after %d bytes: %w", oid, sent, rerr)
		}
	}
	if sent != size {
		return nil, fmt.Errorf("lfstransfer: object %s gave %d bytes, its reference says %d", oid, sent, size)
	}
	if err := pktline.WriteFlush(s.out); err != nil {
		return nil, err
	}
	return nil, s.out.Flush()
}

func lockArgs(l lfs.Lock) []string {
	return []string{"id=" + l.ID, "path=" + l.Path, "locked-at=" + l.LockedAt.UTC().Format(time.RFC3339), "ownername=" + l.Owner.Name}
}

func (s *session) lock(arg string) (*status, error) {
	if arg != "" {
		return nil, s.skip("lock takes no operand; the path is an argument")
	}
	args, err := s.lockRequestArgs()
	if err != nil {
		return nil, err
	}
	l, err := s.repo.CreateLock(s.ctx, args["path"])
	var exists *lfs.LockExistsError
	switch {
	case errors.As(err, &exists):
		return &status{code: 409, args: lockArgs(exists.Lock), lines: []string{"already created lock"}}, nil
	case errors.Is(err, lfs.ErrBadLockPath), errors.Is(err, lfs.ErrTooManyLocks):
		return fail(422, "%s", err.Error()), nil
	case errors.Is(err, lfs.ErrReadOnly):
		return fail(403, "%v", err), nil
	case err != nil:
		return s.storeFailure("write locks", err), nil
	}
	return &status{code: 201, args: lockArgs(l)}, nil
}

// lockRequestArgs reads lock's arguments: the spec puts a delim before
// the flush, git-lfs sends none; both are accepted.
func (s *session) lockRequestArgs() (argMap, error) {
	m := argMap{}
	for {
		kind, payload, err := s.in.Next()
		if err != nil {
			return nil, badRequest(false, "reading arguments: %v", err)
		}
		switch kind {
		case pktline.Flush:
			return m, nil
		case pktline.Delim:
			if k, _, err := s.in.Next(); err != nil || k != pktline.Flush {
				return nil, s.skip("lock: a delim packet must be followed by the flush")
			}
			return m, nil
		case pktline.Data:
		default:
			return nil, s.skip(fmt.Sprintf("unexpected %s packet among the arguments", kindName(kind)))
		}
		line, err := text(payload)
		if err != nil {
			return nil, s.skip("argument: " + err.Error())
		}
		k, v, ok := strings.Cut(line, "=")
		switch _, dup := m[k]; {
		case !ok || !validKey(k):
			return nil, s.skip(fmt.Sprintf("argument %q is not key=value", truncate(line, 64)))
		case dup:
			return nil, s.skip(fmt.Sprintf("argument %q given twice", k))
		case len(m) == MaxArgs:
			return nil, s.skip(fmt.Sprintf("more than %d arguments", MaxArgs))
		}
		m[k] = v
	}
}

func (s *session) listLocks(arg string) (*status, error) {
	if arg != "" {
		return nil, s.skip("list-lock takes no operand")
	}
	args, err := s.args(false)
	if err != nil {
		return nil, err
	}
	limit, ok := lfs.ParseLimit(args["limit"])
	if !ok {
		return fail(400, "limit must be a positive integer"), nil
	}
	all, err := s.repo.Locks(s.ctx)
	if err != nil {
		return s.storeFailure("read locks", err), nil
	}
	if p, id := args["path"], args["id"]; p != "" || id != "" {
		var kept []lfs.Lock
		for _, l := range all {
			if (p == "" || l.Path == p) && (id == "" || l.ID == id) {
				kept = append(kept, l)
			}
		}
		all = kept
	}
	locks, next := lfs.Page(all, args["cursor"], limit)
	st := &status{code: 200, lines: make([]string, 0, 5*len(locks))}
	if next != "" {
		st.args = []string{"next-cursor=" + next}
	}
	me := s.repo.Owner()
	for _, l := range locks {
		st.lines = append(st.lines,
			"lock "+l.ID,
			"path "+l.ID+" "+l.Path,
			"locked-at "+l.ID+" "+l.LockedAt.UTC().Format(time.RFC3339),
			"ownername "+l.ID+" "+l.Owner.Name)
		if s.opts.Operation == Upload { // a writer verifying before a push
			who := "theirs"
			if me != "" && l.Owner.Name == me {
				who = "ours"
			}
			st.lines = append(st.lines, "owner "+l.ID+" "+who)
		}
	}
	return st, nil
}

func (s *session) unlock(arg string) (*status, error) {
	args, err := s.args(false)
	if err != nil {
		return nil, err
	}
	force := false
	switch args["force"] {
	case "", "false":
	case "true":
		force = true
	default:
		return fail(400, "force must be true or false"), nil
	}
	l, err := s.repo.Unlock(s.ctx, arg, force)
	switch {
	case errors.Is(err, lfs.ErrNoLock):
		return fail(404, "lock %s not found", truncate(arg, 64)), nil
	case errors.Is(err, lfs.ErrReadOnly):
		return fail(403, "%v", err), nil
	case errors.Is(err, lfs.ErrNotLockOwner):
		return fail(403, "the lock on %s belongs to %s: unlock with --force to break it", l.Path, l.Owner.Name), nil
	case err != nil:
		return s.storeFailure("write locks", err), nil
	}
	return &status{code: 200, args: lockArgs(l)}, nil
}

// advertise writes the capabilities, one a line, and a flush.
func (s *session) advertise(lines ...string) error {
	for _, l := range lines {
		if err := pktline.WriteString(s.out, l+"\n"); err != nil {
			return err
		}
	}
	if err := pktline.WriteFlush(s.out); err != nil {
		return err
	}
	return s.out.Flush()
}

func (s *session) writeStatusHead(code int, args []string) error {
	if err := pktline.WriteString(s.out, fmt.Sprintf("status %03d\n", code)); err != nil {
		return err
	}
	for _, a := range args {
		if err := pktline.WriteString(s.out, a+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// send writes a status answer: the status, its arguments, then its lines
// after a delim (when it has any, or is an error, whose message git-lfs
// reads after the delim), and a flush.
func (s *session) send(st *status) error {
	if err := s.writeStatusHead(st.code, st.args); err != nil {
		return err
	}
	if st.lines != nil {
		if err := pktline.WriteDelim(s.out); err != nil {
			return err
		}
		for _, l := range st.lines {
			if err := pktline.WriteString(s.out, l+"\n"); err != nil {
				return err
			}
		}
	}
	if err := pktline.WriteFlush(s.out); err != nil {
		return err
	}
	return s.out.Flush()
}
