package lfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/s3store"
	"github.com/ghost-scm/ghost/internal/objstore/s3store/s3test"
)

// The S3 test server's credentials and bucket.
const (
	s3Key    = "AKIDTEST"
	s3Secret = "secret"
	s3Bucket = "lfs-bucket"
)

func s3Config() *aws.Config {
	return &aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(s3Key, s3Secret, "")}
}

// directFixture is newFixture's repositories on the S3 test server
// (s3test: it checks presigned requests' signatures and expiry, and
// SHA-256 checksums as S3 does), reached by the node at one address and
// by clients at another, with the handler presigning.
type directFixture struct {
	*fixture
	gate    *s3test.Server
	s3      *s3.Client // straight to the bucket, with the node's credentials
	clients string     // the clients' S3 endpoint
}

// directOpts configure newDirect.
type directOpts struct {
	expiry time.Duration
	// unchecked turns the gate's checksums off: gofakes3 as it is.
	unchecked bool
	// store wraps the handler's Store, presigner its Presigner, to
	// inject faults; mod changes its Options.
	store     func(objstore.Store) objstore.Store
	presigner func(*s3store.Store) Presigner
	mod       func(*Options)
}

func newDirectFixture(t *testing.T, expiry time.Duration) *directFixture {
	return newDirect(t, directOpts{expiry: expiry})
}

// newDirect is newFixture's repositories on the S3 test server.
func newDirect(t *testing.T, o directOpts) *directFixture {
	t.Helper()
	gate := s3test.New(s3test.Options{AccessKey: s3Key, Secret: s3Secret, Unchecked: o.unchecked})
	nodeS3 := httptest.NewServer(gate) // 127.0.0.1
	t.Cleanup(nodeS3.Close)
	clientS3 := httptest.NewServer(gate) // 127.0.0.1, another port
	t.Cleanup(clientS3.Close)
	ctx := context.Background()
	c := s3.NewFromConfig(*s3Config(), func(o *s3.Options) { o.BaseEndpoint = aws.String(nodeS3.URL); o.UsePathStyle = true })
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s3Bucket)}); err != nil {
		t.Fatal(err)
	}
	store, err := s3store.New(ctx, s3store.Config{Endpoint: nodeS3.URL, PresignEndpoint: clientS3.URL, Bucket: s3Bucket, Prefix: "g", UsePathStyle: true, AWSConfig: s3Config()})
	if err != nil {
		t.Fatal(err)
	}
	var hstore objstore.Store = store
	if o.store != nil {
		hstore = o.store(store)
	}
	var presigner Presigner = store
	if o.presigner != nil {
		presigner = o.presigner(store)
	}
	opts := Options{Store: hstore, Auth: testAuth(), MaxObjectSize: 1 << 20, MaxBatchBytes: 4096, MaxBatchItems: 10, Presigner: presigner, PresignExpiry: o.expiry}
	if o.mod != nil {
		o.mod(&opts)
	}
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h) // 127.0.0.1
	t.Cleanup(ts.Close)
	return &directFixture{fixture: &fixture{store: store, url: ts.URL}, gate: gate, s3: c, clients: clientS3.URL}
}

// modes runs test on the S3 test server as S3 (checksums checked and
// kept) and as gofakes3 is (checksums kept unchecked).
func modes(t *testing.T, test func(t *testing.T, unchecked bool)) {
	for _, unchecked := range []bool{false, true} {
		name := "checked"
		if unchecked {
			name = "unchecked"
		}
		t.Run(name, func(t *testing.T) { test(t, unchecked) })
	}
}

