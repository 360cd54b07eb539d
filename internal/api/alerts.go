package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/meta"
)

// Option configures the API handler.
type Option func(*handler)

// WithOperator makes every request the operator's, named name: admin
// authority, no token. It is how the CLI works on the object store
// directly (bootstrap and recovery, "ghost tenant create" before any
// token exists): it serves the API in process over the store, so that
// both ways of running a command share one implementation. A handler
// with it must never listen on a network. name appears where the API
// records who acted (an alert's resolver, log lines); it should not be a
// valid tenant name, so that it never passes for one.
func WithOperator(name string) Option {
	return func(h *handler) { h.operator = &meta.Principal{Tenant: name, Scope: meta.ScopeAdmin} }
}

// WithAlerts serves the secret-scanning alert endpoints from a. Without
// it they answer 501, so a server that does not keep alerts says so
// rather than reporting every alert missing.
func WithAlerts(a *alerts.Store) Option {
	return func(h *handler) { h.alerts = a }
}

// The alert endpoints (docs/adr/0070-alert-store.md). Only whoever may
// write a repository sees its alerts (redacted), changes their state and
// reveals a secret, and every reveal is logged: an alert points at a
// leaked secret, file and line, and only those who can act on it should
// be led there, as on GitHub. Anyone else gets 404 (securityView).
func (h *handler) routeAlerts() {
	h.route("GET /api/repos/{owner}/{name}/alerts", h.listRepoAlerts)
	h.route("GET /api/repos/{owner}/{name}/alerts/{id}", h.getAlert)
	h.route("PATCH /api/repos/{owner}/{name}/alerts/{id}", h.patchAlert)
	h.route("POST /api/repos/{owner}/{name}/alerts/{id}/reveal", h.revealAlert)
	h.route("GET /api/tenants/{tenant}/alerts", h.listTenantAlerts)
}

var errNoAlerts = fmt.Errorf("secret-scanning alerts are not enabled on this server: %w", errors.ErrUnsupported)

func (h *handler) alertStore() (*alerts.Store, error) {
	if h.alerts == nil {
		return nil, errNoAlerts
	}
	return h.alerts, nil
}

// kindError keeps an error's own message (in plain words) while giving it
// the meta kind that decides its HTTP status.
type kindError struct {
	err  error
	kind error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.err, e.kind} }

// alertError maps the alert store's errors to the API's statuses: an
// absent alert is 404; bad input 400; contention and storage failures
// 503 (try again), never a 404 that would tell the caller the alert is
// gone. A corrupt record stays a 500.
func alertError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, alerts.ErrNotFound), errors.Is(err, alerts.ErrNoSecret):
		return &kindError{err, meta.ErrNotFound}
	case errors.Is(err, alerts.ErrInvalidArgument):
		return &kindError{err, meta.ErrInvalidArgument}
	case errors.Is(err, alerts.ErrCorrupt), errors.Is(err, context.Canceled):
		return err
	}
	return &kindError{err, meta.ErrUnavailable}
}

type alertLocationJSON struct {
	Commit string `json:"commit,omitempty"`
	Path   string `json:"path"`
	Line   int    `json:"line"`
	Column int    `json:"column,omitempty"`
	BlobID string `json:"blob_id"`
	// Source is "commit-message" or "tag-message" for a secret in a
	// commit or tag object (BlobID is its id, Line counts from its first
	// header line); absent for a file.
	Source string `json:"source,omitempty"`
	// Ref names a ref that reaches a blob no commit adds (a tag of a tree
	// or blob); Commit is then absent.
	Ref string `json:"ref,omitempty"`
	// Where says the same in words (alerts.Location.Where).
	Where     string    `json:"where"`
	RuleID    string    `json:"rule_id"`
	Match     string    `json:"match"`
	FirstSeen time.Time `json:"first_seen"`
	Seq       uint64    `json:"seq,omitempty"`
	RunID     string    `json:"run_id,omitempty"`
}

