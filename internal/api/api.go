// Package api is ghost's JSON REST API for tenants, tokens, SSH keys,
// repositories and their secret-scanning alerts (alerts.go), served under
// /api/ next to the git smart-HTTP endpoints.
//
// Authentication is the same as for git (docs/design.md §7.6): HTTP Basic with the
// access token as the password (the username is ignored, so git credential
// helpers work unchanged), or "Authorization: Bearer <token>". A request
// without credentials is anonymous; bad credentials are always 401, never
// silently anonymous, so a mistyped token is noticed.
//
// Errors are {"error": "..."} with one status per error kind: 400 invalid
// input, 401 missing or bad credentials (with WWW-Authenticate), 403
// authenticated but not allowed, 404 absent, 409 exists (or a tenant to
// delete still owns repositories), 503 storage unavailable. Messages are
// in plain words: never Go type names or internal error chains. A private
// repository the caller may not read is 404, exactly like an absent one,
// so the API never confirms that a private name exists.
package api

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"reflect"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/pulls"
)

// MaxBodyBytes bounds every request body: API requests are a few fields,
// and an unbounded body would let any client make the server buffer
// arbitrary amounts.
const MaxBodyBytes = 1 << 20

type handler struct {
	// operator, when set, is every request's principal: the CLI working
	// on the store directly (WithOperator).
	operator *meta.Principal
	store    *meta.Store
	alerts   *alerts.Store  // nil: the alert endpoints answer 501
	scans    Scans          // nil: the scan endpoints answer 501
	hooks    Hooks          // nil: the webhook endpoints answer 501
	pulls    *pulls.Service // nil: the pull-request endpoints answer 501
	lfs      LFSLister      // nil: the LFS listing answers 501
	log      *slog.Logger
	mux      *http.ServeMux
}

// NewHandler returns the API handler. It serves paths under /api/ and
// expects to be mounted there with the path intact (not stripped). A nil
// logger discards logs. Options add optional parts, such as the alert
// endpoints (WithAlerts).
func NewHandler(s *meta.Store, logger *slog.Logger, opts ...Option) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{store: s, log: logger, mux: http.NewServeMux()}
	for _, o := range opts {
		o(h)
	}
	h.route("GET /api/user", h.user)
	h.route("GET /api/user/orgs", h.userOrgs)
	h.route("GET /api/repos", h.publicRepos)
	h.route("POST /api/tenants", h.createTenant)
	h.route("GET /api/tenants", h.listTenants)
	h.route("DELETE /api/tenants/{tenant}", h.deleteTenant)
	h.route("POST /api/tenants/{tenant}/members", h.addMember)
	h.route("DELETE /api/tenants/{tenant}/members/{user}", h.removeMember)
	h.route("POST /api/tenants/{tenant}/tokens", h.createToken)
	h.route("GET /api/tenants/{tenant}/tokens", h.listTokens)
	h.route("DELETE /api/tenants/{tenant}/tokens/{id}", h.revokeToken)
	h.route("POST /api/tenants/{tenant}/keys", h.addSSHKey)
	h.route("GET /api/tenants/{tenant}/keys", h.listSSHKeys)
	h.route("DELETE /api/tenants/{tenant}/keys/{fingerprint...}", h.removeSSHKey)
	h.route("GET /api/repos/{owner}", h.listRepos)
	h.route("POST /api/repos/{owner}", h.createRepo)
	h.route("GET /api/repos/{owner}/{name}", h.getRepo)
	h.route("DELETE /api/repos/{owner}/{name}", h.deleteRepo)
	h.route("PATCH /api/repos/{owner}/{name}", h.patchRepo)
	h.route("POST /api/repos/{owner}/{name}/fork", h.forkRepo)
	h.routeAlerts()
	h.routeScans()
	h.routeHooks()
	h.routePulls()
	h.routeBranchRules()
	h.routePullNotes()
	h.routeLFS()
	return h
}

// apiFunc is an endpoint: it returns the status and body to send, or an
// error that writeError maps to one.
type apiFunc func(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error)

func (h *handler) route(pattern string, fn apiFunc) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		p, err := h.principal(r)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		status, body, err := fn(w, r, p)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		writeJSON(w, status, body)
	})
}

