package lfstransfer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/gitsvc/pktline"
	"github.com/ghost-scm/ghost/internal/lfs"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// tokenAuth maps a token to a grant on the one repository, for the HTTP
// side of the shared-locks test; the server tests exercise the real
// authorizer.
type tokenAuth map[string]access.Grant

func (a tokenAuth) Authorize(_ context.Context, token, _, _ string) (access.Grant, error) {
	g, ok := a[token]
	if !ok {
		return access.Grant{}, access.ErrUnauthenticated
	}
	return g, nil
}

var (
	alice  = access.Grant{RepoID: "01R", Tenant: "alice", Actor: "alice", Principal: "alice", Level: access.Write}
	bob    = access.Grant{RepoID: "01R", Tenant: "alice", Actor: "bob", Principal: "bob", Level: access.Write}
	reader = access.Grant{RepoID: "01R", Tenant: "alice", Actor: "carol", Principal: "carol", Level: access.Read}
)

type fixture struct {
	store objstore.Store
	h     *lfs.Handler
}

func newFixture(t testing.TB, maxObject int64) *fixture {
	t.Helper()
	store := memstore.New()
	h, err := lfs.New(lfs.Options{Store: store, Auth: tokenAuth{"alice": alice, "bob": bob}, MaxObjectSize: maxObject})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{store: store, h: h}
}

// client drives one Serve session through pipes, as git-lfs does over
// the SSH channel.
type client struct {
	t    testing.TB
	w    *io.PipeWriter
	in   *pktline.Reader
	done chan error
}

func (f *fixture) session(t testing.TB, g access.Grant, op Operation, maxBatch int) *client {
	t.Helper()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	c := &client{t: t, w: cw, in: pktline.NewReader(cr), done: make(chan error, 1)}
	go func() {
		err := Serve(context.Background(), sr, sw, f.h.Repo(g), Options{Operation: op, MaxBatchItems: maxBatch})
		sw.Close()
		sr.Close()
		c.done <- err
	}()
	t.Cleanup(func() { cw.Close(); cr.Close() })
	caps := c.lines()
	if strings.Join(caps, ",") != "version=1,locking" {
		t.Fatalf("capabilities %q", caps)
	}
	return c
}

// send writes packets: "" is a flush, "\x01" a delim, anything else a
// text line.
func (c *client) send(pkts ...string) {
	c.t.Helper()
	var b bytes.Buffer
	for _, p := range pkts {
		switch p {
		case "":
			pktline.WriteFlush(&b)
		case "\x01":
			pktline.WriteDelim(&b)
		default:
			pktline.WriteString(&b, p+"\n")
		}
	}
	go c.w.Write(b.Bytes()) // the server may stop reading; the test reads its answer
}

// lines reads text packets to a flush.
func (c *client) lines() []string {
	c.t.Helper()
	var out []string
	for {
		kind, p, err := c.in.Next()
		if err != nil {
			c.t.Fatalf("reading: %v (after %q)", err, out)
		}
		switch kind {
		case pktline.Flush:
			return out
		case pktline.Delim:
			out = append(out, "|")
		default:
			out = append(out, strings.TrimSuffix(string(p), "\n"))
		}
	}
}

// answer reads one status answer: its code and the rest, joined.
func (c *client) answer() (int, string) {
	c.t.Helper()
	l := c.lines()
	var code int
	if len(l) == 0 || !strings.HasPrefix(l[0], "status ") {
		c.t.Fatalf("answer %q: no status", l)
	}
	fmt.Sscanf(l[0], "status %d", &code)
	return code, strings.Join(l[1:], "\n")
}

// ended waits for the session's end and returns Serve's error.
func (c *client) ended() error {
	c.t.Helper()
	select {
	case err := <-c.done:
		return err
	case <-time.After(10 * time.Second):
		c.t.Fatal("the session did not end")
		return nil
	}
}

func (c *client) version() {
	c.t.Helper()
	c.send("version 1", "")
	if code, rest := c.answer(); code != 200 {
		c.t.Fatalf("version: %d %s", code, rest)
	}
}

