package countstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/countstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/objstore/storetest"
)

// TestConformance: the decorator is a Store like any other.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store {
		return countstore.New(memstore.New(), func(string, error) {})
	}, storetest.LargeObject(0)) // memstore holds objects in memory

}

// TestCounts: each operation is reported once, with its error.
func TestCounts(t *testing.T) {
	got := map[string]int{}
	failed := map[string]int{}
	s := countstore.New(memstore.New(), func(op string, err error) {
		got[op]++
		if err != nil {
			failed[op]++
		}
	})
	ctx := context.Background()
	info, err := s.Put(ctx, "a", strings.NewReader("x"), 1)
	if err != nil {
		t.Fatal(err)
	}
	s.PutIfMatch(ctx, "a", strings.NewReader("y"), 1, info.ETag)
	s.PutIfAbsent(ctx, "a", strings.NewReader("z"), 1) // exists: fails
	rc, _, _ := s.Get(ctx, "a")
	rc.Close()
	rc, _ = s.GetRange(ctx, "a", 0, 1)
	rc.Close()
	s.List(ctx, "", "", 10)
	s.Copy(ctx, "a", "b")
	s.Delete(ctx, "b")
	for _, op := range []string{"put", "put_if_match", "put_if_absent", "get", "get_range", "list", "copy", "delete"} {
		if got[op] != 1 {
			t.Errorf("%s counted %d times, want 1", op, got[op])
		}
	}
	if failed["put_if_absent"] != 1 || len(failed) != 1 {
		t.Errorf("failures %v, want the one PutIfAbsent", failed)
	}
}