// send performs an action as git-lfs does: its href, its headers, body.
func send(t *testing.T, method string, a *action, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, a.Href, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range a.Header {
		req.Header.Set(k, v)
	}
	if method == "POST" {
		req.Header.Set("Content-Type", MediaType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func verifyBody(oid string, size int64) []byte {
	b, _ := json.Marshal(batchObject{OID: oid, Size: size})
	return b
}

// uploadActs asks for an upload and returns its presigned upload and
// verify actions.
func (f *directFixture) uploadActs(t *testing.T, repo, token string, o batchObject) (*action, *action) {
	t.Helper()
	code, res := f.batch(t, repo, token, "upload", o)
	if code != 200 || len(res.Objects) != 1 || res.Objects[0].Actions["upload"] == nil || res.Objects[0].Actions["verify"] == nil {
		t.Fatalf("upload batch: %d %+v", code, res)
	}
	if !res.Objects[0].Authenticated {
		t.Fatalf("presigned actions not marked authenticated: git-lfs would look for the bucket's credentials")
	}
	return res.Objects[0].Actions["upload"], res.Objects[0].Actions["verify"]
}

// visible reports whether anything of oid is visible: the repository's
// reference or the tenant's object.
func (f *directFixture) visible(t *testing.T, repoID, tenant, oid string) bool {
	t.Helper()
	ctx := context.Background()
	for _, k := range []string{refKey(repoID, oid), objectKey(tenant, oid)} {
		rc, _, err := f.store.Get(ctx, k)
		if err == nil {
			rc.Close()
			return true
		}
		if !errorsIsNotFound(err) {
			t.Fatal(err)
		}
	}
	return false
}

func errorsIsNotFound(err error) bool { return errors.Is(err, objstore.ErrNotFound) }

// TestDirectRoundTrip: the batch hands out presigned URLs at the
// clients' S3 endpoint, the client PUTs there, verify makes the object
// visible, and a download batch hands out a GET that fetches it. On a
// store that checks checksums verify reads nothing back and publishes
// with one copy, straight from the upload's key; on one that keeps them
// unchecked it copies the upload to its own key and reads that back.
func TestDirectRoundTrip(t *testing.T) {
	modes(t, func(t *testing.T, unchecked bool) {
		f := newDirect(t, directOpts{expiry: 2 * time.Minute, unchecked: unchecked})
		data := []byte("large file content, straight to the bucket")
		oid := oidOf(data)
		o := batchObject{OID: oid, Size: int64(len(data))}
		up, ver := f.uploadActs(t, "alice/priv", writer, o)
		if !strings.HasPrefix(up.Href, f.clients+"/"+s3Bucket+"/g/lfs/tmp/direct-") || up.ExpiresIn != 120 {
			t.Fatalf("upload action %+v: want a presigned PUT at %s, expires_in 120", up, f.clients)
		}
		if up.Header["Authorization"] != "" || up.Header["X-Amz-Checksum-Sha256"] == "" {
			t.Fatalf("upload headers %v: want the checksum and never the caller's token", up.Header)
		}
		if !strings.HasPrefix(ver.Href, f.url+"/alice/priv.git/info/lfs/objects/verify") || ver.Header["Authorization"] == "" {
			t.Fatalf("verify action %+v", ver)
		}
		if code, b := send(t, "PUT", up, data); code != 200 {
			t.Fatalf("presigned PUT: %d %s", code, b)
		}
		if f.visible(t, "01PRIV", "alice", oid) {
			t.Fatal("the object is visible before verify")
		}
		if code, b := send(t, "POST", ver, verifyBody(oid, o.Size)); code != 200 {
			t.Fatalf("verify: %d %s", code, b)
		}
		if !f.visible(t, "01PRIV", "alice", oid) {
			t.Fatal("verified object not visible")
		}
		reads, tmps, objs := f.gate.Requests(false, "GET", "/g/lfs/tmp/"), f.gate.Requests(false, "PUT", "/g/lfs/tmp/"), f.gate.Requests(false, "PUT", "/g/lfs/objects/")
		if unchecked {
			// The probe, the copy to its own key, read back and published.
			if len(reads) != 1 || len(tmps) != 2 || len(objs) != 1 || strings.Contains(objs[0], "direct-") {
				t.Fatalf("verify on a store that does not check checksums: reads %q, puts %q %q; want a copy read back and published", reads, tmps, objs)
			}
		} else if len(reads) != 0 || len(tmps) != 1 || len(objs) != 1 || !strings.Contains(objs[0], " <- "+s3Bucket+"/g/lfs/tmp/direct-") {
			// The probe (refused), and the upload published.
			t.Fatalf("verify on a store that checks checksums: reads %q, puts %q %q; want no read and one copy from the upload", reads, tmps, objs)
		}
		// The temporaries are gone, the probe's too.
		if tmp, err := f.store.List(context.Background(), "lfs/tmp/", "", 10); err != nil || len(tmp) != 0 {
			t.Fatalf("temporaries left: %v %v", tmp, err)
		}
		// A retried verify succeeds; the upload is no longer needed.
		if code, b := send(t, "POST", ver, verifyBody(oid, o.Size)); code != 200 {
			t.Fatalf("verify again: %d %s", code, b)
		}
		if code, res := f.batch(t, "alice/priv", writer, "upload", o); code != 200 || res.Objects[0].Actions != nil {
			t.Fatalf("upload of a held object: %d %+v", code, res)
		}

		code, res := f.batch(t, "alice/priv", writer, "download", o)
		if code != 200 || res.Objects[0].Actions["download"] == nil {
			t.Fatalf("download batch: %d %+v", code, res)
		}
		dl := res.Objects[0].Actions["download"]
		if !strings.HasPrefix(dl.Href, f.clients+"/"+s3Bucket+"/g/lfs/objects/alice/"+oid+"?") || dl.Header != nil || dl.ExpiresIn != 120 {
			t.Fatalf("download action %+v", dl)
		}
		if code, b := send(t, "GET", dl, nil); code != 200 || !bytes.Equal(b, data) {
			t.Fatalf("presigned GET: %d %q", code, b)
		}
	})
}

// TestDirectWrongUploadNeverVisible: bytes that are not the oid's, or
// not its size, never become visible: a store that checks checksums
// refuses them at the PUT, one that does not has them refused at
// verify; and a wrong re-upload through a URL still valid after a
// verify changes nothing.
func TestDirectWrongUploadNeverVisible(t *testing.T) {
	modes(t, func(t *testing.T, unchecked bool) {
		f := newDirect(t, directOpts{expiry: time.Minute, unchecked: unchecked})
		data := []byte("the real bytes")
		oid := oidOf(data)
		o := batchObject{OID: oid, Size: int64(len(data))}
		wrong := []byte("the fake bytes") // same length

		up, ver := f.uploadActs(t, "alice/priv", writer, o)
		code, b := send(t, "PUT", up, wrong)
		switch {
		case unchecked && code != 200:
			t.Fatalf("presigned PUT: %d %s", code, b)
		case !unchecked && (code != http.StatusBadRequest || !strings.Contains(string(b), "BadDigest")):
			t.Fatalf("presigned PUT of wrong bytes: %d %s, want 400 BadDigest", code, b)
		}
		code, b = send(t, "POST", ver, verifyBody(oid, o.Size))
		switch {
		case unchecked && (code != http.StatusUnprocessableEntity || !strings.Contains(string(b), "do not hash to the oid")):
			t.Fatalf("verify of wrong bytes: %d %s", code, b)
		case !unchecked && code != http.StatusNotFound:
			t.Fatalf("verify after a refused PUT: %d %s, want 404", code, b)
		}
		if f.visible(t, "01PRIV", "alice", oid) {
			t.Fatal("wrong bytes became visible")
		}
		// The URL signs the length: another one is refused by the store.
		if code, _ := send(t, "PUT", up, append(data, '!')); code != http.StatusForbidden {
			t.Fatalf("PUT of another length: %d, want 403", code)
		}
		// Dropping the signed checksum header is refused too.
		noSum := &action{Href: up.Href}
		if code, _ := send(t, "PUT", noSum, data); code != http.StatusForbidden {
			t.Fatalf("PUT without the checksum header: %d, want 403", code)
		}

		// A store that took a short object (none of the URL's checks): verify
		// refuses the size.
		up, ver = f.uploadActs(t, "alice/priv", writer, o)
		key := ver.Header[UploadHeader]
		if _, err := f.store.Put(context.Background(), directKey(key), bytes.NewReader(data[:5]), 5); err != nil {
			t.Fatal(err)
		}
		if code, b := send(t, "POST", ver, verifyBody(oid, o.Size)); code != http.StatusUnprocessableEntity || !strings.Contains(string(b), "declared size") {
			t.Fatalf("verify of a short upload: %d %s", code, b)
		}
		if f.visible(t, "01PRIV", "alice", oid) {
			t.Fatal("a short upload became visible")
		}

		// Right bytes, verified; then the still-valid URL writes wrong ones
		// (refused by a store that checks) and verify runs again: the
		// object stays the right bytes.
		if code, _ := send(t, "PUT", up, data); code != 200 {
			t.Fatal("PUT")
		}
		if code, b := send(t, "POST", ver, verifyBody(oid, o.Size)); code != 200 {
			t.Fatalf("verify: %d %s", code, b)
		}
		if code, _ := send(t, "PUT", up, wrong); code != map[bool]int{true: 200, false: http.StatusBadRequest}[unchecked] {
			t.Fatalf("re-PUT of wrong bytes: %d", code)
		}
		if code, b := send(t, "POST", ver, verifyBody(oid, o.Size)); code != map[bool]int{true: http.StatusUnprocessableEntity, false: 200}[unchecked] {
			t.Fatalf("verify after the wrong re-upload: %d %s", code, b)
		}
		b, _, err := objstore.ReadAll(context.Background(), f.store, objectKey("alice", oid), 1<<20)
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("stored object %q, %v", b, err)
		}

		// Verify without any upload, or naming a forged one.
		other := []byte("never uploaded")
		_, ver = f.uploadActs(t, "alice/priv", writer, batchObject{OID: oidOf(other), Size: int64(len(other))})
		if code, b := send(t, "POST", ver, verifyBody(oidOf(other), int64(len(other)))); code != http.StatusNotFound {
			t.Fatalf("verify with no upload: %d %s", code, b)
		}
		ver.Header[UploadHeader] = "../../objects/alice/" + oid
		if code, b := send(t, "POST", ver, verifyBody(oidOf(other), int64(len(other)))); code != http.StatusUnprocessableEntity {
			t.Fatalf("verify naming a forged upload: %d %s", code, b)
		}
		if f.visible(t, "01PRIV", "alice", oidOf(other)) {
			t.Fatal("an object never uploaded became visible")
		}
	})
}

// TestDirectStoredChecksum: verify trusts the store's checksum only
// when it is the oid's and the size is the declared one. The store
// checks checksums; the upload's key is written straight to the bucket,
// as only someone with the bucket's credentials could. Another object
// with its own, right, checksum is refused without being read, at
// either size, and so are the oid's bytes under another declared size,
// and the upload is deleted; an object written without a checksum is
// read back, and passes or fails on its bytes.
func TestDirectStoredChecksum(t *testing.T) {
	f := newDirectFixture(t, time.Minute)
	ctx := context.Background()
	data := []byte("the bytes of the oid")
	oid := oidOf(data)
	o := batchObject{OID: oid, Size: int64(len(data))}
	putWithSum := func(t *testing.T, upload string, body []byte) {
		t.Helper()
		sum := sha256.Sum256(body)
		if _, err := f.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String("g/" + directKey(upload)),
			Body: bytes.NewReader(body), ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:]))}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		body []byte
		size int64 // declared
		want string
	}{
		{"another object, same size", []byte("not the oid's bytes!"), o.Size, "do not hash to the oid"},
		{"another object, another size", []byte("short"), o.Size, "declared size"},
		{"the oid's bytes, another declared size", data, o.Size + 1, "declared size"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, ver := f.uploadActs(t, "alice/priv", writer, batchObject{OID: oid, Size: c.size})
			putWithSum(t, ver.Header[UploadHeader], c.body)
			reads := len(f.gate.Requests(false, "GET", "/lfs/tmp/"))
			if code, b := send(t, "POST", ver, verifyBody(oid, c.size)); code != http.StatusUnprocessableEntity || !strings.Contains(string(b), c.want) {
				t.Fatalf("verify %d %s, want 422 %q", code, b, c.want)
			}
			if got := len(f.gate.Requests(false, "GET", "/lfs/tmp/")); got != reads {
				t.Fatal("verify read the upload back although the store's checksum decided")
			}
			if f.visible(t, "01PRIV", "alice", oid) {
				t.Fatal("it became visible")
			}
			if _, err := f.store.GetRange(ctx, directKey(ver.Header[UploadHeader]), 0, 0); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("the wrong upload was kept: %v", err)
			}
		})
	}
	// Without a checksum (a store that keeps none for it): read back.
	for _, c := range []struct {
		body []byte
		code int
	}{{[]byte("not the oid's bytes!"), http.StatusUnprocessableEntity}, {data, 200}} {
		_, ver := f.uploadActs(t, "alice/priv", writer, o)
		if _, err := f.store.Put(ctx, directKey(ver.Header[UploadHeader]), bytes.NewReader(c.body), int64(len(c.body))); err != nil {
			t.Fatal(err)
		}
		reads := len(f.gate.Requests(false, "GET", "/lfs/tmp/"))
		if code, b := send(t, "POST", ver, verifyBody(oid, o.Size)); code != c.code {
			t.Fatalf("verify of %q without a checksum: %d %s, want %d", c.body, code, b, c.code)
		}
		if got := len(f.gate.Requests(false, "GET", "/lfs/tmp/")); got != reads+1 {
			t.Fatalf("verify of an upload without a checksum read back %d times, want once", got-reads)
		}
		if f.visible(t, "01PRIV", "alice", oid) != (c.code == 200) {
			t.Fatalf("visible after a verify answered %d: %v", c.code, !(c.code == 200))
		}
	}
	b, _, err := objstore.ReadAll(ctx, f.store, objectKey("alice", oid), 1<<20)
	if err != nil || !bytes.Equal(b, data) {
		t.Fatalf("stored object %q, %v", b, err)
	}
}