func oidOf(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// putPkts is a put-object request: its data in packets of at most 7
// bytes, so that objects span several.
func putPkts(oid string, size int, data []byte) []string {
	pkts := []string{"put-object " + oid, fmt.Sprintf("size=%d", size), "\x01"}
	for len(data) > 0 {
		n := min(7, len(data))
		pkts = append(pkts, "\x02"+string(data[:n]))
		data = data[n:]
	}
	return append(pkts, "")
}

// sendRaw is send, with "\x02"-prefixed packets written as raw data.
func (c *client) sendRaw(pkts ...string) {
	var b bytes.Buffer
	for _, p := range pkts {
		switch {
		case p == "":
			pktline.WriteFlush(&b)
		case p == "\x01":
			pktline.WriteDelim(&b)
		case strings.HasPrefix(p, "\x02"):
			pktline.WriteString(&b, p[1:])
		default:
			pktline.WriteString(&b, p+"\n")
		}
	}
	go c.w.Write(b.Bytes())
}

// visible lists the object store's LFS objects and references (the
// temporaries are not visible).
func (f *fixture) visible(t testing.TB) []string {
	t.Helper()
	var keys []string
	for _, prefix := range []string{"lfs/objects/", "lfs/refs/"} {
		infos, err := f.store.List(context.Background(), prefix, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range infos {
			keys = append(keys, i.Key)
		}
	}
	return keys
}

func TestUploadThenDownload(t *testing.T) {
	f := newFixture(t, 1000)
	data := []byte("a large file, as far as this test goes")
	oid := oidOf(data)
	up := f.session(t, alice, Upload, 0)
	up.version()
	up.send("batch", "transfer=ssh", "hash-algo=sha256", "refname=refs/heads/main", "\x01", fmt.Sprintf("%s %d", oid, len(data)), "")
	if code, rest := up.answer(); code != 200 || rest != fmt.Sprintf("hash-algo=sha256\n|\n%s %d upload", oid, len(data)) {
		t.Fatalf("upload batch: %d %q", code, rest)
	}
	up.sendRaw(putPkts(oid, len(data), data)...)
	if code, rest := up.answer(); code != 200 {
		t.Fatalf("put-object: %d %s", code, rest)
	}
	up.send("verify-object "+oid, fmt.Sprintf("size=%d", len(data)), "")
	if code, rest := up.answer(); code != 200 {
		t.Fatalf("verify-object: %d %s", code, rest)
	}
	up.send("verify-object "+oid, "size=1", "")
	if code, _ := up.answer(); code != 409 {
		t.Fatalf("verify-object with a wrong size: %d", code)
	}
	// Asked again, the server has it.
	up.send("batch", "\x01", fmt.Sprintf("%s %d", oid, len(data)), "")
	if _, rest := up.answer(); !strings.HasSuffix(rest, " noop") {
		t.Fatalf("second upload batch: %q", rest)
	}
	up.send("quit", "")
	if code, _ := up.answer(); code != 200 {
		t.Fatalf("quit: %d", code)
	}
	if err := up.ended(); err != nil {
		t.Fatalf("upload session: %v", err)
	}

	down := f.session(t, reader, Download, 0)
	down.version()
	missing := oidOf([]byte("never uploaded"))
	down.send("batch", "\x01", fmt.Sprintf("%s %d", oid, 1), missing+" 5", "")
	if code, rest := down.answer(); code != 200 || rest != fmt.Sprintf("hash-algo=sha256\n|\n%s %d download\n%s 5 noop", oid, len(data), missing) {
		t.Fatalf("download batch: %d %q", code, rest)
	}
	down.send("get-object "+oid, fmt.Sprintf("size=%d", len(data)), "")
	var got []byte
	kind, p, _ := down.in.Next()
	if kind != pktline.Data || string(p) != "status 200\n" {
		t.Fatalf("get-object status %q", p)
	}
	if _, p, _ := down.in.Next(); string(p) != fmt.Sprintf("size=%d\n", len(data)) {
		t.Fatalf("get-object size %q", p)
	}
	if kind, _, _ := down.in.Next(); kind != pktline.Delim {
		t.Fatal("get-object: no delim before the data")
	}
	for {
		kind, p, err := down.in.Next()
		if err != nil || kind == pktline.Flush {
			break
		}
		got = append(got, p...)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("downloaded %q", got)
	}
	down.send("get-object "+missing, "")
	if code, rest := down.answer(); code != 404 || !strings.Contains(rest, "does not exist") {
		t.Fatalf("get-object of a missing object: %d %q", code, rest)
	}
	down.w.Close() // the client goes away between requests: a clean end
	if err := down.ended(); err != nil {
		t.Fatalf("download session: %v", err)
	}
}

// TestBadUploads: a wrong sha256, a short and an overlong upload, one
// over the size limit and one cut by the client leave nothing visible;
// the first two leave the session usable.
func TestBadUploads(t *testing.T) {
	data := []byte("hello, large file")
	oid := oidOf(data)
	cases := []struct {
		name   string
		pkts   []string
		code   int
		goesOn bool
	}{
		{"wrong sha256", putPkts(oidOf([]byte("other")), len(data), data), 422, true},
		{"short", putPkts(oid, len(data)+5, data), 400, true},
		{"overlong", putPkts(oid, len(data)-1, data), 400, false},
		{"over the limit", putPkts(oidOf(bytes.Repeat([]byte("x"), 101)), 101, bytes.Repeat([]byte("x"), 101)), 413, false},
		{"bad oid", putPkts("ABC", len(data), data), 400, false},
		{"no size", []string{"put-object " + oid, "\x01", "\x02" + string(data), ""}, 400, false},
		{"negative size", putPkts(oid, -1, data), 400, false},
		{"a delim after the data", []string{"put-object " + oid, fmt.Sprintf("size=%d", len(data)), "\x01", "\x02" + string(data), "\x01", ""}, 400, false},
		{"a delim in the data", []string{"put-object " + oid, fmt.Sprintf("size=%d", len(data)), "\x01", "\x02hello", "\x01", ""}, 400, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, 100)
			s := f.session(t, alice, Upload, 0)
			s.version()
			s.sendRaw(c.pkts...)
			if code, rest := s.answer(); code != c.code {
				t.Fatalf("answer %d %q, want %d", code, rest, c.code)
			}
			if c.goesOn {
				s.sendRaw(putPkts(oid, len(data), data)...)
				if code, rest := s.answer(); code != 200 {
					t.Fatalf("a good upload after it: %d %s", code, rest)
				}
				if keys := f.visible(t); len(keys) != 2 {
					t.Fatalf("visible %v: want the good object and its reference", keys)
				}
				return
			}
			if err := s.ended(); !errors.Is(err, ErrProtocol) {
				t.Fatalf("session ended with %v, want a protocol error", err)
			}
			if keys := f.visible(t); len(keys) != 0 {
				t.Fatalf("a bad upload left %v", keys)
			}
		})
	}
}

