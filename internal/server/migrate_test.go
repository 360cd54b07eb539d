package server_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
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
}

func (s slowAlertReads) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	if strings.HasPrefix(key, "meta/alerts/") {
		time.Sleep(s.delay)
	}
	return s.Store.Get(ctx, key)
}

// TestMigrationOneNodeAtATime: nodes started together on an installation
// whose alerts predate the state index (no marker) build the index once,
// not once each: the build runs under an election, and the nodes after
// the first find its marker.
func TestMigrationOneNodeAtATime(t *testing.T) {
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
	// Recorded, never listed by state: nothing wrote the index's marker,
	// as on an installation from before it.
	var fs []alerts.Finding
	for i := range 100 {
		fs = append(fs, alerts.Finding{RuleID: "generic-api-key", Commit: strings.Repeat("c", 40), Path: fmt.Sprintf("f%d.env", i),
			Line: 1, BlobID: strings.Repeat("b", 40), Match: "KEY=****", Secret: fmt.Sprintf("secret-%04d", i)})
	}
	if err := alerts.New(base).Record(ctx, "acme", r.ID, fs, alerts.RunRef{ID: "seed", Seq: 1}); err != nil {
		t.Fatal(err)
	}
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
