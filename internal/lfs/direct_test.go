package lfs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/s3store"
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

// presignGate checks presigned requests the way S3 does, in front of
// gofakes3, which checks no signature: the SigV4 query signature over
// the method, path, query and signed headers (Content-Length and
// x-amz-checksum-sha256 among them), and X-Amz-Date + X-Amz-Expires
// against its clock, which tests move forward (a fake clock: no test
// sleeps). It does not hash bodies against x-amz-checksum-sha256, as
// real S3 does: Verify's read-back is what is under test. Requests
// without a query signature (the node's own, header-signed) pass.
type presignGate struct {
	next http.Handler
	mu   sync.Mutex
	now  time.Time
}

func (g *presignGate) advance(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now = g.now.Add(d)
}

func (g *presignGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("X-Amz-Signature") == "" {
		g.next.ServeHTTP(w, r)
		return
	}
	g.mu.Lock()
	now := g.now
	g.mu.Unlock()
	signedAt, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	secs, err2 := strconv.Atoi(q.Get("X-Amz-Expires"))
	if err != nil || err2 != nil {
		http.Error(w, "AuthorizationQueryParametersError", http.StatusBadRequest)
		return
	}
	if now.After(signedAt.Add(time.Duration(secs) * time.Second)) {
		http.Error(w, "AccessDenied: Request has expired", http.StatusForbidden)
		return
	}
	// Sign the same request again at the same time; the signatures
	// match only if nothing signed was changed.
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	uq := u.Query()
	for _, k := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token"} {
		uq.Del(k)
	}
	u.RawQuery = uq.Encode()
	again, _ := http.NewRequest(r.Method, u.String(), nil)
	for _, hname := range strings.Split(q.Get("X-Amz-SignedHeaders"), ";") {
		switch hname {
		case "host":
		case "content-length":
			again.ContentLength = r.ContentLength
		default:
			if v := r.Header.Get(hname); v != "" {
				again.Header.Set(hname, v)
			}
		}
	}
	signed, _, err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).PresignHTTP(
		r.Context(), aws.Credentials{AccessKeyID: s3Key, SecretAccessKey: s3Secret}, again, "UNSIGNED-PAYLOAD", "s3", "us-east-1", signedAt)
	su, _ := url.Parse(signed)
	if err != nil || su.Query().Get("X-Amz-Signature") != q.Get("X-Amz-Signature") || su.Query().Get("X-Amz-SignedHeaders") != q.Get("X-Amz-SignedHeaders") {
		http.Error(w, "SignatureDoesNotMatch", http.StatusForbidden)
		return
	}
	g.next.ServeHTTP(w, r)
}

// directFixture is newFixture's repositories on gofakes3, reached by
// the node at one address and by clients at another (behind the
// presignGate), with the handler presigning.
type directFixture struct {
	*fixture
	gate    *presignGate
	clients string // the clients' S3 endpoint
}

func newDirectFixture(t *testing.T, expiry time.Duration) *directFixture {
	return newDirectFixtureWrap(t, expiry, nil)
}

// newDirectFixtureQuota is newDirectFixture with a tenant quota.
func newDirectFixtureQuota(t *testing.T, expiry time.Duration, quota int64) *directFixture {
	return newDirectFixtureOpts(t, expiry, nil, func(o *Options) { o.QuotaBytes = quota })
}

// newDirectFixtureWrap is newDirectFixture with the handler's Store
// wrapped, to inject faults.
func newDirectFixtureWrap(t *testing.T, expiry time.Duration, wrap func(objstore.Store) objstore.Store) *directFixture {
	return newDirectFixtureOpts(t, expiry, wrap, nil)
}

func newDirectFixtureOpts(t *testing.T, expiry time.Duration, wrap func(objstore.Store) objstore.Store, mod func(*Options)) *directFixture {
	t.Helper()
	backend := s3mem.New()
	nodeS3 := httptest.NewServer(gofakes3.New(backend).Server()) // 127.0.0.1
	t.Cleanup(nodeS3.Close)
	gate := &presignGate{next: gofakes3.New(backend).Server(), now: time.Now()}
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
	if wrap != nil {
		hstore = wrap(store)
	}
	opts := Options{Store: hstore, Auth: testAuth(), MaxObjectSize: 1 << 20, MaxBatchBytes: 4096, MaxBatchItems: 10, Presigner: store, PresignExpiry: expiry}
	if mod != nil {
		mod(&opts)
	}
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h) // 127.0.0.1
	t.Cleanup(ts.Close)
	return &directFixture{fixture: &fixture{store: store, url: ts.URL}, gate: gate, clients: clientS3.URL}
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
// visible, and a download batch hands out a GET that fetches it.
func TestDirectRoundTrip(t *testing.T) {
	f := newDirectFixture(t, 2*time.Minute)
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
	// The temporaries are gone.
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
}

