// Package lfs serves the Git LFS Batch API and the basic transfer over
// HTTP, proxied through ghost: objects are content-addressed in the object
// store per tenant, and a per-repository reference record says which
// repository may serve them (docs/design.md §2.3 and §7.10,
// docs/adr/0104-lfs-storage.md).
//
// Authorization is git's (docs/design.md §7.4): access.Decide with read
// for a download and write for an upload, so a private repository the
// caller cannot read is indistinguishable from a missing one.
package lfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/ids"
	"github.com/ghost-scm/ghost/internal/objstore"
)

// MediaType is the content type of every Batch API request and answer.
const MediaType = "application/vnd.git-lfs+json"

// Defaults of Options.
const (
	DefaultMaxObjectSize = 5 << 30 // 5 GiB
	DefaultMaxBatchBytes = 1 << 20
	DefaultMaxBatchItems = 1000
	DefaultIOTimeout     = time.Minute
	DefaultPresignExpiry = 5 * time.Minute
)

// Authorizer resolves a caller's token and a repository to a grant,
// exactly as the git transport does (githttp.Authorizer): the errors are
// access.ErrUnauthenticated, access.ErrNotFound and access.ErrUnavailable.
type Authorizer interface {
	Authorize(ctx context.Context, token, owner, name string) (access.Grant, error)
}

// Options configure a Handler.
type Options struct {
	Store objstore.Store
	Auth  Authorizer
	// Logger receives errors; nil discards them.
	Logger *slog.Logger
	// MaxObjectSize bounds one object (0: DefaultMaxObjectSize;
	// negative: no bound).
	MaxObjectSize int64
	// MaxBatchBytes bounds a batch request's body (default
	// DefaultMaxBatchBytes) and MaxBatchItems its objects (default
	// DefaultMaxBatchItems).
	MaxBatchBytes int64
	MaxBatchItems int
	// IOTimeout is how long an upload or download may move no byte
	// (0: DefaultIOTimeout; negative: none). The deadline extends with
	// every chunk, as git's does (docs/adr/0015-git-resource-limits.md),
	// so a transfer of any size at a steady speed goes through and a
	// stalled one lets go of its connection.
	IOTimeout time.Duration
	// QuotaBytes bounds the bytes of LFS objects one tenant stores,
	// counted once however many of its repositories reference them
	// (0 or negative: no bound; docs/adr/0129-lfs-gc.md).
	QuotaBytes int64
	// Now is the clock GC's fence reads (default time.Now).
	Now func() time.Time
	// Presigner, when set, sends the bytes of the HTTP transfer straight
	// between the clients and the object store: the batch answers with
	// presigned URLs and a verify action (docs/adr/0126-lfs-direct-to-s3.md).
	// Nil proxies them through the node.
	Presigner Presigner
	// PresignExpiry is how long a presigned URL stays valid
	// (0: DefaultPresignExpiry).
	PresignExpiry time.Duration
}

// Handler serves /<owner>/<repo>.git/info/lfs/...
type Handler struct {
	opts   Options
	logger *slog.Logger
	sums   checksumTrust // whether the store checks checksums (direct.go)
}

