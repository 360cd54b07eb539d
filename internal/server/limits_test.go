package server_test

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"net/http/httptest"

	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/server"
)

func TestNewRemovesLeftovers(t *testing.T) {
	store, err := fsstore.Open(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "cache")
	put := filepath.Join(store.Root(), "tmp", "put-123")
	spool := filepath.Join(cache, "tmp", "push-123.spool")
	os.MkdirAll(filepath.Dir(spool), 0o755)
	for _, p := range []string{put, spool} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Hour)
	os.Chtimes(put, past, past)

	s, err := server.New(context.Background(), server.Options{Store: store, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{put, spool} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s survived the start", p)
		}
	}
}

func TestPushLimitIsPassedOn(t *testing.T) {
	store, err := fsstore.Open(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(context.Background(), server.Options{Store: store, CacheDir: filepath.Join(t.TempDir(), "cache"), Limits: gitsvc.Limits{MaxPushBytes: 1 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tok, _ := seed(t, s)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	src := t.TempDir()
	git(t, src, "init", "-q", "--initial-branch=main")
	noise := make([]byte, 8<<10)
	rand.Read(noise)
	os.WriteFile(filepath.Join(src, "f"), noise, 0o644)
	git(t, src, "add", ".")
	git(t, src, "commit", "-q", "-m", "one")
	out, err := gittest.Combined(gitEnv(t), src, nil, "push", "http://x:"+tok+"@"+strings.TrimPrefix(ts.URL, "http://")+"/alice/demo.git", "main")
	if err == nil || !strings.Contains(out, "push exceeds the maximum allowed size of 1.0 KiB") {
		t.Fatalf("push over the limit: %v\n%s", err, out)
	}
}
