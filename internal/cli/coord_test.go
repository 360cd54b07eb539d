package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestCoordRepairCountersOnEmbeddedEtcd(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"coord", "repair-counters", "-data-dir", dir}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	// An empty store has no tenants; the global counter is created at 0.
	if !strings.Contains(out.String(), "global 0\n") || !strings.Contains(out.String(), "fixed /ghost/coord/global/shard_count (was absent)") {
		t.Fatalf("output:\n%s", out.String())
	}
	out.Reset()
	if code := Main(context.Background(), []string{"coord", "repair-counters", "-data-dir", dir}, &out, &errb); code != 0 {
		t.Fatalf("second run exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "counters under /ghost/coord are correct") {
		t.Fatalf("second run output:\n%s", out.String())
	}
	out.Reset()
	if code := Main(context.Background(), []string{"coord", "gc", "-retention", "1h", "-data-dir", dir}, &out, &errb); code != 0 || out.String() != "removed 0 runs\n" {
		t.Fatalf("gc: exit %d, %q, %s", code, out.String(), errb.String())
	}
}

func TestCoordUsage(t *testing.T) {
	for _, args := range [][]string{{"coord"}, {"coord", "frobnicate"}, {"coord", "repair-counters", "extra"}, {"coord", "gc", "-namespace", "bad/"}, {"coord", "gc", "--namespace", "bad/"}, {"coord", "gc", "--coord-namespace", "bad/"}, {"coord", "gc", "--s3-bucket", "b"}, {"coord", "gc", "--retention", "soon"}} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
}

func TestCoordRetentionFromEnvironment(t *testing.T) {
	t.Setenv("GHOST_COORD_GC_RETENTION", "soon")
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"coord", "gc", "--data-dir", t.TempDir()}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "GHOST_COORD_GC_RETENTION") {
		t.Fatalf("bad GHOST_COORD_GC_RETENTION: exit %d, %s", code, errb.String())
	}
}

// TestCoordNamespaceFromEnvironment: GHOST_COORD_NAMESPACE reaches the
// coord commands, which the deprecated --namespace alias, registered on
// the same variable, must not reset.
func TestCoordNamespaceFromEnvironment(t *testing.T) {
	t.Setenv("GHOST_COORD_NAMESPACE", "bad/")
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"coord", "gc", "--data-dir", t.TempDir()}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--coord-namespace") {
		t.Fatalf("bad GHOST_COORD_NAMESPACE: exit %d, %s", code, errb.String())
	}
}
