package lfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// tableAuth is a test double for the metadata-backed authorizer: tokens
// map to levels per repository. The server tests exercise the real one.
type tableAuth struct {
	repos  map[string]string                  // owner/name -> repoID
	levels map[string]map[string]access.Level // token -> owner/name -> level
}

func (a tableAuth) Authorize(_ context.Context, token, owner, name string) (access.Grant, error) {
	if token != "" && a.levels[token] == nil {
		return access.Grant{}, access.ErrUnauthenticated
	}
	id, ok := a.repos[owner+"/"+name]
	if !ok {
		return access.Grant{}, access.ErrNotFound
	}
	g := access.Grant{RepoID: id, Tenant: owner, Level: a.levels[token][owner+"/"+name]}
	if token != "" {
		g.Actor = strings.TrimSuffix(token, "-token")
		g.Principal = g.Actor + " (token " + token + ")"
	}
	return g, nil
}

type fixture struct {
	store objstore.Store
	url   string
}

const (
	writer  = "w-token"
	writer2 = "w2-token"
	reader  = "r-token"
)

// testAuth is the fixtures' repositories and tokens.
func testAuth() tableAuth {
	return tableAuth{
		repos: map[string]string{"alice/pub": "01PUB", "alice/priv": "01PRIV", "alice/other": "01OTHER"},
		levels: map[string]map[string]access.Level{
			"":      {"alice/pub": access.Read},
			writer:  {"alice/pub": access.Write, "alice/priv": access.Write, "alice/other": access.Write},
			reader:  {"alice/pub": access.Read},
			writer2: {"alice/pub": access.Write},
		},
	}
}

func newFixture(t *testing.T, maxObject int64) *fixture {
	t.Helper()
	store := memstore.New()
	h, err := New(Options{Store: store, Auth: testAuth(), MaxObjectSize: maxObject, MaxBatchBytes: 4096, MaxBatchItems: 10})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h) // 127.0.0.1
	t.Cleanup(ts.Close)
	return &fixture{store: store, url: ts.URL}
}

