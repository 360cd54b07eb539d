package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v68/github"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/compact"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/coord/memcoord"
	"github.com/ghost-scm/ghost/internal/etcdserver"
	"github.com/ghost-scm/ghost/internal/etcdserver/etcdtest"
	"github.com/ghost-scm/ghost/internal/hooks"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/testkit"
	"github.com/ghost-scm/ghost/internal/webhook"
)

// staticCoord is a coordination handle whose backend is open from the
// start.
type staticCoord struct{ b coord.Backend }

func (c staticCoord) Backend() (coord.Backend, bool) { return c.b, c.b != nil }

// dialer dials 127.0.0.1 only and fails the test if asked for anything
// else; while blocked, it holds every dial until released or cancelled.
type dialer struct {
	t       *testing.T
	mu      sync.Mutex
	blocked chan struct{}
	entered chan struct{}
}

func (d *dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(address)
	if host != "127.0.0.1" {
		d.t.Errorf("asked to dial %s: only 127.0.0.1 may be dialled", address)
		return nil, errors.New("refused by the test dialer")
	}
	d.mu.Lock()
	b := d.blocked
	d.mu.Unlock()
	if b != nil {
		select {
		case d.entered <- struct{}{}:
		default:
		}
		select {
		case <-b:
			return nil, errors.New("the node is gone")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

// hookReceiver accepts deliveries that go-github validates under secret.
type hookReceiver struct {
	t      *testing.T
	srv    *httptest.Server
	secret []byte
	mu     sync.Mutex
	got    []received
}

type received struct {
	guid, event string
	body        []byte
	parsed      any
}

func newHookReceiver(t *testing.T, secret string) *hookReceiver {
	rc := &hookReceiver{t: t, secret: []byte(secret)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		payload, err := github.ValidatePayload(r, rc.secret)
		if err != nil {
			t.Errorf("receiver: %v", err)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		ev, err := github.ParseWebHook(github.WebHookType(r), payload)
		if err != nil && !strings.Contains(err.Error(), "unknown X-Github-Event") { // scan_run is ghost's own
			t.Errorf("receiver: %s: %v", github.WebHookType(r), err)
		}
		rc.mu.Lock()
		rc.got = append(rc.got, received{github.DeliveryID(r), github.WebHookType(r), payload, ev})
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *hookReceiver) wait(t *testing.T, n int, within time.Duration) []received {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rc.mu.Lock()
		g := append([]received(nil), rc.got...)
		rc.mu.Unlock()
		if len(g) >= n {
			return g
		}
		if time.Now().After(deadline) {
			var evs []string
			for _, x := range g {
				evs = append(evs, x.event)
			}
			t.Fatalf("the receiver got %d deliveries (%v) in %v, want %d", len(g), evs, within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// node is one ghost server of a cluster sharing a store and an etcd.
type node struct {
	srv  *server.Server
	http *httptest.Server
	etcd *clientv3.Client
	stop context.CancelFunc
	done chan struct{}
}

func startNode(t *testing.T, store objstore.Store, endpoints []string, ns string, d webhook.Dialer, logs *testkit.Buffer, off bool) *node {
	t.Helper()
	n := &node{}
	var c server.Coordination
	if endpoints != nil {
		cl, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		n.etcd = cl
		t.Cleanup(func() { cl.Close() })
		b, err := etcdcoord.New(etcdcoord.Config{Client: cl, Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		c = staticCoord{b}
	}
	var logger *slog.Logger
	if logs != nil {
		logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := server.New(context.Background(), server.Options{
		Store: store, CacheDir: filepath.Join(t.TempDir(), "cache"), Coordination: c, Logger: logger,
		Webhooks: server.WebhookOptions{
			Policy: webhook.Policy{AllowPrivate: true}, Dialer: d, Timeout: 5 * time.Second,
			RetryBase: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond, HoldTTL: 2 * time.Second,
			Reconcile: hooks.ReconcileOptions{Every: 200 * time.Millisecond, LeaderTTL: 2 * time.Second, MarkGrace: 500 * time.Millisecond}, TakeJitter: -1,
			BaseURL: "https://git.example.com", Off: off,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	n.srv = srv
	n.http = httptest.NewServer(srv.Handler()) // 127.0.0.1
	ctx, cancel := context.WithCancel(context.Background())
	n.stop, n.done = cancel, make(chan struct{})
	go func() {
		defer close(n.done)
		_ = srv.RunWebhooks(ctx)
	}()
	t.Cleanup(func() {
		n.stop()
		<-n.done
		if n.etcd != nil {
			n.etcd.Close()
		}
		n.http.Close()
		srv.Close()
	})
	return n
}

// kill stops the node as a crash would: its etcd session is not ended,
// so its holds stay until their time to live runs out. What it was doing
// winds down in the background (its connections are gone).
func (n *node) kill() {
	if n.etcd != nil {
		n.etcd.Close()
	}
	n.stop()
}

func etcdEndpoints(t *testing.T) []string {
	t.Helper()
	srv := etcdtest.StartServer(t, etcdserver.Options{Dir: t.TempDir(), UnsafeNoFsync: true, Logger: zap.NewNop()})
	c, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.Endpoints()
}

func pushURL(n *node, tok string) string {
	return "http://x:" + tok + "@" + strings.TrimPrefix(n.http.URL, "http://") + "/alice/demo.git"
}

const hookSecret = "the-hook-secret-0451"

// TestWebhookNodeKilledBeforeDelivery: the node that took a push dies
// before it delivered it (it held the hook, in the middle of an
// attempt); another node delivers it once the dead node's hold runs out.
// And a node whose dispatch never ran (it died between the commit and
// waking anyone) leaves a mark the other node's reconciler finds. The
// secret is in no payload, no log line and no stored object but the
// hook's own record.
func TestWebhookNodeKilledBeforeDelivery(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	eps := etcdEndpoints(t)
	logs := &testkit.Buffer{}
	rc := newHookReceiver(t, hookSecret)
	da := &dialer{t: t, blocked: make(chan struct{}), entered: make(chan struct{}, 1)}
	a := startNode(t, store, eps, "/k", da, logs, false)
	tok, repo := seed(t, a.srv)
	sc := hooks.Scope{Tenant: "alice", Repo: repo.ID, Name: "demo"}
	secret := hookSecret
	if _, err := a.srv.Hooks().Create(ctx, sc, hooks.Input{URL: &rc.srv.URL, Secret: &secret, Events: []string{"push", "create"}}, "alice"); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	git(t, src, "init", "-q", "--initial-branch=main")
	git(t, src, "commit", "-q", "--allow-empty", "-m", "one")
	git(t, src, "push", "-q", pushURL(a, tok), "main")
	// A holds the hook and is stuck in an attempt.
	select {
	case <-da.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("node A never tried to deliver")
	}
	b := startNode(t, store, eps, "/k", &dialer{t: t}, logs, false)
	a.kill()
	close(da.blocked)
	g := rc.wait(t, 3, 30*time.Second)
	if g[0].event != "ping" || g[1].event != "create" || g[2].event != "push" {
		t.Fatalf("got %s %s %s, want the ping, then the push's create and push", g[0].event, g[1].event, g[2].event)
	}
	if p := g[2].parsed.(*github.PushEvent); p.GetAfter() != git(t, src, "rev-parse", "HEAD") || len(p.Commits) != 1 || p.Commits[0].GetMessage() != "one\n" {
		t.Errorf("push payload: after %s, commits %v", p.GetAfter(), p.Commits)
	}

	// C takes a push and dies before it wakes anyone (its delivery is
	// off): B's reconciler finds the push's mark, the only trace of it
	// once the earlier marks are gone.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if len(keys(t, store, "hooks/pending/")) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("marks left: %v", keys(t, store, "hooks/pending/"))
		}
	}
	c := startNode(t, store, nil, "/k", &dialer{t: t}, logs, true)
	git(t, src, "commit", "-q", "--allow-empty", "-m", "two")
	git(t, src, "push", "-q", pushURL(c, tok), "main")
	c.kill()
	g = rc.wait(t, 4, 30*time.Second)
	if p, ok := g[3].parsed.(*github.PushEvent); !ok || p.GetAfter() != git(t, src, "rev-parse", "HEAD") {
		t.Fatalf("fourth delivery %s, want the second push", g[3].event)
	}
	_ = b

	for _, x := range g {
		if bytes.Contains(x.body, []byte(hookSecret)) {
			t.Errorf("the secret is in a %s payload", x.event)
		}
	}
	if strings.Contains(logs.String(), hookSecret) {
		t.Error("the secret is in a log line")
	}
	_ = objstore.Walk(ctx, store, "", func(o objstore.Info) error {
		if strings.HasPrefix(o.Key, "hooks/sets/") {
			return nil
		}
		body, _, err := objstore.ReadAll(ctx, store, o.Key, 1<<30)
		if err == nil && bytes.Contains(body, []byte(hookSecret)) {
			t.Errorf("the secret is stored in %s", o.Key)
		}
		return nil
	})
	ds, err := b.srv.Hooks().Deliveries(ctx, sc, mustHookID(t, b.srv, sc), 0)
	if err != nil || len(ds) < 4 {
		t.Fatalf("delivery log: %v, %d entries", err, len(ds))
	}
}

func mustHookID(t *testing.T, s *server.Server, sc hooks.Scope) int64 {
	t.Helper()
	hs, err := s.Hooks().List(context.Background(), sc)
	if err != nil || len(hs) != 1 {
		t.Fatalf("hooks: %v %v", err, hs)
	}
	return hs[0].ID
}

// TestWebhookCompactionBetweenPushAndDelivery: pushes land while no node
// delivers (etcd is not there), a full compaction that keeps nothing
// recent folds them, and a force-push has made the second push's commit
// unreachable. Once a node delivers, every push arrives, with its
// commits: compaction kept the headers and the objects hooks had not
// delivered (docs/adr/0105-webhook-delivery.md).
func TestWebhookCompactionBetweenPushAndDelivery(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	rc := newHookReceiver(t, hookSecret)
	a := startNode(t, store, nil, "/c", &dialer{t: t}, nil, false)
	tok, repo := seed(t, a.srv)
	sc := hooks.Scope{Tenant: "alice", Repo: repo.ID, Name: "demo"}
	secret := hookSecret
	if _, err := a.srv.Hooks().Create(ctx, sc, hooks.Input{URL: &rc.srv.URL, Secret: &secret, Events: []string{"push"}}, "alice"); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	git(t, src, "init", "-q", "--initial-branch=main")
	var heads []string
	for i, m := range []string{"one", "two"} {
		git(t, src, "commit", "-q", "--allow-empty", "-m", m)
		git(t, src, "push", "-q", pushURL(a, tok), "main")
		heads = append(heads, git(t, src, "rev-parse", "HEAD"))
		_ = i
	}
	git(t, src, "reset", "-q", "--hard", "HEAD~1")
	git(t, src, "commit", "-q", "--allow-empty", "-m", "three, forced")
	git(t, src, "push", "-q", "--force", pushURL(a, tok), "main")
	heads = append(heads, git(t, src, "rev-parse", "HEAD"))

	cp := compact.New(a.srv.Log(), a.srv.Cache(), compact.Options{Events: a.srv.Hooks(), Factor: -1, KeepRecent: -1})
	if _, err := cp.CompactFull(ctx, repo.ID); err != nil {
		t.Fatal(err)
	}
	x, err := a.srv.Log().Head(ctx, repo.ID)
	if err != nil || x.CompactedThroughSeq != 3 || len(x.Layers) != 0 {
		t.Fatalf("not folded: %+v %v", x, err)
	}
	b := startNode(t, store, etcdEndpoints(t), "/c", &dialer{t: t}, nil, false)
	g := rc.wait(t, 4, 30*time.Second)
	_ = b
	if g[0].event != "ping" {
		t.Fatalf("first %s", g[0].event)
	}
	msgs := []string{"one\n", "two\n", "three, forced\n"}
	for i := 0; i < 3; i++ {
		p, ok := g[i+1].parsed.(*github.PushEvent)
		if !ok || p.GetAfter() != heads[i] {
			t.Fatalf("delivery %d: %s, want push %d", i+1, g[i+1].event, i+1)
		}
		if len(p.Commits) != 1 || p.Commits[0].GetMessage() != msgs[i] {
			t.Errorf("push %d lists %d commits (%v), want its own: its objects were dropped", i+1, len(p.Commits), p.Commits)
		}
		if p.GetForced() != (i == 2) {
			t.Errorf("push %d forced=%v", i+1, p.GetForced())
		}
	}
	if n := strings.Count(fmt.Sprint(keys(t, store, "hooks/layers/")), "hooks/layers/"); n != 0 {
		// Kept headers go once every hook is past them (at the next
		// compaction); here they are still there, which is allowed.
		t.Logf("%d kept headers remain until the next compaction", n)
	}
}

func keys(t *testing.T, s objstore.Store, prefix string) []string {
	var out []string
	_ = objstore.Walk(context.Background(), s, prefix, func(o objstore.Info) error {
		out = append(out, o.Key)
		return nil
	})
	return out
}

var _ = meta.KindUser

// TestWebhookEventsOfAlertsScansAndRepositories: a tenant's hook gets the
// repository events of the API (created, publicized, deleted), the
// alert a push's scan files (never with the secret) and its resolution,
// and the scan run's completion, each parsed by go-github where GitHub
// has the event.
func TestWebhookEventsOfAlertsScansAndRepositories(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	eps := etcdEndpoints(t)
	cl, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	eb, err := etcdcoord.New(etcdcoord.Config{Client: cl, Namespace: "/e"})
	if err != nil {
		t.Fatal(err)
	}
	scans := memcoord.New(coord.Limits{})
	logs := &testkit.Buffer{}
	srv, err := server.New(ctx, server.Options{
		Store: store, CacheDir: filepath.Join(t.TempDir(), "cache"), Coordination: staticCoord{eb},
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Scan:   scanner.Options{Coord: func() coord.Backend { return scans }, InitialShards: 1},
		Webhooks: server.WebhookOptions{Policy: webhook.Policy{AllowPrivate: true}, Dialer: &dialer{t: t}, TakeJitter: -1,
			Reconcile: hooks.ReconcileOptions{Every: 200 * time.Millisecond, LeaderTTL: 2 * time.Second}},
	})
	if err != nil {
		t.Fatal(err)
	}
	hctx, stop := context.WithCancel(ctx)
	hdone := make(chan struct{})
	go func() { defer close(hdone); _ = srv.RunWebhooks(hctx) }()
	t.Cleanup(func() { stop(); <-hdone; srv.Close() })
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	tok, repo := seed(t, srv)
	rc := newHookReceiver(t, hookSecret)
	secret := hookSecret
	if _, err := srv.Hooks().Create(ctx, hooks.Scope{Tenant: "alice"}, hooks.Input{URL: &rc.srv.URL, Secret: &secret, Events: []string{"*"}}, "alice"); err != nil {
		t.Fatal(err)
	}
	api := func(method, path, body string, want int) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		req.SetBasicAuth("x", tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Fatalf("%s %s: %d, want %d", method, path, res.StatusCode, want)
		}
	}
	api("POST", "/api/repos/alice", `{"name":"other"}`, 201)
	api("PATCH", "/api/repos/alice/other", `{"public":true}`, 200)
	api("DELETE", "/api/repos/alice/other", "", 204)

	// A push that adds a secret; its scan files the alert.
	leak := fakeToken("webhook")
	src := t.TempDir()
	git(t, src, "init", "-q", "--initial-branch=main")
	if err := os.WriteFile(filepath.Join(src, "config.env"), []byte("TOKEN="+leak+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, src, "add", "config.env")
	git(t, src, "commit", "-q", "-m", "config")
	git(t, src, "push", "-q", "http://x:"+tok+"@"+strings.TrimPrefix(ts.URL, "http://")+"/alice/demo.git", "main")
	w, err := srv.Scanner().NewWorker(scanner.WorkerOptions{Cache: srv.Cache(), EngineWorkers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		did, err := w.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		act, _ := srv.Scanner().Active(ctx)
		if !did && len(act) == 0 {
			break
		}
		if i > 1000 {
			t.Fatal("the push's scan did not finish")
		}
	}
	page, err := srv.Alerts().List(ctx, alerts.Filter{Tenant: "alice", RepoID: repo.ID}, "", 10)
	if err != nil || len(page.Alerts) != 1 {
		t.Fatalf("alerts: %v %v", page.Alerts, err)
	}
	api("PATCH", "/api/repos/alice/demo/alerts/"+page.Alerts[0].Fingerprint, `{"state":"resolved","resolution":"revoked"}`, 200)

	want := map[string]bool{"ping": true, "repository.created": true, "repository.publicized": true, "repository.deleted": true,
		"create": true, "push": true, "secret_scanning_alert.created": true, "secret_scanning_alert.resolved": true, "scan_run.completed": true}
	deadline := time.Now().Add(30 * time.Second)
	seen := map[string]bool{}
	for len(seen) < len(want) && time.Now().Before(deadline) {
		rc.mu.Lock()
		for _, x := range rc.got {
			k := x.event
			var a struct {
				Action string `json:"action"`
			}
			if json.Unmarshal(x.body, &a) == nil && a.Action != "" {
				k += "." + a.Action
			}
			seen[k] = true
			if bytes.Contains(x.body, []byte(leak)) {
				t.Errorf("the leaked secret is in a %s payload", k)
			}
			if e, ok := x.parsed.(*github.SecretScanningAlertEvent); ok {
				if e.GetAlert().GetSecret() != "" || e.GetAlert().GetSecretType() == "" || e.GetRepo().GetFullName() != "alice/demo" {
					t.Errorf("alert event: %+v", e.GetAlert())
				}
			}
			if e, ok := x.parsed.(*github.RepositoryEvent); ok && e.GetRepo().GetFullName() != "alice/other" {
				t.Errorf("repository event of %s", e.GetRepo().GetFullName())
			}
		}
		rc.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	for k := range want {
		if !seen[k] {
			t.Errorf("no %s event (got %v)", k, seen)
		}
	}
	if strings.Contains(logs.String(), hookSecret) || strings.Contains(logs.String(), leak) {
		t.Error("a secret is in the log")
	}
}
