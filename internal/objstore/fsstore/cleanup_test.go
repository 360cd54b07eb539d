package fsstore_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
)

func TestRemoveStaleTemp(t *testing.T) {
	s, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(s.Root(), "tmp")
	old, fresh, other := filepath.Join(tmp, "put-old"), filepath.Join(tmp, "put-fresh"), filepath.Join(tmp, "keep-old")
	for _, p := range []string{old, fresh, other} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Hour)
	os.Chtimes(old, past, past)
	os.Chtimes(other, past, past)

	n, err := s.RemoveStaleTemp(time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("removed %d, %v; want 1", n, err)
	}
	if _, err := os.Stat(old); err == nil {
		t.Fatal("a stale temporary survived")
	}
	for _, p := range []string{fresh, other} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s was removed: %v", filepath.Base(p), err)
		}
	}
}