// New returns a Handler.
func New(opts Options) (*Handler, error) {
	if opts.Store == nil || opts.Auth == nil {
		return nil, errors.New("lfs: Store and Auth are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case opts.MaxObjectSize == 0:
		opts.MaxObjectSize = DefaultMaxObjectSize
	case opts.MaxObjectSize < 0:
		opts.MaxObjectSize = math.MaxInt64
	}
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if opts.IOTimeout == 0 {
		opts.IOTimeout = DefaultIOTimeout
	}
	if opts.MaxBatchItems <= 0 {
		opts.MaxBatchItems = DefaultMaxBatchItems
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PresignExpiry <= 0 {
		opts.PresignExpiry = DefaultPresignExpiry
	}
	return &Handler{opts: opts, logger: opts.Logger}, nil
}

// Owns reports whether path is an LFS request: /<owner>/<repo>.git/info/lfs/...
// The mux asks it before handing a path to git.
func Owns(path string) bool {
	segs := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 5)
	return len(segs) == 5 && strings.HasSuffix(segs[1], ".git") && segs[2] == "info" && segs[3] == "lfs"
}

// The object store keys of docs/design.md §2.3.
func objectKey(tenant, oid string) string { return "lfs/objects/" + tenant + "/" + oid }
func refKey(repoID, oid string) string    { return "lfs/refs/" + repoID + "/" + oid }
func tempKey(name string) string          { return "lfs/tmp/" + name }

// validOID reports whether oid is a sha256 in lowercase hex.
func validOID(oid string) bool {
	if len(oid) != 64 {
		return false
	}
	for i := 0; i < len(oid); i++ {
		if c := oid[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// route is a parsed LFS path.
type route struct {
	owner, name string
	rest        string // "objects/batch", "objects/<oid>", "locks..."
}

func parseRoute(path string) (route, bool) {
	if !Owns(path) {
		return route{}, false
	}
	segs := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 5)
	rt := route{owner: segs[0], name: strings.TrimSuffix(segs[1], ".git"), rest: segs[4]}
	if ids.ValidateName(rt.owner) != nil || ids.ValidateName(rt.name) != nil {
		return route{}, false
	}
	return rt, true
}

// ServeHTTP serves one LFS request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, ok := parseRoute(r.URL.Path)
	if !ok {
		jsonError(w, http.StatusNotFound, "not found")
		return
	}
	switch {
	case rt.rest == "objects/batch":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			jsonError(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		h.batch(w, r, rt)
	case rt.rest == "objects/verify":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			jsonError(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		h.verify(w, r, rt)
	case strings.HasPrefix(rt.rest, "objects/") && validOID(strings.TrimPrefix(rt.rest, "objects/")):
		oid := strings.TrimPrefix(rt.rest, "objects/")
		switch r.Method {
		case http.MethodGet:
			h.download(w, r, rt, oid)
		case http.MethodPut:
			h.upload(w, r, rt, oid)
		default:
			w.Header().Set("Allow", "GET, PUT")
			jsonError(w, http.StatusMethodNotAllowed, "method not allowed")
		}
	case rt.rest == "locks" || strings.HasPrefix(rt.rest, "locks/"):
		h.locks(w, r, rt, strings.TrimPrefix(rt.rest, "locks"))
	default:
		jsonError(w, http.StatusNotFound, "not found")
	}
}

func mimeType(r *http.Request) (string, map[string]string, error) {
	return mime.ParseMediaType(r.Header.Get("Content-Type"))
}

// authorize applies git's policy (access.Decide) and writes the refusal
// itself when the caller may not go on.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, rt route, write bool) (access.Grant, bool) {
	token := requestToken(r)
	g, err := h.opts.Auth.Authorize(r.Context(), token, rt.owner, rt.name)
	switch {
	case errors.Is(err, access.ErrUnauthenticated):
		challenge(w, "invalid credentials: the password must be a valid ghost access token")
		return access.Grant{}, false
	case errors.Is(err, access.ErrNotFound):
		g = access.Grant{} // a missing repository answers as a private one
	case errors.Is(err, access.ErrUnavailable):
		h.logger.Error("lfs request failed", "what", "authorize", "path", r.URL.Path, "err", err)
		jsonError(w, http.StatusServiceUnavailable, "storage is temporarily unavailable; try again later")
		return access.Grant{}, false
	case err != nil:
		h.internalError(w, r, "authorize", err)
		return access.Grant{}, false
	}
	err = access.Decide(g.Level, token == "", write)
	switch {
	case err == nil:
		return g, true
	case errors.Is(err, access.ErrUnauthenticated):
		challenge(w, "authentication required: use an access token as the password")
	case errors.Is(err, access.ErrForbidden):
		jsonError(w, http.StatusForbidden, fmt.Sprintf("your token may not upload to %s/%s (it needs write access)", rt.owner, rt.name))
	default:
		jsonError(w, http.StatusNotFound, "repository not found")
	}
	return access.Grant{}, false
}

// The Batch API's JSON (git-lfs docs/api/batch.md).
type batchRequest struct {
	Operation string        `json:"operation"`
	Transfers []string      `json:"transfers"`
	HashAlgo  string        `json:"hash_algo"`
	Objects   []batchObject `json:"objects"`
}

type batchObject struct {
	OID  string `json:"oid"`
	Size int64  `json:"size"`
}

type action struct {
	Href      string            `json:"href"`
	Header    map[string]string `json:"header,omitempty"`
	ExpiresIn int               `json:"expires_in,omitempty"`
}

type objectError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type batchResult struct {
	OID           string             `json:"oid"`
	Size          int64              `json:"size"`
	Authenticated bool               `json:"authenticated,omitempty"`
	Actions       map[string]*action `json:"actions,omitempty"`
	Error         *objectError       `json:"error,omitempty"`
}

type batchResponse struct {
	Transfer string        `json:"transfer"`
	Objects  []batchResult `json:"objects"`
	HashAlgo string        `json:"hash_algo"`
}

// refRecord is what lfs/refs/<repoID>/<oid> holds: the repository may
// serve the object, which is oid's bytes, Size long.
type refRecord struct {
	Size int64 `json:"size"`
}

func (h *Handler) batch(w http.ResponseWriter, r *http.Request, rt route) {
	if mt, _, err := mimeType(r); err != nil || mt != MediaType {
		jsonError(w, http.StatusUnsupportedMediaType, "Content-Type must be "+MediaType)
		return
	}
	var req batchRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, h.opts.MaxBatchBytes))
	if err := dec.Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			jsonError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("batch request larger than %d bytes", h.opts.MaxBatchBytes))
			return
		}
		jsonError(w, http.StatusBadRequest, "malformed batch request: "+err.Error())
		return
	}
	var write bool
	switch req.Operation {
	case "download":
	case "upload":
		write = true
	default:
		jsonError(w, http.StatusUnprocessableEntity, `operation must be "upload" or "download"`)
		return
	}
	if len(req.Objects) > h.opts.MaxBatchItems {
		jsonError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("at most %d objects per batch", h.opts.MaxBatchItems))
		return
	}
	g, ok := h.authorize(w, r, rt, write)
	if !ok {
		return
	}
	if req.HashAlgo != "" && req.HashAlgo != "sha256" {
		jsonError(w, http.StatusConflict, "only the sha256 hash algorithm is supported")
		return
	}
	if len(req.Transfers) > 0 && !contains(req.Transfers, "basic") {
		jsonError(w, http.StatusUnprocessableEntity, "only the basic transfer is supported")
		return
	}
	base := baseURL(r) + "/" + rt.owner + "/" + rt.name + ".git/info/lfs/objects/"
	var header map[string]string
	if a := r.Header.Get("Authorization"); a != "" {
		header = map[string]string{"Authorization": a}
	}
	res := batchResponse{Transfer: "basic", HashAlgo: "sha256", Objects: make([]batchResult, 0, len(req.Objects))}
	for _, o := range req.Objects {
		out := batchResult{OID: o.OID, Size: o.Size}
		switch {
		case !validOID(o.OID):
			out.Error = &objectError{Code: http.StatusUnprocessableEntity, Message: "oid must be a sha256 in lowercase hex"}
		case o.Size < 0:
			out.Error = &objectError{Code: http.StatusUnprocessableEntity, Message: "size must not be negative"}
		case o.Size > h.opts.MaxObjectSize:
			out.Error = &objectError{Code: http.StatusUnprocessableEntity, Message: fmt.Sprintf("object larger than the limit of %d bytes", h.opts.MaxObjectSize)}
		}
		if out.Error != nil {
			res.Objects = append(res.Objects, out)
			continue
		}
		ref, err := h.ref(r.Context(), g.RepoID, o.OID)
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			ref = nil
		case err != nil:
			h.storeError(w, r, "read reference", err)
			return
		}
		var aerr error
		switch {
		case !write && ref == nil:
			out.Error = &objectError{Code: http.StatusNotFound, Message: "object does not exist"}
		case !write:
			out.Size = ref.Size
			out.Actions, aerr = h.downloadActions(r.Context(), g, o.OID, base, header)
		case ref == nil || ref.Size != o.Size:
			out.Actions, aerr = h.uploadActions(r.Context(), g, o, base, header)
		}
		// An upload the repository already has needs no action.
		if aerr != nil {
			h.internalError(w, r, "presign", aerr)
			return
		}
		// Presigned URLs carry their own authorization: git-lfs must not
		// look for credentials for the bucket's host.
		out.Authenticated = out.Actions != nil && h.opts.Presigner != nil
		res.Objects = append(res.Objects, out)
	}
	if write && h.overQuota(w, r, g.Tenant, res.Objects) {
		return
	}
	w.Header().Set("Content-Type", MediaType)
	w.Header().Set("Cache-Control", "no-cache")
	if err := json.NewEncoder(w).Encode(res); err != nil {
		h.logger.Debug("lfs batch answer not sent", "err", err)
	}
}

