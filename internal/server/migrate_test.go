package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/memcoord"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/testkit"
	"github.com/ghost-scm/ghost/internal/wal"
)

// slowAlertReads delays every read of an alert record. A fake, for the
// one fault this test needs: a migration that takes long enough for the
// nodes started together to overlap in it, as one over millions of
// alerts does.
type slowAlertReads struct {
	objstore.Store
	delay time.Duration
	// onRead, when set, is called before each alert read.
	onRead func()
}

func (s slowAlertReads) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	if strings.HasPrefix(key, "meta/alerts/") {
		if s.onRead != nil {
			s.onRead()
		}
		time.Sleep(s.delay)
	}
	return s.Store.Get(ctx, key)
}

// TestMigrationOneNodeAtATime: nodes started together on an installation
// whose alerts predate the state index (no marker) build the index once,
// not once each: the build runs under an election, and the nodes after
// the first find its marker.
func TestMigrationOneNodeAtATime(t *testing.T) {
	base := seedUnindexedAlerts(t, 100)
	store := slowAlertReads{Store: base, delay: 10 * time.Millisecond}
	eps := etcdEndpoints(t)
	logs := &testkit.Buffer{}
	const nodes = 3
	for range nodes {
		startNode(t, store, eps, "/mig", &dialer{t: t}, logs, true)
	}
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(logs.String(), "the alerts' state index are complete") < nodes {
		if time.Now().After(deadline) {
			t.Fatalf("the nodes did not all finish the migration:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "built the alerts' state index"); n != 1 {
		t.Fatalf("the state index was built %d times by %d nodes started together, want once:\n%s", n, nodes, logs)
	}
}

// seedUnindexedAlerts returns a store with n alerts of one repository,
// recorded but never listed by state: nothing wrote the state index's
// marker, as on an installation from before the index.
func seedUnindexedAlerts(t *testing.T, n int) objstore.Store {
	t.Helper()
	ctx := context.Background()
	base := memstore.New()
	m := meta.New(base, wal.New(base, wal.Options{}))
	if _, err := m.CreateTenant(ctx, "acme", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	r, err := m.CreateRepo(ctx, "acme", "demo", false)
	if err != nil {
		t.Fatal(err)
	}
	var fs []alerts.Finding
	for i := range n {
		fs = append(fs, alerts.Finding{RuleID: "generic-api-key", Commit: strings.Repeat("c", 40), Path: fmt.Sprintf("f%d.env", i),
			Line: 1, BlobID: strings.Repeat("b", 40), Match: "KEY=****", Secret: fmt.Sprintf("secret-%04d", i)})
	}
	if err := alerts.New(base).Record(ctx, "acme", r.ID, fs, alerts.RunRef{ID: "seed", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	return base
}

// loseFirstTerm is a coordination backend whose election ends its first
// term when told to (lose), as an expired etcd session does, and grants
// every later one until fn returns. A fake: a lost leadership at a chosen
// moment is the fault this test needs.
type loseFirstTerm struct {
	coord.Backend
	mu    sync.Mutex
	lose  func()
	terms int
}

func (l *loseFirstTerm) Lead(ctx context.Context, name string, ttl time.Duration, fn func(ctx context.Context)) error {
	for ctx.Err() == nil {
		lctx, cancel := context.WithCancel(ctx)
		l.mu.Lock()
		l.terms++
		if l.terms == 1 {
			l.lose = sync.OnceFunc(cancel)
		}
		l.mu.Unlock()
		fn(lctx)
		cancel()
	}
	return ctx.Err()
}

func (l *loseFirstTerm) loseNow() {
	l.mu.Lock()
	lose := l.lose
	l.mu.Unlock()
	if lose != nil {
		lose()
	}
}

// TestMigrationLeadershipLost: a node that loses leadership in the middle
// of building the state index builds it again in its next term, rather
// than taking the interrupted build for done.
func TestMigrationLeadershipLost(t *testing.T) {
	base := seedUnindexedAlerts(t, 20)
	ld := &loseFirstTerm{Backend: memcoord.New(coord.Limits{})}
	store := slowAlertReads{Store: base, onRead: ld.loseNow}
	logs := &testkit.Buffer{}
	srv, err := server.New(context.Background(), server.Options{
		Store: store, CacheDir: t.TempDir(), Coordination: staticCoord{ld},
		Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Webhooks: server.WebhookOptions{Off: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "the alerts' state index are complete") {
		if time.Now().After(deadline) {
			t.Fatalf("the migration never completed:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "built the alerts' state index") {
		t.Fatalf("the build interrupted by a lost leadership was taken for done; no term built the index:\n%s", logs)
	}
	ld.mu.Lock()
	terms := ld.terms
	ld.mu.Unlock()
	if terms < 2 {
		t.Fatalf("the migration led %d terms, want a second after the first was lost", terms)
	}
}
