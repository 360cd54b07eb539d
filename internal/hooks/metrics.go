package hooks

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the dispatcher's Prometheus figures. A nil *Metrics
// records nothing.
type Metrics struct {
	attempts *prometheus.CounterVec
	duration prometheus.Histogram
	given    prometheus.Counter
	lostEvs  prometheus.Counter
	holds    prometheus.Gauge
}

// NewMetrics registers the dispatcher's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ghost_webhook_deliveries_total",
			Help: "Webhook delivery attempts of this node, by result: ok (the receiver answered 2xx) or failed.",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ghost_webhook_delivery_seconds",
			Help:    "Time of each webhook delivery attempt, from dial to the response's excerpt.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
		given: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ghost_webhook_events_failed_total",
			Help: "Webhook events given up after their retry window (docs/adr/0105-webhook-delivery.md).",
		}),
		lostEvs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ghost_webhook_events_lost_total",
			Help: "Pushes a hook could not deliver because compaction folded them without keeping them for hooks: should stay 0.",
		}),
		holds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ghost_webhook_hooks_held",
			Help: "Hooks this node delivers for now (one node at a time per hook).",
		}),
	}
	reg.MustRegister(m.attempts, m.duration, m.given, m.lostEvs, m.holds)
	return m
}

func (m *Metrics) attempt(ok bool, d time.Duration) {
	if m == nil {
		return
	}
	r := "failed"
	if ok {
		r = "ok"
	}
	m.attempts.WithLabelValues(r).Inc()
	m.duration.Observe(d.Seconds())
}

func (m *Metrics) failed() {
	if m != nil {
		m.given.Inc()
	}
}

func (m *Metrics) lost() {
	if m != nil {
		m.lostEvs.Inc()
	}
}

func (m *Metrics) held(n float64) {
	if m != nil {
		m.holds.Add(n)
	}
}