// TestUploadCut: the client dies in the middle of an object's data.
func TestUploadCut(t *testing.T) {
	f := newFixture(t, 1000)
	data := bytes.Repeat([]byte("0123456789"), 50)
	s := f.session(t, alice, Upload, 0)
	s.version()
	var b bytes.Buffer
	pktline.WriteString(&b, "put-object "+oidOf(data)+"\n")
	pktline.WriteString(&b, fmt.Sprintf("size=%d\n", len(data)))
	pktline.WriteDelim(&b)
	pktline.Write(&b, data[:100])
	go func() { // whatever the server says, nobody reads it
		for {
			if _, _, err := s.in.Next(); err != nil {
				return
			}
		}
	}()
	if _, err := s.w.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	s.w.Close()
	if err := s.ended(); err == nil {
		t.Fatal("a cut upload ended the session cleanly")
	}
	if keys := f.visible(t); len(keys) != 0 {
		t.Fatalf("a cut upload left %v", keys)
	}
	if infos, _ := f.store.List(context.Background(), "lfs/", "", 10); len(infos) != 0 {
		t.Fatalf("a cut upload left %v", infos)
	}
}

// TestMalformed: requests that can be read to their end are answered
// with an error and the session goes on; the others end it.
func TestMalformed(t *testing.T) {
	oid := oidOf([]byte("x"))
	long := strings.Repeat("a", maxTextLine+1)
	many := []string{"list-lock"}
	for i := 0; i <= MaxArgs; i++ {
		many = append(many, fmt.Sprintf("k%d=v", i))
	}
	many = append(many, "")
	cases := []struct {
		name    string
		op      Operation
		noVer   bool
		pkts    []string
		code    int
		goesOn  bool
		message string
	}{
		{"before version", Upload, true, []string{"batch", "\x01", ""}, 400, true, "send \"version 1\" first"},
		{"version 2", Upload, true, []string{"version 2", ""}, 400, true, "version 1"},
		{"unknown command", Upload, false, []string{"frobnicate", "a=b", ""}, 400, true, "unknown command"},
		{"put in a download session", Download, false, []string{"put-object " + oid, "size=1", "\x01", "x", ""}, 400, true, "upload session"},
		{"lock in a download session", Download, false, []string{"lock", "path=a", ""}, 400, true, "upload session"},
		{"unlock in a download session", Download, false, []string{"unlock 0123", ""}, 400, true, "upload session"},
		{"get in an upload session", Upload, false, []string{"get-object " + oid, ""}, 400, true, "download session"},
		{"argument without =", Upload, false, []string{"list-lock", "nonsense", ""}, 400, true, "key=value"},
		{"argument with a bad key", Upload, false, []string{"list-lock", "bad key=1", ""}, 400, true, "key=value"},
		{"argument twice", Upload, false, []string{"list-lock", "limit=1", "limit=2", ""}, 400, true, "twice"},
		{"too many arguments", Upload, false, many, 400, true, "more than"},
		{"bad limit", Upload, false, []string{"list-lock", "limit=-1", ""}, 400, true, "limit"},
		{"bad batch oid", Upload, false, []string{"batch", "\x01", "abc 1", ""}, 400, true, "sha256"},
		{"bad batch size", Upload, false, []string{"batch", "\x01", oid + " -1", ""}, 400, true, "size"},
		{"batch size overflow", Upload, false, []string{"batch", "\x01", oid + " 99999999999999999999", ""}, 400, true, "size"},
		{"batch line without size", Upload, false, []string{"batch", "\x01", oid, ""}, 400, true, "want <oid> <size>"},
		{"batch over the object limit", Upload, false, []string{"batch", "\x01", oid + " 101", ""}, 413, true, "limit"},
		{"batch hash-algo", Upload, false, []string{"batch", "hash-algo=sha1", "\x01", ""}, 409, true, "sha256"},
		{"batch without delim", Upload, false, []string{"batch", ""}, 400, true, "delim"},
		{"too many objects", Upload, false, []string{"batch", "\x01", oid + " 1", oid + " 1", oid + " 1", ""}, 413, false, "at most 2"},
		{"overlong line", Upload, false, []string{long, ""}, 400, false, "at most"},
		{"a flush for a command", Upload, false, []string{""}, 400, false, "expected a command"},
		{"verify bad size", Upload, false, []string{"verify-object " + oid, "size=x", ""}, 400, true, "size"},
		{"verify bad oid", Upload, false, []string{"verify-object zz", "size=1", ""}, 400, true, "sha256"},
		{"unlock bad force", Upload, false, []string{"unlock 0123", "force=yes", ""}, 400, true, "force"},
		{"unknown lock", Upload, false, []string{"unlock 0123", ""}, 404, true, "not found"},
		{"lock without path", Upload, false, []string{"lock", ""}, 422, true, "path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, 100)
			s := f.session(t, alice, c.op, 2)
			if !c.noVer {
				s.version()
			}
			s.send(c.pkts...)
			code, rest := s.answer()
			if code != c.code || !strings.Contains(rest, c.message) {
				t.Fatalf("answer %d %q, want %d with %q", code, rest, c.code, c.message)
			}
			if !c.goesOn {
				if err := s.ended(); !errors.Is(err, ErrProtocol) {
					t.Fatalf("session ended with %v, want a protocol error", err)
				}
				return
			}
			s.version() // in sync: the next request is read as one
			s.send("quit", "")
			if code, _ := s.answer(); code != 200 {
				t.Fatalf("quit: %d", code)
			}
			if err := s.ended(); err != nil {
				t.Fatal(err)
			}
			if keys := f.visible(t); len(keys) != 0 {
				t.Fatalf("a malformed request left %v", keys)
			}
		})
	}
}