// plainPresigner is a Presigner and nothing more: a store that cannot
// report checksums.
type plainPresigner struct{ p Presigner }

func (p plainPresigner) PresignPut(ctx context.Context, key string, size int64, sum []byte, expires time.Duration) (string, http.Header, error) {
	return p.p.PresignPut(ctx, key, size, sum, expires)
}

func (p plainPresigner) PresignGet(ctx context.Context, key string, expires time.Duration) (string, error) {
	return p.p.PresignGet(ctx, key, expires)
}

// TestDirectWithoutChecksumStore: a Presigner that cannot report
// checksums has every upload read back, which still catches a wrong
// body.
func TestDirectWithoutChecksumStore(t *testing.T) {
	f := newDirect(t, directOpts{expiry: time.Minute, unchecked: true,
		presigner: func(s *s3store.Store) Presigner { return plainPresigner{s} }})
	data := []byte("the real bytes")
	oid := oidOf(data)
	o := batchObject{OID: oid, Size: int64(len(data))}
	up, ver := f.uploadActs(t, "alice/priv", writer, o)
	if code, _ := send(t, "PUT", up, []byte("the fake bytes")); code != 200 {
		t.Fatal("PUT")
	}
	if code, b := send(t, "POST", ver, verifyBody(oid, o.Size)); code != http.StatusUnprocessableEntity {
		t.Fatalf("verify of wrong bytes: %d %s", code, b)
	}
	if f.visible(t, "01PRIV", "alice", oid) {
		t.Fatal("wrong bytes became visible")
	}
	up, ver = f.uploadActs(t, "alice/priv", writer, o)
	if code, _ := send(t, "PUT", up, data); code != 200 {
		t.Fatal("PUT")
	}
	if code, b := send(t, "POST", ver, verifyBody(oid, o.Size)); code != 200 {
		t.Fatalf("verify: %d %s", code, b)
	}
	if reads := f.gate.Requests(false, "GET", "/lfs/tmp/"); len(reads) != 2 {
		t.Fatalf("reads back %q, want one per verify", reads)
	}
	if heads := f.gate.Requests(false, "HEAD", "/lfs/tmp/"); len(heads) != 0 {
		t.Fatalf("checksums asked of a store that cannot report them: %q", heads)
	}
}

