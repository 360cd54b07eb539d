package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/etcdserver"
	"github.com/ghost-scm/ghost/internal/objstore/countstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
	"github.com/ghost-scm/ghost/internal/webhook"
)

// The delivery benchmarks (issue 24). Each reports its figures beside a
// reference measured in the same run: a bare webhook.Sender posting to
// the same receiver, one request after another, which is what a delivery
// costs without the dispatcher (no log, no state, no board).
//
//	go test -run '^$' -bench 'Delivery|Dispatcher' -benchtime 1x -timeout 30m ./internal/hooks/
//
// GHOST_BENCH_PUSHES sets the pushes timed per case (default 40 for one
// hook, 4 for 1,000), GHOST_BENCH_EVENTS the events of the throughput
// run (default 500). The log and the store are in memory (memstore,
// counted by countstore) and etcd is the embedded server, all on this
// machine: the figures are of the dispatcher's own work and its
// requests, not of a network.

// benchReceiver records when each push (by its "after") reached each
// hook (by path).
type benchReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	at    map[string]time.Time // "<path> <after>" -> arrival
	count atomic.Int64
}

func newBenchReceiver(b *testing.B) *benchReceiver {
	rc := &benchReceiver{at: map[string]time.Time{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-GitHub-Event") == "push" {
			var p struct {
				After string `json:"after"`
			}
			_ = json.Unmarshal(body, &p)
			rc.mu.Lock()
			rc.at[r.URL.Path+" "+p.After] = now
			rc.mu.Unlock()
		}
		rc.count.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(rc.srv.Close)
	return rc
}

func (rc *benchReceiver) waitCount(b *testing.B, n int64, within time.Duration) {
	deadline := time.Now().Add(within)
	for rc.count.Load() < n {
		if time.Now().After(deadline) {
			b.Fatalf("the receiver got %d deliveries, want %d", rc.count.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// counted is an installation whose object-store and etcd requests are
// counted.
type counted struct {
	*env
	storeReqs, etcdReqs atomic.Int64
	mu                  sync.Mutex
	byOp                map[string]int64
	d                   *Dispatcher
}

func newCounted(b *testing.B) *counted {
	c := &counted{byOp: map[string]int64{}}
	store := countstore.New(memstore.New(), func(op string, _ error) {
		c.storeReqs.Add(1)
		c.mu.Lock()
		c.byOp[op]++
		c.mu.Unlock()
	})
	c.env = newEnv(b, store)
	cl, err := etcdserver.NewClient(etcdClient.Endpoints(), etcdserver.WithRequestObserver(func(string) { c.etcdReqs.Add(1) }))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cl.Close() })
	o := c.dispatchOptions(c.board(cl, 10*time.Second))
	o.Sender.Dialer = nil // the system's: the benchmark is not a test of the guard
	c.d = NewDispatcher(c.hooks, o)
	c.hooks.SetWake(c.d.Notify)
	run(b, c.d)
	return c
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func pct(ds []time.Duration, p float64) time.Duration {
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

// ops returns a copy of the per-operation counts.
func (c *counted) ops() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.byOp))
	for k, v := range c.byOp {
		out[k] = v
	}
	return out
}

// reportOps reports the object-store requests per event by operation,
// since before, less those of not (the pushes' own commits).
func (c *counted) reportOps(b *testing.B, before, not map[string]int64, events float64) {
	for op, n := range c.ops() {
		if d := n - before[op] - not[op]; d > 0 {
			b.ReportMetric(float64(d)/events, op+"/event")
		}
	}
}

// reference posts n signed push bodies with a bare sender, one after
// another, and returns each one's time.
func reference(b *testing.B, url string, n int) []time.Duration {
	s := webhook.NewSender(webhook.Options{Policy: webhook.Policy{AllowPrivate: true}})
	body, _ := webhook.PushPayload(webhook.Push{Ref: "refs/heads/main", Before: wal.ZeroID, After: oid(1), Repo: webhook.Repository{ID: "r", Owner: "alice", Name: "web"}})
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := s.Send(context.Background(), url+"/ref", []byte("k"), webhook.Delivery{ID: strconv.Itoa(i), Event: "ping", Body: body}); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(t0))
	}
	return out
}

