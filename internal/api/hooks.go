package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/hooks"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/webhook"
)

// Hooks is what the webhook endpoints need; *hooks.Store is one.
type Hooks interface {
	Create(ctx context.Context, sc hooks.Scope, in hooks.Input, sender string) (hooks.Hook, error)
	List(ctx context.Context, sc hooks.Scope) ([]hooks.Hook, error)
	Get(ctx context.Context, sc hooks.Scope, id int64) (hooks.Hook, error)
	Update(ctx context.Context, sc hooks.Scope, id int64, in hooks.Input) (hooks.Hook, error)
	Delete(ctx context.Context, sc hooks.Scope, id int64) error
	Ping(ctx context.Context, sc hooks.Scope, id int64, sender string) error
	Test(ctx context.Context, sc hooks.Scope, id int64) error
	Deliveries(ctx context.Context, sc hooks.Scope, id int64, limit int) ([]hooks.Delivery, error)
	Delivery(ctx context.Context, sc hooks.Scope, id int64, deliveryID string) (hooks.Delivery, error)
	Redeliver(ctx context.Context, sc hooks.Scope, id int64, deliveryID string) error
	Enqueue(ctx context.Context, e hooks.Event) error
	Forget(ctx context.Context, sc hooks.Scope) error
}

// WithHooks serves the webhook endpoints from hk, and makes the
// repository endpoints enqueue GitHub's "repository" events. Without it
// the webhook endpoints answer 501.
func WithHooks(hk Hooks) Option {
	return func(h *handler) { h.hooks = hk }
}

var errNoHooks = fmt.Errorf("webhooks are not enabled on this server: %w", errors.ErrUnsupported)

// The webhook endpoints (docs/adr/0105-webhook-delivery.md), in GitHub's
// shapes: a repository's hooks under /api/repos/{owner}/{name}/hooks, a
// tenant's (every repository of it, as an organization's hooks) under
// /api/tenants/{tenant}/hooks. Only whoever may write the repository (or
// create repositories under the tenant) sees or changes them; anyone else
// gets 404, as for alerts: a hook's URL is the owner's business.
func (h *handler) routeHooks() {
	for _, base := range []string{"/api/repos/{owner}/{name}/hooks", "/api/tenants/{tenant}/hooks"} {
		h.route("GET "+base, h.listHooks)
		h.route("POST "+base, h.createHook)
		h.route("GET "+base+"/{id}", h.getHook)
		h.route("PATCH "+base+"/{id}", h.patchHook)
		h.route("DELETE "+base+"/{id}", h.deleteHook)
		h.route("POST "+base+"/{id}/pings", h.pingHook)
		h.route("POST "+base+"/{id}/tests", h.testHook)
		h.route("GET "+base+"/{id}/deliveries", h.listDeliveries)
		h.route("GET "+base+"/{id}/deliveries/{delivery}", h.getDelivery)
		h.route("POST "+base+"/{id}/deliveries/{delivery}/attempts", h.redeliver)
	}
}

// hookScope resolves the path's scope for p, who must be able to write
// it; anyone else gets the answer of a missing page.
func (h *handler) hookScope(r *http.Request, p *meta.Principal) (hooks.Scope, string, error) {
	if h.hooks == nil {
		return hooks.Scope{}, "", errNoHooks
	}
	if t := r.PathValue("tenant"); t != "" {
		if err := requireAuth(p); err != nil {
			return hooks.Scope{}, "", err
		}
		tn, err := h.store.Tenant(r.Context(), t)
		if err != nil {
			if errors.Is(err, meta.ErrNotFound) || errors.Is(err, meta.ErrInvalidName) {
				return hooks.Scope{}, "", errNoPage
			}
			return hooks.Scope{}, "", err
		}
		ok, err := h.store.CanWriteOwner(r.Context(), p, tn.Name)
		if err != nil {
			return hooks.Scope{}, "", err
		}
		if !ok {
			return hooks.Scope{}, "", errNoPage
		}
		return hooks.Scope{Tenant: tn.Name}, "/api/tenants/" + tn.Name + "/hooks", nil
	}
	repo, err := h.securityView(r, p)
	if err != nil {
		return hooks.Scope{}, "", err
	}
	return hooks.Scope{Tenant: repo.Owner, Repo: repo.ID, Name: repo.Name}, "/api/repos/" + repo.Owner + "/" + repo.Name + "/hooks", nil
}

