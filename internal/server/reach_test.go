package server_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/server"
)

// reachFixture is a public repository alice/open whose history lost
// objects: main was force-pushed back over a commit that added a
// "leaked" file, and a branch on top of it was deleted.
type reachFixture struct {
	s        *server.Server
	http     string // base URL
	tok      string
	reach    map[string]string // reachable: "commit" (not a tip), "blob"
	gone     map[string]string // unreachable: "commit", "tip" (the deleted branch's), "blob", "tree"
	mainTip  string
	repoPath string
}

func newReachFixture(t *testing.T) *reachFixture {
	t.Helper()
	s := newServer(t)
	tok, _ := seed(t, s)
	if _, err := s.Meta().CreateRepo(context.Background(), "alice", "open", true); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	host := strings.TrimPrefix(ts.URL, "http://")
	remote := "http://x:" + tok + "@" + host + "/alice/open.git"
	src := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, src, "init", "-q", "--initial-branch=main")
	write("a.txt", "one\n")
	git(t, src, "add", "-A")
	git(t, src, "commit", "-q", "-m", "one")
	c1 := git(t, src, "rev-parse", "HEAD")
	write("a.txt", "two\n")
	git(t, src, "commit", "-q", "-am", "two")
	c2 := git(t, src, "rev-parse", "HEAD")
	write("leak.txt", "password=hunter2\n")
	git(t, src, "add", "-A")
	git(t, src, "commit", "-q", "-m", "oops")
	c3 := git(t, src, "rev-parse", "HEAD")
	write("more.txt", "more\n")
	git(t, src, "add", "-A")
	git(t, src, "commit", "-q", "-m", "more")
	c4 := git(t, src, "rev-parse", "HEAD")
	git(t, src, "push", "-q", remote, "main", "main:gone")
	git(t, src, "push", "-q", "-f", remote, c2+":refs/heads/main")
	git(t, src, "push", "-q", remote, ":gone")
	return &reachFixture{
		s: s, http: ts.URL, tok: tok, mainTip: c2, repoPath: "/alice/open",
		reach: map[string]string{"commit": c1, "blob": git(t, src, "rev-parse", c1+":a.txt")},
		gone: map[string]string{"commit": c3, "tip": c4, "blob": git(t, src, "rev-parse", c3+":leak.txt"),
			"tree": git(t, src, "rev-parse", c3+"^{tree}")},
	}
}

// v0Request and v2Request are fetch requests for want, in the two
// protocol versions.
func v0Request(want string) string {
	return pktLine("want "+want+" side-band-64k ofs-delta\n") + "0000" + pktLine("done\n")
}

func v2Request(want string) string {
	return pktLine("command=fetch") + pktLine("object-format=sha1") + "0001" + pktLine("ofs-delta") +
		pktLine("want "+want+"\n") + pktLine("done\n") + "0000"
}