type alertBypassJSON struct {
	// By is who pushed, with the credential: "alice (token <id>)" or
	// "alice (ssh key <fingerprint> "<title>")".
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	Commit string    `json:"commit,omitempty"`
	Path   string    `json:"path,omitempty"`
	Line   int       `json:"line,omitempty"`
	Source string    `json:"source,omitempty"`
	Ref    string    `json:"ref,omitempty"`
}

type alertEventJSON struct {
	At         time.Time `json:"at"`
	By         string    `json:"by"`
	State      string    `json:"state"`
	Resolution string    `json:"resolution,omitempty"`
	Comment    string    `json:"comment,omitempty"`
}

// alertJSON is an alert on the wire. It has no field for the secret: only
// the reveal endpoint's answer carries it.
type alertJSON struct {
	ID                string              `json:"id"`
	Repository        string              `json:"repository"`
	RepoID            string              `json:"repo_id"`
	RuleID            string              `json:"rule_id"`
	Description       string              `json:"description,omitempty"`
	Rules             []string            `json:"rules"`
	SecretRedacted    string              `json:"secret_redacted"`
	State             string              `json:"state"`
	Resolution        string              `json:"resolution,omitempty"`
	ResolvedBy        string              `json:"resolved_by,omitempty"`
	ResolvedAt        *time.Time          `json:"resolved_at,omitempty"`
	ResolutionComment string              `json:"resolution_comment,omitempty"`
	CreatedAt         time.Time           `json:"created_at"`
	UpdatedAt         time.Time           `json:"updated_at"`
	Locations         []alertLocationJSON `json:"locations"`
	// LocationsCount is how many locations the alert holds. A list
	// carries the first few; an alert's own page carries a page of them,
	// LocationsNextPage naming the next (?locations_page=).
	LocationsCount     int               `json:"locations_count"`
	LocationsNextPage  int               `json:"locations_next_page,omitempty"`
	LocationsTruncated bool              `json:"locations_truncated,omitempty"`
	Bypasses           []alertBypassJSON `json:"push_protection_bypasses,omitempty"`
	History            []alertEventJSON  `json:"history,omitempty"`
	Revealable         bool              `json:"revealable"`
}

func toAlert(repo meta.Repo, a alerts.Alert) alertJSON {
	out := alertJSON{
		ID: a.Fingerprint, Repository: repo.FullName(), RepoID: a.RepoID,
		RuleID: a.RuleID, Description: a.Description, Rules: a.Rules, SecretRedacted: a.Redacted,
		State: string(a.State), Resolution: string(a.Resolution), ResolvedBy: a.ResolvedBy,
		ResolutionComment: a.Comment, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt,
		Locations: make([]alertLocationJSON, 0, len(a.Locations)), LocationsCount: a.LocationCount, LocationsTruncated: a.LocationsTruncated,
		Revealable: a.HasSecret,
	}
	if !a.ResolvedAt.IsZero() {
		at := a.ResolvedAt
		out.ResolvedAt = &at
	}
	for _, l := range a.Locations {
		out.Locations = append(out.Locations, alertLocationJSON{
			Commit: l.Commit, Path: l.Path, Line: l.Line, Column: l.Column, BlobID: l.BlobID,
			Source: l.Source, Ref: l.Ref, Where: l.Where(),
			RuleID: l.RuleID, Match: l.Match, FirstSeen: l.FirstSeen, Seq: l.Seq, RunID: l.RunID,
		})
	}
	for _, b := range a.Bypasses {
		out.Bypasses = append(out.Bypasses, alertBypassJSON{By: b.By, Reason: string(b.Reason), At: b.At, Commit: b.Commit, Path: b.Path, Line: b.Line, Source: b.Source, Ref: b.Ref})
	}
	for _, e := range a.History {
		out.History = append(out.History, alertEventJSON{At: e.At, By: e.By, State: string(e.State), Resolution: string(e.Resolution), Comment: e.Comment})
	}
	return out
}

type alertPageJSON struct {
	Alerts []alertJSON `json:"alerts"`
	// NextPage is the "page" parameter of the next page; absent on the
	// last. A page may be shorter than per_page while it is set.
	NextPage string `json:"next_page,omitempty"`
}