// hookError maps the hook store's errors to the API's statuses; an
// outcome that could not be learned says so.
func hookError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, hooks.ErrNotFound):
		return &kindError{err, meta.ErrNotFound}
	case errors.Is(err, hooks.ErrInvalid):
		return &kindError{err, meta.ErrInvalidArgument}
	case errors.Is(err, objstore.ErrOutcomeUnknown):
		return &kindError{errors.New("the change may or may not have been applied (storage did not answer); read the hooks to see"), meta.ErrUnavailable}
	case errors.Is(err, hooks.ErrUnavailable):
		return &kindError{err, meta.ErrUnavailable}
	case errors.Is(err, context.Canceled):
		return err
	}
	return err
}

// hookConfigJSON is a hook's config, as GitHub's: the secret is never
// shown, only "********" when one is set.
type hookConfigJSON struct {
	URL         string `json:"url"`
	ContentType string `json:"content_type"`
	InsecureSSL string `json:"insecure_ssl"`
	Secret      string `json:"secret,omitempty"`
}

type hookJSON struct {
	Type          string         `json:"type"`
	ID            int64          `json:"id"`
	Name          string         `json:"name"`
	Active        bool           `json:"active"`
	Events        []string       `json:"events"`
	Config        hookConfigJSON `json:"config"`
	CreatedAt     time.Time      `json:"created_at"`
	UpdatedAt     time.Time      `json:"updated_at"`
	URL           string         `json:"url"`
	TestURL       string         `json:"test_url,omitempty"`
	PingURL       string         `json:"ping_url"`
	DeliveriesURL string         `json:"deliveries_url"`
	// Failures counts the events given up in a row; DisabledReason says
	// why the dispatcher turned the hook off (ghost's own fields).
	Failures       int    `json:"consecutive_failures"`
	DisabledReason string `json:"disabled_reason,omitempty"`
}

func toHook(base string, hk hooks.Hook) hookJSON {
	self := base + "/" + strconv.FormatInt(hk.ID, 10)
	out := hookJSON{
		Type: "Repository", ID: hk.ID, Name: "web", Active: hk.Active, Events: hk.Events,
		Config:    hookConfigJSON{URL: hk.URL, ContentType: "json", InsecureSSL: "0"},
		CreatedAt: hk.CreatedAt, UpdatedAt: hk.UpdatedAt, URL: self, PingURL: self + "/pings",
		DeliveriesURL: self + "/deliveries", Failures: hk.Failures, DisabledReason: hk.DisabledReason,
	}
	if hk.Scope.IsRepo() {
		out.TestURL = self + "/tests"
	} else {
		out.Type = "Organization"
	}
	if hk.InsecureSSL {
		out.Config.InsecureSSL = "1"
	}
	if hk.SecretSet {
		out.Config.Secret = "********"
	}
	if out.Events == nil {
		out.Events = []string{}
	}
	return out
}

// hookRequest is a create or change, in GitHub's fields.
type hookRequest struct {
	Name         *string  `json:"name"` // "web", the only kind
	Active       *bool    `json:"active"`
	Events       []string `json:"events"`
	AddEvents    []string `json:"add_events"`
	RemoveEvents []string `json:"remove_events"`
	Config       *struct {
		URL         *string         `json:"url"`
		ContentType *string         `json:"content_type"`
		Secret      *string         `json:"secret"`
		InsecureSSL json.RawMessage `json:"insecure_ssl"`
	} `json:"config"`
}

