// Package githttp maps git's smart HTTP protocol onto the git service
// (gitsvc, docs/design.md §6): routes, authorization and its challenges,
// gzip request bodies, connection deadlines, and HTTP status codes for
// what the service does not answer in git's protocol. Everything about
// running upload-pack and about a push (ghost's own receive-pack, with
// the write-ahead log as its commit point, docs/adr/0010-git-receive-pack.md)
// lives in gitsvc, which SSH shares (docs/adr/0018-git-service-boundary.md).
package githttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/httpx"
	"github.com/ghost-scm/ghost/internal/ids"
)

// Authorizer resolves a request's credentials and repository name. It is
// the one thing githttp needs from the metadata layer, kept this small so
// the transport does not depend on how tenants and tokens are stored.
type Authorizer interface {
	// Authorize authenticates token ("" for an anonymous caller) and
	// resolves owner/name (name without ".git"). It returns
	// access.ErrUnauthenticated for a token that is not valid,
	// access.ErrNotFound when no such repository exists,
	// access.ErrUnavailable when the rights could not be decided, and
	// otherwise the caller's grant (whose level may be access.None).
	Authorize(ctx context.Context, token, owner, name string) (access.Grant, error)
}

// ServiceOptions configure the git service a Handler runs
// (gitsvc.Options): the repositories, the log, the git binary, the push
// and fetch limits, the git slots, the logger and the metrics.
type ServiceOptions = gitsvc.Options

// Options configure a Handler.
type Options struct {
	ServiceOptions
	Auth Authorizer
	// AnonymousNotFound makes an anonymous read of a repository that is
	// not public answer 404 instead of 401. 404 hides nothing more (a
	// missing repository answers the same either way) but stops stock git
	// clients from ever sending credentials, since they only do so after a
	// 401: private repositories then cannot be cloned without an explicit
	// Authorization header. See docs/adr/0012-git-auth.md.
	AnonymousNotFound bool
}

// Handler serves /<owner>/<repo>[.git]/... git smart HTTP requests.
type Handler struct {
	opts   Options
	logger *slog.Logger
	svc    *gitsvc.Service
}

// NewHandler returns a git smart HTTP handler over a git service built
// from opts.ServiceOptions.
func NewHandler(opts Options) (*Handler, error) {
	if opts.Auth == nil {
		return nil, errors.New("githttp: Auth is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	svc, err := gitsvc.New(opts.ServiceOptions)
	if err != nil {
		return nil, fmt.Errorf("githttp: %w", err)
	}
	opts.Limits = opts.Limits.WithDefaults()
	return &Handler{opts: opts, logger: opts.Logger, svc: svc}, nil
}

// Service returns the git service the handler runs, for another
// transport to share (and with it the node's git slots).
func (h *Handler) Service() *gitsvc.Service { return h.svc }

const (
	svcUpload  = gitsvc.UploadPackService
	svcReceive = gitsvc.ReceivePackService
)

// route is a parsed request path.
type route struct {
	owner, name string
	action      string // "info/refs", svcUpload, svcReceive, or "dumb"
}

// parseRoute accepts an owner and repository only if ids.ValidateName
// does: one rule, so every repository that can be created can be reached.
func parseRoute(path string) (route, bool) {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(segs) < 3 {
		return route{}, false
	}
	rt := route{owner: segs[0], name: strings.TrimSuffix(segs[1], ".git")}
	if ids.ValidateName(rt.owner) != nil || ids.ValidateName(rt.name) != nil {
		return route{}, false
	}
	rest := strings.Join(segs[2:], "/")
	switch {
	case rest == "info/refs" || rest == svcUpload || rest == svcReceive:
		rt.action = rest
	case rest == "HEAD" || strings.HasPrefix(rest, "objects/") || strings.HasPrefix(rest, "info/"):
		rt.action = "dumb"
	default:
		return route{}, false
	}
	return rt, true
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	conn := &connIO{rc: http.NewResponseController(w), idle: max(h.opts.Limits.IOTimeout, 0)}
	sw := &httpx.StatusWriter{ResponseWriter: w, BeforeWrite: conn.writeDeadline}
	r.Body = &deadlineBody{ReadCloser: r.Body, conn: conn}
	// The response is flushed after the handler returns: that last write
	// gets a deadline of its own.
	defer conn.writeDeadline()
	rt, ok := parseRoute(r.URL.Path)
	service := rt.action
	if rt.action == "info/refs" {
		service = r.URL.Query().Get("service")
	}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			h.logger.Error("panic serving git request", "path", r.URL.Path, "panic", p)
			if !sw.Wrote() {
				httpError(sw, http.StatusInternalServerError, "internal error")
			}
		}
		d, status := time.Since(start), sw.Status
		if status == 0 {
			status = http.StatusOK
		}
		h.opts.Metrics.ObserveRequest(service, status, d)
		h.logger.Debug("git request", "method", r.Method, "path", r.URL.Path, "service", service, "status", status, "duration", d)
	}()
	if !ok {
		httpError(sw, http.StatusNotFound, "not found")
		return
	}
	switch rt.action {
	case "dumb":
		httpError(sw, http.StatusForbidden, "the dumb HTTP protocol is not supported; use a git client that speaks smart HTTP (git 1.6.6 or later)")
	case "info/refs":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(sw, "GET")
			return
		}
		switch service {
		case "":
			httpError(sw, http.StatusForbidden, "the dumb HTTP protocol is not supported; use a git client that speaks smart HTTP (git 1.6.6 or later)")
		case svcUpload, svcReceive:
			h.infoRefs(sw, r, rt, service)
		default:
			httpError(sw, http.StatusForbidden, fmt.Sprintf("unsupported service %q", service))
		}
	case svcUpload, svcReceive:
		if r.Method != http.MethodPost {
			methodNotAllowed(sw, "POST")
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-"+rt.action+"-request" {
			httpError(sw, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type must be application/x-%s-request", rt.action))
			return
		}
		acc, ok := h.authorize(sw, r, rt, rt.action)
		if !ok {
			return
		}
		if rt.action == svcUpload {
			h.uploadPack(sw, r, acc)
		} else {
			h.receivePack(sw, r, acc)
		}
	}
}

