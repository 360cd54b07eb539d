package cli

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/hooks"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/webhook"
)

// webhookFlags are serve's webhook settings
// (docs/adr/0105-webhook-delivery.md).
type webhookFlags struct {
	allowPrivate bool
	allowCIDR    string
	retryFor     time.Duration
	disableAfter int
	baseURL      string
}

func (w *webhookFlags) register(f *pflag.FlagSet) {
	config.BoolVar(f, &w.allowPrivate, "webhook-allow-private", "GHOST_WEBHOOK_ALLOW_PRIVATE", false, "let webhooks reach loopback, private, link-local (cloud metadata) and other internal addresses: for closed networks only")
	config.StringVar(f, &w.allowCIDR, "webhook-allow-cidr", "GHOST_WEBHOOK_ALLOW_CIDR", "", "comma-separated networks webhooks may reach although internal, such as 10.1.2.0/24 for an internal CI server")
	config.DurationVar(f, &w.retryFor, "webhook-retry-for", "GHOST_WEBHOOK_RETRY_FOR", hooks.DefaultRetryFor, "how long a webhook event is retried (exponential backoff with jitter) before it is marked failed")
	config.IntVar(f, &w.disableAfter, "webhook-disable-after", "GHOST_WEBHOOK_DISABLE_AFTER", hooks.DefaultDisableAfter, "turn a webhook off after this many of its events in a row failed")
	config.StringVar(f, &w.baseURL, "webhook-base-url", "GHOST_WEBHOOK_BASE_URL", "", "the server's public URL, for the links in webhook payloads (default: from --listen)")
}

// options checks the flags and returns the server's webhook options.
func (w *webhookFlags) options(listen string, tls bool) (server.WebhookOptions, error) {
	if w.retryFor <= 0 || w.disableAfter < 1 {
		return server.WebhookOptions{}, usageErrorf("--webhook-retry-for must be positive and --webhook-disable-after at least 1")
	}
	o := server.WebhookOptions{Policy: webhook.Policy{AllowPrivate: w.allowPrivate}, RetryFor: w.retryFor, DisableAfter: w.disableAfter, BaseURL: w.baseURL}
	for _, c := range strings.Split(w.allowCIDR, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return server.WebhookOptions{}, usageErrorf("--webhook-allow-cidr %q: want networks such as 10.1.2.0/24", c)
		}
		o.Policy.Allow = append(o.Policy.Allow, p.Masked())
	}
	if o.BaseURL == "" {
		scheme := "http"
		if tls {
			scheme = "https"
		}
		o.BaseURL = fmt.Sprintf("%s://%s", scheme, listen)
	}
	return o, nil
}