// input turns a request into the store's Input; cur holds the hook's
// events for add_events and remove_events.
func (q hookRequest) input(cur []string) (hooks.Input, error) {
	var in hooks.Input
	if q.Name != nil && *q.Name != "web" {
		return in, fmt.Errorf("%w: name %q: the only kind of hook is \"web\"", meta.ErrInvalidArgument, *q.Name)
	}
	in.Active = q.Active
	in.Events = q.Events
	if len(q.AddEvents) > 0 || len(q.RemoveEvents) > 0 {
		evs := slices.Clone(cur)
		if in.Events != nil {
			evs = slices.Clone(in.Events)
		}
		for _, e := range q.AddEvents {
			if !slices.Contains(evs, e) {
				evs = append(evs, e)
			}
		}
		evs = slices.DeleteFunc(evs, func(e string) bool { return slices.Contains(q.RemoveEvents, e) })
		in.Events = evs
		if in.Events == nil {
			in.Events = []string{}
		}
	}
	if c := q.Config; c != nil {
		in.URL, in.ContentType, in.Secret = c.URL, c.ContentType, c.Secret
		if len(c.InsecureSSL) > 0 {
			b, err := parseInsecureSSL(c.InsecureSSL)
			if err != nil {
				return in, err
			}
			in.InsecureSSL = &b
		}
	}
	return in, nil
}

// parseInsecureSSL reads GitHub's insecure_ssl: "0" or "1", as a string
// or a number.
func parseInsecureSSL(raw json.RawMessage) (bool, error) {
	switch string(bytes.TrimSpace(raw)) {
	case `"0"`, `0`, `false`:
		return false, nil
	case `"1"`, `1`, `true`:
		return true, nil
	}
	return false, fmt.Errorf("%w: config.insecure_ssl: want \"0\" or \"1\"", meta.ErrInvalidArgument)
}

func hookID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, &kindError{fmt.Errorf("hook %q not found", r.PathValue("id")), meta.ErrNotFound}
	}
	return id, nil
}

func (h *handler) listHooks(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	sc, base, err := h.hookScope(r, p)
	if err != nil {
		return 0, nil, err
	}
	hs, err := h.hooks.List(r.Context(), sc)
	if err != nil {
		return 0, nil, hookError(err)
	}
	out := make([]hookJSON, 0, len(hs))
	for _, hk := range hs {
		out = append(out, toHook(base, hk))
	}
	return http.StatusOK, out, nil
}

// createHook adds a hook, GitHub's POST .../hooks: config.url is
// required, events default to ["push"], and a ping is queued for it.
func (h *handler) createHook(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	sc, base, err := h.hookScope(r, p)
	if err != nil {
		return 0, nil, err
	}
	var q hookRequest
	if err := decode(w, r, &q); err != nil {
		return 0, nil, err
	}
	if q.Config == nil || q.Config.URL == nil {
		return 0, nil, fmt.Errorf("%w: config.url is required", meta.ErrInvalidArgument)
	}
	in, err := q.input(nil)
	if err != nil {
		return 0, nil, err
	}
	hk, err := h.hooks.Create(r.Context(), sc, in, p.Tenant)
	if err != nil {
		return 0, nil, hookError(err)
	}
	h.log.InfoContext(r.Context(), "webhook created", "scope", sc.String(), "hook", hk.ID, "url", redactURL(hk.URL), "events", hk.Events, "by", p.Tenant, "token_id", p.TokenID)
	return http.StatusCreated, toHook(base, hk), nil
}

func (h *handler) getHook(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	sc, base, err := h.hookScope(r, p)
	if err != nil {
		return 0, nil, err
	}
	id, err := hookID(r)
	if err != nil {
		return 0, nil, err
	}
	hk, err := h.hooks.Get(r.Context(), sc, id)
	if err != nil {
		return 0, nil, hookError(err)
	}
	return http.StatusOK, toHook(base, hk), nil
}

func (h *handler) patchHook(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	sc, base, err := h.hookScope(r, p)
	if err != nil {
		return 0, nil, err
	}
	id, err := hookID(r)
	if err != nil {
		return 0, nil, err
	}
	var q hookRequest
	if err := decode(w, r, &q); err != nil {
		return 0, nil, err
	}
	var cur []string
	if len(q.AddEvents) > 0 || len(q.RemoveEvents) > 0 {
		hk, err := h.hooks.Get(r.Context(), sc, id)
		if err != nil {
			return 0, nil, hookError(err)
		}
		cur = hk.Events
	}
	in, err := q.input(cur)
	if err != nil {
		return 0, nil, err
	}
	hk, err := h.hooks.Update(r.Context(), sc, id, in)
	if err != nil {
		return 0, nil, hookError(err)
	}
	h.log.InfoContext(r.Context(), "webhook changed", "scope", sc.String(), "hook", id, "by", p.Tenant, "token_id", p.TokenID)
	return http.StatusOK, toHook(base, hk), nil
}

