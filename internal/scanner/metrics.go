package scanner

import (
	"time"

	"github.com/ghost-scm/ghost/internal/secretscan"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the scanner's Prometheus figures: how far scans trail
// pushes, what the runs are doing, and why attempts fail
// (docs/adr/0033-scan-coverage.md). A nil *Metrics records nothing.
type Metrics struct {
	lag        *prometheus.GaugeVec
	oldest     *prometheus.GaugeVec
	runs       *prometheus.GaugeVec
	parked     prometheus.Gauge
	fails      *prometheus.CounterVec
	parks      prometheus.Counter
	catchUp    prometheus.Counter
	work       *prometheus.CounterVec
	shards     prometheus.Counter
	done       *prometheus.CounterVec
	pushToDone prometheus.Histogram
}

// NewMetrics registers the scanner's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ghost_scan_lag_seqs",
			Help: "Pushes not yet scanned: the repository's newest seq minus its scan watermark, set by each reconcile pass. Only repositories with a lag have a series.",
		}, []string{"tenant", "repo_id"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ghost_scan_oldest_unscanned_push_timestamp_seconds",
			Help: "When the oldest push not yet scanned landed (Unix seconds); time() minus it is its age. Only repositories with a lag have a series.",
		}, []string{"tenant", "repo_id"}),
		runs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ghost_scan_runs",
			Help: "Scan runs not yet done, by kind and state (queued: no coord run yet; active; parked: some shard parked; finishing: the coord run ended and its follow-ups are pending; unknown: the coordination store did not answer), as of the last reconcile pass.",
		}, []string{"kind", "state"}),
		parked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ghost_scan_parked_shards",
			Help: "Shards parked after a failure that repeated on the same input, as of the last reconcile pass; `ghost repo scans` names them and `ghost coord unpark` resumes one.",
		}),
		fails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ghost_scan_attempt_failures_total",
			Help: "Failed attempts at a shard by this node's workers, by cause: transient (storage, coordination store, lease) or input (counts toward parking).",
		}, []string{"cause"}),
		parks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ghost_scan_shards_parked_total",
			Help: "Shards this node's workers parked.",
		}),
		catchUp: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ghost_scan_superseded_runs_total",
			Help: "Push runs this node's workers found folded without a preserved object list and handed to a catch-up full run.",
		}),
	}
	m.work = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ghost_scan_scanned_total",
		Help: "What this node's scan workers scanned, by unit: blobs (and commit and tag objects), bytes, findings (secrets found, before they are merged into alerts), lfs_objects and lfs_bytes (Git LFS objects read as their pointers' content), lfs_skipped (LFS objects over the size bound or not held by the repository).",
	}, []string{"unit"})
	m.shards = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ghost_scan_shards_completed_total",
		Help: "Shards this node's scan workers completed.",
	})
	m.done = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ghost_scan_runs_completed_total",
		Help: "Scan runs this node saw finish (the node whose worker completed a run's last shard), by kind: push or full.",
	}, []string{"kind"})
	m.pushToDone = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "ghost_scan_push_to_done_seconds",
		Help:    "For each push run that finished: from its start, right after the push landed, to the end of its scan.",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 14), // 0.25 s to about 34 min
	})
	for _, u := range []string{"blobs", "bytes", "findings"} {
		m.work.WithLabelValues(u)
	}
	for _, k := range []Kind{KindPush, KindFull} {
		m.done.WithLabelValues(string(k))
	}
	reg.MustRegister(m.lag, m.oldest, m.runs, m.parked, m.fails, m.parks, m.catchUp, m.work, m.shards, m.done, m.pushToDone)
	return m
}

// scanned counts a batch a worker scanned.
func (m *Metrics) scanned(blobs int, bytes int64, findings int) {
	if m == nil {
		return
	}
	m.work.WithLabelValues("blobs").Add(float64(blobs))
	m.work.WithLabelValues("bytes").Add(float64(bytes))
	m.work.WithLabelValues("findings").Add(float64(findings))
}

// lfs counts the Git LFS objects of a batch's pointers: read and
// scanned, or skipped (over the bound, or not held).
func (m *Metrics) lfs(st secretscan.Stats, missing int) {
	if m == nil {
		return
	}
	m.work.WithLabelValues("lfs_objects").Add(float64(st.Blobs - st.LargeSkipped))
	m.work.WithLabelValues("lfs_bytes").Add(float64(st.Bytes - st.LargeBytes))
	m.work.WithLabelValues("lfs_skipped").Add(float64(st.LargeSkipped + int64(missing)))
}

func (m *Metrics) shardDone() {
	if m != nil {
		m.shards.Inc()
	}
}

// runDone counts a run that finished, and a push run's time from its
// start to the end of its scan.
func (m *Metrics) runDone(kind Kind, took time.Duration) {
	if m == nil {
		return
	}
	m.done.WithLabelValues(string(kind)).Inc()
	if kind == KindPush && took >= 0 {
		m.pushToDone.Observe(took.Seconds())
	}
}

func (m *Metrics) observeLag(tenant, repoID string, l Lag) {
	if m == nil {
		return
	}
	if l.Seqs == 0 {
		m.forget(tenant, repoID)
		return
	}
	m.lag.WithLabelValues(tenant, repoID).Set(float64(l.Seqs))
	if !l.Oldest.IsZero() {
		m.oldest.WithLabelValues(tenant, repoID).Set(float64(l.Oldest.UnixMilli()) / 1000)
	} else {
		m.oldest.DeleteLabelValues(tenant, repoID)
	}
}

func (m *Metrics) forget(tenant, repoID string) {
	if m == nil {
		return
	}
	m.lag.DeleteLabelValues(tenant, repoID)
	m.oldest.DeleteLabelValues(tenant, repoID)
}

func (m *Metrics) failure(transient bool) {
	if m == nil {
		return
	}
	cause := "input"
	if transient {
		cause = "transient"
	}
	m.fails.WithLabelValues(cause).Inc()
}

func (m *Metrics) parkedOne() {
	if m != nil {
		m.parks.Inc()
	}
}

func (m *Metrics) superseded() {
	if m != nil {
		m.catchUp.Inc()
	}
}

// resetLag drops every per-repository figure: this process no longer
// reconciles, so they would go stale.
func (m *Metrics) resetLag() {
	if m == nil {
		return
	}
	m.lag.Reset()
	m.oldest.Reset()
	m.runs.Reset()
	m.parked.Set(0)
}

// observeRuns replaces the run-state figures with counts.
func (m *Metrics) observeRuns(counts map[[2]string]int, parked int) {
	if m == nil {
		return
	}
	m.runs.Reset()
	for k, n := range counts {
		m.runs.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
	m.parked.Set(float64(parked))
}
