// Package webhook delivers ghost's events to the URLs of hooks: signed
// as GitHub signs them, in GitHub's payload shapes, and only to addresses
// the policy allows, checked on the connection's actual address
// (docs/design.md §10, issue 24). What to deliver and when (hooks, the
// per-hook watermark over the log, retries, the delivery log) is built
// on top of Sender.
package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Defaults of Options.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultExcerptSize = 4 << 10
	// maxDrain bounds what is read of a response past its excerpt, so
	// the connection can be reused without a receiver making us read
	// forever.
	maxDrain = 64 << 10
)

// Options configure a Sender. The zero value delivers with the default
// policy (no private addresses), a 10 s timeout, no redirects, and the
// system's dialer and resolver.
type Options struct {
	Policy Policy
	// Dialer and Resolver default to net's.
	Dialer   Dialer
	Resolver Resolver
	// Timeout bounds one delivery, from dial to the response's excerpt.
	Timeout time.Duration
	// ExcerptSize is how much of a response body a Result keeps.
	ExcerptSize int
	// FollowRedirects follows up to three redirects, each one's
	// connection checked against the policy again. Off by default: a
	// receiver answering 3xx is a failed delivery.
	FollowRedirects bool
	// UserAgent defaults to "ghost-Hookshot/1".
	UserAgent string
	// InsecureSkipVerify accepts any TLS certificate: a hook's
	// insecure_ssl, for receivers with self-signed certificates. The
	// address policy still applies.
	InsecureSkipVerify bool
}

// Sender posts events to hook URLs. It is safe for concurrent use.
type Sender struct {
	opts   Options
	client *http.Client
}

// NewSender returns a Sender.
func NewSender(opts Options) *Sender {
	if opts.Dialer == nil {
		opts.Dialer = &net.Dialer{Timeout: DefaultTimeout}
	}
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.ExcerptSize <= 0 {
		opts.ExcerptSize = DefaultExcerptSize
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "ghost-Hookshot/1"
	}
	g := guardedDialer{policy: opts.Policy, dialer: opts.Dialer, resolver: opts.Resolver}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would connect where the guard cannot see
		DialContext:           g.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   opts.Timeout,
		ResponseHeaderTimeout: opts.Timeout,
	}
	if opts.InsecureSkipVerify {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the hook's owner asked for it (insecure_ssl)
	}
	client := &http.Client{Transport: tr, Timeout: opts.Timeout}
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !opts.FollowRedirects {
			return http.ErrUseLastResponse
		}
		if len(via) >= 3 {
			return errors.New("webhook: more than 3 redirects")
		}
		return nil
	}
	return &Sender{opts: opts, client: client}
}

// Delivery is one event for one hook. ID stays the same across retries
// of the same event, so a receiver can drop duplicates.
type Delivery struct {
	ID    string
	Event string // "push", "ping", "secret_scanning_alert", ...
	Body  []byte // the JSON payload
}

// Result is what a delivery attempt saw, for the delivery log. It never
// holds the hook's secret: the signature header is derived from it, the
// secret itself is not kept.
type Result struct {
	Status int
	// StatusText is the receiver's status line ("503 Service Unavailable").
	StatusText string
	Duration   time.Duration
	// RequestHeaders are the headers sent.
	RequestHeaders http.Header
	// ResponseHeaders and Excerpt are the receiver's answer, the body
	// cut at Options.ExcerptSize.
	ResponseHeaders http.Header
	Excerpt         []byte
}

// ErrFailed reports a delivery the receiver did not accept (no 2xx), as
// opposed to one that could not be sent (a refused address, a timeout).
var ErrFailed = errors.New("webhook delivery failed")

// Send posts d to url, signed with secret (none when empty). A nil
// error means the receiver answered 2xx; otherwise the error says why,
// and Result holds what was seen.
func (s *Sender) Send(ctx context.Context, url string, secret []byte, d Delivery) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(d.Body))
	if err != nil {
		return Result{}, fmt.Errorf("webhook: %w", err)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return Result{}, fmt.Errorf("webhook: url scheme %q: want http or https", req.URL.Scheme)
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", s.opts.UserAgent)
	h.Set("X-GitHub-Event", d.Event)
	h.Set("X-Ghost-Event", d.Event)
	h.Set("X-GitHub-Delivery", d.ID)
	h.Set("X-Ghost-Delivery", d.ID)
	if len(secret) > 0 {
		h.Set("X-Hub-Signature-256", Sign(secret, d.Body))
	}
	res := Result{RequestHeaders: h.Clone()}
	start := time.Now()
	resp, err := s.client.Do(req)
	res.Duration = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("webhook: post %s: %w", req.URL.Redacted(), err)
	}
	defer resp.Body.Close()
	res.Status, res.StatusText = resp.StatusCode, resp.Status
	res.ResponseHeaders = resp.Header.Clone()
	res.Excerpt, err = io.ReadAll(io.LimitReader(resp.Body, int64(s.opts.ExcerptSize)))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	if err != nil {
		return res, fmt.Errorf("webhook: read response of %s: %w", req.URL.Redacted(), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return res, fmt.Errorf("%w: %s answered %s", ErrFailed, req.URL.Redacted(), resp.Status)
	}
	return res, nil
}