// TestDirectExpired: a presigned URL used after its expiry is refused
// by the store (the S3 test server's clock moved past X-Amz-Date+X-Amz-Expires),
// so nothing lands and verify finds nothing.
func TestDirectExpired(t *testing.T) {
	f := newDirectFixture(t, 30*time.Second)
	data := []byte("too late")
	oid := oidOf(data)
	up, ver := f.uploadActs(t, "alice/priv", writer, batchObject{OID: oid, Size: int64(len(data))})
	f.gate.Advance(31 * time.Second)
	if code, b := send(t, "PUT", up, data); code != http.StatusForbidden || !strings.Contains(string(b), "expired") {
		t.Fatalf("expired PUT: %d %s", code, b)
	}
	if code, _ := send(t, "POST", ver, verifyBody(oid, int64(len(data)))); code != http.StatusNotFound {
		t.Fatalf("verify after an expired PUT: %d", code)
	}
	if f.visible(t, "01PRIV", "alice", oid) {
		t.Fatal("visible")
	}
	// A fresh batch gets a fresh URL; a download URL expires the same way.
	f.gate.Advance(-31 * time.Second)
	up, ver = f.uploadActs(t, "alice/priv", writer, batchObject{OID: oid, Size: int64(len(data))})
	if code, _ := send(t, "PUT", up, data); code != 200 {
		t.Fatal("fresh PUT")
	}
	if code, _ := send(t, "POST", ver, verifyBody(oid, int64(len(data)))); code != 200 {
		t.Fatal("verify")
	}
	_, res := f.batch(t, "alice/priv", writer, "download", batchObject{OID: oid, Size: int64(len(data))})
	dl := res.Objects[0].Actions["download"]
	if code, _ := send(t, "GET", dl, nil); code != 200 {
		t.Fatal("GET in time")
	}
	f.gate.Advance(31 * time.Second)
	if code, _ := send(t, "GET", dl, nil); code != http.StatusForbidden {
		t.Fatalf("expired GET: %d", code)
	}
}

