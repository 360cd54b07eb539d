package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Hook is a webhook, in GitHub's fields. Config.Secret is "********"
// when the hook has a secret: the API never shows it.
type Hook struct {
	Type           string     `json:"type"`
	ID             int64      `json:"id"`
	Name           string     `json:"name"`
	Active         bool       `json:"active"`
	Events         []string   `json:"events"`
	Config         HookConfig `json:"config"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	URL            string     `json:"url"`
	TestURL        string     `json:"test_url,omitempty"`
	PingURL        string     `json:"ping_url"`
	DeliveriesURL  string     `json:"deliveries_url"`
	Failures       int        `json:"consecutive_failures"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
}

// HookConfig is where and how a hook delivers.
type HookConfig struct {
	URL         string `json:"url"`
	ContentType string `json:"content_type"`
	InsecureSSL string `json:"insecure_ssl"`
	Secret      string `json:"secret,omitempty"`
}

// HookChange creates or changes a hook: nil fields keep what the hook has
// (on create, the defaults: events ["push"], active).
type HookChange struct {
	Active *bool           `json:"active,omitempty"`
	Events []string        `json:"events,omitempty"`
	Config *HookConfigEdit `json:"config,omitempty"`
}

// HookConfigEdit is the config part of a HookChange.
type HookConfigEdit struct {
	URL         *string `json:"url,omitempty"`
	Secret      *string `json:"secret,omitempty"`
	ContentType *string `json:"content_type,omitempty"`
	InsecureSSL *string `json:"insecure_ssl,omitempty"`
}

// Delivery is one delivery of a hook's delivery log.
type Delivery struct {
	ID          string  `json:"id"`
	GUID        string  `json:"guid"`
	DeliveredAt string  `json:"delivered_at"`
	Redelivery  bool    `json:"redelivery"`
	Duration    float64 `json:"duration"`
	Status      string  `json:"status"`
	StatusCode  int     `json:"status_code"`
	Event       string  `json:"event"`
	Action      *string `json:"action"`
	Outcome     string  `json:"outcome"`
	Attempt     int     `json:"attempt"`
	Request     *struct {
		Headers map[string]string `json:"headers"`
		Payload json.RawMessage   `json:"payload"`
	} `json:"request,omitempty"`
	Response *struct {
		Headers map[string]string `json:"headers"`
		Payload string            `json:"payload"`
	} `json:"response,omitempty"`
}

// hooksPath is the hooks of target: "owner/name" for a repository's,
// "owner" for a tenant's (every repository of it).
func hooksPath(target string) string {
	if owner, name, ok := strings.Cut(target, "/"); ok {
		return repoPath(owner, name) + "/hooks"
	}
	return "/api/tenants/" + target + "/hooks"
}

func hookPath(target string, id int64) string {
	return hooksPath(target) + "/" + strconv.FormatInt(id, 10)
}

// CreateHook adds a hook to target ("owner/name" or "owner"); the server
// sends it a ping.
func (c *Client) CreateHook(ctx context.Context, target string, ch HookChange) (Hook, error) {
	var h Hook
	_, err := c.do(ctx, http.MethodPost, hooksPath(target), nil, ch, &h)
	return h, err
}

// ListHooks returns target's hooks.
func (c *Client) ListHooks(ctx context.Context, target string) ([]Hook, error) {
	var hs []Hook
	_, err := c.do(ctx, http.MethodGet, hooksPath(target), nil, nil, &hs)
	return hs, err
}

// Hook returns one hook of target.
func (c *Client) Hook(ctx context.Context, target string, id int64) (Hook, error) {
	var h Hook
	_, err := c.do(ctx, http.MethodGet, hookPath(target, id), nil, nil, &h)
	return h, err
}

// UpdateHook changes a hook.
func (c *Client) UpdateHook(ctx context.Context, target string, id int64, ch HookChange) (Hook, error) {
	var h Hook
	_, err := c.do(ctx, http.MethodPatch, hookPath(target, id), nil, ch, &h)
	return h, err
}

// DeleteHook removes a hook.
func (c *Client) DeleteHook(ctx context.Context, target string, id int64) error {
	_, err := c.do(ctx, http.MethodDelete, hookPath(target, id), nil, nil, nil)
	return err
}

// PingHook queues a ping for a hook.
func (c *Client) PingHook(ctx context.Context, target string, id int64) error {
	_, err := c.do(ctx, http.MethodPost, hookPath(target, id)+"/pings", nil, nil, nil)
	return err
}

// TestHook queues the push event of the repository's latest push for a
// repository's hook.
func (c *Client) TestHook(ctx context.Context, target string, id int64) error {
	_, err := c.do(ctx, http.MethodPost, hookPath(target, id)+"/tests", nil, nil, nil)
	return err
}

// HookDeliveries returns a hook's newest deliveries, newest first.
func (c *Client) HookDeliveries(ctx context.Context, target string, id int64, perPage int) ([]Delivery, error) {
	var ds []Delivery
	var q url.Values
	if perPage > 0 {
		q = url.Values{"per_page": {strconv.Itoa(perPage)}}
	}
	_, err := c.do(ctx, http.MethodGet, hookPath(target, id)+"/deliveries", q, nil, &ds)
	return ds, err
}

// HookDelivery returns one delivery whole: its request and response.
func (c *Client) HookDelivery(ctx context.Context, target string, id int64, delivery string) (Delivery, error) {
	var d Delivery
	_, err := c.do(ctx, http.MethodGet, hookPath(target, id)+"/deliveries/"+delivery, nil, nil, &d)
	return d, err
}

// Redeliver queues a delivery's event again.
func (c *Client) Redeliver(ctx context.Context, target string, id int64, delivery string) error {
	_, err := c.do(ctx, http.MethodPost, hookPath(target, id)+"/deliveries/"+delivery+"/attempts", nil, nil, nil)
	return err
}
