package fsstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
)

// FuzzKeys drives the store with arbitrary keys. Invalid keys are refused
// with ErrInvalidKey and touch nothing; valid ones land at objects/<key>
// and nowhere else, read back, list, and delete without a trace. Nothing
// is ever created beside the store's root.
func FuzzKeys(f *testing.F) {
	for _, s := range []string{"repos/a/index", "a", "a..b/.c/d", "../escape", "a/../../escape", "/abs", "a//b", "a\\..\\b", "tmp/x", strings.Repeat("s", 300)} {
		f.Add(s, []byte("data"))
	}
	parent := f.TempDir()
	root := filepath.Join(parent, "root")
	s, err := fsstore.Open(root)
	if err != nil {
		f.Fatal(err)
	}
	objects := filepath.Join(root, "objects")
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, key string, data []byte) {
		t.Cleanup(func() {
			// Failed puts may leave empty directories; start each run clean.
			ents, _ := os.ReadDir(objects)
			for _, e := range ents {
				os.RemoveAll(filepath.Join(objects, e.Name()))
			}
		})
		valid := objstore.ValidateKey(key) == nil
		_, perr := s.Put(ctx, key, bytes.NewReader(data), int64(len(data)))
		if !valid && !errors.Is(perr, objstore.ErrInvalidKey) {
			t.Fatalf("Put(%q) of an invalid key: %v", key, perr)
		}
		checkConfined(t, parent, root)
		if perr == nil {
			if _, err := os.Stat(filepath.Join(objects, key)); err != nil {
				t.Fatalf("Put(%q): object not at objects/<key>: %v", key, err)
			}
			rc, info, err := s.Get(ctx, key)
			if err != nil {
				t.Fatalf("Get(%q) after Put: %v", key, err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, data) || info.Key != key || info.Size != int64(len(data)) {
				t.Fatalf("Get(%q) = %q %+v %v", key, got, info, err)
			}
			list, err := s.List(ctx, key, "", 10)
			if err != nil || len(list) == 0 || list[0].Key != key {
				t.Fatalf("List(%q) = %+v, %v", key, list, err)
			}
		}
		rc, _, gerr := s.Get(ctx, key)
		if gerr == nil {
			rc.Close()
		}
		if !valid && !errors.Is(gerr, objstore.ErrInvalidKey) {
			t.Fatalf("Get(%q) of an invalid key: %v", key, gerr)
		}
		derr := s.Delete(ctx, key)
		if !valid && !errors.Is(derr, objstore.ErrInvalidKey) {
			t.Fatalf("Delete(%q) of an invalid key: %v", key, derr)
		}
		if perr == nil {
			if derr != nil {
				t.Fatalf("Delete(%q): %v", key, derr)
			}
			if _, _, err := s.Get(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("Get(%q) after Delete: %v", key, err)
			}
			if ents, _ := os.ReadDir(objects); len(ents) != 0 {
				t.Fatalf("Delete(%q) left %v behind", key, ents)
			}
		}
		// A valid key the filesystem cannot hold (a segment over NAME_MAX)
		// fails to put, and may fail to list: only a stored one must list.
		if _, err := s.List(ctx, key, "", 10); perr == nil && err != nil {
			t.Fatalf("List(%q): %v", key, err)
		}
		checkConfined(t, parent, root)
	})
}

// checkConfined fails unless parent holds only root, and root only the
// store's own directories, with no stray temp files.
func checkConfined(t *testing.T, parent, root string) {
	t.Helper()
	names := func(dir string) string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, e := range ents {
			n = append(n, e.Name())
		}
		return strings.Join(n, ",")
	}
	if got := names(parent); got != "root" {
		t.Fatalf("beside the root: %s", got)
	}
	if got := names(root); got != "locks,objects,tmp" {
		t.Fatalf("in the root: %s", got)
	}
	if got := names(filepath.Join(root, "tmp")); got != "" {
		t.Fatalf("temp files left: %s", got)
	}
}
