package githttp

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/ghost-scm/ghost/internal/githttp/pktline"
)

// infoRefs answers GET info/refs?service=...: the ref advertisement, from
// a cache brought forward first so that the client judges fast-forwards
// against the log's current refs.
func (h *Handler) infoRefs(w http.ResponseWriter, r *http.Request, rt route, service string) {
	acc, ok := h.authorize(w, r, rt, service)
	if !ok {
		return
	}
	snap, err := h.opts.Cache.Materialize(r.Context(), acc.RepoID)
	if err != nil {
		h.materializeError(w, r, err)
		return
	}
	noCache(w)
	w.Header().Set("Content-Type", "application/x-"+service+"-advertisement")
	if service == svcReceive {
		// Receive-pack speaks only protocol v0/v1.
		var b bufferWriter
		pktline.WriteString(&b, "# service="+service+"\n")
		pktline.WriteFlush(&b)
		writeReceiveAdvertisement(&b, snap.Index.Refs)
		w.Write(b.Bytes())
		return
	}
	proto := gitProtocol(r)
	out := &lazyWriter{w: w}
	if !isV2(proto) {
		// git http-backend's framing: v0 clients expect the service line;
		// a v2 capability advertisement stands alone.
		pktline.WriteString(&out.prefix, "# service="+service+"\n")
		pktline.WriteFlush(&out.prefix)
	}
	var env []string
	if proto != "" {
		env = append(env, "GIT_PROTOCOL="+proto)
	}
	cmd := h.opts.Cache.Git().Command(r.Context(), snap.Dir, env, "upload-pack", "--stateless-rpc", "--advertise-refs", snap.Dir)
	cmd.Stdout = out
	if err := cmd.Run(); err != nil {
		h.streamError(w, r, out, "upload-pack advertisement", cmd.Wrap(err))
		return
	}
	out.Write(nil) // a prefix-only answer still needs its prefix
}

// uploadPack answers POST git-upload-pack by running git upload-pack
// against the cache, streaming the request in and the response out.
func (h *Handler) uploadPack(w http.ResponseWriter, r *http.Request, acc Access) {
	body, err := requestBody(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	defer body.Close()
	br := bufio.NewReaderSize(body, 64<<10)
	if probe, err := isFlushProbe(br); err != nil {
		httpError(w, http.StatusBadRequest, "reading request: "+err.Error())
		return
	} else if probe {
		resultHeaders(w, svcUpload)
		w.WriteHeader(http.StatusOK)
		return
	}
	snap, err := h.opts.Cache.Materialize(r.Context(), acc.RepoID)
	if err != nil {
		h.materializeError(w, r, err)
		return
	}
	var env []string
	if proto := gitProtocol(r); proto != "" {
		env = append(env, "GIT_PROTOCOL="+proto)
	}
	resultHeaders(w, svcUpload)
	out := &lazyWriter{w: w, flush: true}
	cmd := h.opts.Cache.Git().Command(r.Context(), snap.Dir, env, "upload-pack", "--stateless-rpc", snap.Dir)
	cmd.Stdin = br
	cmd.Stdout = out
	if err := cmd.Run(); err != nil {
		h.streamError(w, r, out, "upload-pack", cmd.Wrap(err))
	}
}

func resultHeaders(w http.ResponseWriter, service string) {
	noCache(w)
	w.Header().Set("Content-Type", "application/x-"+service+"-result")
}

// streamError reports a git process failure: as an HTTP error when nothing
// was sent yet, otherwise only in the log (the client sees a broken
// stream, which git reports as such).
func (h *Handler) streamError(w http.ResponseWriter, r *http.Request, out *lazyWriter, what string, err error) {
	if r.Context().Err() != nil {
		h.logger.Info("git request canceled by the client", "path", r.URL.Path, "what", what)
		return
	}
	if !out.started {
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

// isFlushProbe reports whether the body is exactly "0000": the probe git
// sends before a large request to learn whether authentication is needed.
func isFlushProbe(br *bufio.Reader) (bool, error) {
	b, err := br.Peek(5)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return len(b) == 4 && string(b) == "0000", nil
}

// lazyWriter defers the response until the first byte, so that a git
// process that fails before writing anything can still be answered with
// an HTTP error status. It writes prefix before the first byte.
type lazyWriter struct {
	w       http.ResponseWriter
	prefix  bufferWriter
	flush   bool
	started bool
}

func (l *lazyWriter) Write(b []byte) (int, error) {
	if !l.started {
		l.started = true
		if len(l.prefix.b) > 0 {
			if _, err := l.w.Write(l.prefix.b); err != nil {
				return 0, err
			}
		}
	}
	n, err := l.w.Write(b)
	if err == nil && l.flush {
		err = http.NewResponseController(l.w).Flush()
	}
	return n, err
}

// bufferWriter is a minimal byte buffer for small protocol messages.
type bufferWriter struct{ b []byte }

func (b *bufferWriter) Write(p []byte) (int, error) {
	b.b = append(b.b, p...)
	return len(p), nil
}

func (b *bufferWriter) Bytes() []byte { return b.b }
