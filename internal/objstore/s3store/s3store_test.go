package s3store

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/storetest"
	"github.com/ghost-scm/ghost/internal/wal"
)

// childEnv makes the test binary a gofakes3 server instead of running tests;
// see startChildFake.
const childEnv = "GHOST_S3STORE_FAKES3_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		serveChildFake()
		return
	}
	os.Exit(m.Run())
}

// serveChildFake serves gofakes3 (in-memory backend) on 127.0.0.1, prints
// its URL, and exits when stdin closes (the parent finished or died).
func serveChildFake() {
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	fmt.Println(srv.URL)
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
}

// startChildFake runs gofakes3 in a child process. The conformance suite's
// LargeStream test bounds this process's heap while 256 MiB stream through
// Put and Get; gofakes3's only backend available in go.mod (s3mem) keeps
// objects in memory, so in this process it would count against that bound
// and fail a backend that streams perfectly well.
func startChildFake(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("gofakes3 child: %v", err)
	}
	return strings.TrimSpace(line)
}

// startFake runs gofakes3 in this process, optionally behind a middleware
// that records or alters requests.
func startFake(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = gofakes3.New(s3mem.New()).Server()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// testAWSConfig has static credentials so tests never consult the
// environment, shared config files or an instance metadata service. Its
// checksum settings are the ones config.LoadDefaultConfig produces, so New
// has to override them as it does in production.
func testAWSConfig() *aws.Config {
	return &aws.Config{
		Region:                     "us-east-1",
		Credentials:                credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported,
	}
}

// createBucket makes a bucket with a plain SDK client, independent of the
// code under test.
func createBucket(t *testing.T, endpoint, bucket string) {
	t.Helper()
	c := s3.NewFromConfig(*testAWSConfig(), func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	})
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
}

func newTestStore(t *testing.T, endpoint string, cfg Config) *Store {
	t.Helper()
	cfg.Endpoint = endpoint
	cfg.UsePathStyle = true
	cfg.AWSConfig = testAWSConfig()
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformance runs the shared objstore suite against gofakes3, one fresh
// bucket per subtest. The whole suite passes. S3's ETag for a single-part PUT
// is the MD5 of the bytes, so rewriting equal bytes keeps it; the suite's
// Conditional test therefore rewrites different bytes (see
// docs/adr/0004-s3-store.md).
func TestConformance(t *testing.T) {
	endpoint := startChildFake(t)
	var n atomic.Int64
	storetest.Run(t, func(t *testing.T) objstore.Store {
		bucket := fmt.Sprintf("conformance-%d", n.Add(1))
		createBucket(t, endpoint, bucket)
		return newTestStore(t, endpoint, Config{Bucket: bucket})
	})
}

func mustPut(t *testing.T, s objstore.Store, key, val string) objstore.Info {
	t.Helper()
	info, err := s.Put(context.Background(), key, strings.NewReader(val), int64(len(val)))
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	return info
}

func mustGet(t *testing.T, s objstore.Store, key string) (string, objstore.Info) {
	t.Helper()
	rc, info, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), info
}

// TestPrefix checks that a configured prefix is applied on the wire,
// stripped from listings, and isolates stores sharing a bucket.
func TestPrefix(t *testing.T) {
	ctx := context.Background()
	endpoint := startFake(t, nil)
	createBucket(t, endpoint, "shared")
	a := newTestStore(t, endpoint, Config{Bucket: "shared", Prefix: "tenant/a"})
	b := newTestStore(t, endpoint, Config{Bucket: "shared", Prefix: "tenant/b/"})
	raw := newTestStore(t, endpoint, Config{Bucket: "shared"})

	mustPut(t, a, "repos/r/index", "A")
	mustPut(t, b, "repos/r/index", "B")
	if got, _ := mustGet(t, raw, "tenant/a/repos/r/index"); got != "A" {
		t.Fatalf("raw tenant/a object = %q, want A", got)
	}
	if got, _ := mustGet(t, b, "repos/r/index"); got != "B" {
		t.Fatalf("store b reads %q, want B", got)
	}
	page, err := a.List(ctx, "repos/", "", 10)
	if err != nil || len(page) != 1 || page[0].Key != "repos/r/index" {
		t.Fatalf("a.List = %+v, %v; want only repos/r/index, prefix stripped", page, err)
	}
	page, err = a.List(ctx, "", "repos/r/index", 10)
	if err != nil || len(page) != 0 {
		t.Fatalf("a.List after last key = %+v, %v; want empty", page, err)
	}
	if err := a.Copy(ctx, "repos/r/index", "repos/s/index"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := raw.Get(ctx, "tenant/a/repos/s/index"); err != nil {
		t.Fatalf("copy did not land under the prefix: %v", err)
	}
	for _, p := range []string{"/abs", "a//b", "../x"} {
		if _, err := New(ctx, Config{Bucket: "x", Prefix: p, AWSConfig: testAWSConfig()}); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("New with Prefix %q: err = %v, want ErrInvalidKey", p, err)
		}
	}
}