func oidOf(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func (f *fixture) do(t testing.TB, method, path, token, ctype string, body io.Reader, size int64) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if size >= 0 {
		req.ContentLength = size
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if token != "" {
		req.SetBasicAuth("x", token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b
}

func (f *fixture) batch(t testing.TB, repo, token, op string, objs ...batchObject) (int, batchResponse) {
	t.Helper()
	b, _ := json.Marshal(batchRequest{Operation: op, Transfers: []string{"basic"}, Objects: objs})
	code, _, out := f.do(t, "POST", "/"+repo+".git/info/lfs/objects/batch", token, MediaType, bytes.NewReader(b), int64(len(b)))
	var res batchResponse
	if code == http.StatusOK {
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("batch answer %s: %v", out, err)
		}
	}
	return code, res
}

func (f *fixture) put(t *testing.T, repo, token, oid string, data []byte) int {
	t.Helper()
	code, _, _ := f.do(t, "PUT", "/"+repo+".git/info/lfs/objects/"+oid, token, "application/octet-stream", bytes.NewReader(data), int64(len(data)))
	return code
}

// visible lists every key under lfs/objects/ and lfs/tmp/.
func (f *fixture) visible(t *testing.T) []string {
	t.Helper()
	var keys []string
	for _, p := range []string{"lfs/objects/", "lfs/refs/", "lfs/tmp/"} {
		infos, err := f.store.List(context.Background(), p, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range infos {
			keys = append(keys, i.Key)
		}
	}
	return keys
}

func TestUploadDownload(t *testing.T) {
	f := newFixture(t, 1<<20)
	data := bytes.Repeat([]byte("lfs"), 50000)
	oid := oidOf(data)
	code, res := f.batch(t, "alice/pub", writer, "upload", batchObject{oid, int64(len(data))})
	if code != 200 || len(res.Objects) != 1 || res.Objects[0].Actions["upload"] == nil {
		t.Fatalf("upload batch: %d %+v", code, res)
	}
	up := res.Objects[0].Actions["upload"]
	if !strings.HasSuffix(up.Href, "/alice/pub.git/info/lfs/objects/"+oid) || up.Header["Authorization"] == "" {
		t.Fatalf("upload action %+v", up)
	}
	if code := f.put(t, "alice/pub", writer, oid, data); code != 200 {
		t.Fatalf("put: %d", code)
	}
	// Uploaded: no action any more.
	if _, res := f.batch(t, "alice/pub", writer, "upload", batchObject{oid, int64(len(data))}); res.Objects[0].Actions != nil {
		t.Fatalf("second upload batch still asks: %+v", res.Objects[0])
	}
	code, res = f.batch(t, "alice/pub", "", "download", batchObject{oid, int64(len(data))})
	if code != 200 || res.Objects[0].Actions["download"] == nil {
		t.Fatalf("download batch: %d %+v", code, res)
	}
	code, _, got := f.do(t, "GET", "/alice/pub.git/info/lfs/objects/"+oid, "", "", nil, -1)
	if code != 200 || !bytes.Equal(got, data) {
		t.Fatalf("get: %d, %d bytes", code, len(got))
	}
	// Another repository of the tenant does not serve it.
	if _, res := f.batch(t, "alice/other", writer, "download", batchObject{oid, int64(len(data))}); res.Objects[0].Error == nil || res.Objects[0].Error.Code != 404 {
		t.Fatalf("other repository's download batch: %+v", res.Objects[0])
	}
	if code, _, _ := f.do(t, "GET", "/alice/other.git/info/lfs/objects/"+oid, writer, "", nil, -1); code != 404 {
		t.Fatalf("other repository's get: %d", code)
	}
	if keys := f.visible(t); len(keys) != 2 {
		t.Fatalf("keys %v: want the object and one reference", keys)
	}
}

func TestUploadRefusals(t *testing.T) {
	f := newFixture(t, 1000)
	data := []byte("hello, large file")
	oid := oidOf(data)
	// A wrong sha256.
	if code := f.put(t, "alice/pub", writer, oidOf([]byte("other")), data); code != http.StatusUnprocessableEntity {
		t.Fatalf("wrong sha256: %d", code)
	}
	// Oversize.
	big := bytes.Repeat([]byte("x"), 1001)
	if code := f.put(t, "alice/pub", writer, oidOf(big), big); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversize put: %d", code)
	}
	if _, res := f.batch(t, "alice/pub", writer, "upload", batchObject{oidOf(big), 1001}); res.Objects[0].Error == nil || res.Objects[0].Error.Code != 422 {
		t.Fatalf("oversize batch: %+v", res.Objects[0])
	}
	// A cut upload: the body ends before its Content-Length.
	if code := f.cutPut(t, "alice/pub", oid, data[:5], int64(len(data))); code == 200 {
		t.Fatal("cut upload accepted")
	}
	// Unauthorized, forbidden, not found.
	if code := f.put(t, "alice/pub", "", oid, data); code != 401 {
		t.Fatalf("anonymous put: %d", code)
	}
	if code := f.put(t, "alice/pub", reader, oid, data); code != 403 {
		t.Fatalf("reader's put: %d", code)
	}
	if code := f.put(t, "alice/priv", reader, oid, data); code != 404 {
		t.Fatalf("reader's put to a private repository: %d", code)
	}
	if code := f.put(t, "alice/pub", "bogus", oid, data); code != 401 {
		t.Fatalf("bad token: %d", code)
	}
	if keys := f.visible(t); len(keys) != 0 {
		t.Fatalf("refused uploads left %v", keys)
	}
	// And a good one still works afterwards.
	if code := f.put(t, "alice/pub", writer, oid, data); code != 200 {
		t.Fatalf("put: %d", code)
	}
}

// cutPut sends part of a body under a larger Content-Length and closes
// the connection, as a client that dies mid-upload does.
func (f *fixture) cutPut(t *testing.T, repo, oid string, part []byte, size int64) int {
	t.Helper()
	pr, pw := io.Pipe()
	go func() {
		pw.Write(part)
		pw.CloseWithError(io.ErrUnexpectedEOF)
	}()
	code, _, _ := f.do(t, "PUT", "/"+repo+".git/info/lfs/objects/"+oid, writer, "application/octet-stream", pr, size)
	return code
}

func TestBatchRefusals(t *testing.T) {
	f := newFixture(t, 1000)
	path := "/alice/pub.git/info/lfs/objects/batch"
	for _, c := range []struct {
		name, ctype, body, token string
		want                     int
	}{
		{"bad JSON", MediaType, `{"operation":`, writer, 400},
		{"wrong type", "application/json", `{"operation":"download","objects":[]}`, writer, 415},
		{"bad operation", MediaType, `{"operation":"delete","objects":[]}`, writer, 422},
		{"too large", MediaType, `{"operation":"download","objects":[` + strings.Repeat(`{"oid":"a","size":1},`, 300) + `]}`, writer, 413},
		{"too many", MediaType, `{"operation":"download","objects":[` + strings.TrimSuffix(strings.Repeat(`{"oid":"a","size":1},`, 11), ",") + `]}`, writer, 413},
		{"hash algo", MediaType, `{"operation":"download","hash_algo":"sha512","objects":[]}`, writer, 409},
		{"transfer", MediaType, `{"operation":"download","transfers":["tus"],"objects":[]}`, writer, 422},
		{"ok", MediaType, `{"operation":"download","objects":[]}`, writer, 200},
	} {
		code, _, out := f.do(t, "POST", path, c.token, c.ctype, strings.NewReader(c.body), int64(len(c.body)))
		if code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, out, c.want)
		}
	}
	code, res := f.batch(t, "alice/pub", writer, "upload", batchObject{"NOTHEX", 1}, batchObject{strings.Repeat("a", 64), -1})
	if code != 200 || res.Objects[0].Error == nil || res.Objects[1].Error == nil {
		t.Fatalf("invalid objects: %d %+v", code, res)
	}
}