// TestDirectAuthorization: presigned URLs are handed out after git's
// authorization only: anonymous and other-tenant callers learn nothing
// of a private repository, a reader cannot upload or verify, and a
// repository that does not reference an object gets no URL for it even
// when its tenant holds the bytes.
func TestDirectAuthorization(t *testing.T) {
	f := newDirectFixture(t, time.Minute)
	data := []byte("private bytes")
	oid := oidOf(data)
	o := batchObject{OID: oid, Size: int64(len(data))}
	up, ver := f.uploadActs(t, "alice/priv", writer, o)
	send(t, "PUT", up, data)
	if code, _ := send(t, "POST", ver, verifyBody(oid, o.Size)); code != 200 {
		t.Fatal("verify")
	}
	for _, c := range []struct {
		token, repo, op string
		want            int
	}{
		{"", "alice/priv", "download", http.StatusUnauthorized},
		{writer2, "alice/priv", "download", http.StatusNotFound}, // a token without access to it
		{writer2, "alice/priv", "upload", http.StatusNotFound},
		{reader, "alice/pub", "upload", http.StatusForbidden},
		{"", "alice/pub", "upload", http.StatusUnauthorized},
	} {
		if code, res := f.batch(t, c.repo, c.token, c.op, o); code != c.want {
			t.Errorf("%s %s by %q: %d %+v, want %d", c.op, c.repo, c.token, code, res, c.want)
		}
	}
	// alice/other, same tenant, does not reference the object: no URL.
	if code, res := f.batch(t, "alice/other", writer, "download", o); code != 200 || res.Objects[0].Actions != nil || res.Objects[0].Error == nil {
		t.Fatalf("download from a repository without the reference: %d %+v", code, res)
	}
	// Verify needs write access to the repository, as upload does.
	for _, c := range []struct {
		token, repo string
		want        int
	}{
		{"", "alice/priv", http.StatusUnauthorized},
		{writer2, "alice/priv", http.StatusNotFound},
		{reader, "alice/pub", http.StatusForbidden},
	} {
		req := &action{Href: f.url + "/" + c.repo + ".git/info/lfs/objects/verify", Header: map[string]string{UploadHeader: ver.Header[UploadHeader]}}
		if c.token != "" {
			req.Header["Authorization"] = "Basic " + basic("x", c.token)
		}
		if code, b := send(t, "POST", req, verifyBody(oid, o.Size)); code != c.want {
			t.Errorf("verify on %s by %q: %d %s, want %d", c.repo, c.token, code, b, c.want)
		}
	}
	if _, err := f.store.GetRange(context.Background(), refKey("01PUB", oid), 0, 0); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("alice/pub references the object: %v", err)
	}
}

