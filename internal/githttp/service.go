package githttp

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/gitsvc/pktline"
)

// infoRefs answers GET info/refs?service=...: the ref advertisement
// (gitsvc.Service.AdvertiseRefs) in git http-backend's framing.
func (h *Handler) infoRefs(w http.ResponseWriter, r *http.Request, rt route, service string) {
	acc, ok := h.authorize(w, r, rt, service)
	if !ok {
		return
	}
	proto := ""
	if service == svcUpload {
		// Receive-pack speaks only protocol v0/v1.
		proto = gitProtocol(r)
	}
	out := &response{w: w, start: func(out *response) {
		noCache(w)
		w.Header().Set("Content-Type", "application/x-"+service+"-advertisement")
		if !gitsvc.IsV2(proto) {
			// v0 clients expect the service line; a v2 capability
			// advertisement stands alone.
			var b strings.Builder
			pktline.WriteString(&b, "# service="+service+"\n")
			pktline.WriteFlush(&b)
			out.w.Write([]byte(b.String()))
		}
	}}
	err := h.svc.AdvertiseRefs(r.Context(), service, gitsvc.Request{
		Repo: acc.RepoID, Principal: acc.Principal, Out: out, GitProtocol: proto, DefaultBranch: acc.DefaultBranch,
	})
	h.finish(w, r, service, out, err)
}

// uploadPack answers POST git-upload-pack (gitsvc.Service.UploadPack).
// The whole request must arrive within FetchRequestTimeout.
func (h *Handler) uploadPack(w http.ResponseWriter, r *http.Request, acc access.Grant) {
	if b, ok := r.Body.(*deadlineBody); ok && h.opts.Limits.FetchRequestTimeout > 0 {
		b.until = time.Now().Add(h.opts.Limits.FetchRequestTimeout)
	}
	body, err := requestBody(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	defer body.Close()
	out := &response{w: w, start: func(*response) { resultHeaders(w, svcUpload) }}
	err = h.svc.UploadPack(r.Context(), gitsvc.Request{
		Repo: acc.RepoID, Principal: acc.Principal, Body: body, Out: out, GitProtocol: gitProtocol(r),
		DefaultBranch: acc.DefaultBranch,
	})
	h.finish(w, r, svcUpload, out, err)
}

// receivePack answers POST git-receive-pack (gitsvc.Service.ReceivePack).
// A push over the size limit drains the raw, undecoded body.
func (h *Handler) receivePack(w http.ResponseWriter, r *http.Request, acc access.Grant) {
	body, err := requestBody(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	defer body.Close()
	out := &response{w: w, start: func(*response) { resultHeaders(w, svcReceive) }}
	req := gitsvc.GrantRequest(acc)
	req.Body, req.Out, req.Drain = body, out, r.Body
	err = h.svc.ReceivePack(r.Context(), req)
	h.finish(w, r, svcReceive, out, err)
}

// finish answers what the service left to the transport: the headers of
// an empty response, or the HTTP status for an error it returned before
// writing anything.
func (h *Handler) finish(w http.ResponseWriter, r *http.Request, service string, out *response, err error) {
	if err == nil {
		out.begin()
		return
	}
	var e *gitsvc.Error
	if !errors.As(err, &e) {
		e = &gitsvc.Error{Kind: gitsvc.Internal, Msg: "internal error", Err: err}
	}
	if out.started {
		return // the service logged it; the client sees a broken stream
	}
	switch e.Kind {
	case gitsvc.Canceled, gitsvc.Broken:
	case gitsvc.BadRequest:
		httpError(w, http.StatusBadRequest, e.Msg)
	case gitsvc.BodyError:
		status, msg, ok := bodyError(r, e.Err)
		if !ok {
			return
		}
		if service == svcReceive {
			msg = "reading the push: " + strings.TrimPrefix(msg, "reading the request: ")
		}
		w.Header().Set("Connection", "close")
		httpError(w, status, msg)
	case gitsvc.TooLarge:
		httpError(w, http.StatusRequestEntityTooLarge, e.Msg)
	case gitsvc.Busy, gitsvc.Contention:
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
		httpError(w, http.StatusServiceUnavailable, e.Msg)
	case gitsvc.NotFound:
		notFound(w)
	default:
		h.logger.Error("git request failed", "path", r.URL.Path, "service", service, "err", e)
		httpError(w, http.StatusInternalServerError, e.Msg)
	}
}

// response is the service's Out: it sets the headers (start) before the
// first byte, flushes on request and can close the connection after the
// response.
type response struct {
	w       http.ResponseWriter
	start   func(*response)
	started bool
}

func (o *response) begin() {
	if !o.started {
		o.started = true
		o.start(o)
	}
}

func (o *response) Write(b []byte) (int, error) {
	o.begin()
	return o.w.Write(b)
}

// Flush sends what is buffered to the client.
func (o *response) Flush() error { return http.NewResponseController(o.w).Flush() }

// CloseAfter closes the connection after the response (a client that
// keeps sending a refused push).
func (o *response) CloseAfter() { o.w.Header().Set("Connection", "close") }

func resultHeaders(w http.ResponseWriter, service string) {
	noCache(w)
	w.Header().Set("Content-Type", "application/x-"+service+"-result")
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
