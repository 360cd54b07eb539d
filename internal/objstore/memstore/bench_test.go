package memstore_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// BenchmarkPutGet puts and reads back small JSON-like records, the
// objects the scale benchmark holds tens of millions of (issue 22), in
// both stores: the deflated one must not cost a compressor's allocation
// per request.
func BenchmarkPutGet(b *testing.B) {
	ctx := context.Background()
	body := strings.Repeat(`{"rule":"generic-api-key","path":"config/1.env","state":"open"},`, 6)
	for _, bc := range []struct {
		name string
		new  func() *memstore.Store
	}{{"plain", memstore.New}, {"deflated", memstore.NewDeflated}} {
		b.Run(bc.name, func(b *testing.B) {
			s := bc.new()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				key := fmt.Sprintf("alerts/t/%08d", i)
				if _, err := s.Put(ctx, key, strings.NewReader(body), int64(len(body))); err != nil {
					b.Fatal(err)
				}
				rc, _, err := s.Get(ctx, key)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, rc); err != nil {
					b.Fatal(err)
				}
				rc.Close()
			}
		})
	}
}
