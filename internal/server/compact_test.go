package server_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/compact"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/server"
)

// TestCompactionAfterPushes: once pushes take a repository past the
// policy, the server compacts it in the background, and both this node
// and a cold node serve clones of the compacted log.
func TestCompactionAfterPushes(t *testing.T) {
	store, err := fsstore.Open(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 4)
	s, err := server.New(context.Background(), server.Options{
		Store: store, CacheDir: filepath.Join(t.TempDir(), "cache"),
		Compaction: compact.TriggerOptions{
			Policy: compact.Policy{MaxLayers: 2},
			Done:   func(_ string, _ compact.Result, err error) { done <- err },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tok, r := seed(t, s)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	url := "http://x:" + tok + "@" + strings.TrimPrefix(ts.URL, "http://") + "/alice/demo.git"

	src := t.TempDir()
	git(t, src, "init", "-q", "--initial-branch=main")
	for _, m := range []string{"one", "two"} {
		git(t, src, "commit", "-q", "--allow-empty", "-m", m)
		git(t, src, "push", "-q", url, "main")
	}
	if err := <-done; err != nil {
		t.Fatalf("background compaction: %v", err)
	}
	x, err := s.Log().Head(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if x.CompactedThroughSeq != 2 {
		t.Fatalf("not compacted: %+v", x)
	}
	want := git(t, src, "rev-parse", "HEAD")
	if _, metrics := get(t, ts.URL+"/metrics"); !strings.Contains(metrics, `ghost_compactions_total{result="ok"} 1`) {
		t.Errorf("metrics lack the compaction:\n%s", metrics)
	}

	cold, err := server.New(context.Background(), server.Options{Store: store, CacheDir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cold.Close() })
	cts := httptest.NewServer(cold.Handler())
	defer cts.Close()
	for _, u := range []string{url, "http://x:" + tok + "@" + strings.TrimPrefix(cts.URL, "http://") + "/alice/demo.git"} {
		dst := filepath.Join(t.TempDir(), "c")
		git(t, "", "clone", "-q", u, dst)
		if got := git(t, dst, "rev-parse", "HEAD"); got != want {
			t.Fatalf("clone of %s is at %s, want %s", u, got, want)
		}
		git(t, dst, "fsck", "--full")
	}
}
