package githttp

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/ghost-scm/ghost/internal/githttp/pktline"
	"github.com/ghost-scm/ghost/internal/repocache"
)

// infoRefs answers GET info/refs?service=...: the ref advertisement, from
// a cache brought forward first so that the client judges fast-forwards
// against the log's current refs.
func (h *Handler) infoRefs(w http.ResponseWriter, r *http.Request, rt route, service string) {
	acc, ok := h.authorize(w, r, rt, service)
	if !ok {
		return
	}
	release, ok := h.admit(w, r)
	if !ok {
		return
	}
	defer release()
	if service == svcReceive {
		snap, err := h.opts.Cache.Materialize(r.Context(), acc.RepoID)
		if err != nil {
			h.materializeError(w, r, err)
			return
		}
		noCache(w)
		w.Header().Set("Content-Type", "application/x-"+service+"-advertisement")
		// Receive-pack speaks only protocol v0/v1.
		var b bufferWriter
		pktline.WriteString(&b, "# service="+service+"\n")
		pktline.WriteFlush(&b)
		writeReceiveAdvertisement(&b, snap.Index.Refs)
		w.Write(b.Bytes())
		return
	}
	proto := gitProtocol(r)
	var env []string
	if proto != "" {
		env = append(env, "GIT_PROTOCOL="+proto)
	}
	h.serveGit(w, r, acc.RepoID, "upload-pack advertisement", func(out *lazyWriter) {
		if !isV2(proto) {
			// git http-backend's framing: v0 clients expect the service
			// line; a v2 capability advertisement stands alone.
			pktline.WriteString(&out.prefix, "# service="+service+"\n")
			pktline.WriteFlush(&out.prefix)
		}
	}, func() {
		noCache(w)
		w.Header().Set("Content-Type", "application/x-"+service+"-advertisement")
	}, func(ctx context.Context, snap *repocache.Snapshot, out *lazyWriter) error {
		cmd := h.opts.Cache.Git().Command(ctx, snap.Dir, env, "upload-pack", "--stateless-rpc", "--advertise-refs", snap.Dir)
		cmd.Stdout = out
		return cmd.Wrap(cmd.Run())
	})
}

// uploadPack answers POST git-upload-pack by running git upload-pack
// against the cache. The request is read whole first (it is small, and
// bounded by MaxFetchRequestBytes and FetchRequestTimeout), so that a
// client trickling it in holds no git process and so that it can be
// replayed once after the cache healed; the response streams out.
func (h *Handler) uploadPack(w http.ResponseWriter, r *http.Request, acc Access) {
	if b, ok := r.Body.(*deadlineBody); ok && h.opts.FetchRequestTimeout > 0 {
		b.until = time.Now().Add(h.opts.FetchRequestTimeout)
	}
	body, err := requestBody(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	defer body.Close()
	req, err := readFetchRequest(body, max(h.opts.MaxFetchRequestBytes, 0), h.opts.Cache.TempDir)
	if err != nil {
		if status, msg, ok := bodyError(r, err); ok {
			w.Header().Set("Connection", "close")
			httpError(w, status, msg)
		}
		return
	}
	defer req.Close()
	if req.size == 4 && string(req.mem) == "0000" {
		// The probe git sends before a large request, to learn whether
		// authentication is needed.
		resultHeaders(w, svcUpload)
		w.WriteHeader(http.StatusOK)
		return
	}
	if err := checkPktLines(req.Reader()); err != nil {
		httpError(w, http.StatusBadRequest, "malformed upload-pack request: "+err.Error())
		return
	}
	release, ok := h.admit(w, r)
	if !ok {
		return
	}
	defer release()
	var env []string
	if proto := gitProtocol(r); proto != "" {
		env = append(env, "GIT_PROTOCOL="+proto)
	}
	h.serveGit(w, r, acc.RepoID, "upload-pack", func(out *lazyWriter) { out.flush = true },
		func() { resultHeaders(w, svcUpload) },
		func(ctx context.Context, snap *repocache.Snapshot, out *lazyWriter) error {
			cmd := h.opts.Cache.Git().Command(ctx, snap.Dir, env, "upload-pack", "--stateless-rpc", snap.Dir)
			cmd.Stdin = req.Reader()
			cmd.Stdout = out
			return cmd.Wrap(cmd.Run())
		})
}

// checkPktLines reports whether r is a well-formed sequence of pkt-lines
// with at least one packet, so that a malformed request is answered 400
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

// serveGit materializes the repository and runs git against it through
// run, which writes the response to out (prepared by setup; headers set
// by headers). When git fails, it may be the cache's fault (a pack
// damaged on disk): the repository is marked for verification, and when
// nothing has reached the client yet and verification did rebuild it, run
// goes once more. A failure after the response started can only be
// logged; the next request then finds the repository verified and healed
// (docs/adr/0016-cache-self-healing.md).
func (h *Handler) serveGit(w http.ResponseWriter, r *http.Request, repo, what string,
	setup func(*lazyWriter), headers func(), run func(context.Context, *repocache.Snapshot, *lazyWriter) error) {
	// A write that fails (the client is gone or too slow) cancels git at
	// once instead of leaving it to notice a broken pipe.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	snap, err := h.opts.Cache.Materialize(ctx, repo)
	if err != nil {
		h.materializeError(w, r, err)
		return
	}
	for attempt := 0; ; attempt++ {
		out := &lazyWriter{w: w, onError: cancel, hold: holdBack, headers: headers}
		setup(out)
		err := run(ctx, snap, out)
		if err == nil {
			if err := out.finish(); err != nil {
				h.logger.Info("git response not delivered", "path", r.URL.Path, "what", what, "err", err)
			}
			return
		}
		started, werr := out.abort()
		if werr != nil {
			// The client stopped reading (IOTimeout) or went away.
			h.logger.Info("git response not delivered", "path", r.URL.Path, "what", what, "err", werr)
			return
		}
		if ctx.Err() != nil {
			h.streamError(w, r, started, what, err)
			return
		}
		if !h.opts.Cache.Suspect(repo) || started || attempt > 0 {
			h.streamError(w, r, started, what, err)
			return
		}
		healed, herr := h.opts.Cache.Materialize(ctx, repo)
		if herr != nil || !healed.Healed {
			h.streamError(w, r, started, what, err)
			return
		}
		h.logger.Warn("git failed on a damaged cache; rebuilt it and retrying", "repo", repo, "what", what, "err", err)
		h.opts.Metrics.healRetry()
		snap = healed
	}
}

func resultHeaders(w http.ResponseWriter, service string) {
	noCache(w)
	w.Header().Set("Content-Type", "application/x-"+service+"-result")
}

// streamError reports a git process failure: as an HTTP error when nothing
// was sent yet, otherwise only in the log (the client sees a broken
// stream, which git reports as such).
func (h *Handler) streamError(w http.ResponseWriter, r *http.Request, started bool, what string, err error) {
	if r.Context().Err() != nil {
		h.logger.Info("git request canceled by the client", "path", r.URL.Path, "what", what)
		return
	}
	if !started {
		h.internalError(w, r, what, err)
		return
	}
	h.logger.Error("git stream failed", "path", r.URL.Path, "what", what, "err", err)
}

// requestBody returns the request body, gzip-decoded when the client said
// Content-Encoding: gzip (git does for large fetch negotiations).
func requestBody(r *http.Request) (io.ReadCloser, error) {
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
		return r.Body, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, fmt.Errorf("bad gzip request body: %w", err)
		}
		return struct {
			io.Reader
			io.Closer
		}{zr, r.Body}, nil
	default:
		return nil, fmt.Errorf("unsupported Content-Encoding %q", enc)
	}
}

