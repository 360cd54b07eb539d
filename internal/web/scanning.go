package web

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/client"
	"github.com/ghost-scm/ghost/internal/scanner"
)

// The secret-scanning pages: a repository's alerts and scan runs, for
// those who may write it, and a tenant's alerts across its repositories.

// alertStates are the filters of the alerts page.
func alertStates() []string { return []string{"open", "resolved", "all"} }

func (h *Handler) alerts(w http.ResponseWriter, r *http.Request, v *visitor) error {
	rv, err := h.security(r, v)
	if err != nil {
		return err
	}
	if !rv.Alerts {
		return errNotFound
	}
	state := r.URL.Query().Get("state")
	if !slices.Contains(alertStates(), state) {
		state = "open"
	}
	f := alerts.Filter{Tenant: rv.Owner, RepoID: rv.ID}
	if state != "all" {
		f.State = alerts.State(state)
	}
	pg, err := h.opts.Alerts.List(r.Context(), f, r.URL.Query().Get("after"), alerts.DefaultPageSize)
	if err != nil {
		return alertError(err)
	}
	h.show(w, r, v, http.StatusOK, "alerts", page{Title: "Alerts · " + rv.FullName(), Repo: rv, Tab: "alerts", Data: struct {
		State       string
		States      []string
		Alerts      []alerts.Alert
		Next        string
		Resolutions []alerts.Resolution
	}{state, alertStates(), pg.Alerts, pg.Next, []alerts.Resolution{alerts.ResolutionRevoked, alerts.ResolutionFalsePositive, alerts.ResolutionUsedInTests, alerts.ResolutionWontFix}}})
	return nil
}

// alertError maps the alert store's errors: absent is 404, bad input
// 400, anything else (contention, storage) 503.
func alertError(err error) error {
	switch {
	case errors.Is(err, alerts.ErrNotFound):
		return &httpError{status: http.StatusNotFound, msg: "Not found.", err: err}
	case errors.Is(err, alerts.ErrInvalidArgument):
		return &httpError{status: http.StatusBadRequest, msg: "Invalid request: " + err.Error(), err: err}
	case errors.Is(err, alerts.ErrCorrupt):
		return &httpError{status: http.StatusInternalServerError, msg: "Internal error.", err: err}
	}
	return &httpError{status: http.StatusServiceUnavailable, msg: "The service is unavailable; try again shortly.", err: err}
}

func (h *Handler) resolveAlert(w http.ResponseWriter, r *http.Request, v *visitor) error {
	rv, err := h.security(r, v)
	if err != nil {
		return err
	}
	if !rv.Alerts {
		return errNotFound
	}
	c := alerts.Change{
		State:      alerts.StateResolved,
		Resolution: alerts.Resolution(r.PostFormValue("resolution")),
		By:         v.p.Tenant,
		Comment:    strings.TrimSpace(r.PostFormValue("comment")),
	}
	a, err := h.opts.Alerts.SetState(r.Context(), rv.Owner, rv.ID, r.PathValue("id"), c)
	if err != nil {
		return alertError(err)
	}
	h.opts.Logger.InfoContext(r.Context(), "alert state changed", "repo", rv.FullName(), "alert", a.Fingerprint, "state", a.State, "resolution", a.Resolution, "by", v.p.Tenant, "token_id", v.p.TokenID, "via", "web")
	http.Redirect(w, r, repoURL(rv.Repo)+"/-/alerts?state=all", http.StatusSeeOther)
	return nil
}

// scanRunsShown bounds the runs on the scan-runs page.
const scanRunsShown = 50

// scans lists the repository's secret-scanning runs with their progress.
func (h *Handler) scans(w http.ResponseWriter, r *http.Request, v *visitor) error {
	rv, err := h.security(r, v)
	if err != nil {
		return err
	}
	if !rv.Scans {
		return errNotFound
	}
	runs, err := h.opts.Scans.Runs(r.Context(), rv.ID, scanRunsShown)
	if err != nil {
		return &httpError{status: http.StatusServiceUnavailable, msg: "The scan runs are unavailable; try again shortly.", err: err}
	}
	lag, err := h.opts.Scans.Lag(r.Context(), rv.ID)
	if err != nil {
		return &httpError{status: http.StatusServiceUnavailable, msg: "The scan runs are unavailable; try again shortly.", err: err}
	}
	h.show(w, r, v, http.StatusOK, "scans", page{Title: "Scan runs · " + rv.FullName(), Repo: rv, Tab: "scans", Notice: noticeOf(r), Data: scansPage{Runs: runs, Lag: lag}})
	return nil
}

// scansPage is what the scan-runs page shows: how far scans trail the
// pushes (docs/adr/0033-scan-coverage.md), then the newest runs.
type scansPage struct {
	Runs []scanner.Status
	Lag  scanner.Lag
}

// tenantAlertsPage is a tenant's alerts across its repositories.
type tenantAlertsPage struct {
	Owner  string
	State  string
	Rule   string
	Repo   string
	States []string
	Repos  []client.Repo
	Alerts []client.Alert
	Next   string
}

// tenantAlerts lists the alerts of every repository of an owner the
// visitor may write, with filters: state, rule, repository.
func (h *Handler) tenantAlerts(w http.ResponseWriter, r *http.Request, v *visitor) error {
	if v.p == nil || h.opts.Alerts == nil {
		return errNotFound
	}
	q := r.URL.Query()
	d := tenantAlertsPage{Owner: r.PathValue("owner"), State: q.Get("state"), Rule: strings.TrimSpace(q.Get("rule")), Repo: q.Get("repo"), States: alertStates()}
	if !slices.Contains(d.States, d.State) {
		d.State = "open"
	}
	c := h.api(v)
	p, err := c.ListTenantAlerts(r.Context(), d.Owner, client.AlertFilter{State: d.State, Rule: d.Rule, Repo: d.Repo, Page: q.Get("page")})
	if err != nil {
		return apiError(err)
	}
	d.Alerts, d.Next = p.Alerts, p.NextPage
	if d.Repos, err = c.ListRepos(r.Context(), d.Owner); err != nil {
		return apiError(err)
	}
	h.show(w, r, v, http.StatusOK, "tenantalerts", page{Title: "Secret alerts · " + d.Owner, Data: d})
	return nil
}