func basic(user, pw string) string {
	r, _ := http.NewRequest("GET", "http://x", nil)
	r.SetBasicAuth(user, pw)
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")
}

// TestProxiedWithoutPresigner: without a Presigner the batch is as it
// was: the node's own URLs and the caller's Authorization, no verify.
func TestProxiedWithoutPresigner(t *testing.T) {
	f := newFixture(t, 1<<20)
	data := []byte("proxied")
	code, res := f.batch(t, "alice/priv", writer, "upload", batchObject{OID: oidOf(data), Size: int64(len(data))})
	a := res.Objects[0]
	if code != 200 || a.Actions["verify"] != nil || a.Authenticated || !strings.HasPrefix(a.Actions["upload"].Href, f.url+"/alice/priv.git/info/lfs/objects/") || a.Actions["upload"].Header["Authorization"] == "" {
		t.Fatalf("proxied upload batch: %d %+v", code, res)
	}
}

// beforePublish runs hook once before the first Copy to an object's key:
// a fault injected between verify's check and its publishing.
type beforePublish struct {
	objstore.Store
	once sync.Once
	hook func()
}

func (b *beforePublish) Copy(ctx context.Context, src, dst string) error {
	if strings.HasPrefix(dst, "lfs/objects/") {
		b.once.Do(b.hook)
	}
	return b.Store.Copy(ctx, src, dst)
}

// TestDirectWriteDuringVerify: the presigned URL is still valid while
// verify runs; wrong bytes written through it after the check and before
// the publishing do not become the object. A store that checks
// checksums refuses them (the URL signs the oid's); on one that does
// not they land, and verify publishes its own copy of what it checked.
func TestDirectWriteDuringVerify(t *testing.T) {
	modes(t, func(t *testing.T, unchecked bool) {
		data := []byte("the bytes that were checked")
		wrong := []byte("the bytes that came later!!")
		oid := oidOf(data)
		o := batchObject{OID: oid, Size: int64(len(data))}
		var up *action
		hookCode := 0
		f := newDirect(t, directOpts{expiry: time.Minute, unchecked: unchecked, store: func(s objstore.Store) objstore.Store {
			return &beforePublish{Store: s, hook: func() {
				req, _ := http.NewRequest("PUT", up.Href, bytes.NewReader(wrong))
				for k, v := range up.Header {
					req.Header.Set(k, v)
				}
				if res, err := http.DefaultClient.Do(req); err == nil {
					res.Body.Close()
					hookCode = res.StatusCode
				}
			}}
		}})
		var ver *action
		up, ver = f.uploadActs(t, "alice/priv", writer, o)
		if code, _ := send(t, "PUT", up, data); code != 200 {
			t.Fatal("PUT")
		}
		if code, b := send(t, "POST", ver, verifyBody(oid, o.Size)); code != 200 {
			t.Fatalf("verify: %d %s", code, b)
		}
		if want := map[bool]int{true: 200, false: http.StatusBadRequest}[unchecked]; hookCode != want {
			t.Fatalf("the write during verify: %d, want %d", hookCode, want)
		}
		b, _, err := objstore.ReadAll(context.Background(), f.store, objectKey("alice", oid), 1<<20)
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("published %q (%v), want the checked bytes", b, err)
		}
	})
}