func (h *handler) deleteHook(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	sc, _, err := h.hookScope(r, p)
	if err != nil {
		return 0, nil, err
	}
	id, err := hookID(r)
	if err != nil {
		return 0, nil, err
	}
	if err := h.hooks.Delete(r.Context(), sc, id); err != nil {
		return 0, nil, hookError(err)
	}
	h.log.InfoContext(r.Context(), "webhook deleted", "scope", sc.String(), "hook", id, "by", p.Tenant, "token_id", p.TokenID)
	return http.StatusNoContent, nil, nil
}

// pingHook queues a ping (204, as GitHub answers): the dispatcher sends it.
func (h *handler) pingHook(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	sc, _, err := h.hookScope(r, p)
	if err != nil {
		return 0, nil, err
	}
	id, err := hookID(r)
	if err != nil {
		return 0, nil, err
	}
	if err := h.hooks.Ping(r.Context(), sc, id, p.Tenant); err != nil {
		return 0, nil, hookError(err)
	}
	return http.StatusNoContent, nil, nil
}

// testHook queues the push event of the repository's latest push, as
// GitHub's test does (nothing for a hook that does not take pushes).
func (h *handler) testHook(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	sc, _, err := h.hookScope(r, p)
	if err != nil {
		return 0, nil, err
	}
	id, err := hookID(r)
	if err != nil {
		return 0, nil, err
	}
	if err := h.hooks.Test(r.Context(), sc, id); err != nil {
		return 0, nil, hookError(err)
	}
	return http.StatusNoContent, nil, nil
}

// deliveryJSON is GitHub's delivery: the list shows the summary, one
// delivery its request and response.
type deliveryJSON struct {
	ID          string  `json:"id"`
	GUID        string  `json:"guid"`
	DeliveredAt string  `json:"delivered_at"`
	Redelivery  bool    `json:"redelivery"`
	Duration    float64 `json:"duration"`
	Status      string  `json:"status"`
	StatusCode  int     `json:"status_code"`
	Event       string  `json:"event"`
	Action      *string `json:"action"`
	// Outcome and Attempt are ghost's: "delivered", "retrying" or
	// "failed", and which attempt of the event this was.
	Outcome  string               `json:"outcome"`
	Attempt  int                  `json:"attempt"`
	Request  *deliveryRequestJSON `json:"request,omitempty"`
	Response *deliveryRespJSON    `json:"response,omitempty"`
}

type deliveryRequestJSON struct {
	Headers map[string]string `json:"headers"`
	Payload json.RawMessage   `json:"payload"`
}

type deliveryRespJSON struct {
	Headers map[string]string `json:"headers"`
	Payload string            `json:"payload"`
}

func flat(h map[string][]string) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		if len(v) > 0 {
			out[k] = v[0]
		}
	}
	return out
}

func toDelivery(d hooks.Delivery, whole bool) deliveryJSON {
	out := deliveryJSON{
		ID: d.ID, GUID: d.GUID, DeliveredAt: d.At.UTC().Format(time.RFC3339), Redelivery: d.Redelivery,
		Duration: d.Duration, Status: d.Status, StatusCode: d.StatusCode, Event: d.Event,
		Outcome: d.Outcome, Attempt: d.Attempt,
	}
	if d.Action != "" {
		a := d.Action
		out.Action = &a
	}
	if whole {
		payload := d.RequestBody
		if len(payload) == 0 {
			payload = json.RawMessage("null")
		}
		out.Request = &deliveryRequestJSON{Headers: flat(d.RequestHeaders), Payload: payload}
		out.Response = &deliveryRespJSON{Headers: flat(d.ResponseHeaders), Payload: d.ResponseBody}
	}
	return out
}

