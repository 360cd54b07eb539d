package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/pushprotect"
)

// Readier is a Coordination that can say whether its store answers now;
// /readyz asks it. serve's coordination is one.
type Readier interface {
	Ready(ctx context.Context) error
}

// readyTimeout bounds each check of /readyz: a load balancer's probe must
// get an answer, and a store that takes longer is not ready.
const readyTimeout = 2 * time.Second

// readyz answers 200 only when the object store answers (one LIST of a
// key) and, when the node has a coordination store, so does etcd. Each
// check is one line of the body, so an operator sees which one failed
// (docs/adr/0101-health-metrics-traces.md).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	type check struct {
		name string
		run  func(context.Context) error
	}
	checks := []check{{"store", func(ctx context.Context) error {
		_, err := s.opts.Store.List(ctx, "meta/", "", 1)
		return err
	}}}
	if s.opts.Coordination != nil {
		checks = append(checks, check{"etcd", func(ctx context.Context) error {
			if rd, ok := s.opts.Coordination.(Readier); ok {
				return rd.Ready(ctx)
			}
			if _, ok := s.opts.Coordination.Backend(); !ok {
				return errors.New("the coordination store is not open yet")
			}
			return nil
		}})
	}
	var b strings.Builder
	ok := true
	for _, c := range checks {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		err := c.run(ctx)
		cancel()
		if err != nil {
			ok = false
			fmt.Fprintf(&b, "%s: not ready: %v\n", c.name, err)
			continue
		}
		fmt.Fprintf(&b, "%s: ok\n", c.name)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprint(w, b.String())
}

// meteredProtect counts what push protection decides and the time it
// adds to a push (ghost_push_protection_*).
type meteredProtect struct {
	inner    gitsvc.PushProtector
	checks   *prometheus.CounterVec
	duration prometheus.Histogram
	// unscanned counts the Git LFS objects pushes added past push
	// protection's budget: work refused or deferred to the scan run,
	// never dropped (docs/adr/0130-lfs-push-protection.md).
	unscanned *prometheus.CounterVec
}

func newMeteredProtect(inner gitsvc.PushProtector, reg prometheus.Registerer) *meteredProtect {
	m := &meteredProtect{
		inner: inner,
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ghost_push_protection_checks_total",
			Help: "Pushes push protection checked, by outcome: clean, blocked (a secret refused the push), bypassed (secrets let through with a reason, each recorded as an alert), refused (a bad push option, a bypass not recorded) or error (could not decide; the push was refused, retry).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ghost_push_protection_seconds",
			Help:    "Time push protection added to each push it checked.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
		}),
	}
	m.unscanned = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ghost_push_protection_lfs_unscanned_total",
		Help: "Git LFS objects pushes added past push protection's budget, by what became of the push: refused, or landed with the objects left to its scan run (deferred).",
	}, []string{"outcome"})
	for _, o := range []string{"clean", "blocked", "bypassed", "refused", "error"} {
		m.checks.WithLabelValues(o)
	}
	for _, o := range []string{"refused", "deferred"} {
		m.unscanned.WithLabelValues(o)
	}
	reg.MustRegister(m.checks, m.duration, m.unscanned)
	return m
}

// Check implements gitsvc.PushProtector.
func (m *meteredProtect) Check(ctx context.Context, p pushprotect.Push) (*pushprotect.Verdict, error) {
	start := time.Now()
	v, err := m.inner.Check(ctx, p)
	m.duration.Observe(time.Since(start).Seconds())
	if err == nil && len(v.Unscanned) > 0 {
		o := "deferred"
		if v.Blocked {
			o = "refused"
		}
		m.unscanned.WithLabelValues(o).Add(float64(len(v.Unscanned)))
	}
	var oe *pushprotect.OptionError
	switch {
	case errors.As(err, &oe), errors.Is(err, pushprotect.ErrBypassNotRecorded):
		m.checks.WithLabelValues("refused").Inc()
	case err != nil:
		m.checks.WithLabelValues("error").Inc()
	case v.Blocked:
		m.checks.WithLabelValues("blocked").Inc()
	case v.Bypass != "" && len(v.Findings) > 0:
		m.checks.WithLabelValues("bypassed").Inc()
	default:
		m.checks.WithLabelValues("clean").Inc()
	}
	return v, err
}