// TestDirectVerifyAdmits: a presigned upload counts against the tenant's
// quota when it is verified, as a proxied one does when it is stored:
// two batches that each fit, verified one after the other, the second
// refused with 507 and never visible.
func TestDirectVerifyAdmits(t *testing.T) {
	modes(t, func(t *testing.T, unchecked bool) {
		a, b := []byte("first object, 29 bytes long."), []byte("second object, 30 bytes long.")
		f := newDirect(t, directOpts{expiry: time.Minute, unchecked: unchecked, mod: func(o *Options) { o.QuotaBytes = int64(len(a) + 10) }})
		oa, ob := batchObject{OID: oidOf(a), Size: int64(len(a))}, batchObject{OID: oidOf(b), Size: int64(len(b))}
		upA, verA := f.uploadActs(t, "alice/priv", writer, oa)
		upB, verB := f.uploadActs(t, "alice/priv", writer, ob)
		for _, u := range []struct {
			up   *action
			data []byte
		}{{upA, a}, {upB, b}} {
			if code, body := send(t, "PUT", u.up, u.data); code != 200 {
				t.Fatalf("presigned PUT: %d %s", code, body)
			}
		}
		if code, body := send(t, "POST", verA, verifyBody(oa.OID, oa.Size)); code != 200 {
			t.Fatalf("verify of the first: %d %s", code, body)
		}
		if code, body := send(t, "POST", verB, verifyBody(ob.OID, ob.Size)); code != http.StatusInsufficientStorage {
			t.Fatalf("verify past the quota: %d %s", code, body)
		}
		if f.visible(t, "01PRIV", "alice", ob.OID) {
			t.Fatal("an object past the quota became visible")
		}
	})
}

// hexRun is a hash or a random name in a key.
var hexRun = regexp.MustCompile(`[0-9a-f]{16,}`)

// TestDirectConcurrentVerify: two verifies of one upload at once (a
// client's retry while the first still runs): the second publishes and
// removes the upload between the first's check and its copy, and the
// first then finds the object held and succeeds too.
func TestDirectConcurrentVerify(t *testing.T) {
	modes(t, func(t *testing.T, unchecked bool) {
		data := []byte("verified twice at once")
		oid := oidOf(data)
		o := batchObject{OID: oid, Size: int64(len(data))}
		var ver *action
		var inner atomic.Int32
		var second int
		f := newDirect(t, directOpts{expiry: time.Minute, unchecked: unchecked, store: func(s objstore.Store) objstore.Store {
			return &beforeCopy{Store: s, hook: func() {
				if inner.Add(1) == 1 {
					second, _ = send(t, "POST", ver, verifyBody(oid, o.Size))
				}
			}}
		}})
		var up *action
		up, ver = f.uploadActs(t, "alice/priv", writer, o)
		if code, _ := send(t, "PUT", up, data); code != 200 {
			t.Fatal("PUT")
		}
		if code, b := send(t, "POST", ver, verifyBody(oid, o.Size)); code != 200 || second != 200 {
			t.Fatalf("verifies: the first %d %s, the second %d", code, b, second)
		}
		b, _, err := objstore.ReadAll(context.Background(), f.store, objectKey("alice", oid), 1<<20)
		if err != nil || !bytes.Equal(b, data) || !f.visible(t, "01PRIV", "alice", oid) {
			t.Fatalf("published %q (%v)", b, err)
		}
	})
}

// beforeCopy runs hook before every Copy.
type beforeCopy struct {
	objstore.Store
	hook func()
}

func (b *beforeCopy) Copy(ctx context.Context, src, dst string) error {
	b.hook()
	return b.Store.Copy(ctx, src, dst)
}

// faultPresigner injects a fault into the store steps verify takes
// through the Presigner (the probe, the checksum's HEAD): lost (an
// unavailable store, nothing done) or landed then error (done, then an
// unavailable store reported).
type faultPresigner struct {
	*s3store.Store
	op     string // "probe" or "head"
	landed bool
	once   sync.Once
}

func (p *faultPresigner) fault(op string) bool {
	hit := false
	if op == p.op {
		p.once.Do(func() { hit = true })
	}
	return hit
}

var errInjected = fmt.Errorf("injected: %w", objstore.ErrUnavailable)

func (p *faultPresigner) ChecksSHA256(ctx context.Context, key string) (bool, error) {
	if !p.fault("probe") {
		return p.Store.ChecksSHA256(ctx, key)
	}
	if p.landed {
		p.Store.ChecksSHA256(ctx, key)
	}
	return false, errInjected
}

func (p *faultPresigner) StoredSHA256(ctx context.Context, key string) ([]byte, int64, error) {
	if !p.fault("head") {
		return p.Store.StoredSHA256(ctx, key)
	}
	if p.landed {
		p.Store.StoredSHA256(ctx, key)
	}
	return nil, 0, errInjected
}