// TestDirectWrongUploadNeverVisible: bytes that are not the oid's, or
// not its size, are refused at verify and never become visible, and a
// wrong re-upload through a URL still valid after a verify changes
// nothing.
func TestDirectWrongUploadNeverVisible(t *testing.T) {
	f := newDirectFixture(t, time.Minute)
	data := []byte("the real bytes")
	oid := oidOf(data)
	o := batchObject{OID: oid, Size: int64(len(data))}
	wrong := []byte("the fake bytes") // same length

	up, ver := f.uploadActs(t, "alice/priv", writer, o)
	if code, b := send(t, "PUT", up, wrong); code != 200 {
		t.Fatalf("presigned PUT: %d %s", code, b) // gofakes3 checks no checksum; real S3 would refuse here
	}
	if code, b := send(t, "POST", ver, verifyBody(oid, o.Size)); code != http.StatusUnprocessableEntity || !strings.Contains(string(b), "do not hash to the oid") {
		t.Fatalf("verify of wrong bytes: %d %s", code, b)
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
	// and verify runs again: the object stays the right bytes.
	if code, _ := send(t, "PUT", up, data); code != 200 {
		t.Fatal("PUT")
	}
	if code, b := send(t, "POST", ver, verifyBody(oid, o.Size)); code != 200 {
		t.Fatalf("verify: %d %s", code, b)
	}
	if code, _ := send(t, "PUT", up, wrong); code != 200 {
		t.Fatal("re-PUT")
	}
	if code, b := send(t, "POST", ver, verifyBody(oid, o.Size)); code != http.StatusUnprocessableEntity {
		t.Fatalf("verify of the wrong re-upload: %d %s", code, b)
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
}

// TestDirectExpired: a presigned URL used after its expiry is refused
// by the store (presignGate's clock moved past X-Amz-Date+X-Amz-Expires),
// so nothing lands and verify finds nothing.
func TestDirectExpired(t *testing.T) {
	f := newDirectFixture(t, 30*time.Second)
	data := []byte("too late")
	oid := oidOf(data)
	up, ver := f.uploadActs(t, "alice/priv", writer, batchObject{OID: oid, Size: int64(len(data))})
	f.gate.advance(31 * time.Second)
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
	f.gate.advance(-31 * time.Second)
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
	f.gate.advance(31 * time.Second)
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
// the publishing do not become the object, because verify publishes its
// own copy of what it checked.
func TestDirectWriteDuringVerify(t *testing.T) {
	data := []byte("the bytes that were checked")
	wrong := []byte("the bytes that came later!!")
	oid := oidOf(data)
	o := batchObject{OID: oid, Size: int64(len(data))}
	var up *action
	var hookErr error
	f := newDirectFixtureWrap(t, time.Minute, func(s objstore.Store) objstore.Store {
		return &beforePublish{Store: s, hook: func() {
			req, _ := http.NewRequest("PUT", up.Href, bytes.NewReader(wrong))
			for k, v := range up.Header {
				req.Header.Set(k, v)
			}
			res, err := http.DefaultClient.Do(req)
			if err == nil {
				res.Body.Close()
				if res.StatusCode != 200 {
					err = errors.New(res.Status)
				}
			}
			hookErr = err
		}}
	})
	var ver *action
	up, ver = f.uploadActs(t, "alice/priv", writer, o)
	if code, _ := send(t, "PUT", up, data); code != 200 {
		t.Fatal("PUT")
	}
	if code, b := send(t, "POST", ver, verifyBody(oid, o.Size)); code != 200 {
		t.Fatalf("verify: %d %s", code, b)
	}
	if hookErr != nil {
		t.Fatalf("the write during verify failed: %v", hookErr)
	}
	b, _, err := objstore.ReadAll(context.Background(), f.store, objectKey("alice", oid), 1<<20)
	if err != nil || !bytes.Equal(b, data) {
		t.Fatalf("published %q (%v), want the checked bytes", b, err)
	}
}

// TestDirectVerifyAdmits: a presigned upload counts against the tenant's
// quota when it is verified, as a proxied one does when it is stored:
// two batches that each fit, verified one after the other, the second
// refused with 507 and never visible.
func TestDirectVerifyAdmits(t *testing.T) {
	a, b := []byte("first object, 29 bytes long."), []byte("second object, 30 bytes long.")
	f := newDirectFixtureQuota(t, time.Minute, int64(len(a)+10))
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
}
