package lfs

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/objstore/s3store"
)

// BenchmarkDirect pushes and fetches one object against one gofakes3
// server on 127.0.0.1, three ways (docs/adr/0126-lfs-direct-to-s3.md):
//
//   - sdk: PutObject and GetObject with the AWS SDK, the reference;
//   - presigned: upload batch, PUT to the presigned URL, verify,
//     download batch, GET from the presigned URL;
//   - proxied: upload batch, PUT to the node, download batch, GET from
//     the node (no Presigner).
//
// The object is GHOST_LFS_BENCH_BYTES bytes (default 64 MiB; 1 GiB needs
// about 4 GiB of memory, gofakes3 keeping objects in memory). Compare
// the MB/s of the three in the same run:
//
//	go test -run XXX -bench Direct -benchtime 5x ./internal/lfs
//	GHOST_LFS_BENCH_BYTES=1073741824 go test -run XXX -bench Direct -benchtime 2x -timeout 30m ./internal/lfs
func BenchmarkDirect(b *testing.B) {
	size := int64(64 << 20)
	if s := os.Getenv("GHOST_LFS_BENCH_BYTES"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("GHOST_LFS_BENCH_BYTES=%q: want a positive byte count", s)
		}
		size = n
	}
	data := make([]byte, size)
	rand.NewChaCha8([32]byte{26}).Read(data)
	oid := oidOf(data)
	ctx := context.Background()
	s3srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server()) // 127.0.0.1
	defer s3srv.Close()
	client := s3.NewFromConfig(*s3Config(), func(o *s3.Options) { o.BaseEndpoint = aws.String(s3srv.URL); o.UsePathStyle = true })
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s3Bucket)}); err != nil {
		b.Fatal(err)
	}
	store, err := s3store.New(ctx, s3store.Config{Endpoint: s3srv.URL, Bucket: s3Bucket, UsePathStyle: true, AWSConfig: s3Config(),
		MultipartThreshold: 1 << 40}) // one PutObject, as the SDK reference and a presigned PUT
	if err != nil {
		b.Fatal(err)
	}
	auth := tableAuth{repos: map[string]string{"a/b": "01B"}, levels: map[string]map[string]access.Level{writer: {"a/b": access.Write}}}

	b.Run("sdk", func(b *testing.B) {
		b.SetBytes(2 * size) // up and down
		for i := 0; i < b.N; i++ {
			_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String("bench/sdk"),
				Body: bytes.NewReader(data), ContentLength: aws.Int64(size)},
				s3.WithAPIOptions(v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware))
			if err != nil {
				b.Fatal(err)
			}
			out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String("bench/sdk")})
			if err != nil {
				b.Fatal(err)
			}
			if n, _ := io.Copy(io.Discard, out.Body); n != size {
				b.Fatalf("got %d bytes", n)
			}
			out.Body.Close()
		}
	})
	for _, direct := range []bool{true, false} {
		name := "proxied"
		opts := Options{Store: store, Auth: auth, MaxObjectSize: -1, IOTimeout: -1}
		if direct {
			name, opts.Presigner = "presigned", store
		}
		b.Run(name, func(b *testing.B) {
			h, err := New(opts)
			if err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewServer(h) // 127.0.0.1
			defer ts.Close()
			f := &fixture{store: store, url: ts.URL}
			o := batchObject{OID: oid, Size: size}
			b.SetBytes(2 * size)
			for i := 0; i < b.N; i++ {
				code, res := f.batch(b, "a/b", writer, "upload", o)
				if code != 200 || res.Objects[0].Actions["upload"] == nil {
					b.Fatalf("upload batch: %d %+v", code, res)
				}
				transfer(b, "PUT", res.Objects[0].Actions["upload"], data, size)
				if v := res.Objects[0].Actions["verify"]; v != nil {
					body, _ := json.Marshal(o)
					transfer(b, "POST", v, body, 0)
				}
				code, res = f.batch(b, "a/b", writer, "download", o)
				if code != 200 || res.Objects[0].Actions["download"] == nil {
					b.Fatalf("download batch: %d %+v", code, res)
				}
				transfer(b, "GET", res.Objects[0].Actions["download"], nil, size)
				b.StopTimer()
				if err := store.Delete(ctx, refKey("01B", oid)); err != nil { // upload again next time
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// transfer performs an action; a GET must bring want bytes.
func transfer(b *testing.B, method string, a *action, body []byte, want int64) {
	req, _ := http.NewRequest(method, a.Href, bytes.NewReader(body))
	for k, v := range a.Header {
		req.Header.Set(k, v)
	}
	if method == "POST" {
		req.Header.Set("Content-Type", MediaType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	n, _ := io.Copy(io.Discard, res.Body)
	if res.StatusCode != 200 || (method == "GET" && n != want) {
		b.Fatalf("%s %s: %d, %d bytes", method, a.Href, res.StatusCode, n)
	}
}