func (h *Handler) ref(ctx context.Context, repoID, oid string) (*refRecord, error) {
	rc, _, err := h.opts.Store.Get(ctx, refKey(repoID, oid))
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var rec refRecord
	if err := json.NewDecoder(io.LimitReader(rc, 4096)).Decode(&rec); err != nil {
		return nil, fmt.Errorf("lfs: reference %s: %w", refKey(repoID, oid), err)
	}
	return &rec, nil
}

func (h *Handler) download(w http.ResponseWriter, r *http.Request, rt route, oid string) {
	g, ok := h.authorize(w, r, rt, false)
	if !ok {
		return
	}
	rc, size, err := h.Repo(g).Open(r.Context(), oid)
	if errors.Is(err, ErrNoObject) {
		jsonError(w, http.StatusNotFound, "object does not exist")
		return
	}
	if err != nil {
		h.storeError(w, r, "read object", err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(size))
	if _, err := io.Copy(h.idleWriter(w), rc); err != nil {
		h.logger.Debug("lfs download cut", "oid", oid, "err", err)
	}
}

// countingReader counts and hashes what passes through it.
type countingReader struct {
	r io.Reader
	n int64
	h interface{ Write([]byte) (int, error) }
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.h.Write(p[:n])
	return n, err
}

// idle extends a connection's deadline before every chunk of a transfer.
type idle struct {
	rc *http.ResponseController
	d  time.Duration
	r  io.Reader
	w  io.Writer
}

func (i *idle) Read(p []byte) (int, error) {
	i.rc.SetReadDeadline(time.Now().Add(i.d))
	return i.r.Read(p)
}

func (i *idle) Write(p []byte) (int, error) {
	i.rc.SetWriteDeadline(time.Now().Add(i.d))
	return i.w.Write(p)
}

func (h *Handler) idleReader(w http.ResponseWriter, r io.Reader) io.Reader {
	if h.opts.IOTimeout < 0 {
		return r
	}
	return &idle{rc: http.NewResponseController(w), d: h.opts.IOTimeout, r: r}
}

func (h *Handler) idleWriter(w http.ResponseWriter) io.Writer {
	if h.opts.IOTimeout < 0 {
		return w
	}
	return &idle{rc: http.NewResponseController(w), d: h.opts.IOTimeout, w: w}
}

// upload streams the body into the repository (Repo.Put): a cut or
// wrong upload leaves nothing visible.
func (h *Handler) upload(w http.ResponseWriter, r *http.Request, rt route, oid string) {
	g, ok := h.authorize(w, r, rt, true)
	if !ok {
		return
	}
	size := r.ContentLength
	switch {
	case size < 0:
		jsonError(w, http.StatusLengthRequired, "Content-Length is required")
		return
	case size > h.opts.MaxObjectSize:
		jsonError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("object larger than the limit of %d bytes", h.opts.MaxObjectSize))
		return
	}
	err := h.Repo(g).Put(r.Context(), oid, size, h.idleReader(w, r.Body))
	switch {
	case err == nil:
		w.WriteHeader(http.StatusOK)
	case errors.Is(err, ErrCut), errors.Is(err, ErrOverrun):
		jsonError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, ErrHashMismatch):
		jsonError(w, http.StatusUnprocessableEntity, err.Error())
	case errors.Is(err, ErrCollecting):
		jsonError(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, ErrQuota):
		jsonError(w, http.StatusInsufficientStorage, err.Error())
	default:
		h.storeError(w, r, "store upload", err)
	}
}

