// Package client is a Go client of ghost's REST API (docs/design.md §7.6):
// what "ghost" commands use against a running server (--server,
// GHOST_SERVER, "ghost login"), and against the object store directly,
// where the same API is served in process (internal/api's WithOperator).
// Its errors are typed (*Error, matched with errors.Is against
// ErrNotFound, ErrUnauthenticated, ...), so callers branch on the kind of
// failure rather than on text.
//
// The wire types here are the client's own, not the server's: the API's
// JSON is a contract, and this package is one party to it. Its tests
// decode the real handler's answers strictly, so a field either side
// drops or renames fails them.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to one server with one token. It is safe for concurrent
// use.
type Client struct {
	base   *url.URL // scheme and host, and a path prefix when the server lives under one
	token  string
	hc     *http.Client
	agent  string
	strict bool // decode answers with unknown fields refused (tests)
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends requests through hc (TLS settings, timeouts).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithHandler serves every request in process by h, without a network:
// how the CLI works on the object store directly.
func WithHandler(h http.Handler) Option {
	return func(c *Client) { c.hc = &http.Client{Transport: handlerTransport{h}} }
}

// WithUserAgent sets the User-Agent of every request.
func WithUserAgent(ua string) Option { return func(c *Client) { c.agent = ua } }

// MaxResponseBytes bounds what one answer may hold: the API's pages are
// bounded (docs/adr/0090-bounded-serving.md), and a client must not be
// made to buffer without end by whatever answers at the URL.
const MaxResponseBytes = 16 << 20

// DefaultTimeout bounds one request when no http.Client is given.
const DefaultTimeout = time.Minute

// New returns a client of the server at server ("https://git.example.com",
// or with a path prefix) authenticating with token ("" for anonymous).
func New(server, token string, opts ...Option) (*Client, error) {
	u, err := ParseServer(server)
	if err != nil {
		return nil, err
	}
	c := &Client{base: u, token: token, hc: &http.Client{Timeout: DefaultTimeout}, agent: "ghost"}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// ParseServer checks a server URL: http or https, a host, no query,
// fragment or credentials (the token goes in its own setting, never in a
// URL that ends up in shell history and config files).
func ParseServer(server string) (*url.URL, error) {
	s := strings.TrimSpace(server)
	if s == "" {
		return nil, &Error{Kind: ErrInvalid, Message: "no server URL"}
	}
	if !strings.Contains(s, "://") {
		return nil, &Error{Kind: ErrInvalid, Message: fmt.Sprintf("server %q: want a URL such as https://git.example.com or http://127.0.0.1:8080", server)}
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, &Error{Kind: ErrInvalid, Message: fmt.Sprintf("server %q is not a URL", server)}
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, &Error{Kind: ErrInvalid, Message: fmt.Sprintf("server %q: want an http or https URL", server)}
	case u.Host == "":
		return nil, &Error{Kind: ErrInvalid, Message: fmt.Sprintf("server %q has no host", server)}
	case u.User != nil:
		return nil, &Error{Kind: ErrInvalid, Message: fmt.Sprintf("server %q holds credentials: give the token with GHOST_TOKEN or ghost login instead", u.Redacted())}
	case u.RawQuery != "" || u.Fragment != "":
		return nil, &Error{Kind: ErrInvalid, Message: fmt.Sprintf("server %q: no query or fragment, please", server)}
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// Server returns the server's URL as the client uses it.
func (c *Client) Server() string { return c.base.String() }

// The kinds of failure, for errors.Is. Every *Error is one of them.
var (
	ErrInvalid         = errors.New("invalid request")                         // 400, 413
	ErrUnauthenticated = errors.New("not authenticated")                       // 401
	ErrForbidden       = errors.New("forbidden")                               // 403
	ErrNotFound        = errors.New("not found")                               // 404
	ErrConflict        = errors.New("conflict")                                // 409; 405, 422 (a pull request's merge)
	ErrUnsupported     = errors.New("not supported by this server")            // 501
	ErrUnavailable     = errors.New("server unavailable")                      // 503, network failures
	ErrServer          = errors.New("server error")                            // other 5xx, unreadable answers
	ErrNotGhost        = errors.New("the server did not answer as ghost does") // not JSON
)

// Error is a failed request: the server's message and the kind of
// failure.
type Error struct {
	Kind    error  // one of the Err* values above
	Status  int    // the HTTP status; 0 when the request got no answer
	Message string // the server's message, or what went wrong
	Method  string
	Path    string
	Err     error // the transport's error, when there was no answer
}

func (e *Error) Error() string {
	switch {
	case e.Status == 0 && e.Err != nil:
		return e.Message + ": " + e.Err.Error()
	case e.Message != "":
		return e.Message
	}
	return e.Kind.Error()
}

// Is matches e's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the transport's error, if any.
func (e *Error) Unwrap() error { return e.Err }

func kindOf(status int) error {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return ErrInvalid
	case http.StatusUnauthorized:
		return ErrUnauthenticated
	case http.StatusForbidden:
		return ErrForbidden
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusConflict, http.StatusMethodNotAllowed, http.StatusUnprocessableEntity:
		return ErrConflict
	case http.StatusNotImplemented:
		return ErrUnsupported
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return ErrUnavailable
	}
	return ErrServer
}

// do sends one request and decodes the JSON answer into out (nil: none
// expected). body, when not nil, is sent as JSON.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) (int, error) {
	return c.doHeader(ctx, method, path, query, body, out, nil)
}

// doHeader is do that also hands back the response's header (when hdr
// is not nil), for the Link header of a paged list.
func (c *Client) doHeader(ctx context.Context, method, path string, query url.Values, body, out any, hdr *http.Header) (int, error) {
	u := *c.base
	u.Path = c.base.Path + path
	u.RawPath = c.base.Path + escapePath(path)
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("client: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, &Error{Kind: ErrInvalid, Message: "bad request: " + err.Error(), Method: method, Path: path}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.agent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, &Error{Kind: ErrUnavailable, Message: "cannot reach " + c.base.Redacted(), Method: method, Path: path, Err: err}
	}
	defer res.Body.Close()
	if hdr != nil {
		*hdr = res.Header
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, MaxResponseBytes+1))
	if err != nil {
		return res.StatusCode, &Error{Kind: ErrUnavailable, Status: res.StatusCode, Message: "reading the answer of " + c.base.Redacted(), Method: method, Path: path, Err: err}
	}
	if len(data) > MaxResponseBytes {
		return res.StatusCode, &Error{Kind: ErrServer, Status: res.StatusCode, Message: fmt.Sprintf("the answer of %s is larger than %d bytes", c.base.Redacted(), MaxResponseBytes), Method: method, Path: path}
	}
	isJSON := strings.HasPrefix(res.Header.Get("Content-Type"), "application/json")
	if res.StatusCode >= 400 {
		e := &Error{Kind: kindOf(res.StatusCode), Status: res.StatusCode, Method: method, Path: path}
		var eb struct {
			Error string `json:"error"`
		}
		if isJSON && json.Unmarshal(data, &eb) == nil && eb.Error != "" {
			e.Message = eb.Error
		} else {
			e.Message = fmt.Sprintf("%s %s: HTTP %d from %s (is it a ghost server?)", method, path, res.StatusCode, c.base.Redacted())
			if !isJSON {
				e.Kind = ErrNotGhost
			}
		}
		return res.StatusCode, e
	}
	if out == nil || res.StatusCode == http.StatusNoContent {
		return res.StatusCode, nil
	}
	if !isJSON {
		return res.StatusCode, &Error{Kind: ErrNotGhost, Status: res.StatusCode, Message: fmt.Sprintf("%s answered %s with %q, not JSON: is it a ghost server?", c.base.Redacted(), path, res.Header.Get("Content-Type")), Method: method, Path: path}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if c.strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(out); err != nil {
		return res.StatusCode, &Error{Kind: ErrServer, Status: res.StatusCode, Message: fmt.Sprintf("the answer to %s %s does not read as expected", method, path), Method: method, Path: path, Err: err}
	}
	return res.StatusCode, nil
}

// escapePath escapes each segment of a path made of segments the callers
// built with seg.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// handlerTransport serves requests with an http.Handler in process.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	if req.Body == nil {
		req.Body = http.NoBody
	}
	t.h.ServeHTTP(rec, req)
	return &http.Response{
		Status: strconv.Itoa(rec.code) + " " + http.StatusText(rec.code), StatusCode: rec.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.header, Body: io.NopCloser(&rec.body), ContentLength: int64(rec.body.Len()), Request: req,
	}, nil
}

// recorder is the ResponseWriter of an in-process request.
type recorder struct {
	header http.Header
	code   int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	if r.body.Len()+len(b) > MaxResponseBytes+1 {
		return 0, errors.New("client: in-process answer too large")
	}
	return r.body.Write(b)
}