// TestPrivateLikeMissing: every answer about a private repository the
// caller cannot read is the answer about a repository that does not exist.
func TestPrivateLikeMissing(t *testing.T) {
	f := newFixture(t, 1000)
	body := `{"operation":"download","objects":[]}`
	oid := strings.Repeat("a", 64)
	for _, token := range []string{"", reader} {
		for _, req := range []struct{ method, rest, ctype, body string }{
			{"POST", "objects/batch", MediaType, body},
			{"POST", "objects/batch", MediaType, `{"operation":"upload","objects":[]}`},
			{"GET", "objects/" + oid, "", ""},
			{"PUT", "objects/" + oid, "", "x"},
		} {
			var got [2]string
			for i, repo := range []string{"alice/priv", "alice/nosuch"} {
				code, hdr, out := f.do(t, req.method, "/"+repo+".git/info/lfs/"+req.rest, token, req.ctype, strings.NewReader(req.body), int64(len(req.body)))
				got[i] = strings.Join([]string{http.StatusText(code), hdr.Get("WWW-Authenticate"), string(out)}, "|")
				if code == 200 {
					t.Errorf("%s %s %s as %q: 200", req.method, repo, req.rest, token)
				}
			}
			if got[0] != got[1] {
				t.Errorf("%s %s as %q: private %q, missing %q", req.method, req.rest, token, got[0], got[1])
			}
		}
	}
	// Anonymous callers are challenged, so git-lfs asks for credentials.
	if code, hdr, _ := f.do(t, "POST", "/alice/priv.git/info/lfs/objects/batch", "", MediaType, strings.NewReader(body), int64(len(body))); code != 401 || hdr.Get("LFS-Authenticate") == "" {
		t.Fatalf("anonymous: %d %v", code, hdr)
	}
}

func TestOwns(t *testing.T) {
	for path, want := range map[string]bool{
		"/a/b.git/info/lfs/objects/batch": true,
		"/a/b.git/info/lfs/locks":         true,
		"/a/b.git/info/refs":              false,
		"/a/b/info/lfs/objects/batch":     false,
		"/a/b.git/info/lfs":               false,
	} {
		if Owns(path) != want {
			t.Errorf("Owns(%q) = %v", path, !want)
		}
	}
}