// ServeHTTP routes to the endpoints, answering unknown paths and methods
// in JSON too.
//
// A path that cleaning would change (".." or "." segments, "//", a
// trailing slash) is not found, where a mux would redirect to the cleaned
// path: "/api/repos/alice/.." must not land on GET /api/repos.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; p != path.Clean(p) {
		writeJSON(w, http.StatusNotFound, errorBody{Error: strings.ToLower(http.StatusText(http.StatusNotFound))})
		return
	}
	if _, pattern := h.mux.Handler(r); pattern == "" {
		// No route: let the mux decide between 404 and 405 (and set
		// Allow), but answer in JSON like every other error.
		h.mux.ServeHTTP(&jsonStatus{ResponseWriter: w}, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// jsonStatus replaces the mux's plain-text 404/405 bodies with JSON.
type jsonStatus struct {
	http.ResponseWriter
	wrote bool
}

// WriteHeader sends code with a JSON error body instead of the mux's text.
func (j *jsonStatus) WriteHeader(code int) {
	if j.wrote {
		return
	}
	j.wrote = true
	writeJSON(j.ResponseWriter, code, errorBody{Error: strings.ToLower(http.StatusText(code))})
}

// Write discards the mux's plain-text body.
func (j *jsonStatus) Write(b []byte) (int, error) {
	if !j.wrote {
		j.WriteHeader(http.StatusOK)
	}
	return len(b), nil // the plain-text body is dropped
}

type errorBody struct {
	Error string `json:"error"`
}

// errNoCredentials is returned by endpoints that need credentials when
// the request has none.
var errNoCredentials = fmt.Errorf("%w: credentials required: use HTTP Basic with a token as the password, or a Bearer token", meta.ErrUnauthenticated)

// principal authenticates the request. No Authorization header means
// anonymous (nil); a header that is present but unusable is an error.
func (h *handler) principal(r *http.Request) (*meta.Principal, error) {
	if h.operator != nil {
		p := *h.operator
		return &p, nil
	}
	authz := r.Header.Get("Authorization")
	if authz == "" {
		return nil, nil
	}
	var token string
	if _, pass, ok := r.BasicAuth(); ok {
		token = pass
	} else if scheme, rest, ok := strings.Cut(authz, " "); ok && strings.EqualFold(scheme, "Bearer") {
		token = strings.TrimSpace(rest)
	} else {
		return nil, fmt.Errorf("%w: unsupported Authorization scheme", meta.ErrUnauthenticated)
	}
	p, err := h.store.Authenticate(r.Context(), token)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := status(err)
	msg := err.Error()
	if code >= 500 {
		h.log.ErrorContext(r.Context(), "api request failed", "method", r.Method, "path", r.URL.Path, "status", code, "err", err)
		switch {
		case errors.Is(err, meta.ErrUnavailable):
			// The chain names object keys and the store's own error: for
			// the log, not for clients.
			msg = "storage is temporarily unavailable; try again later"
		case code != http.StatusServiceUnavailable && code != http.StatusNotImplemented:
			msg = "internal error"
		}
	}
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="ghost"`)
	}
	writeJSON(w, code, errorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Del("Content-Length")
	w.WriteHeader(code)
	if body == nil || code == http.StatusNoContent {
		return
	}
	_ = json.NewEncoder(w).Encode(body) // the status is sent; a write error means the client left
}

// decode reads exactly one JSON object into v: bounded in size, no unknown
// fields (a typo such as "publc" must fail, not silently do nothing), no
// trailing data. Its errors are in plain words (see jsonProblem): never
// encoding/json's, which name Go types and struct fields.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLargeError{err}
		}
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: empty request body, want a JSON object", meta.ErrInvalidArgument)
		}
		return fmt.Errorf("%w: request body: %s", meta.ErrInvalidArgument, jsonProblem(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: request body: data after the JSON object", meta.ErrInvalidArgument)
	}
	return nil
}

// tooLargeError reports a body over MaxBodyBytes in plain words; it wraps
// the *http.MaxBytesError (for status) without showing its text.
type tooLargeError struct{ err error }

func (e tooLargeError) Error() string {
	return fmt.Sprintf("request body larger than %d bytes", MaxBodyBytes)
}

func (e tooLargeError) Unwrap() error { return e.err }

// jsonProblem describes a decoding error for the client who sent the
// body. encoding/json's own messages ("json: cannot unmarshal string into
// Go struct field .public of type bool") name Go types and are not for
// API users, so they never leave the server; the error is deliberately
// not wrapped.
func jsonProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return "must be a JSON object"
		}
		return fmt.Sprintf("field %q must be %s", typeErr.Field, jsonKind(typeErr.Type))
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("not valid JSON (at byte %d)", syntaxErr.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "not valid JSON (it ends too early)"
	}
	// DisallowUnknownFields reports an unknown field with an untyped
	// error whose text is the only way to tell it apart.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "unknown field " + name
	}
	return "not a valid JSON object"
}

// jsonKind names the JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a different kind of value"
	}
	if t.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "a different kind of value"
}

// Wire forms. They are separate from the meta types so the API's JSON is
// a deliberate contract, not whatever the store's structs happen to be.

type tenantJSON struct {
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	CreatedAt time.Time `json:"created_at"`
}

func toTenant(t meta.Tenant) tenantJSON {
	return tenantJSON{Name: t.Name, Kind: t.Kind, CreatedAt: t.CreatedAt}
}

type repoJSON struct {
	ID         string    `json:"id"`
	Owner      string    `json:"owner"`
	Name       string    `json:"name"`
	FullName   string    `json:"full_name"`
	Public     bool      `json:"public"`
	CreatedAt  time.Time `json:"created_at"`
	ForkedFrom string    `json:"forked_from,omitempty"`
	// PushProtection is whether pushes that add secrets are refused
	// (docs/adr/0031-push-protection.md).
	PushProtection bool `json:"push_protection"`
	// AllowReplaceRefs is whether pushes may update refs/replace/*
	// (docs/adr/0031-push-protection.md).
	AllowReplaceRefs bool `json:"allow_replace_refs"`
	// DefaultBranch is the branch HEAD names and clones check out, when
	// set; absent when unset (the server picks main, then master, then
	// the first branch) and in lists, whose entries do not carry it
	// (docs/adr/0110-default-branch.md).
	DefaultBranch string `json:"default_branch,omitempty"`
	// AllowMergeCommit, AllowSquashMerge and AllowRebaseMerge are the
	// strategies its pull requests may be merged with
	// (docs/adr/0119-server-side-merge.md), GitHub's fields. A single
	// repository's answers carry them; lists do not (their listing keys
	// do not hold them, docs/adr/0027-listing-keys.md).
	AllowMergeCommit *bool `json:"allow_merge_commit,omitempty"`
	AllowSquashMerge *bool `json:"allow_squash_merge,omitempty"`
	AllowRebaseMerge *bool `json:"allow_rebase_merge,omitempty"`
	// AllowMissingLFS is whether pushes may name Git LFS objects the
	// repository does not hold (a mirror's); single answers only.
	AllowMissingLFS *bool `json:"allow_missing_lfs,omitempty"`
	// LFSScanAfterPush is whether Git LFS objects too large for push
	// protection's budget are left to the scan run; single answers only.
	LFSScanAfterPush *bool `json:"lfs_scan_after_push,omitempty"`
}

// withSettings is toRepo of a single repository, with the settings
// lists leave out.
func withSettings(r meta.Repo) repoJSON {
	out := toRepo(r)
	m, s, rb := r.AllowsMerge("merge"), r.AllowsMerge("squash"), r.AllowsMerge("rebase")
	out.AllowMergeCommit, out.AllowSquashMerge, out.AllowRebaseMerge = &m, &s, &rb
	lfs, later := r.AllowMissingLFS, r.LFSScanAfterPush
	out.AllowMissingLFS, out.LFSScanAfterPush = &lfs, &later
	return out
}

func toRepo(r meta.Repo) repoJSON {
	return repoJSON{ID: r.ID, Owner: r.Owner, Name: r.Name, FullName: r.FullName(), Public: r.Public, CreatedAt: r.CreatedAt, ForkedFrom: r.ForkedFrom, PushProtection: r.PushProtection, AllowReplaceRefs: r.AllowReplaceRefs, DefaultBranch: r.DefaultBranch}
}

type tokenJSON struct {
	Token       string     `json:"token,omitempty"` // only in the create response
	ID          string     `json:"id"`
	Tenant      string     `json:"tenant"`
	Scope       meta.Scope `json:"scope"`
	Description string     `json:"description"`
	CreatedAt   time.Time  `json:"created_at"`
}

func toToken(t meta.Token) tokenJSON {
	return tokenJSON{ID: t.ID, Tenant: t.Tenant, Scope: t.Scope, Description: t.Description, CreatedAt: t.CreatedAt}
}