// authorize applies docs/design.md §7.4 and writes the refusal itself when the
// caller may not go on.
//
//   - A token that does not authenticate: 401.
//   - receive-pack: anonymous 401 (whether or not the repository exists);
//     unreadable or missing 404; readable but not writable 403.
//   - upload-pack: readable goes on; otherwise anonymous callers get 401
//     (or 404 with AnonymousNotFound) and authenticated ones 404.
//
// A private repository the caller cannot read is indistinguishable from
// one that does not exist.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, rt route, service string) (access.Grant, bool) {
	token := requestToken(r)
	anonymous := token == ""
	write := service == svcReceive
	g, err := h.opts.Auth.Authorize(r.Context(), token, rt.owner, rt.name)
	switch {
	case errors.Is(err, access.ErrUnauthenticated):
		challenge(w, "invalid credentials: the password must be a valid ghost access token")
		return access.Grant{}, false
	case errors.Is(err, access.ErrNotFound):
		g = access.Grant{} // decided as None: a missing repository answers as a private one
	case errors.Is(err, access.ErrUnavailable):
		h.logger.Error("git request failed", "what", "authorize", "path", r.URL.Path, "err", err)
		httpError(w, http.StatusServiceUnavailable, "storage is temporarily unavailable; try again later")
		return access.Grant{}, false
	case err != nil:
		h.internalError(w, r, "authorize", err)
		return access.Grant{}, false
	}
	err = access.Decide(g.Level, anonymous, write)
	switch {
	case err == nil:
		return g, true
	case errors.Is(err, access.ErrUnauthenticated) && write:
		challenge(w, "authentication required to push: use an access token with write scope as the password")
	case errors.Is(err, access.ErrUnauthenticated) && !h.opts.AnonymousNotFound:
		challenge(w, "authentication required: repository not found or not public")
	case errors.Is(err, access.ErrForbidden):
		httpError(w, http.StatusForbidden, fmt.Sprintf("your token may not push to %s/%s (it needs write access)", rt.owner, rt.name))
	default:
		notFound(w)
	}
	return access.Grant{}, false
}

// requestToken returns the caller's access token: the password of Basic
// auth (what stock git sends), or the token of "Authorization: Bearer"
// (what the API takes, and what git sends with http.extraHeader), or ""
// for an anonymous caller.
func requestToken(r *http.Request) string {
	if _, pw, ok := r.BasicAuth(); ok {
		return pw
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(tok)
	}
	return ""
}

func challenge(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Basic realm="ghost"`)
	httpError(w, http.StatusUnauthorized, msg)
}

func notFound(w http.ResponseWriter) { httpError(w, http.StatusNotFound, "repository not found") }

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	httpError(w, http.StatusMethodNotAllowed, "method not allowed")
}

func httpError(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}

func (h *Handler) internalError(w http.ResponseWriter, r *http.Request, what string, err error) {
	h.logger.Error("git request failed", "what", what, "path", r.URL.Path, "err", err)
	httpError(w, http.StatusInternalServerError, "internal error: "+what+" failed")
}

func noCache(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache, max-age=0, must-revalidate")
	h.Set("Pragma", "no-cache")
	h.Set("Expires", "Fri, 01 Jan 1980 00:00:00 GMT")
}

var gitProtocolValue = regexp.MustCompile(`^[A-Za-z0-9=:.,_-]{1,200}$`)

// gitProtocol returns the GIT_PROTOCOL value to pass through: the
// client's Git-Protocol header when it is well formed, else "".
func gitProtocol(r *http.Request) string {
	v := r.Header.Get("Git-Protocol")
	if !gitProtocolValue.MatchString(v) {
		return ""
	}
	return v
}
