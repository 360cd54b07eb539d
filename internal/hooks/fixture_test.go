package hooks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v68/github"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver/etcdtest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
	"github.com/ghost-scm/ghost/internal/webhook"
)

var etcdClient *clientv3.Client

func TestMain(m *testing.M) { etcdtest.Main(m, &etcdClient) }

// loopbackOnly is a dialer that fails the test if asked to connect
// anywhere but 127.0.0.1: no test here may send a packet elsewhere.
type loopbackOnly struct {
	t  testing.TB
	mu sync.Mutex
	n  int
}

func (d *loopbackOnly) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil || host != "127.0.0.1" {
		d.t.Errorf("asked to dial %s: only 127.0.0.1 may be dialled", address)
		return nil, errors.New("refused by the test dialer")
	}
	d.mu.Lock()
	d.n++
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

// got is one delivery as the receiver saw it.
type got struct {
	guid, event string
	body        []byte
	parsed      any
	status      int
}

// receiver is a real HTTP server on 127.0.0.1 that checks every delivery
// as a GitHub receiver does, with go-github: the signature under the
// hook's secret, and the payload's shape.
type receiver struct {
	t      testing.TB
	srv    *httptest.Server
	secret []byte
	mu     sync.Mutex
	all    []got // every request, refused ones included
	ok     []got // the accepted ones, in order
	// fail, while positive, makes the next requests fail with 503.
	fail int
	// block, when set, holds requests until it is closed.
	block chan struct{}
	seen  chan struct{}
}

func newReceiver(t testing.TB, secret string) *receiver {
	rc := &receiver{t: t, secret: []byte(secret), seen: make(chan struct{}, 1024)}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	payload, err := github.ValidatePayload(r, rc.secret)
	if err != nil {
		rc.t.Errorf("receiver: the signature does not validate: %v", err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	ev, err := github.ParseWebHook(github.WebHookType(r), payload)
	if err != nil && !strings.Contains(err.Error(), "unknown X-Github-Event") {
		rc.t.Errorf("receiver: %s payload does not parse: %v", github.WebHookType(r), err)
	}
	if r.Header.Get("X-Ghost-Event") != github.WebHookType(r) || r.Header.Get("X-Ghost-Delivery") != github.DeliveryID(r) {
		rc.t.Errorf("receiver: ghost's headers differ from GitHub's")
	}
	g := got{guid: github.DeliveryID(r), event: github.WebHookType(r), body: payload, parsed: ev}
	rc.mu.Lock()
	block := rc.block
	fail := rc.fail > 0
	if fail {
		rc.fail--
		g.status = http.StatusServiceUnavailable
	} else {
		g.status = http.StatusOK
	}
	rc.all = append(rc.all, g)
	if !fail {
		rc.ok = append(rc.ok, g)
	}
	rc.mu.Unlock()
	select {
	case rc.seen <- struct{}{}:
	default:
	}
	if block != nil {
		<-block
	}
	if fail {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "thanks")
}

func (rc *receiver) accepted() []got {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]got(nil), rc.ok...)
}

func (rc *receiver) requests() []got {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]got(nil), rc.all...)
}

// waitFor waits until the receiver accepted n deliveries.
func (rc *receiver) waitFor(t testing.TB, n int, within time.Duration) []got {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if g := rc.accepted(); len(g) >= n {
			return g
		}
		if time.Now().After(deadline) {
			g := rc.accepted()
			var evs []string
			for _, x := range g {
				evs = append(evs, x.event)
			}
			t.Fatalf("the receiver accepted %d deliveries (%v) within %v, want %d", len(g), evs, within, n)
		}
		select {
		case <-rc.seen:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// env is one installation: a store, its log and metadata, a namespace in
// the shared etcd, and a repository alice/web.
type env struct {
	t     testing.TB
	store objstore.Store
	log   *wal.Log
	meta  *meta.Store
	hooks *Store
	ns    string
	repo  meta.Repo
	dial  *loopbackOnly
}

func noSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func newEnv(t testing.TB, store objstore.Store) *env {
	t.Helper()
	if store == nil {
		store = memstore.New()
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	e := &env{t: t, store: store, log: wal.New(store, wal.Options{Sleep: noSleep}), ns: "/t/" + hex.EncodeToString(b[:]), dial: &loopbackOnly{t: t}}
	e.meta = meta.New(store, e.log)
	e.hooks = New(Options{Store: store, Log: e.log, Meta: e.meta, Policy: webhook.Policy{AllowPrivate: true}, BaseURL: "https://git.example.com"})
	ctx := context.Background()
	if _, err := e.meta.CreateTenant(ctx, "alice", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	r, err := e.meta.CreateRepo(ctx, "alice", "web", false)
	if err != nil {
		t.Fatal(err)
	}
	e.repo = r
	return e
}

func (e *env) scope() Scope { return Scope{Tenant: "alice", Repo: e.repo.ID, Name: "web"} }

// board returns a board of the env's namespace, on its own client when
// c is set (a node of its own).
func (e *env) board(c *clientv3.Client, ttl time.Duration) *etcdcoord.Board {
	e.t.Helper()
	if c == nil {
		c = etcdClient
	}
	b, err := etcdcoord.New(etcdcoord.Config{Client: c, Namespace: e.ns})
	if err != nil {
		e.t.Fatal(err)
	}
	bd, err := b.Board("hooks", ttl)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = bd.Close() })
	return bd
}

// fastRetries are DispatchOptions for tests: quick retries, the test's
// dialer, private addresses allowed.
func (e *env) dispatchOptions(b Board) DispatchOptions {
	return DispatchOptions{
		Board:     func() Board { return b },
		Sender:    webhook.Options{Policy: webhook.Policy{AllowPrivate: true}, Dialer: e.dial, Timeout: 5 * time.Second},
		RetryBase: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond, RetryFor: time.Minute,
		TakeJitter: -1,
	}
}

// run starts d until the test ends.
func run(t testing.TB, d *Dispatcher) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return cancel
}

func oid(n int) string { return fmt.Sprintf("%040x", n) }

// push commits a synthetic push (ref transitions, no objects) to the log,
// as the push path would after validation.
func (e *env) push(ts ...wal.Transition) wal.Result {
	e.t.Helper()
	res, err := e.log.Commit(context.Background(), e.repo.ID, wal.Push{Transitions: ts, PushedBy: "alice (token 01TEST)", Pack: strings.NewReader(""), PackSize: 0})
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

func (e *env) addHook(t testing.TB, sc Scope, url, secret string, events ...string) Hook {
	t.Helper()
	h, err := e.hooks.Create(context.Background(), sc, Input{URL: &url, Secret: &secret, Events: events}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// newClient opens another client of the test etcd: a node of its own,
// with its own session.
func newClient(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: etcdClient.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type (
	responseWriter = http.ResponseWriter
	request        = http.Request
	httpFunc       = http.HandlerFunc
)
