package lfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
)

// BenchmarkTransfer puts and gets one 64 MiB object on a filesystem
// store, straight through the Store ("direct", the physical limit on this
// machine) and through the handler over HTTP on 127.0.0.1 ("proxied":
// batch-free PUT and GET, hashing, the temporary and its copy). B/op
// against the object's size shows whether memory stays flat.
//
//	go test -run XXX -bench Transfer -benchmem ./internal/lfs
func BenchmarkTransfer(b *testing.B) {
	data := make([]byte, 64<<20)
	rand.NewChaCha8([32]byte{1}).Read(data)
	sum := sha256.Sum256(data)
	oid := hex.EncodeToString(sum[:])
	store, err := fsstore.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			if _, err := store.Put(ctx, "bench/direct", bytes.NewReader(data), int64(len(data))); err != nil {
				b.Fatal(err)
			}
			rc, _, err := store.Get(ctx, "bench/direct")
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, rc)
			rc.Close()
		}
	})
	b.Run("proxied", func(b *testing.B) {
		auth := tableAuth{repos: map[string]string{"a/b": "01B"}, levels: map[string]map[string]access.Level{writer: {"a/b": access.Write}}}
		h, err := New(Options{Store: store, Auth: auth})
		if err != nil {
			b.Fatal(err)
		}
		ts := httptest.NewServer(h) // 127.0.0.1
		defer ts.Close()
		url := ts.URL + "/a/b.git/info/lfs/objects/" + oid
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			req, _ := http.NewRequest("PUT", url, bytes.NewReader(data))
			req.SetBasicAuth("x", writer)
			res, err := http.DefaultClient.Do(req)
			if err != nil || res.StatusCode != 200 {
				b.Fatalf("put: %v %v", err, res)
			}
			res.Body.Close()
			req, _ = http.NewRequest("GET", url, nil)
			req.SetBasicAuth("x", writer)
			res, err = http.DefaultClient.Do(req)
			if err != nil || res.StatusCode != 200 {
				b.Fatalf("get: %v %v", err, res)
			}
			n, _ := io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if n != int64(len(data)) {
				b.Fatalf("got %d bytes", n)
			}
		}
	})
}