// removeTemp deletes an upload's temporary, even after the request ended.
func (h *Handler) removeTemp(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.opts.Store.Delete(ctx, key); err != nil {
		h.logger.Warn("lfs temporary not removed", "key", key, "err", err)
	}
}

func (h *Handler) storeError(w http.ResponseWriter, r *http.Request, what string, err error) {
	if StoreUnavailable(err) {
		h.logger.Error("lfs request failed", "what", what, "path", r.URL.Path, "err", err)
		jsonError(w, http.StatusServiceUnavailable, "storage is temporarily unavailable; try again later")
		return
	}
	h.internalError(w, r, what, err)
}

func (h *Handler) internalError(w http.ResponseWriter, r *http.Request, what string, err error) {
	h.logger.Error("lfs request failed", "what", what, "path", r.URL.Path, "err", err)
	jsonError(w, http.StatusInternalServerError, "internal error: "+what+" failed")
}

// baseURL is the scheme and host the client reached, for the actions'
// absolute hrefs.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// requestToken is githttp's: the Basic password, or a Bearer token, or "".
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
	w.Header().Set("LFS-Authenticate", `Basic realm="ghost"`)
	w.Header().Set("WWW-Authenticate", `Basic realm="ghost"`)
	jsonError(w, http.StatusUnauthorized, msg)
}

// jsonError answers as the spec's error body: {"message": ...}.
func jsonError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", MediaType)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(struct {
		Message string `json:"message"`
	}{msg})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Missing returns the oids among oids whose objects the repository does
// not hold: no reference for it, so its bytes were never uploaded to it
// (or were uploaded to another repository, which grants nothing here).
// It implements gitsvc.LFSObjects, so that a push whose pointers name
// objects never uploaded is refused (docs/design.md §7.10). It reads one
// reference a distinct oid, a few at a time; an oid that is not a
// sha256 in lower-case hex is reported missing.
func (h *Handler) Missing(ctx context.Context, repoID string, oids []string) ([]string, error) {
	const parallel = 8
	var (
		mu      sync.Mutex
		missing []string
		wg      sync.WaitGroup
		sem     = make(chan struct{}, parallel)
		errs    []error
	)
	seen := make(map[string]bool, len(oids))
	for _, oid := range oids {
		if seen[oid] {
			continue
		}
		seen[oid] = true
		if !validOID(oid) {
			mu.Lock() // the lookups started so far append concurrently
			missing = append(missing, oid)
			mu.Unlock()
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := h.ref(ctx, repoID, oid)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, objstore.ErrNotFound):
				missing = append(missing, oid)
			case err != nil:
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.Sort(missing)
	return missing, nil
}