// holdBack is how much of git's output, and for how long, is held
// before the response starts: while nothing has been sent a failure can
// still be answered with an HTTP status, and retried after healing the
// cache. Small responses thus go out whole; large ones start at most
// holdBackTime late, soon enough for progress and keep-alives.
const (
	holdBack     = 64 << 10
	holdBackTime = 3 * time.Second
)

// lazyWriter defers the response while git's output is small and young
// (holdBack), so that a git process that fails early can still be
// answered with an HTTP error status, or retried. It sets the headers and
// writes prefix before the first byte. Writes come from the goroutine
// copying git's stdout and from a timer, hence the mutex.
type lazyWriter struct {
	w       http.ResponseWriter
	headers func()
	prefix  bufferWriter
	flush   bool
	hold    int
	onError func()

	mu      sync.Mutex
	held    []byte
	timer   *time.Timer
	started bool
	aborted bool
	err     error
}

func (l *lazyWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return 0, l.err
	}
	if l.aborted {
		return 0, errAborted
	}
	if !l.started {
		l.held = append(l.held, b...)
		if len(l.held) <= l.hold {
			if l.timer == nil {
				l.timer = time.AfterFunc(holdBackTime, l.timeout)
			}
			return len(b), nil
		}
		if err := l.startLocked(); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	if err := l.writeLocked(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

var errAborted = errors.New("response abandoned")

func (l *lazyWriter) timeout() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started && !l.aborted && l.err == nil {
		l.startLocked()
	}
}

// startLocked sends the headers, the prefix and what was held.
func (l *lazyWriter) startLocked() error {
	l.started = true
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.headers != nil {
		l.headers()
	}
	b := append(l.prefix.b, l.held...)
	l.held = nil
	return l.writeLocked(b)
}

func (l *lazyWriter) writeLocked(b []byte) error {
	_, err := l.w.Write(b)
	if err == nil && l.flush {
		err = http.NewResponseController(l.w).Flush()
	}
	if err != nil {
		l.err = err
		if l.onError != nil {
			l.onError()
		}
	}
	return err
}

// finish sends what is still held (a prefix-only answer still needs its
// prefix) once git succeeded.
func (l *lazyWriter) finish() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if !l.started {
		return l.startLocked()
	}
	return nil
}

// abort drops what is held after git failed and reports whether any of
// the response had been sent, and the error that writing it met, if any.
func (l *lazyWriter) abort() (started bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
	l.aborted, l.held = true, nil
	return l.started, l.err
}

// bufferWriter is a minimal byte buffer for small protocol messages.
type bufferWriter struct{ b []byte }

func (b *bufferWriter) Write(p []byte) (int, error) {
	b.b = append(b.b, p...)
	return len(p), nil
}

func (b *bufferWriter) Bytes() []byte { return b.b }