// FuzzBatch: no batch body panics the handler or answers anything but
// JSON, and every object of a 200 answer is an error or a well-formed
// action.
func FuzzBatch(f *testing.F) {
	f.Add(`{"operation":"upload","objects":[{"oid":"` + strings.Repeat("a", 64) + `","size":3}]}`)
	f.Add(`{"operation":"download","transfers":["basic"],"hash_algo":"sha256","objects":[{"oid":"x","size":-1}]}`)
	f.Add(`{"operation":`)
	store := memstore.New()
	auth := tableAuth{repos: map[string]string{"a/b": "01B"}, levels: map[string]map[string]access.Level{writer: {"a/b": access.Write}}}
	h, err := New(Options{Store: store, Auth: auth, MaxObjectSize: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest("POST", "http://127.0.0.1/a/b.git/info/lfs/objects/batch", strings.NewReader(body))
		req.Header.Set("Content-Type", MediaType)
		req.SetBasicAuth("x", writer)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if ct := rec.Header().Get("Content-Type"); ct != MediaType {
			t.Fatalf("answer %d of type %q", rec.Code, ct)
		}
		if rec.Code != 200 {
			return
		}
		var res batchResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
			t.Fatalf("answer %s: %v", rec.Body.Bytes(), err)
		}
		for _, o := range res.Objects {
			if o.Error == nil && o.Actions != nil && (!validOID(o.OID) || o.Size < 0 || o.Size > 1<<20) {
				t.Fatalf("an action for an invalid object %+v", o)
			}
		}
	})
}

// TestStalledUpload: an upload that stops sending is cut after the idle
// timeout and leaves nothing behind.
func TestStalledUpload(t *testing.T) {
	store := memstore.New()
	auth := tableAuth{repos: map[string]string{"a/b": "01B"}, levels: map[string]map[string]access.Level{writer: {"a/b": access.Write}}}
	h, err := New(Options{Store: store, Auth: auth, IOTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h) // 127.0.0.1
	defer ts.Close()
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte("some bytes, then nothing"))
	req, _ := http.NewRequest("PUT", ts.URL+"/a/b.git/info/lfs/objects/"+strings.Repeat("a", 64), pr)
	req.ContentLength = 1000
	req.SetBasicAuth("x", writer)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				t.Error("a stalled upload was accepted")
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("a stalled upload held its connection for a minute")
	}
	if infos, _ := store.List(context.Background(), "lfs/", "", 10); len(infos) != 0 {
		t.Fatalf("a stalled upload left %v", infos)
	}
}

// lenientStore is a fault-injecting backend that stores whatever its
// reader gives, however short, instead of refusing a size mismatch.
type lenientStore struct{ objstore.Store }

func (s lenientStore) Put(ctx context.Context, key string, r io.Reader, _ int64) (objstore.Info, error) {
	b, _ := io.ReadAll(r)
	return s.Store.Put(ctx, key, bytes.NewReader(b), int64(len(b)))
}

// TestShortBodyLenientStore: a body shorter than its Content-Length is
// refused by the handler itself, even over a backend that would store it
// and even when the short bytes hash to the oid.
func TestShortBodyLenientStore(t *testing.T) {
	store := memstore.New()
	auth := tableAuth{repos: map[string]string{"a/b": "01B"}, levels: map[string]map[string]access.Level{writer: {"a/b": access.Write}}}
	h, err := New(Options{Store: lenientStore{store}, Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	part := []byte("short")
	req := httptest.NewRequest("PUT", "http://127.0.0.1/a/b.git/info/lfs/objects/"+oidOf(part), bytes.NewReader(part))
	req.ContentLength = 1000
	req.SetBasicAuth("x", writer)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code == 200 {
		t.Fatal("a short body was accepted")
	}
	if infos, _ := store.List(context.Background(), "lfs/", "", 10); len(infos) != 0 {
		t.Fatalf("a short body left %v", infos)
	}
}
