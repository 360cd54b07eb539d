package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ghost-scm/ghost/internal/coord"
)

// TestNodeRunsCoordinationGC: the node's link to the coordination store removes the
// summaries of ended runs once they are older than the retention, without
// anyone running "ghost coord gc".
func TestNodeRunsCoordinationGC(t *testing.T) {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := newEtcdLink(logger, EtcdOptions{DataDir: t.TempDir(), Namespace: "/test/servegc",
		GCInterval: 5 * time.Millisecond, GCRetention: time.Millisecond}, prometheus.NewRegistry())
	if b, ok := c.Backend(); ok || b != nil {
		t.Fatalf("Backend() before start = %v, %v; want nil, false", b, ok)
	}
	c.start(ctx)
	defer c.close()
	var b coord.Admin // the test creates and ends a run
	for {
		be, ok := c.Backend()
		if ok {
			b = be
			break
		}
		time.Sleep(5 * time.Millisecond) // the embedded etcd is starting
	}
	tenant := coord.TenantID{1}
	now := coord.TimeOf(time.Now())
	cfg := coord.RunConfig{LeaseDuration: time.Second, Cursor: coord.CursorNonDecreasing}
	if _, err := b.CreateRun(ctx, now, coord.CreateRunRequest{Tenant: tenant, Run: 1, Op: 1, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CancelRun(ctx, now, coord.CancelRunRequest{Tenant: tenant, Run: 1, Op: 2}); err != nil {
		t.Fatal(err)
	}
	// Wait, as long as the test's timeout allows, for a GC pass to remove it.
	for {
		_, err := b.GetRun(ctx, tenant, 1)
		if errors.Is(err, coord.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The pass that removed the run is counted once TryGC returns.
	for c.gcs.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
}