// listLocks parses a list-lock answer into path -> "id owner who".
func listLocks(t *testing.T, s *client, args ...string) map[string][]string {
	t.Helper()
	s.send(append(append([]string{"list-lock"}, args...), "")...)
	code, rest := s.answer()
	if code != 200 {
		t.Fatalf("list-lock: %d %q", code, rest)
	}
	out := map[string][]string{}
	byID := map[string]string{}
	for _, l := range strings.Split(rest, "\n") {
		f := strings.SplitN(l, " ", 3)
		switch f[0] {
		case "path":
			byID[f[1]] = f[2]
			out[f[2]] = append(out[f[2]], f[1])
		case "ownername", "owner":
			out[byID[f[1]]] = append(out[byID[f[1]]], f[2])
		}
	}
	return out
}

// TestLocks: lock, list, unlock over the protocol, on the same records
// as the HTTP Locks API.
func TestLocks(t *testing.T) {
	f := newFixture(t, 100)
	a := f.session(t, alice, Upload, 0)
	a.version()
	a.send("lock", "path=art/a.psd", "refname=refs/heads/main", "")
	code, rest := a.answer()
	if code != 201 || !strings.Contains(rest, "path=art/a.psd") || !strings.Contains(rest, "ownername=alice") {
		t.Fatalf("lock: %d %q", code, rest)
	}
	id := strings.TrimPrefix(strings.Split(rest, "\n")[0], "id=")
	// The spec's form, with a delim before the flush, works too.
	a.send("lock", "path=art/c.psd", "\x01", "")
	if code, rest := a.answer(); code != 201 {
		t.Fatalf("lock with a delim: %d %q", code, rest)
	}

	// Over HTTP, bob sees alice's lock and takes another.
	srv := httptest.NewServer(f.h) // 127.0.0.1
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/alice/r.git/info/lfs/locks", strings.NewReader(`{"path":"art/b.psd"}`))
	req.Header.Set("Content-Type", lfs.MediaType)
	req.SetBasicAuth("x", "bob")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 201 {
		t.Fatalf("HTTP lock: %v %v", err, res)
	}
	res.Body.Close()
	req, _ = http.NewRequest("POST", srv.URL+"/alice/r.git/info/lfs/locks", strings.NewReader(`{"path":"art/a.psd"}`))
	req.Header.Set("Content-Type", lfs.MediaType)
	req.SetBasicAuth("x", "bob")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 409 {
		t.Fatalf("HTTP lock of a path locked over SSH: %v %v", err, res)
	}

	b := f.session(t, bob, Upload, 0)
	b.version()
	b.send("lock", "path=art/b.psd", "")
	if code, rest := b.answer(); code != 409 || !strings.Contains(rest, "ownername=bob") {
		t.Fatalf("lock of a held path: %d %q", code, rest)
	}
	got := listLocks(t, b)
	if len(got) != 3 || got["art/a.psd"][1] != "alice" || got["art/a.psd"][2] != "theirs" || got["art/b.psd"][2] != "ours" {
		t.Fatalf("bob's list: %v", got)
	}
	if got := listLocks(t, b, "path=art/b.psd"); len(got) != 1 {
		t.Fatalf("list by path: %v", got)
	}
	// Paging, by path.
	b.send("list-locks", "limit=1", "")
	if code, rest := b.answer(); code != 200 || !strings.HasPrefix(rest, "next-cursor=art/a.psd\n|\nlock ") {
		t.Fatalf("first page: %d %q", code, rest)
	}
	if got := listLocks(t, b, "cursor=art/b.psd"); len(got) != 1 || got["art/c.psd"] == nil {
		t.Fatalf("page after art/b.psd: %v", got)
	}
	// A reader lists, without owner lines.
	r := f.session(t, reader, Download, 0)
	r.version()
	if got := listLocks(t, r); len(got) != 3 || len(got["art/a.psd"]) != 2 {
		t.Fatalf("reader's list: %v", got)
	}
	// bob may not release alice's lock, unless he forces it.
	b.send("unlock "+id, "refname=refs/heads/main", "")
	if code, rest := b.answer(); code != 403 || !strings.Contains(rest, "--force") {
		t.Fatalf("unlock of another's lock: %d %q", code, rest)
	}
	b.send("unlock "+id, "force=true", "")
	if code, rest := b.answer(); code != 200 || !strings.Contains(rest, "path=art/a.psd") {
		t.Fatalf("forced unlock: %d %q", code, rest)
	}
	a.send("unlock "+id, "")
	if code, _ := a.answer(); code != 404 {
		t.Fatalf("unlock of a released lock: %d", code)
	}
	// And HTTP sees it gone.
	req, _ = http.NewRequest("GET", srv.URL+"/alice/r.git/info/lfs/locks?path=art/a.psd", nil)
	req.SetBasicAuth("x", "alice")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `"locks":[]`) {
		t.Fatalf("HTTP list after the SSH unlock: %s", body)
	}
}