// TestDirectVerifyFaults: each store step of a verify, in turn, lost or
// landed then failed (an S3 request can land and still report an
// error): the failed verify leaves nothing visible but the right bytes
// (a reference only with its object), and the client's retried verify
// succeeds with the right bytes. On both kinds of store; the steps are
// those a clean verify takes, recorded first.
func TestDirectVerifyFaults(t *testing.T) {
	data := []byte("bytes that must survive every fault")
	oid := oidOf(data)
	o := batchObject{OID: oid, Size: int64(len(data))}
	modes(t, func(t *testing.T, unchecked bool) {
		// run uploads, and verifies under plan (the steps counted from
		// the verify's start), returning its answer.
		run := func(t *testing.T, fs **faultstore.Store, f *directFixture, plan func(c faultstore.Call, base [8]int) faultstore.Fault) (*action, int) {
			up, ver := f.uploadActs(t, "alice/priv", writer, o)
			if code, _ := send(t, "PUT", up, data); code != 200 {
				t.Fatal("PUT")
			}
			var base [8]int
			for op := range base {
				base[op] = (*fs).Count(faultstore.Op(op))
			}
			(*fs).SetPlan(func(c faultstore.Call) faultstore.Fault { return plan(c, base) })
			code, _ := send(t, "POST", ver, verifyBody(oid, o.Size))
			(*fs).SetPlan(nil)
			return ver, code
		}
		newF := func(t *testing.T, p func(*s3store.Store) Presigner) (*directFixture, **faultstore.Store) {
			fs := new(*faultstore.Store)
			f := newDirect(t, directOpts{expiry: time.Minute, unchecked: unchecked, presigner: p,
				store: func(s objstore.Store) objstore.Store { *fs = faultstore.New(s); return *fs }})
			return f, fs
		}
		// The steps of a clean verify.
		type step struct {
			op faultstore.Op
			n  int // the nth call of op in the verify
		}
		var steps []step
		var names []string
		{
			f, fs := newF(t, nil)
			seen := map[faultstore.Op]int{}
			_, code := run(t, fs, f, func(c faultstore.Call, base [8]int) faultstore.Fault {
				seen[c.Op]++
				steps = append(steps, step{c.Op, seen[c.Op]})
				names = append(names, c.Op.String()+" "+c.Key)
				return faultstore.Fault{}
			})
			if code != 200 {
				t.Fatalf("clean verify: %d", code)
			}
			t.Logf("the store steps of a verify: %q", names)
		}
		check := func(t *testing.T, f *directFixture, ver *action, code int) {
			t.Helper()
			ctx := context.Background()
			obj, _, err := objstore.ReadAll(ctx, f.store, objectKey("alice", oid), 1<<20)
			if err == nil && !bytes.Equal(obj, data) {
				t.Fatalf("after a verify that answered %d the object is %q", code, obj)
			}
			if _, rerr := f.store.GetRange(ctx, refKey("01PRIV", oid), 0, 0); rerr == nil && err != nil {
				t.Fatalf("after a verify that answered %d a reference names a missing object: %v", code, err)
			}
			if code == 200 && !f.visible(t, "01PRIV", "alice", oid) {
				t.Fatal("verify answered 200 and nothing is visible")
			}
			if retry, b := send(t, "POST", ver, verifyBody(oid, o.Size)); retry != 200 {
				t.Fatalf("retried verify after one that answered %d: %d %s", code, retry, b)
			}
			obj, _, err = objstore.ReadAll(ctx, f.store, objectKey("alice", oid), 1<<20)
			if err != nil || !bytes.Equal(obj, data) {
				t.Fatalf("after the retry the object is %q (%v)", obj, err)
			}
			if _, err := f.store.GetRange(ctx, refKey("01PRIV", oid), 0, 0); err != nil {
				t.Fatalf("after the retry the reference is missing: %v", err)
			}
		}
		for i, st := range steps {
			for _, outcome := range []faultstore.Outcome{faultstore.Lost, faultstore.LandedThenError} {
				t.Run(fmt.Sprintf("%s/%s", hexRun.ReplaceAllString(names[i], "*"), outcome), func(t *testing.T) {
					f, fs := newF(t, nil)
					ver, code := run(t, fs, f, func(c faultstore.Call, base [8]int) faultstore.Fault {
						if c.Op == st.op && c.N-base[st.op] == st.n {
							return faultstore.Fault{Outcome: outcome}
						}
						return faultstore.Fault{}
					})
					check(t, f, ver, code)
				})
			}
		}
		for _, op := range []string{"probe", "head"} {
			for _, landed := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/landed=%v", op, landed), func(t *testing.T) {
					f, fs := newF(t, func(s *s3store.Store) Presigner { return &faultPresigner{Store: s, op: op, landed: landed} })
					ver, code := run(t, fs, f, func(faultstore.Call, [8]int) faultstore.Fault { return faultstore.Fault{} })
					check(t, f, ver, code)
				})
			}
		}
	})
}