// alertQuery reads the filters and pagination every list takes:
// state, rule, page (the previous answer's next_page) and per_page.
func alertQuery(r *http.Request) (alerts.Filter, string, int, error) {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "all" {
		state = "" // what the web UI and the CLI offer: no filter
	}
	f := alerts.Filter{State: alerts.State(state), Rule: q.Get("rule")}
	limit := 0
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return f, "", 0, fmt.Errorf("%w: per_page=%q: want a positive whole number", meta.ErrInvalidArgument, v)
		}
		limit = n
	}
	return f, q.Get("page"), limit, nil
}

// errNoPage is the answer to a path that does not exist, word for word
// what the router answers for one.
var errNoPage = &kindError{errors.New(strings.ToLower(http.StatusText(http.StatusNotFound))), meta.ErrNotFound}

// securityView resolves the path's repository for p when p may see its
// secret-scanning alerts and scan runs: write access, as changing an
// alert or revealing its secret needs. A caller who may not read the
// repository gets the answer for a missing repository, as everywhere; one
// who may read it but not write gets the answer for a path that does not
// exist, so that nothing tells whether the repository has alerts.
func (h *handler) securityView(r *http.Request, p *meta.Principal) (meta.Repo, error) {
	repo, err := h.readable(r, p)
	if err != nil {
		return meta.Repo{}, err
	}
	ok, err := h.store.CanWrite(r.Context(), p, repo)
	if err != nil {
		return meta.Repo{}, err
	}
	if !ok {
		return meta.Repo{}, errNoPage
	}
	return repo, nil
}

func (h *handler) listRepoAlerts(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	as, err := h.alertStore()
	if err != nil {
		return 0, nil, err
	}
	repo, err := h.securityView(r, p)
	if err != nil {
		return 0, nil, err
	}
	f, tok, limit, err := alertQuery(r)
	if err != nil {
		return 0, nil, err
	}
	f.Tenant, f.RepoID = repo.Owner, repo.ID
	page, err := as.List(r.Context(), f, tok, limit)
	if err != nil {
		return 0, nil, alertError(err)
	}
	out := alertPageJSON{Alerts: make([]alertJSON, 0, len(page.Alerts)), NextPage: page.Next}
	for _, a := range page.Alerts {
		out.Alerts = append(out.Alerts, toAlert(repo, a))
	}
	return http.StatusOK, out, nil
}

// listTenantAlerts lists the alerts of every repository of the tenant,
// for a caller who may write them (404 for anyone else); ?repo=<name>
// narrows it to one.
func (h *handler) listTenantAlerts(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	as, err := h.alertStore()
	if err != nil {
		return 0, nil, err
	}
	tenant := r.PathValue("tenant")
	repos, err := h.store.ListRepos(r.Context(), tenant)
	if err != nil {
		return 0, nil, err
	}
	// Write access is one decision per owner (meta.Store.CanWrite).
	ok, err := h.store.CanWriteOwner(r.Context(), p, tenant)
	if err != nil {
		return 0, nil, err
	}
	if !ok {
		return 0, nil, errNoPage
	}
	f, tok, limit, err := alertQuery(r)
	if err != nil {
		return 0, nil, err
	}
	only := r.URL.Query().Get("repo")
	byID := make(map[string]meta.Repo, len(repos))
	f.Repos = make(map[string]bool, len(repos))
	for _, repo := range repos {
		if only == "" || strings.EqualFold(repo.Name, only) {
			byID[repo.ID] = repo
			f.Repos[repo.ID] = true
		}
	}
	if only != "" && len(f.Repos) == 0 {
		return 0, nil, repoNotFound(tenant, only)
	}
	f.Tenant = tenant
	page, err := as.List(r.Context(), f, tok, limit)
	if err != nil {
		return 0, nil, alertError(err)
	}
	out := alertPageJSON{Alerts: make([]alertJSON, 0, len(page.Alerts)), NextPage: page.Next}
	for _, a := range page.Alerts {
		out.Alerts = append(out.Alerts, toAlert(byID[a.RepoID], a))
	}
	return http.StatusOK, out, nil
}