func (h *handler) listDeliveries(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	sc, _, err := h.hookScope(r, p)
	if err != nil {
		return 0, nil, err
	}
	id, err := hookID(r)
	if err != nil {
		return 0, nil, err
	}
	limit := hooks.MaxDeliveries
	if v := r.URL.Query().Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, nil, fmt.Errorf("%w: per_page=%q: want a positive whole number", meta.ErrInvalidArgument, v)
		}
		limit = min(n, hooks.MaxDeliveries)
	}
	ds, err := h.hooks.Deliveries(r.Context(), sc, id, limit)
	if err != nil {
		return 0, nil, hookError(err)
	}
	out := make([]deliveryJSON, 0, len(ds))
	for _, d := range ds {
		out = append(out, toDelivery(d, false))
	}
	return http.StatusOK, out, nil
}

func (h *handler) getDelivery(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	sc, _, err := h.hookScope(r, p)
	if err != nil {
		return 0, nil, err
	}
	id, err := hookID(r)
	if err != nil {
		return 0, nil, err
	}
	d, err := h.hooks.Delivery(r.Context(), sc, id, r.PathValue("delivery"))
	if err != nil {
		return 0, nil, hookError(err)
	}
	return http.StatusOK, toDelivery(d, true), nil
}

// redeliver queues a delivery's event again (202, as GitHub answers).
func (h *handler) redeliver(w http.ResponseWriter, r *http.Request, p *meta.Principal) (int, any, error) {
	sc, _, err := h.hookScope(r, p)
	if err != nil {
		return 0, nil, err
	}
	id, err := hookID(r)
	if err != nil {
		return 0, nil, err
	}
	if err := h.hooks.Redeliver(r.Context(), sc, id, r.PathValue("delivery")); err != nil {
		return 0, nil, hookError(err)
	}
	h.log.InfoContext(r.Context(), "webhook delivery sent again", "scope", sc.String(), "hook", id, "delivery", r.PathValue("delivery"), "by", p.Tenant)
	return http.StatusAccepted, struct{}{}, nil
}

// forgetHooks removes the hooks of a scope whose owner is gone (a
// deleted repository or tenant), or of a tenant name just created, which
// must not inherit a deleted namesake's hooks. A failure is logged: the
// change it follows has landed.
func (h *handler) forgetHooks(ctx context.Context, sc hooks.Scope) {
	if h.hooks == nil {
		return
	}
	if err := h.hooks.Forget(ctx, sc); err != nil {
		h.log.ErrorContext(ctx, "removing the webhooks of a deleted owner failed; they are removed when the name is created again", "scope", sc.String(), "err", err)
	}
}

// redactURL leaves a hook URL's query out of logs (some receivers take a
// token there).
func redactURL(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i] + "?..."
	}
	return u
}

// repoEvent queues GitHub's "repository" event for the hooks of repo and
// of its owner: created, deleted (its owner's hooks only: its own went
// with it), publicized, privatized. The change has landed whatever
// happens here: a failure is logged, and the event lost.
func (h *handler) repoEvent(ctx context.Context, repo meta.Repo, action string, p *meta.Principal) {
	if h.hooks == nil {
		return
	}
	sender := ""
	if p != nil {
		sender = p.Tenant
	}
	payload, _ := json.Marshal(map[string]string{"action": action})
	wr := webhook.Repository{ID: repo.ID, Owner: repo.Owner, Name: repo.Name, Private: !repo.Public}
	ev := hooks.Event{
		Name: hooks.EventRepository, Repo: hooks.RepoRef{Tenant: repo.Owner, ID: repo.ID, Name: repo.Name},
		Payload: payload, Sender: sender, OwnerOnly: action == "deleted" || action == "created",
	}
	if action == "deleted" {
		ev.Repository = &wr // it can no longer be looked up
	}
	if err := h.hooks.Enqueue(ctx, ev); err != nil {
		h.log.WarnContext(ctx, "queueing a repository webhook event failed; it is lost", "repo", repo.FullName(), "action", action, "err", err)
	}
}
