// Package web is ghost's browser UI: server-rendered pages for
// repositories (README, files, history, commits) and their secret-scanning
// alerts, at "/" of "ghost serve".
//
// Pages are html/template with no script at all; they work with
// JavaScript off. Reads go through the node cache (Materializer) and the
// same authorization as git and the API: a private repository is 404 to
// whoever may not read it. Sessions are sealed cookies that any node can
// open (docs/adr/0080-web-ui-sessions-and-reads.md).
package web

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// Authenticator turns a token into a principal (meta.Store does).
// A token that does not authenticate is meta.ErrUnauthenticated.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (meta.Principal, error)
}

// Repos looks repositories up (meta.Store does). Missing names are
// meta.ErrNotFound or meta.ErrInvalidName.
type Repos interface {
	Repo(ctx context.Context, owner, name string) (meta.Repo, error)
	// ListRepoPage returns a page of owner's repositories after the name
	// after, only the public ones when publicOnly, and the next cursor.
	ListRepoPage(ctx context.Context, owner, after string, limit int, publicOnly bool) ([]meta.Repo, string, error)
}

// Authorizer decides reads and writes (meta.Store does). A nil principal
// is the anonymous visitor.
type Authorizer interface {
	CanRead(ctx context.Context, p *meta.Principal, r meta.Repo) (bool, error)
	CanWrite(ctx context.Context, p *meta.Principal, r meta.Repo) (bool, error)
}

// Materializer brings a repository (by log id) to a local bare git
// directory that plain git can read, as of now or later.
// wal.ErrRepoDeleted reports a deleted repository.
type Materializer interface {
	Materialize(ctx context.Context, repoID string) (dir string, err error)
}

// Alerts lists and changes secret-scanning alerts (alerts.Store does).
type Alerts interface {
	List(ctx context.Context, f alerts.Filter, token string, limit int) (alerts.Page, error)
	SetState(ctx context.Context, tenant, repoID, fp string, c alerts.Change) (alerts.Alert, error)
	ByCommits(ctx context.Context, tenant, repoID string, commits []string, limit int) ([]alerts.Alert, bool, error)
}

// LFSObjects reads a repository's Git LFS objects (the server adapts
// lfs.Handler): a file whose content is an LFS pointer is shown as the
// object it points to, and downloaded as its bytes.
type LFSObjects interface {
	// Open opens oid's bytes if repo references the object, or answers an
	// error matching ErrLFSMissing. The caller closes the reader.
	Open(ctx context.Context, repo meta.Repo, oid string) (io.ReadCloser, int64, error)
}

// ErrLFSMissing is an LFS object a repository does not hold (its
// upload never came).
var ErrLFSMissing = errors.New("git lfs object not stored")

// Scans lists a repository's secret-scanning runs with their progress,
// newest first, and says how far scans trail pushes (scanner.Scanner
// does).
type Scans interface {
	Runs(ctx context.Context, repoID string, limit int) ([]scanner.Status, error)
	Lag(ctx context.Context, repoID string) (scanner.Lag, error)
}

