package gitsvc

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the git service's Prometheus metrics (its transports record
// their requests in them too). A nil *Metrics
// records nothing, so tests need not set one up.
type Metrics struct {
	requests     *prometheus.HistogramVec
	pushes       *prometheus.CounterVec
	received     prometheus.Counter
	casAttempts  prometheus.Histogram
	materialize  *prometheus.HistogramVec
	layersLoaded prometheus.Counter
	waiting      prometheus.Gauge
	busy         prometheus.Counter
	healed       prometheus.Counter
}

// NewMetrics creates the metrics and registers them on reg (a registry of
// the server's own, never the global one).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ghost_git_request_duration_seconds",
			Help:    "Duration of git smart HTTP requests by service and status code.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
		}, []string{"service", "code"}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ghost_git_pushes_total",
			Help: "Pushes by result: ok, rejected (report-status ng), invalid (malformed request), too_large (over --max-push-bytes), contention (503), error.",
		}, []string{"result"}),
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ghost_git_push_received_bytes_total",
			Help: "Bytes of push request bodies received (after gzip decoding).",
		}),
		casAttempts: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ghost_wal_commit_cas_attempts",
			Help:    "Index compare-and-swap attempts per push commit.",
			Buckets: []float64{1, 2, 3, 4, 5, 6, 7, 8},
		}),
		materialize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ghost_cache_materialize_seconds",
			Help:    "Time to bring a repository's cache forward, by outcome (noop, forward, rebuild, error).",
			Buckets: prometheus.ExponentialBuckets(0.002, 2.5, 12),
		}, []string{"outcome"}),
		layersLoaded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ghost_cache_layers_indexed_total",
			Help: "Log layers indexed into the cache by materializations.",
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ghost_git_queue_waiting",
			Help: "Git requests waiting for a slot (--max-git-processes).",
		}),
		busy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ghost_git_busy_rejections_total",
			Help: "Git requests answered 503 because every slot and the queue were taken.",
		}),
		healed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ghost_cache_heal_retries_total",
			Help: "Git requests that failed because of a damaged cache and were retried after it was rebuilt.",
		}),
	}
	reg.MustRegister(m.requests, m.pushes, m.received, m.casAttempts, m.materialize, m.layersLoaded, m.waiting, m.busy, m.healed)
	return m
}

// ObserveMaterialize records one materialization: its outcome (noop,
// forward, rebuild, error), duration and the layers it indexed.
func (m *Metrics) ObserveMaterialize(outcome string, d time.Duration, layers int) {
	if m == nil {
		return
	}
	m.materialize.WithLabelValues(outcome).Observe(d.Seconds())
	m.layersLoaded.Add(float64(layers))
}

// ObserveRequest records one request of a transport: its service
// (UploadPackService, ReceivePackService, anything else counts as
// "other"), status code and duration.
func (m *Metrics) ObserveRequest(service string, code int, d time.Duration) {
	if m == nil {
		return
	}
	switch service {
	case UploadPackService, ReceivePackService:
	default:
		service = "other"
	}
	m.requests.WithLabelValues(service, strconv.Itoa(code)).Observe(d.Seconds())
}

func (m *Metrics) pushResult(result string) {
	if m != nil {
		m.pushes.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) addReceived(n int64) {
	if m != nil && n > 0 {
		m.received.Add(float64(n))
	}
}

func (m *Metrics) observeAttempts(n int) {
	if m != nil && n > 0 {
		m.casAttempts.Observe(float64(n))
	}
}

func (m *Metrics) queued(d float64) {
	if m != nil {
		m.waiting.Add(d)
	}
}

func (m *Metrics) rejectedBusy() {
	if m != nil {
		m.busy.Inc()
	}
}

func (m *Metrics) healRetry() {
	if m != nil {
		m.healed.Inc()
	}
}