// TestAwkwardKeys round-trips keys that need escaping in a URL path and in
// x-amz-copy-source ("+" is a space there unless escaped).
func TestAwkwardKeys(t *testing.T) {
	ctx := context.Background()
	endpoint := startFake(t, nil)
	createBucket(t, endpoint, "keys")
	s := newTestStore(t, endpoint, Config{Bucket: "keys"})
	for i, k := range []string{"a b/c+d", "pct%41/x?y#z", "ü/日本.pack", "semi;colon,&=$'"} {
		v := fmt.Sprint("value ", i)
		mustPut(t, s, k, v)
		dst := fmt.Sprintf("copies/%d/%s", i, k)
		if err := s.Copy(ctx, k, dst); err != nil {
			t.Fatalf("Copy(%q): %v", k, err)
		}
		if got, _ := mustGet(t, s, dst); got != v {
			t.Fatalf("copy of %q = %q, want %q", k, got, v)
		}
		page, err := s.List(ctx, k, "", 10)
		if err != nil || len(page) != 1 || page[0].Key != k {
			t.Fatalf("List(%q) = %+v, %v", k, page, err)
		}
	}
}

// TestListBeyondOnePage asks for more keys than one ListObjectsV2 response
// carries (1000), so List must page internally: a short page would tell
// objstore.Walk the listing is over.
func TestListBeyondOnePage(t *testing.T) {
	ctx := context.Background()
	endpoint := startFake(t, nil)
	createBucket(t, endpoint, "many")
	s := newTestStore(t, endpoint, Config{Bucket: "many"})
	const n = 1205
	for i := range n {
		mustPut(t, s, fmt.Sprintf("k/%05d", i), "x")
	}
	page, err := s.List(ctx, "k/", "", 1500)
	if err != nil || len(page) != n {
		t.Fatalf("List(limit 1500) = %d objects, %v; want %d", len(page), err, n)
	}
	for i, o := range page {
		if want := fmt.Sprintf("k/%05d", i); o.Key != want {
			t.Fatalf("page[%d] = %q, want %q", i, o.Key, want)
		}
	}
	page, err = s.List(ctx, "k/", "k/00002", 1100)
	if err != nil || len(page) != 1100 || page[0].Key != "k/00003" || page[1099].Key != "k/01102" {
		t.Fatalf("List(after k/00002, limit 1100) = %d objects, %v", len(page), err)
	}
}

// TestRangeEdges covers what the suite does not: ranges of an empty object
// (S3 answers 416 to any of them), zero-length reads of a missing key, and
// an offset+length that overflows int64.
func TestRangeEdges(t *testing.T) {
	ctx := context.Background()
	endpoint := startFake(t, nil)
	createBucket(t, endpoint, "ranges")
	s := newTestStore(t, endpoint, Config{Bucket: "ranges"})
	mustPut(t, s, "empty", "")
	mustPut(t, s, "obj", "0123456789")
	for _, c := range []struct {
		key    string
		off, n int64
		want   string
	}{
		{"empty", 0, 10, ""},
		{"empty", 0, 0, ""},
		{"obj", 7, 1<<63 - 1, "789"},
		{"obj", 10, 0, ""},
	} {
		rc, err := s.GetRange(ctx, c.key, c.off, c.n)
		if err != nil {
			t.Fatalf("GetRange(%s, %d, %d): %v", c.key, c.off, c.n, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(b) != c.want {
			t.Fatalf("GetRange(%s, %d, %d) = %q, %v; want %q", c.key, c.off, c.n, b, err, c.want)
		}
	}
	if _, err := s.GetRange(ctx, "missing", 0, 0); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("zero-length GetRange of missing key: err = %v, want ErrNotFound", err)
	}
	if _, err := s.GetRange(ctx, "missing", 100, 5); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("GetRange past the end of a missing key: err = %v, want ErrNotFound", err)
	}
	if _, err := s.GetRange(ctx, "obj", -1, 5); err == nil {
		t.Fatal("negative offset accepted")
	}
}