func (f *reachFixture) post(t *testing.T, v2 bool, body string) string {
	t.Helper()
	req, err := http.NewRequest("POST", f.http+f.repoPath+"/git-upload-pack", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	if v2 {
		req.Header.Set("Git-Protocol", "version=2")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("upload-pack: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// served reports whether an upload-pack response carries a pack, and
// fails on a response that is neither a pack nor git's refusal.
func served(t *testing.T, what, resp string) bool {
	t.Helper()
	pack, refused := strings.Contains(resp, "PACK"), strings.Contains(resp, "ERR upload-pack: not our ref")
	if pack == refused {
		t.Fatalf("%s: neither a pack nor a refusal: %q", what, resp[:min(len(resp), 200)])
	}
	return pack
}

// TestOnlyReachableObjectsOverHTTP: in both protocol versions, a fetch
// of a commit, a tip, a tree or a blob that no ref reaches is refused, as
// git refuses a wrong want in v0, and objects the refs reach are served
// by id (docs/adr/0091-reachable-objects.md). Before, v2 served all of
// them and v0 served the blob and the tree.
func TestOnlyReachableObjectsOverHTTP(t *testing.T) {
	f := newReachFixture(t)
	for _, v2 := range []bool{false, true} {
		req := v0Request
		if v2 {
			req = v2Request
		}
		for what, id := range f.gone {
			if served(t, what, f.post(t, v2, req(id))) {
				t.Errorf("v2=%v: the unreachable %s %s was served", v2, what, id)
			}
		}
		for what, id := range f.reach {
			if !served(t, what, f.post(t, v2, req(id))) {
				t.Errorf("v2=%v: the reachable %s %s was refused", v2, what, id)
			}
		}
	}
	// v2's object-info, which ghost does not advertise, would tell the
	// size of any object.
	info := pktLine("command=object-info") + "0001" + pktLine("size") + pktLine("oid "+f.gone["blob"]) + "0000"
	if resp := f.post(t, true, info); !strings.Contains(resp, "ERR upload-pack: command not offered: object-info") {
		t.Errorf("object-info: %q", resp)
	}
}

// TestReachableFetchesStillWork: stock git clients fetch what refs reach
// in both protocols: a partial clone, whose checkout fetches blobs by id,
// and a fetch of an old commit by id.
func TestReachableFetchesStillWork(t *testing.T) {
	f := newReachFixture(t)
	remote := strings.Replace(f.http, "http://", "http://x:"+f.tok+"@", 1) + f.repoPath + ".git"
	for _, v := range []string{"0", "2"} {
		dir := filepath.Join(t.TempDir(), "partial")
		git(t, "", "-c", "protocol.version="+v, "clone", "-q", "--filter=blob:none", remote, dir)
		if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "two\n" {
			t.Fatalf("protocol %s: partial clone checked out %q, %v", v, b, err)
		}
		git(t, dir, "-c", "protocol.version="+v, "fetch", "-q", "origin", f.reach["commit"])
	}
}

// sshFixture serves f's server over SSH with a key of alice's.
func (f *reachFixture) ssh(t *testing.T) *ssh.Client {
	t.Helper()
	ctx := context.Background()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Meta().AddSSHKey(ctx, "alice", "test", ssh.MarshalAuthorizedKey(key.PublicKey())); err != nil {
		t.Fatal(err)
	}
	return serveSSH(t, f.s, key)
}

// sshFetch runs git-upload-pack over c in protocol v0 or v2: it reads the
// advertisement, sends req, and returns what came back and stderr.
func sshFetch(t *testing.T, c *ssh.Client, v2 bool, req string) (string, string) {
	t.Helper()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if v2 {
		if err := sess.Setenv("GIT_PROTOCOL", "version=2"); err != nil {
			t.Fatal(err)
		}
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	sess.Stderr = &stderr
	if err := sess.Start("git-upload-pack 'alice/open.git'"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(stdout)
	for { // the advertisement, up to its flush
		var hdr [4]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			t.Fatalf("advertisement: %v", err)
		}
		var n int
		fmt.Sscanf(string(hdr[:]), "%04x", &n)
		if n == 0 {
			break
		}
		if _, err := br.Discard(n - 4); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.WriteString(stdin, req); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	out, _ := io.ReadAll(br)
	sess.Wait()
	return string(out), stderr.String()
}

// TestOnlyReachableObjectsOverSSH: the same over SSH, where git runs
// full-duplex and each request of the stream is checked before git reads
// it.
func TestOnlyReachableObjectsOverSSH(t *testing.T) {
	f := newReachFixture(t)
	c := f.ssh(t)
	for _, v2 := range []bool{false, true} {
		req := v0Request
		if v2 {
			req = v2Request
		}
		for what, id := range f.gone {
			out, stderr := sshFetch(t, c, v2, req(id))
			if served(t, what, out) {
				t.Errorf("v2=%v: the unreachable %s %s was served", v2, what, id)
			}
			if !strings.Contains(stderr, "ERROR: refused: upload-pack: not our ref "+id) && !strings.Contains(out, "not our ref "+id) {
				t.Errorf("v2=%v: refusing the %s said %q", v2, what, stderr)
			}
		}
		for what, id := range f.reach {
			if out, stderr := sshFetch(t, c, v2, req(id)); !served(t, what, out) {
				t.Errorf("v2=%v: the reachable %s %s was refused: %s", v2, what, id, stderr)
			}
		}
	}
}
