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
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// TestFullObjectSHA256: only a base64 SHA-256 of the whole object is a
// sum; a composite (multipart) checksum, another type, a truncated or
// malformed value is none.
func TestFullObjectSHA256(t *testing.T) {
	sum := sha256.Sum256([]byte("x"))
	b64 := base64.StdEncoding.EncodeToString(sum[:])
	for _, c := range []struct {
		value string
		kind  types.ChecksumType
		want  bool
	}{
		{b64, types.ChecksumTypeFullObject, true},
		{b64, "", true}, // a server older than checksum types
		{b64, types.ChecksumTypeComposite, false},
		{b64 + "-3", "", false}, // composite, marked the old way
		{b64 + "-3", types.ChecksumTypeComposite, false},
		{"", types.ChecksumTypeFullObject, false},
		{base64.StdEncoding.EncodeToString(sum[:20]), "", false}, // SHA-1's length
		{"not base64!", "", false},
	} {
		got := fullObjectSHA256(c.value, c.kind)
		if (got != nil) != c.want || (got != nil && !bytes.Equal(got, sum[:])) {
			t.Errorf("fullObjectSHA256(%q, %q) = %x, want a sum: %v", c.value, c.kind, got, c.want)
		}
	}
}

// TestStoredSHA256Wire: StoredSHA256 is one HEAD asking for the
// checksum (x-amz-checksum-mode: ENABLED), reports the size and the
// decoded sum, none for a composite checksum, and ErrNotFound for a
// missing key. A fault injection: an httptest server answers HEADs with
// canned headers, as S3 would.
func TestStoredSHA256Wire(t *testing.T) {
	sum := sha256.Sum256([]byte("the object"))
	var (
		mu      sync.Mutex
		headers http.Header
		seen    []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Method+" "+r.URL.Path+" mode="+r.Header.Get("X-Amz-Checksum-Mode"))
		if headers == nil {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		for k, v := range headers {
			w.Header()[k] = v
		}
		w.WriteHeader(http.StatusOK)
	})) // 127.0.0.1
	t.Cleanup(srv.Close)
	s := newTestStore(t, srv.URL, Config{Bucket: "bkt", Prefix: "p"})
	ctx := context.Background()
	set := func(h http.Header) {
		mu.Lock()
		headers = h
		mu.Unlock()
	}

	set(http.Header{"Content-Length": {"10"}, "X-Amz-Checksum-Sha256": {base64.StdEncoding.EncodeToString(sum[:])}, "X-Amz-Checksum-Type": {"FULL_OBJECT"}})
	got, size, err := s.StoredSHA256(ctx, "lfs/tmp/k")
	if err != nil || size != 10 || !bytes.Equal(got, sum[:]) {
		t.Fatalf("full-object checksum: %x %d %v", got, size, err)
	}
	if len(seen) != 1 || seen[0] != "HEAD /bkt/p/lfs/tmp/k mode=ENABLED" {
		t.Fatalf("requests %q: want one HEAD with the checksum mode", seen)
	}
	set(http.Header{"Content-Length": {"10"}, "X-Amz-Checksum-Sha256": {base64.StdEncoding.EncodeToString(sum[:]) + "-2"}, "X-Amz-Checksum-Type": {"COMPOSITE"}})
	if got, size, err := s.StoredSHA256(ctx, "lfs/tmp/k"); err != nil || size != 10 || got != nil {
		t.Fatalf("composite checksum: %x %d %v, want no sum", got, size, err)
	}
	set(http.Header{"Content-Length": {"10"}})
	if got, _, err := s.StoredSHA256(ctx, "lfs/tmp/k"); err != nil || got != nil {
		t.Fatalf("no checksum: %x %v, want no sum", got, err)
	}
	set(nil)
	if _, _, err := s.StoredSHA256(ctx, "lfs/tmp/k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("missing key: %v, want ErrNotFound", err)
	}
	if _, _, err := s.StoredSHA256(ctx, "../k"); err == nil {
		t.Fatal("an invalid key was asked for")
	}
}

// refuseBadSHA256 is a fault injection in front of gofakes3, which
// stores x-amz-checksum-sha256 as sent: it answers 400 with code to a
// PUT whose body does not hash to that header, as S3 (BadDigest) and
// MinIO (XAmzContentChecksumMismatch) do, and stores nothing.
func refuseBadSHA256(code string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			want := r.Header.Get("X-Amz-Checksum-Sha256")
			if r.Method != "PUT" || want == "" {
				next.ServeHTTP(w, r)
				return
			}
			body, _ := io.ReadAll(r.Body)
			if sum := sha256.Sum256(body); base64.StdEncoding.EncodeToString(sum[:]) != want {
				s3Error(w, http.StatusBadRequest, code)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
		})
	}
}

// TestChecksSHA256: the probe tells a server that checks checksums
// (BadDigest, or MinIO's code) from one that stores them unchecked, as
// gofakes3 does (it echoes any x-amz-* header it was sent: its stored
// "checksum" is the writer's claim), deletes what the latter took, and
// is an error for any other answer.
func TestChecksSHA256(t *testing.T) {
	ctx := context.Background()
	for _, code := range []string{"BadDigest", "XAmzContentChecksumMismatch"} {
		url := startFake(t, refuseBadSHA256(code))
		createBucket(t, url, "bkt")
		s := newTestStore(t, url, Config{Bucket: "bkt"})
		if ok, err := s.ChecksSHA256(ctx, "lfs/tmp/probe"); !ok || err != nil {
			t.Fatalf("%s: ChecksSHA256 = %v, %v; want true", code, ok, err)
		}
		if keys, _ := s.List(ctx, "", "", 10); len(keys) != 0 {
			t.Fatalf("%s: the refused probe left %v", code, keys)
		}
	}

	url := startFake(t, nil)
	createBucket(t, url, "bkt")
	s := newTestStore(t, url, Config{Bucket: "bkt"})
	if ok, err := s.ChecksSHA256(ctx, "lfs/tmp/probe"); ok || err != nil {
		t.Fatalf("gofakes3: ChecksSHA256 = %v, %v; want false", ok, err)
	}
	if keys, _ := s.List(ctx, "", "", 10); len(keys) != 0 {
		t.Fatalf("the probe gofakes3 took was not deleted: %v", keys)
	}
	// What such a server reports is whatever the writer claimed.
	c := s3.NewFromConfig(*testAWSConfig(), func(o *s3.Options) { o.BaseEndpoint = aws.String(url); o.UsePathStyle = true })
	claim := sha256.Sum256([]byte("other bytes"))
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("these bytes"),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(claim[:]))}); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.StoredSHA256(ctx, "k"); err != nil || !bytes.Equal(got, claim[:]) {
		t.Fatalf("gofakes3's stored claim: %x %v", got, err)
	}

	// Anything else: no answer.
	url = startFake(t, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s3Error(w, http.StatusForbidden, "AccessDenied") })
	})
	s = newTestStore(t, url, Config{Bucket: "bkt"})
	if ok, err := s.ChecksSHA256(ctx, "lfs/tmp/probe"); ok || err == nil {
		t.Fatalf("AccessDenied: ChecksSHA256 = %v, %v; want an error", ok, err)
	}
}