// BenchmarkDeliveryLatency: from a push's commit (its acknowledgement:
// the push path answers once the log's compare-and-swap landed) to the
// receiver, for every hook of the repository, with 1 and 1,000 hooks;
// and the object-store and etcd requests per delivered event.
func BenchmarkDeliveryLatency(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("hooks=%d", n), func(b *testing.B) {
			pushes := envInt("GHOST_BENCH_PUSHES", map[bool]int{true: 40, false: 4}[n == 1])
			for range b.N {
				c := newCounted(b)
				rc := newBenchReceiver(b)
				for i := 0; i < n; i++ {
					c.addHook(b, c.scope(), fmt.Sprintf("%s/h/%d", rc.srv.URL, i), "k", "push")
				}
				rc.waitCount(b, int64(n), 10*time.Minute) // the pings
				ref := reference(b, rc.srv.URL, 200)
				base := rc.count.Load()
				s0, e0 := c.storeReqs.Load(), c.etcdReqs.Load()
				ops0 := c.ops()
				var lat []time.Duration
				var commitReqs int64 // the pushes' own: not delivery's
				commitOps := map[string]int64{}
				old := wal.ZeroID
				start := time.Now()
				for p := 1; p <= pushes; p++ {
					r0, o0 := c.storeReqs.Load(), c.ops()
					c.push(wal.Transition{Ref: "refs/heads/main", Old: old, New: oid(p)})
					acked := time.Now()
					commitReqs += c.storeReqs.Load() - r0
					for op, n := range c.ops() {
						commitOps[op] += n - o0[op]
					}
					c.d.AfterPush(context.Background(), "alice", c.repo.ID, "web")
					old = oid(p)
					rc.waitCount(b, base+int64(p*n), 10*time.Minute)
					rc.mu.Lock()
					for i := 0; i < n; i++ {
						lat = append(lat, rc.at[fmt.Sprintf("/h/%d %s", i, oid(p))].Sub(acked))
					}
					rc.mu.Unlock()
				}
				elapsed := time.Since(start)
				events := float64(pushes * n)
				p50, p99, r50 := pct(lat, 0.50), pct(lat, 0.99), pct(ref, 0.50)
				var refSum time.Duration
				for _, d := range ref {
					refSum += d
				}
				// The reference for n hooks: a bare sender posting the n
				// deliveries of one push back to back.
				refAll := time.Duration(float64(refSum) / float64(len(ref)) * float64(n))
				b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(r50.Microseconds())/1000, "ref-post-p50-ms")
				b.ReportMetric(float64(refAll.Microseconds())/1000, "ref-n-posts-ms")
				b.ReportMetric(float64(p99)/float64(refAll), "p99/ref-n-posts")
				b.ReportMetric(events/elapsed.Seconds(), "events/s")
				b.ReportMetric(float64(c.storeReqs.Load()-s0-commitReqs)/events, "store-req/event")
				b.ReportMetric(float64(c.etcdReqs.Load()-e0)/events, "etcd-req/event")
				b.ReportMetric(float64(commitReqs)/float64(pushes), "commit-store-req/push")
				c.reportOps(b, ops0, commitOps, events)
			}
		})
	}
}

// BenchmarkDispatcherThroughput: one hook, a backlog of pushes already in
// the log (a receiver that was down), delivered in order as fast as the
// dispatcher goes, against the bare sender's rate.
func BenchmarkDispatcherThroughput(b *testing.B) {
	events := envInt("GHOST_BENCH_EVENTS", 500)
	for range b.N {
		c := newCounted(b)
		rc := newBenchReceiver(b)
		c.addHook(b, c.scope(), rc.srv.URL+"/h/0", "k", "push")
		rc.waitCount(b, 1, time.Minute)
		old := wal.ZeroID
		for p := 1; p <= events; p++ {
			c.push(wal.Transition{Ref: "refs/heads/main", Old: old, New: oid(p)})
			old = oid(p)
		}
		ref := reference(b, rc.srv.URL, events)
		var refTotal time.Duration
		for _, d := range ref {
			refTotal += d
		}
		base := rc.count.Load()
		s0, e0 := c.storeReqs.Load(), c.etcdReqs.Load()
		ops0 := c.ops()
		start := time.Now()
		c.d.AfterPush(context.Background(), "alice", c.repo.ID, "web")
		rc.waitCount(b, base+int64(events), 10*time.Minute)
		elapsed := time.Since(start)
		rate := float64(events) / elapsed.Seconds()
		refRate := float64(events) / refTotal.Seconds()
		b.ReportMetric(rate, "events/s")
		b.ReportMetric(refRate, "ref-posts/s")
		b.ReportMetric(rate/refRate, "rate/ref")
		b.ReportMetric(float64(c.storeReqs.Load()-s0)/float64(events), "store-req/event")
		b.ReportMetric(float64(c.etcdReqs.Load()-e0)/float64(events), "etcd-req/event")
		c.reportOps(b, ops0, nil, float64(events))
	}
}
