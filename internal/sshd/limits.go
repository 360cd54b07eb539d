package sshd

import (
	"net"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of the SSH transport's limits (docs/adr/0090-bounded-serving.md).
// One connection, or one principal, must not be able to take memory or
// connections away from everyone else: every channel that is open but runs
// no command holds a receive window of 2 MiB that the client may fill.
const (
	// DefaultMaxSessions is how many session channels one connection may
	// have open at once, OpenSSH's MaxSessions. git opens one.
	DefaultMaxSessions = 10
	// DefaultExecTimeout is how long a session channel may stay open
	// without asking for a command (exec or shell). git asks at once.
	DefaultExecTimeout = 10 * time.Second
	// DefaultHandshakeTimeout bounds the handshake and authentication of
	// a connection, OpenSSH's LoginGraceTime (whose default is 120 s).
	DefaultHandshakeTimeout = 30 * time.Second
	// DefaultMaxUnauthenticated bounds the connections of the whole server
	// that have not finished authenticating (OpenSSH's MaxStartups full
	// mark is 100). Beyond, new connections are closed at once.
	DefaultMaxUnauthenticated = 100
	// DefaultMaxUnauthenticatedPerSource is the same bound for one source
	// address (OpenSSH's PerSourceMaxStartups).
	DefaultMaxUnauthenticatedPerSource = 10
	// DefaultMaxConnsPerPrincipal bounds the authenticated connections of
	// one tenant (or of one source address for anonymous callers). With
	// the session cap it bounds what one principal's open windows can
	// hold: 10 × 10 × 2 MiB.
	DefaultMaxConnsPerPrincipal = 10
)

// The limits, as the label of ghost_ssh_limit_hits_total.
const (
	limitUnauthenticated          = "unauthenticated"
	limitUnauthenticatedPerSource = "unauthenticated_per_source"
	limitConnsPerPrincipal        = "connections_per_principal"
	limitSessions                 = "sessions"
	limitExecTimeout              = "exec_timeout"
	limitHandshakeTimeout         = "handshake_timeout"
)

// Metrics are the SSH transport's Prometheus metrics. A nil *Metrics
// records nothing, so tests need not set one up.
type Metrics struct {
	conns        *prometheus.GaugeVec
	sessions     prometheus.Gauge
	sessionsDone prometheus.Counter
	hits         *prometheus.CounterVec
	authFails    *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg (a registry of
// the server's own, never the global one).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		conns: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ghost_ssh_connections",
			Help: "Open SSH connections, by state: unauthenticated (handshake and authentication in progress) or authenticated.",
		}, []string{"state"}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ghost_ssh_sessions",
			Help: "Open SSH session channels.",
		}),
		sessionsDone: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ghost_ssh_sessions_total",
			Help: "SSH session channels opened since the node started.",
		}),
		authFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ghost_ssh_auth_failures_total",
			Help: "SSH authentication failures, by reason: unknown_key (a key offered that no tenant registered; a client may offer several per connection), lookup_error (the key could not be looked up: storage), handshake (a connection that never completed the handshake and authentication, timeouts included).",
		}, []string{"reason"}),
		hits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ghost_ssh_limit_hits_total",
			Help: "SSH connections and channels refused or closed by a limit: unauthenticated (--ssh-max-unauthenticated), unauthenticated_per_source (--ssh-max-unauthenticated-per-source), connections_per_principal (--ssh-max-connections-per-principal), sessions (--ssh-max-sessions), exec_timeout (--ssh-exec-timeout), handshake_timeout (--ssh-handshake-timeout).",
		}, []string{"limit"}),
	}
	for _, l := range []string{limitUnauthenticated, limitUnauthenticatedPerSource, limitConnsPerPrincipal, limitSessions, limitExecTimeout, limitHandshakeTimeout} {
		m.hits.WithLabelValues(l)
	}
	for _, st := range []string{"unauthenticated", "authenticated"} {
		m.conns.WithLabelValues(st)
	}
	for _, r := range []string{authUnknownKey, authLookupError, authHandshake} {
		m.authFails.WithLabelValues(r)
	}
	reg.MustRegister(m.conns, m.sessions, m.sessionsDone, m.hits, m.authFails)
	return m
}

// The reasons of ghost_ssh_auth_failures_total.
const (
	authUnknownKey  = "unknown_key"
	authLookupError = "lookup_error"
	authHandshake   = "handshake"
)

func (m *Metrics) authFailed(reason string) {
	if m != nil {
		m.authFails.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) hit(limit string) {
	if m != nil {
		m.hits.WithLabelValues(limit).Inc()
	}
}

func (m *Metrics) conn(state string, d float64) {
	if m != nil {
		m.conns.WithLabelValues(state).Add(d)
	}
}

func (m *Metrics) session(d float64) {
	if m != nil {
		m.sessions.Add(d)
		if d > 0 {
			m.sessionsDone.Add(d)
		}
	}
}

// counter counts holders by key under caps on the total and per key; a
// cap <= 0 is no cap. It never holds a key whose count is zero, so it is
// as large as the connections it counts.
type counter struct {
	mu     sync.Mutex
	total  int
	by     map[string]int
	maxAll int
	maxKey int
}

func newCounter(maxAll, maxKey int) *counter {
	return &counter{by: map[string]int{}, maxAll: maxAll, maxKey: maxKey}
}

// enter counts one holder of key in. It reports which cap refused it, ""
// when it is in (and must call leave).
func (c *counter) enter(key string, allLimit, keyLimit string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maxAll > 0 && c.total >= c.maxAll {
		return allLimit
	}
	if c.maxKey > 0 && c.by[key] >= c.maxKey {
		return keyLimit
	}
	c.total++
	c.by[key]++
	return ""
}

func (c *counter) leave(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if c.by[key]--; c.by[key] <= 0 {
		delete(c.by, key)
	}
}

// sourceKey is the address a connection comes from, without its port: the
// unit of the per-source cap and of the anonymous principal.
func sourceKey(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// principalKey is whom the per-principal cap counts: the tenant of a
// registered key, or the source address of an anonymous caller (all
// anonymous callers share no principal, or one client could lock every
// other anonymous one out).
func principalKey(res authResult, source string) string {
	switch {
	case res.principal != nil:
		return "tenant " + strings.ToLower(res.principal.Tenant)
	case res.err != nil:
		return "unresolved " + source
	}
	return "anonymous " + source
}
