package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/server"
)

// fakeCoord is a coordination handle whose store answers or not.
type fakeCoord struct{ down atomic.Bool }

func (c *fakeCoord) Backend() (coord.Backend, bool) { return nil, false }

func (c *fakeCoord) Ready(context.Context) error {
	if c.down.Load() {
		return errors.New("etcd does not answer")
	}
	return nil
}

// TestReadyz: /readyz is 200 only while the object store and the
// coordination store both answer, and says which one does not
// (issue 21 §4); /healthz stays 200 throughout.
func TestReadyz(t *testing.T) {
	store := faultstore.New(memstore.New())
	c := &fakeCoord{}
	s, err := server.New(context.Background(), server.Options{Store: store, CacheDir: t.TempDir(), Coordination: c})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != 200 || body != "store: ok\netcd: ok\n" {
		t.Errorf("all up: %d %q", code, body)
	}
	c.down.Store(true)
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "store: ok\n") || !strings.Contains(body, "etcd: not ready: etcd does not answer") {
		t.Errorf("etcd down: %d %q", code, body)
	}
	c.down.Store(false)
	store.SetPlan(func(call faultstore.Call) faultstore.Fault {
		if call.Op == faultstore.OpList {
			return faultstore.Fault{Outcome: faultstore.Lost}
		}
		return faultstore.Fault{}
	})
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "store: not ready") || !strings.Contains(body, "etcd: ok") {
		t.Errorf("store down: %d %q", code, body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz while not ready: %d", code)
	}
	store.SetPlan(nil)
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("back up: %d", code)
	}
}

// gatherAll reads a registry's counters, gauges and histogram counts by
// name{labels}.
func gatherAll(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[name] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[name] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[name+"_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}