// TestMissingBucket: a wrong bucket is a configuration error and must not
// read as a missing object (the repository would look absent) or a lost CAS
// (the log would retry, then report contention).
func TestMissingBucket(t *testing.T) {
	ctx := context.Background()
	endpoint := startFake(t, nil)
	s := newTestStore(t, endpoint, Config{Bucket: "nosuchbucket"})
	_, _, err := s.Get(ctx, "repos/r/index")
	if err == nil || errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get in missing bucket: err = %v, want a non-ErrNotFound error", err)
	}
	_, err = s.PutIfMatch(ctx, "repos/r/index", strings.NewReader("x"), 1, `"abc"`)
	if err == nil || errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch in missing bucket: err = %v, want a non-precondition error", err)
	}
}

// TestPutIfMatchEmptyETag: the SDK omits an empty If-Match header, which
// would silently turn the compare-and-swap into an overwrite.
func TestPutIfMatchEmptyETag(t *testing.T) {
	endpoint := startFake(t, nil)
	createBucket(t, endpoint, "cas")
	s := newTestStore(t, endpoint, Config{Bucket: "cas"})
	mustPut(t, s, "k", "old")
	if _, err := s.PutIfMatch(context.Background(), "k", strings.NewReader("new"), 3, ""); err == nil {
		t.Fatal("PutIfMatch with empty ETag succeeded")
	}
	if got, _ := mustGet(t, s, "k"); got != "old" {
		t.Fatalf("object = %q after refused CAS, want old", got)
	}
}

// TestConditionalAfterDelete checks conditional puts after a delete (as the
// tail of the suite's Conditional test does) against an in-process gofakes3.
func TestConditionalAfterDelete(t *testing.T) {
	ctx := context.Background()
	endpoint := startFake(t, nil)
	createBucket(t, endpoint, "cond")
	s := newTestStore(t, endpoint, Config{Bucket: "cond"})
	const k = "repos/r/index"
	a, err := s.PutIfAbsent(ctx, k, strings.NewReader("a"), 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.PutIfMatch(ctx, k, strings.NewReader("bb"), 2, a.ETag)
	if err != nil {
		t.Fatal(err)
	}
	if got, info := mustGet(t, s, k); got != "bb" || info.ETag != b.ETag {
		t.Fatalf("after CAS: %q etag %s, want bb etag %s", got, info.ETag, b.ETag)
	}
	if err := s.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutIfMatch(ctx, k, strings.NewReader("e"), 1, b.ETag); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch after delete: err = %v, want ErrPreconditionFailed", err)
	}
	if _, err := s.PutIfAbsent(ctx, k, strings.NewReader("f"), 1); err != nil {
		t.Fatalf("PutIfAbsent after delete: %v", err)
	}
	if got, _ := mustGet(t, s, k); got != "f" {
		t.Fatalf("object = %q, want f", got)
	}
}

// s3Error writes an S3 XML error body with the given status.
func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+
		`<Error><Code>%s</Code><Message>injected %s</Message><RequestId>req</RequestId><HostId>host</HostId></Error>`, code, code)
}

