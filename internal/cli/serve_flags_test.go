package cli

import (
	"context"
	"io"
	"testing"
)

func TestServeRejectsBadGCSettings(t *testing.T) {
	t.Setenv("GHOST_COORD_GC_RETENTION", "forever")
	if code := Main(context.Background(), []string{"serve", "-data-dir", t.TempDir()}, io.Discard, io.Discard); code != 2 {
		t.Fatalf("serve with GHOST_COORD_GC_RETENTION=forever: exit %d, want 2", code)
	}
	t.Setenv("GHOST_COORD_GC_RETENTION", "")
	if code := Main(context.Background(), []string{"serve", "-data-dir", t.TempDir(), "-coord-gc-interval", "-1s"}, io.Discard, io.Discard); code != 2 {
		t.Fatalf("serve with a negative interval: exit %d, want 2", code)
	}
}
