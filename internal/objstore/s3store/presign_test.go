package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// TestPresign: a presigned PUT and GET name the client endpoint (not the
// node's), carry the expiry, sign the length and the sha256, and move
// the bytes through gofakes3 with a plain HTTP client.
func TestPresign(t *testing.T) {
	backend := s3mem.New()
	node := httptest.NewServer(gofakes3.New(backend).Server()) // 127.0.0.1
	t.Cleanup(node.Close)
	clients := httptest.NewServer(gofakes3.New(backend).Server()) // the same bucket, another address
	t.Cleanup(clients.Close)
	createBucket(t, node.URL, "bkt")
	s := newTestStore(t, node.URL, Config{Bucket: "bkt", Prefix: "p", PresignEndpoint: clients.URL})
	ctx := context.Background()

	data := []byte("straight to the bucket")
	sum := sha256.Sum256(data)
	put, hdr, err := s.PresignPut(ctx, "lfs/tmp/x", int64(len(data)), sum[:], 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(put)
	q := u.Query()
	if "http://"+u.Host != clients.URL || !strings.HasSuffix(u.Path, "/bkt/p/lfs/tmp/x") {
		t.Fatalf("presigned PUT %s: want %s/bkt/p/lfs/tmp/x", put, clients.URL)
	}
	if q.Get("X-Amz-Expires") != "90" {
		t.Fatalf("X-Amz-Expires %q, want 90", q.Get("X-Amz-Expires"))
	}
	signed := q.Get("X-Amz-SignedHeaders")
	if !strings.Contains(signed, "content-length") || !strings.Contains(signed, "x-amz-checksum-sha256") {
		t.Fatalf("signed headers %q: want content-length and x-amz-checksum-sha256", signed)
	}
	if got := hdr.Get("X-Amz-Checksum-Sha256"); got != base64.StdEncoding.EncodeToString(sum[:]) {
		t.Fatalf("checksum header %q", got)
	}
	if hdr.Get("Host") != "" || hdr.Get("Content-Length") != "" {
		t.Fatalf("headers the client sets itself are returned: %v", hdr)
	}
	t.Logf("PUT %s %v", put, hdr)
	req, _ := http.NewRequest("PUT", put, bytes.NewReader(data))
	req.Header = hdr.Clone()
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("PUT: %v %v", res, err)
	}
	res.Body.Close()

	get, err := s.PresignGet(ctx, "lfs/tmp/x", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(get, clients.URL+"/bkt/p/lfs/tmp/x?") {
		t.Fatalf("presigned GET %s", get)
	}
	res, err = http.Get(get)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET: %v %v", res, err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !bytes.Equal(b, data) {
		t.Fatalf("GET %q", b)
	}

	// Bad arguments are refused, as *objstore.Error.
	for name, err := range map[string]error{
		"expiry 0":     func() error { _, _, err := s.PresignPut(ctx, "k", 1, sum[:], 0); return err }(),
		"expiry 8 d":   func() error { _, err := s.PresignGet(ctx, "k", 8*24*time.Hour); return err }(),
		"short hash":   func() error { _, _, err := s.PresignPut(ctx, "k", 1, sum[:3], time.Minute); return err }(),
		"negative":     func() error { _, _, err := s.PresignPut(ctx, "k", -1, sum[:], time.Minute); return err }(),
		"invalid key":  func() error { _, err := s.PresignGet(ctx, "../k", time.Minute); return err }(),
		"invalid key2": func() error { _, _, err := s.PresignPut(ctx, "a//k", 1, sum[:], time.Minute); return err }(),
	} {
		var oe *objstore.Error
		if !errors.As(err, &oe) {
			t.Errorf("%s: %v, want an *objstore.Error", name, err)
		}
	}
}