// TestErrorMapping is a fault injection: an httptest server (not gofakes3)
// answers each request with one canned S3 error, as AWS S3 and
// S3-compatible servers send them, including the two lost-CAS shapes
// gofakes3 never produces (409 ConditionalRequestConflict, and 404
// NoSuchKey to an If-Match put: gofakes3 answers 412 to both situations).
// It also checks the conditional headers reach the wire byte for byte.
func TestErrorMapping(t *testing.T) {
	type reply struct {
		status int
		code   string // "" for a body-less reply (HEAD)
	}
	var (
		mu   sync.Mutex
		next reply
		seen *http.Request
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		rep := next
		seen = r
		mu.Unlock()
		if rep.code == "" || r.Method == http.MethodHead {
			w.WriteHeader(rep.status)
			return
		}
		s3Error(w, rep.status, rep.code)
	}))
	defer srv.Close()
	s := newTestStore(t, srv.URL, Config{Bucket: "b"})
	ctx := context.Background()
	const etag = `"0123abcd-2"`
	const key = "repos/r/index"

	ifMatch := func() error {
		_, err := s.PutIfMatch(ctx, key, strings.NewReader("v"), 1, etag)
		return err
	}
	ifAbsent := func() error {
		_, err := s.PutIfAbsent(ctx, key, strings.NewReader("v"), 1)
		return err
	}
	plainPut := func() error {
		_, err := s.Put(ctx, key, strings.NewReader("v"), 1)
		return err
	}
	get := func() error {
		_, _, err := s.Get(ctx, key)
		return err
	}
	head := func() error { // zero-length GetRange is a HEAD
		_, err := s.GetRange(ctx, key, 0, 0)
		return err
	}
	copyObj := func() error { return s.Copy(ctx, key, "repos/s/index") }

	for _, c := range []struct {
		name string
		op   func() error
		rep  reply
		want error  // nil: must be neither sentinel
		key  string // the key the error names; "" means key
	}{
		{name: "if-match 412", op: ifMatch, rep: reply{412, "PreconditionFailed"}, want: objstore.ErrPreconditionFailed},
		{name: "if-match 409 conflict", op: ifMatch, rep: reply{409, "ConditionalRequestConflict"}, want: objstore.ErrPreconditionFailed},
		{name: "if-match 404 on missing key", op: ifMatch, rep: reply{404, "NoSuchKey"}, want: objstore.ErrPreconditionFailed},
		{name: "if-none-match 412", op: ifAbsent, rep: reply{412, "PreconditionFailed"}, want: objstore.ErrPreconditionFailed},
		{name: "if-none-match 409 conflict", op: ifAbsent, rep: reply{409, "ConditionalRequestConflict"}, want: objstore.ErrPreconditionFailed},
		{name: "if-match 404 missing bucket", op: ifMatch, rep: reply{404, "NoSuchBucket"}, want: nil},
		{name: "if-match 403", op: ifMatch, rep: reply{403, "AccessDenied"}, want: nil},
		{name: "if-match 500", op: ifMatch, rep: reply{500, "InternalError"}, want: objstore.ErrOutcomeUnknown},
		{name: "if-none-match 503", op: ifAbsent, rep: reply{503, "SlowDown"}, want: objstore.ErrOutcomeUnknown},
		{name: "unconditional put 409", op: plainPut, rep: reply{409, "OperationAborted"}, want: nil},
		{name: "get 404 NoSuchKey", op: get, rep: reply{404, "NoSuchKey"}, want: objstore.ErrNotFound},
		{name: "get 404 NoSuchBucket", op: get, rep: reply{404, "NoSuchBucket"}, want: nil},
		{name: "head 404", op: head, rep: reply{404, ""}, want: objstore.ErrNotFound},
		{name: "copy 404 NoSuchKey", op: copyObj, rep: reply{404, "NoSuchKey"}, want: objstore.ErrNotFound},
		{name: "get 403", op: get, rep: reply{403, "AccessDenied"}, want: nil},
		{name: "get 503", op: get, rep: reply{503, "SlowDown"}, want: objstore.ErrUnavailable},
		{name: "head 500", op: head, rep: reply{500, ""}, want: objstore.ErrUnavailable},
		{name: "copy 500", op: copyObj, rep: reply{500, "InternalError"}, want: objstore.ErrUnavailable, key: "repos/s/index"},
		{name: "if-match 500 is unavailable too", op: ifMatch, rep: reply{500, "InternalError"}, want: objstore.ErrUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			next = c.rep
			mu.Unlock()
			err := c.op()
			if err == nil {
				t.Fatal("no error")
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if c.want == nil && (errors.Is(err, objstore.ErrPreconditionFailed) || errors.Is(err, objstore.ErrNotFound) || errors.Is(err, objstore.ErrOutcomeUnknown) || errors.Is(err, objstore.ErrUnavailable)) {
				t.Fatalf("err = %v, want none of ErrPreconditionFailed, ErrNotFound, ErrOutcomeUnknown, ErrUnavailable", err)
			}
			wantKey := c.key
			if wantKey == "" {
				wantKey = key
			}
			var oe *objstore.Error
			if !errors.As(err, &oe) || oe.Key != wantKey {
				t.Errorf("err %q is not an *objstore.Error naming the key", err)
			}
		})
	}

	// The conditional headers as sent.
	mu.Lock()
	next = reply{412, "PreconditionFailed"}
	mu.Unlock()
	ifMatch()
	if got := seen.Header.Get("If-Match"); got != etag {
		t.Errorf("If-Match sent as %q, want %q byte for byte", got, etag)
	}
	ifAbsent()
	if got := seen.Header.Get("If-None-Match"); got != "*" || seen.Header.Get("If-Match") != "" {
		t.Errorf("PutIfAbsent sent If-None-Match %q, If-Match %q; want * and none", got, seen.Header.Get("If-Match"))
	}
}