// Options configure the UI. Store, Auth, Repos, Authz and Cache are
// required.
type Options struct {
	// Store holds the session key (SessionKeyObject).
	Store  objstore.Store
	Auth   Authenticator
	Repos  Repos
	Authz  Authorizer
	Cache  Materializer
	Alerts Alerts // nil: no alerts pages
	// LFS reads Git LFS objects (nil: a pointer file shows as text).
	LFS   LFSObjects
	Scans Scans // nil: no scan-runs page
	// Pulls reads pull requests (nil: no pull-request pages).
	Pulls Pulls
	// API is the REST API's handler (internal/api), which the pages that
	// change things call in process with the visitor's own token, so that
	// they share its authorization and validation. Required.
	API http.Handler
	// Git is the git binary; empty means "git" from PATH.
	Git string
	// SSHURL, when set, is the base of SSH clone URLs, such as
	// "ssh://git@git.example.com:2222"; the page adds "/owner/name.git".
	SSHURL string
	Logger *slog.Logger
	// MaxBlobBytes is the largest file shown on a page (default 1 MiB);
	// larger ones are offered as a download.
	MaxBlobBytes int64
	// MaxHighlightBytes is the largest file highlighted (default 64 KiB);
	// larger ones are shown plain. Highlighting costs about 4 ms per KiB
	// on a busy core (chroma), plain text almost nothing.
	MaxHighlightBytes int64
	// MaxDiffBytes bounds the diff shown on a commit page (default 1 MiB);
	// a notice says when it is cut.
	MaxDiffBytes int64
	// MaxTreeEntries bounds the entries a directory listing reads and
	// shows (default 1000); a notice says when there are more.
	MaxTreeEntries int
	// GitTimeout bounds each git process of a page (default 10 s); a page
	// whose git runs out of it answers 503. Downloads of raw files too
	// large to show are bounded by the client instead.
	GitTimeout time.Duration
	// MaxMarkdownBytes is the largest README rendered as markdown
	// (default 128 KiB); larger ones are shown as plain text.
	MaxMarkdownBytes int64
	// MarkdownBudget is the time one markdown render may take (default
	// 1 s); past it the page shows the text plain, the render is stopped
	// and the outcome cached (docs/adr/0092-markdown-budget.md).
	MarkdownBudget time.Duration
	// MarkdownRenders bounds the markdown renders running at once
	// (default: the number of CPUs); while all run, READMEs are plain.
	MarkdownRenders int
	// MarkdownCacheBytes bounds the cache of rendered READMEs (default
	// 32 MiB).
	MarkdownCacheBytes int64
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// Handler serves the UI.
type Handler struct {
	opts    Options
	keys    keys
	render  *renderer
	pages   map[string]*template.Template
	assets  map[string]asset // by URL path
	css     string           // the stylesheet's URL
	icon    []byte           // the favicon (SVG)
	iconURL string           // its hashed URL
	mux     *http.ServeMux
	git     *gitexec.Runner
}

type asset struct {
	body  []byte
	ctype string
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/*
var staticFS embed.FS

// New builds the UI, creating the session key in the store if it is the
// first node to start.
func New(ctx context.Context, opts Options) (*Handler, error) {
	if opts.Store == nil || opts.Auth == nil || opts.Repos == nil || opts.Authz == nil || opts.Cache == nil || opts.API == nil {
		return nil, errors.New("web: Store, Auth, Repos, Authz, Cache and API are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBlobBytes <= 0 {
		opts.MaxBlobBytes = 1 << 20
	}
	if opts.MaxHighlightBytes <= 0 {
		opts.MaxHighlightBytes = 64 << 10
	}
	if opts.MaxDiffBytes <= 0 {
		opts.MaxDiffBytes = 1 << 20
	}
	if opts.MaxTreeEntries <= 0 {
		opts.MaxTreeEntries = 1000
	}
	if opts.GitTimeout <= 0 {
		opts.GitTimeout = 10 * time.Second
	}
	if opts.MaxMarkdownBytes <= 0 {
		opts.MaxMarkdownBytes = 128 << 10
	}
	if opts.MarkdownBudget <= 0 {
		opts.MarkdownBudget = time.Second
	}
	if opts.MarkdownRenders <= 0 {
		opts.MarkdownRenders = runtime.NumCPU()
	}
	if opts.MarkdownCacheBytes <= 0 {
		opts.MarkdownCacheBytes = 32 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.SSHURL = strings.TrimSuffix(opts.SSHURL, "/")
	k, err := loadSessionKey(ctx, opts.Store)
	if err != nil {
		return nil, err
	}
	h := &Handler{opts: opts, keys: k, render: newRenderer(markdownOptions{
		maxBytes: opts.MaxMarkdownBytes, budget: opts.MarkdownBudget, renders: opts.MarkdownRenders, cacheBytes: opts.MarkdownCacheBytes,
	}), assets: map[string]asset{}, git: &gitexec.Runner{Path: opts.Git}}
	css, err := staticFS.ReadFile("static/style.css")
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	css = append(css, h.render.chromaCSS()...)
	// chroma's github style draws its error token (what a lexer could not
	// place, as on a go.mod) white on red; ghost shows it as plain text.
	css = append(css, "\n.chroma .err { color: inherit; background-color: transparent; }\n"...)
	h.css = h.addAsset("style.css", css, "text/css; charset=utf-8")
	icon, err := staticFS.ReadFile("static/favicon.svg")
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	h.icon = icon
	h.iconURL = h.addAsset("favicon.svg", icon, "image/svg+xml")
	if err := h.parseTemplates(); err != nil {
		return nil, err
	}
	h.routes()
	return h, nil
}

// addAsset serves body under a URL holding its hash, so it can be cached
// for a year: a new build has new URLs.
func (h *Handler) addAsset(name string, body []byte, ctype string) string {
	sum := sha256.Sum256(body)
	p := "/static/" + hex.EncodeToString(sum[:6]) + "/" + name
	h.assets[p] = asset{body: body, ctype: ctype}
	return p
}

func (h *Handler) parseTemplates() error {
	funcs := template.FuncMap{
		"short":   shortID,
		"ago":     h.ago,
		"size":    humanSize,
		"join":    joinPath,
		"pathURL": pathURL,
		"add":     func(a, b int) int { return a + b },
		"sub":     func(a, b int) int { return a - b },
		"percent": func(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + "%" },
		"bytes":   humanSize,
		"rate":    func(f float64) string { return humanSize(int64(f)) + "/s" },
		"dur":     func(d time.Duration) string { return d.Round(time.Second).String() },
		"subject": func(msg string) string { s, _, _ := strings.Cut(msg, "\n"); return s },
	}
	base, err := template.New("base.html").Funcs(funcs).ParseFS(templateFS, "templates/base.html")
	if err != nil {
		return fmt.Errorf("web: templates: %w", err)
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return fmt.Errorf("web: templates: %w", err)
	}
	h.pages = map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "base" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return fmt.Errorf("web: template %s: %w", name, err)
		}
		h.pages[name] = t
	}
	return nil
}

// Owns reports whether path is the UI's rather than git's: the root,
// static assets, sign-in and sign-out, "/owner", "/owner/repo", anything
// under "/-/" (explore, new, settings, a tenant's alerts) and under
// "/owner/repo/-/". Git's paths ("/owner/repo.git/info/refs",
// ".../git-upload-pack") have a third segment that is never "-", and no
// tenant is named "-".
func Owns(path string) bool {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch {
	case len(segs) <= 2:
		return true
	case segs[0] == "static" || segs[0] == "-":
		return true
	case len(segs) == 3 && segs[2] == "":
		return true // "/owner/repo/"
	}
	return segs[2] == "-"
}

// ServeHTTP serves a UI request with the security headers every page
// carries.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) trimSlash(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, strings.TrimSuffix(r.URL.EscapedPath(), "/"), http.StatusMovedPermanently)
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request, v *visitor) error {
	return errNotFound
}

// favicon serves the icon where browsers look for it unasked.
func (h *Handler) favicon(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "public, max-age=86400")
	_, _ = w.Write(h.icon)
}

func (h *Handler) static(w http.ResponseWriter, r *http.Request) {
	a, ok := h.assets[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", a.ctype)
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	_, _ = w.Write(a.body)
}

func shortID(id string) string {
	if len(id) > 10 {
		return id[:10]
	}
	return id
}

func (h *Handler) ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := h.opts.Now().Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return plural(int(d/time.Minute), "minute") + " ago"
	case d < 48*time.Hour:
		return plural(int(d/time.Hour), "hour") + " ago"
	case d < 60*24*time.Hour:
		return plural(int(d/(24*time.Hour)), "day") + " ago"
	}
	return t.Format("2006-01-02")
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return itoa(n) + " " + unit + "s"
}

func itoa(n int) string { return strconv.Itoa(n) }

func humanSize(n int64) string {
	switch {
	case n < 0:
		return ""
	case n < 1<<10:
		return strconv.FormatInt(n, 10) + " B"
	case n < 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// pathURL escapes each segment of a slash-separated path for a URL.
func pathURL(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = urlSegment(s)
	}
	return strings.Join(segs, "/")
}

func urlSegment(s string) string { return url.PathEscape(s) }
