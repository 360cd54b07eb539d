package fsstore

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestCopyLinks: on Linux a copy is a second name for the source's file,
// not a second copy of its bytes (an LFS upload moves from its temporary
// key by Copy), and it leaves nothing in the temporary directory.
func TestCopyLinks(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", 1<<20)
	if _, err := s.Put(ctx, "lfs/tmp/a", strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	if err := s.Copy(ctx, "lfs/tmp/a", "lfs/objects/t/a"); err != nil {
		t.Fatal(err)
	}
	src, _ := s.path("lfs/tmp/a")
	dst, _ := s.path("lfs/objects/t/a")
	a, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(a, b) {
		t.Error("the copy is a new file: Copy copied the bytes instead of linking")
	}
	left, err := os.ReadDir(s.root + "/tmp")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("Copy left %d files in the temporary directory", len(left))
	}
}