// TestRangeIgnored is a fault injection: a server that ignores Range and
// answers 200 with the whole object must not have its bytes passed off as
// the requested range.
func TestRangeIgnored(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"e"`)
		io.WriteString(w, "0123456789")
	}))
	defer srv.Close()
	s := newTestStore(t, srv.URL, Config{Bucket: "b"})
	if rc, err := s.GetRange(context.Background(), "k", 4, 2); err == nil {
		b, _ := io.ReadAll(rc)
		t.Fatalf("GetRange returned %q from a server that ignored Range", b)
	}
}

// wireRecord is what the recording middleware saw of one request.
type wireRecord struct {
	method, query string
	header        http.Header
	contentLength int64
}

func recordRequests(log *[]wireRecord, mu *sync.Mutex) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			*log = append(*log, wireRecord{r.Method, r.URL.RawQuery, r.Header.Clone(), r.ContentLength})
			mu.Unlock()
			next.ServeHTTP(w, r)
		})
	}
}

// noSeek hides any io.Seeker, as a spooled request body or pipe would.
type noSeek struct{ io.Reader }

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{1}).Read(b)
	return b
}

// TestPutWire checks what a streamed single put looks like on the wire:
// Content-Length set, not chunked, no aws-chunked checksum trailer, and an
// unsigned payload (so the SDK did not read the body ahead to hash it).
func TestPutWire(t *testing.T) {
	var mu sync.Mutex
	var log []wireRecord
	endpoint := startFake(t, recordRequests(&log, &mu))
	createBucket(t, endpoint, "wire")
	s := newTestStore(t, endpoint, Config{Bucket: "wire"})
	data := randomBytes(300 << 10)
	mu.Lock()
	log = nil
	mu.Unlock()
	if _, err := s.Put(context.Background(), "k", noSeek{bytes.NewReader(data)}, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(log) != 1 {
		t.Fatalf("%d requests, want 1 PutObject", len(log))
	}
	r := log[0]
	if r.method != http.MethodPut || r.contentLength != int64(len(data)) {
		t.Errorf("request %s with Content-Length %d, want PUT with %d", r.method, r.contentLength, len(data))
	}
	if te := r.header.Get("Transfer-Encoding"); te != "" {
		t.Errorf("Transfer-Encoding %q, want none", te)
	}
	if ce := r.header.Get("Content-Encoding"); strings.Contains(ce, "aws-chunked") {
		t.Errorf("Content-Encoding %q: checksum trailer sent", ce)
	}
	if sha := r.header.Get("X-Amz-Content-Sha256"); sha != "UNSIGNED-PAYLOAD" {
		t.Errorf("X-Amz-Content-Sha256 %q, want UNSIGNED-PAYLOAD", sha)
	}
	for h := range r.header {
		if strings.HasPrefix(strings.ToLower(h), "x-amz-checksum-") {
			t.Errorf("checksum header %s sent", h)
		}
	}
}

// TestMultipart puts above a small configured threshold and checks the
// upload went out as parts, that conditional puts stay single PUTs, and
// that a body of the wrong length aborts the upload and stores nothing.
func TestMultipart(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var log []wireRecord
	endpoint := startFake(t, recordRequests(&log, &mu))
	createBucket(t, endpoint, "mpu")
	s := newTestStore(t, endpoint, Config{Bucket: "mpu", MultipartThreshold: 1 << 20, PartSize: MinPartSize})
	reset := func() []wireRecord {
		mu.Lock()
		defer mu.Unlock()
		l := log
		log = nil
		return l
	}
	count := func(l []wireRecord) (create, parts, complete, abort, put int) {
		for _, r := range l {
			switch {
			case r.method == http.MethodPost && strings.HasPrefix(r.query, "uploads"):
				create++
			case r.method == http.MethodPut && strings.Contains(r.query, "partNumber="):
				parts++
			case r.method == http.MethodPost && strings.Contains(r.query, "uploadId="):
				complete++
			case r.method == http.MethodDelete && strings.Contains(r.query, "uploadId="):
				abort++
			case r.method == http.MethodPut:
				put++
			}
		}
		return
	}

	size := 2*MinPartSize + 12345 // three parts, the last one short
	data := randomBytes(int(size))
	reset()
	info, err := s.Put(ctx, "repos/r/entries/big.pack", noSeek{bytes.NewReader(data)}, size)
	if err != nil {
		t.Fatal(err)
	}
	if c, p, done, a, put := count(reset()); c != 1 || p != 3 || done != 1 || a != 0 || put != 0 {
		t.Fatalf("requests: %d create, %d parts, %d complete, %d abort, %d plain puts; want 1, 3, 1, 0, 0", c, p, done, a, put)
	}
	if info.Size != size || info.ETag == "" {
		t.Fatalf("Put info %+v", info)
	}
	got, ginfo := mustGet(t, s, "repos/r/entries/big.pack")
	if ginfo.Size != size || sha256.Sum256([]byte(got)) != sha256.Sum256(data) {
		t.Fatalf("read back %d bytes (Info.Size %d), content differs or wrong size", len(got), ginfo.Size)
	}

	// Conditional puts are never multipart, whatever their size.
	if _, err := s.PutIfAbsent(ctx, "repos/r/index", bytes.NewReader(data[:2<<20]), 2<<20); err != nil {
		t.Fatal(err)
	}
	if c, p, _, _, put := count(reset()); c != 0 || p != 0 || put != 1 {
		t.Fatalf("conditional put: %d create, %d parts, %d plain puts; want one plain PUT", c, p, put)
	}

	for _, bad := range []struct {
		name string
		body []byte
	}{
		{"short", data[:MinPartSize+10]},
		{"long", append(bytes.Clone(data), 'x')},
	} {
		_, err := s.Put(ctx, "repos/r/entries/"+bad.name, noSeek{bytes.NewReader(bad.body)}, size)
		if !errors.Is(err, errBodySize) {
			t.Fatalf("%s body: err = %v, want a size error", bad.name, err)
		}
		if c, _, done, a, _ := count(reset()); c != 1 || done != 0 || a != 1 {
			t.Fatalf("%s body: %d create, %d complete, %d abort; want the upload aborted", bad.name, c, done, a)
		}
		if _, _, err := s.Get(ctx, "repos/r/entries/"+bad.name); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("%s body left an object behind (err %v)", bad.name, err)
		}
	}

	if _, err := New(ctx, Config{Bucket: "b", PartSize: MinPartSize - 1, AWSConfig: testAWSConfig()}); err == nil {
		t.Fatal("New accepted a part size below S3's minimum")
	}
}

// TestSizedBody checks the body wrapper on its own: it must withhold the
// final bytes of an over-long body, so the server never sees the declared
// length complete.
func TestSizedBody(t *testing.T) {
	for _, c := range []struct {
		src     string
		size    int64
		wantOut string
		wantErr bool
	}{
		{"abc", 3, "abc", false},
		{"", 0, "", false},
		{"abc", 5, "abc", true},
		{"abcdef", 2, "", true},
		{"x", 0, "", true},
	} {
		for _, seekable := range []bool{false, true} {
			var r io.Reader = strings.NewReader(c.src)
			if !seekable {
				r = noSeek{r}
			}
			b := newSizedBody(r, c.size)
			if _, ok := b.(io.Seeker); ok != seekable {
				t.Fatalf("seekable = %v, want %v", ok, seekable)
			}
			out, err := io.ReadAll(b)
			if string(out) != c.wantOut || (err != nil) != c.wantErr || (err != nil && !errors.Is(err, errBodySize)) {
				t.Errorf("%q as %d bytes (seekable %v): read %q, %v", c.src, c.size, seekable, out, err)
			}
			if (b.failure() != nil) != c.wantErr {
				t.Errorf("%q as %d bytes: failure() = %v", c.src, c.size, b.failure())
			}
		}
	}
	// A rewind (SDK retry) replays the body from where it started.
	sr := strings.NewReader("skip-payload")
	sr.Seek(5, io.SeekStart)
	b := newSizedBody(sr, 7).(*seekableBody)
	first, _ := io.ReadAll(b)
	if _, err := b.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	second, err := io.ReadAll(b)
	if string(first) != "payload" || string(second) != "payload" || err != nil {
		t.Fatalf("reads %q then %q (%v), want payload twice", first, second, err)
	}
}

// landThen500 is a fault-injecting middleware for the first conditional PUT
// it sees: it lets the request land on the real server, throws the answer
// away and sends 500 InternalError instead, as a proxy or a dropped
// connection would. Later conditional PUTs pass through untouched, so a
// resent copy of the first would get the server's 412. It counts
// conditional PUTs on the wire.
type landThen500 struct {
	next http.Handler

	mu       sync.Mutex
	condPuts int
}

func (h *landThen500) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	conditional := r.Method == http.MethodPut && (r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != "")
	if !conditional {
		h.next.ServeHTTP(w, r)
		return
	}
	h.mu.Lock()
	h.condPuts++
	first := h.condPuts == 1
	h.mu.Unlock()
	if !first {
		h.next.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	h.next.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		panic(fmt.Sprintf("landThen500: the real server answered %d, want the put to land", rec.Code))
	}
	s3Error(w, http.StatusInternalServerError, "InternalError")
}

func (h *landThen500) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.condPuts
}

// TestConditionalPutSentOnce is issue 8's reproduction on the wire: a
// conditional PUT lands but its answer is a 500. The SDK would resend the
// (seekable) body, the resend would get 412, and the landed write would be
// reported as a lost compare-and-swap. It must go out once and be reported
// as an unknown outcome (docs/adr/0006-write-outcomes.md).
func TestConditionalPutSentOnce(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		put  func(s *Store, base objstore.Info) error
	}{
		{"if-match", func(s *Store, base objstore.Info) error {
			_, err := s.PutIfMatch(ctx, "repos/r/index", strings.NewReader("new"), 3, base.ETag)
			return err
		}},
		{"if-none-match", func(s *Store, _ objstore.Info) error {
			_, err := s.PutIfAbsent(ctx, "repos/r/other", strings.NewReader("new"), 3)
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fault := &landThen500{}
			endpoint := startFake(t, func(next http.Handler) http.Handler { fault.next = next; return fault })
			createBucket(t, endpoint, "once")
			s := newTestStore(t, endpoint, Config{Bucket: "once"})
			base := mustPut(t, s, "repos/r/index", "old")
			err := c.put(s, base)
			if n := fault.count(); n != 1 {
				t.Errorf("%d conditional PUTs on the wire, want 1: the SDK retried", n)
			}
			if errors.Is(err, objstore.ErrPreconditionFailed) {
				t.Fatalf("err = %v: a write that landed is reported as a lost compare-and-swap", err)
			}
			if !errors.Is(err, objstore.ErrOutcomeUnknown) {
				t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
			}
		})
	}
}

// TestCommitOverLandThen500 runs the write-ahead log on the store behind
// landThen500: the push's first index CAS lands and is answered 500. The
// commit must find its own layer on the next read and report success, with
// its entry kept and the index written once.
func TestCommitOverLandThen500(t *testing.T) {
	ctx := context.Background()
	fault := &landThen500{}
	endpoint := startFake(t, func(next http.Handler) http.Handler { fault.next = next; return fault })
	createBucket(t, endpoint, "wal")
	s := newTestStore(t, endpoint, Config{Bucket: "wal"})
	l := wal.New(s, wal.Options{Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	res, err := l.Commit(ctx, "r", wal.Push{
		Transitions: []wal.Transition{{Ref: "refs/heads/main", Old: wal.ZeroID, New: strings.Repeat("1", 40)}},
		Pack:        strings.NewReader("pack"),
		PackSize:    4,
	})
	if err != nil {
		t.Fatalf("Commit whose CAS landed behind a 500: %v", err)
	}
	x, err := l.Head(ctx, "r")
	if err != nil || len(x.Layers) != 1 || x.Layers[0].ULID != res.ULID {
		t.Fatalf("index %+v, %v: want exactly our layer", x, err)
	}
	if _, err := l.ReadEntryHeader(ctx, "r", res.ULID); err != nil {
		t.Fatalf("entry: %v", err)
	}
	if n := fault.count(); n != 1 {
		t.Fatalf("%d conditional PUTs, want 1: the landed write was found by reading", n)
	}
}