func (h *handler) getAlert(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	as, err := h.alertStore()
	if err != nil {
		return 0, nil, err
	}
	repo, err := h.securityView(r, p)
	if err != nil {
		return 0, nil, err
	}
	page := 1
	if v := r.URL.Query().Get("locations_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, nil, fmt.Errorf("%w: locations_page=%q: want a positive whole number", meta.ErrInvalidArgument, v)
		}
		page = n
	}
	id, err := as.Resolve(r.Context(), repo.Owner, repo.ID, r.PathValue("id"))
	if err != nil {
		return 0, nil, alertError(err)
	}
	a, err := as.Get(r.Context(), repo.Owner, repo.ID, id)
	if err != nil {
		return 0, nil, alertError(err)
	}
	// An alert holds up to alerts.MaxLocations locations: they come a
	// page at a time, as the lists' alerts do.
	from := min((page-1)*alertLocationsPage, len(a.Locations))
	to := min(from+alertLocationsPage, len(a.Locations))
	a.Locations = a.Locations[from:to]
	out := toAlert(repo, a)
	if to < a.LocationCount {
		out.LocationsNextPage = page + 1
	}
	return http.StatusOK, out, nil
}

// alertLocationsPage is the number of locations on a page of an alert.
const alertLocationsPage = 100

// patchAlert changes an alert's state: {"state": "resolved",
// "resolution": "revoked", "comment": "..."} or {"state": "open"}. It
// needs write access to the repository, as GitHub's does. Like every
// endpoint that names one alert, it takes the id whole or as a unique
// prefix of at least alerts.MinIDPrefix hex digits, as git takes commit
// ids.
func (h *handler) patchAlert(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	as, err := h.alertStore()
	if err != nil {
		return 0, nil, err
	}
	repo, err := h.securityView(r, p)
	if err != nil {
		return 0, nil, err
	}
	var req struct {
		State      string `json:"state"`
		Resolution string `json:"resolution"`
		Comment    string `json:"comment"`
	}
	if err := decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	c := alerts.Change{State: alerts.State(req.State), Resolution: alerts.Resolution(req.Resolution), By: p.Tenant, Comment: req.Comment}
	id, err := as.Resolve(r.Context(), repo.Owner, repo.ID, r.PathValue("id"))
	if err != nil {
		return 0, nil, alertError(err)
	}
	a, err := as.SetState(r.Context(), repo.Owner, repo.ID, id, c)
	if err != nil {
		return 0, nil, alertError(err)
	}
	h.log.InfoContext(r.Context(), "alert state changed", "repo", repo.FullName(), "alert", a.Fingerprint, "state", a.State, "resolution", a.Resolution, "by", p.Tenant, "token_id", p.TokenID)
	return http.StatusOK, toAlert(repo, a), nil
}

// revealAlert answers the alert's secret in clear. It needs write access
// to the repository (whoever may fix the leak may see it), and every
// reveal is logged with who asked and which alert, so a leak through
// this endpoint can be traced.
func (h *handler) revealAlert(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	as, err := h.alertStore()
	if err != nil {
		return 0, nil, err
	}
	repo, err := h.securityView(r, p)
	if err != nil {
		return 0, nil, err
	}
	id, err := as.Resolve(r.Context(), repo.Owner, repo.ID, r.PathValue("id"))
	if err != nil {
		return 0, nil, alertError(err)
	}
	secret, err := as.Reveal(r.Context(), repo.Owner, repo.ID, id)
	if err != nil {
		return 0, nil, alertError(err)
	}
	h.log.WarnContext(r.Context(), "alert secret revealed", "repo", repo.FullName(), "repo_id", repo.ID, "alert", id, "by", p.Tenant, "token_id", p.TokenID)
	w.Header().Set("Cache-Control", "no-store")
	return http.StatusOK, struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}{id, secret}, nil
}