// TestReadOnlyRepoRefusesWrites: a session whose grant cannot write is
// refused by the repository too, whatever the session says.
func TestReadOnlyRepoRefusesWrites(t *testing.T) {
	f := newFixture(t, 100)
	s := f.session(t, reader, Upload, 0)
	s.version()
	data := []byte("x")
	s.send("lock", "path=a", "")
	if code, _ := s.answer(); code != 403 {
		t.Fatalf("lock with a read grant: %d", code)
	}
	if _, err := f.h.Repo(alice).CreateLock(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	locks, _ := f.h.Repo(alice).Locks(context.Background())
	s.send("unlock "+locks[0].ID, "force=true", "")
	if code, _ := s.answer(); code != 403 {
		t.Fatalf("unlock with a read grant: %d", code)
	}
	s.sendRaw(putPkts(oidOf(data), 1, data)...)
	if code, _ := s.answer(); code != 403 {
		t.Fatalf("put with a read grant: %d", code)
	}
	if keys := f.visible(t); len(keys) != 0 {
		t.Fatalf("a read grant stored %v", keys)
	}
	if locks, _ := f.h.Repo(alice).Locks(context.Background()); len(locks) != 1 || locks[0].Path != "b" {
		t.Fatalf("a read grant changed the locks: %v", locks)
	}
}

// failingStore fails every Get after the reference: a fault injected to
// see a download cut by the store end the session, not pass as the
// object.
type failingStore struct {
	objstore.Store
	eof bool // end early with io.EOF instead of an error
}

type failAfter struct {
	n   int
	eof bool
}

func (f *failAfter) Read(p []byte) (int, error) {
	if f.n <= 0 && f.eof {
		return 0, io.EOF
	}
	if f.n <= 0 {
		return 0, errors.New("injected read failure")
	}
	n := min(len(p), f.n)
	f.n -= n
	return n, nil
}

func (s failingStore) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	rc, info, err := s.Store.Get(ctx, key)
	if err != nil || !strings.HasPrefix(key, "lfs/objects/") {
		return rc, info, err
	}
	rc.Close()
	return io.NopCloser(&failAfter{n: 10, eof: s.eof}), info, nil
}

func TestDownloadCutByStore(t *testing.T) {
	for _, eof := range []bool{false, true} {
		t.Run(fmt.Sprint("eof=", eof), func(t *testing.T) { testDownloadCutByStore(t, eof) })
	}
}

// testDownloadCutByStore: a store that fails, or ends early, in the
// middle of an object ends the session rather than end the answer as if
// the object were whole.
func testDownloadCutByStore(t *testing.T, eof bool) {
	f := newFixture(t, 1000)
	data := bytes.Repeat([]byte("y"), 200)
	if err := f.h.Repo(alice).Put(context.Background(), oidOf(data), int64(len(data)), bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	h, err := lfs.New(lfs.Options{Store: failingStore{f.store, eof}, Auth: tokenAuth{}})
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	s := f.session(t, reader, Download, 0)
	s.version()
	s.send("get-object "+oidOf(data), "")
	go func() { // the status and the first bytes, then nothing
		for {
			if _, _, err := s.in.Next(); err != nil {
				return
			}
		}
	}()
	if err := s.ended(); err == nil || errors.Is(err, ErrProtocol) {
		t.Fatalf("a download cut by the store ended with %v", err)
	}
}
