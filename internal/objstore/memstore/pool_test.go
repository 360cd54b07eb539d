//go:build !race

// The race detector's sync.Pool drops a quarter of what is put in it, on
// purpose, so a count of the bytes pooling saves means nothing there.

package memstore_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// TestDeflatedReusesCompressors fails when the deflated store allocates a
// compressor or decompressor per request (over a megabyte each), which
// made populating the scale benchmark take hours. It counts bytes, not
// time: a collection may empty the pools a few times, never a hundred.
func TestDeflatedReusesCompressors(t *testing.T) {
	ctx := context.Background()
	s := memstore.NewDeflated()
	body := strings.Repeat(`{"rule":"generic-api-key","path":"config/1.env"},`, 8)
	const n = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		key := fmt.Sprintf("k/%d", i)
		if _, err := s.Put(ctx, key, strings.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
		rc, _, err := s.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		if err != nil || string(got) != body {
			t.Fatalf("read back %q, %v", got, err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 64<<10 {
		t.Fatalf("a put and a get allocated %d bytes on average; a compressor is not being reused", per)
	}
}
