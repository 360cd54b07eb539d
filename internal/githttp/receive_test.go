package githttp_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/githttp"
	"github.com/ghost-scm/ghost/internal/gitsvc/cacheadapter"
	"github.com/ghost-scm/ghost/internal/gitsvc/pktline"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

func pkt(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

// post sends a raw smart-HTTP request body.
func (e *env) post(repo, service, token string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.url+"/"+repo+"/"+service, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-"+service+"-request")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if token != "" {
		req.SetBasicAuth("x", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, b
}

// report decodes a report-status reply (side-band-64k or not) into lines.
func report(t *testing.T, b []byte, sideband bool) []string {
	t.Helper()
	if sideband {
		var inner bytes.Buffer
		r := pktline.NewReader(bytes.NewReader(b))
		for {
			k, p, err := r.Next()
			if err != nil {
				t.Fatalf("sideband: %v in %q", err, b)
			}
			if k == pktline.Flush {
				break
			}
			if p[0] == pktline.BandData {
				inner.Write(p[1:])
			}
		}
		b = inner.Bytes()
	}
	var lines []string
	r := pktline.NewReader(bytes.NewReader(b))
	for {
		k, p, err := r.Next()
		if err != nil {
			t.Fatalf("report: %v in %q", err, b)
		}
		if k == pktline.Flush {
			return lines
		}
		lines = append(lines, strings.TrimSuffix(string(p), "\n"))
	}
}

// packOf returns a pack of the objects named on stdin-style lines
// (pack-objects --revs syntax), built in work tree dir.
func packOf(t *testing.T, dir string, revs ...string) []byte {
	t.Helper()
	return []byte(gittest.Input(t, gittest.Env(t.TempDir()), dir, strings.NewReader(strings.Join(revs, "\n")+"\n"), "pack-objects", "--revs", "--stdout", "-q"))
}

// emptyPack is a valid pack with no objects.
func emptyPack(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	return packOf(t, dir)
}

// seeded returns an env whose "pub" repository holds one pushed commit,
// the work tree it came from, and that commit's id.
func seeded(t *testing.T, opts ...func(*githttp.Options)) (*env, string, string) {
	e := newEnv(t, opts...)
	src := t.TempDir()
	git(t, src, "init", "-q", "--initial-branch=main")
	base := commitFile(t, src, "a.txt", "a\n")
	git(t, src, "push", "-q", e.remote("alice/pub", "rw"), "main")
	return e, src, base
}

func TestCraftedPushesAreRejectedAndChangeNothing(t *testing.T) {
	e, src, base := seeded(t)
	before, seq := e.logRefs("pub"), e.seq("pub")
	next := commitFile(t, src, "b.txt", "b\n")
	good := packOf(t, src, next, "^"+base)
	tree := gitOut(t, src, "rev-parse", "HEAD^{tree}")
	missing := strings.Repeat("ab", 20)
	// An unrelated history of two commits, of which the pack carries only
	// the second: the server lacks the first.
	git(t, src, "checkout", "-q", "--orphan", "orphan")
	orphan1 := commitFile(t, src, "o1.txt", "o1\n")
	orphan2 := commitFile(t, src, "o2.txt", "o2\n")
	orphanPack := packOf(t, src, orphan2, "^"+orphan1)
	git(t, src, "checkout", "-q", "main")

	cases := []struct {
		name   string
		body   string
		status int
		want   []string // report lines, when status is 200
	}{
		{
			name:   "ref to a missing object",
			body:   pkt(base+" "+missing+" refs/heads/main\x00report-status\n") + "0000" + string(emptyPack(t)),
			status: 200,
			want:   []string{"unpack ok", "ng refs/heads/main missing necessary objects"},
		},
		{
			name:   "ref to a missing object, no pack at all",
			body:   pkt(wal.ZeroID+" "+missing+" refs/heads/new\x00report-status\n") + "0000",
			status: 200,
			want:   []string{"unpack ok", "ng refs/heads/new missing necessary objects"},
		},
		{
			name:   "branch pointing at a tree",
			body:   pkt(wal.ZeroID+" "+tree+" refs/heads/tree\x00report-status\n") + "0000" + string(packOf(t, src, next, "^"+base)),
			status: 200,
			want:   []string{"unpack ok", "ng refs/heads/tree branch must point to a commit, not a tree"},
		},
		{
			name:   "malformed pkt-line",
			body:   "00zz" + base + " " + next + " refs/heads/main\n0000",
			status: 400,
		},
		{
			name:   "command list without flush",
			body:   pkt(base + " " + next + " refs/heads/main\x00report-status\n"),
			status: 400,
		},
		{
			name:   "malformed command",
			body:   pkt(base+" refs/heads/main\x00report-status\n") + "0000",
			status: 400,
		},
		{
			name:   "truncated pack",
			body:   pkt(base+" "+next+" refs/heads/main\x00report-status\n") + "0000" + string(good[:len(good)/2]),
			status: 200,
			want:   []string{"", "ng refs/heads/main unpacker error"},
		},
		{
			name:   "garbage instead of a pack",
			body:   pkt(base+" "+next+" refs/heads/main\x00report-status\n") + "0000" + "this is not a pack at all",
			status: 200,
			want:   []string{"unpack bad pack header", "ng refs/heads/main unpacker error"},
		},
		{
			name:   "bad ref name",
			body:   pkt(wal.ZeroID+" "+next+" refs/heads/a..b\x00report-status\n") + "0000" + string(good),
			status: 200,
			want:   []string{"unpack ok", "ng refs/heads/a..b funny refname"},
		},
		{
			name: "one bad ref fails the whole push",
			body: pkt(base+" "+next+" refs/heads/main\x00report-status\n") +
				pkt(wal.ZeroID+" "+missing+" refs/heads/other\n") + "0000" + string(good),
			status: 200,
			want:   []string{"unpack ok", "ng refs/heads/main atomic push failure", "ng refs/heads/other missing necessary objects"},
		},
		{
			name:   "stale old id (a push raced us)",
			body:   pkt(next+" "+base+" refs/heads/main\x00report-status\n") + "0000" + string(emptyPack(t)),
			status: 200,
			want:   []string{"unpack ok", "ng refs/heads/main fetch first"},
		},
		{
			name:   "ref a/b next to a",
			body:   pkt(wal.ZeroID+" "+base+" refs/heads/main/x\x00report-status\n") + "0000" + string(emptyPack(t)),
			status: 200,
			want:   []string{"unpack ok", "ng refs/heads/main/x ref conflicts with refs/heads/main"},
		},
		{
			name:   "shallow push needing a new shallow root",
			body:   pkt("shallow "+orphan1+"\n") + pkt(wal.ZeroID+" "+orphan2+" refs/heads/orphan\x00report-status\n") + "0000" + string(orphanPack),
			status: 200,
			// index-pack --strict already refuses the pack: its links dangle.
			want: []string{"", "ng refs/heads/orphan unpacker error"},
		},
		{
			name:   "history cut short",
			body:   pkt(wal.ZeroID+" "+orphan2+" refs/heads/orphan\x00report-status\n") + "0000" + string(orphanPack),
			status: 200,
			want:   []string{"", "ng refs/heads/orphan unpacker error"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := e.post("alice/pub", "git-receive-pack", "rw", []byte(tc.body), nil)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.status == 200 {
				if ct := resp.Header.Get("Content-Type"); ct != "application/x-git-receive-pack-result" {
					t.Fatalf("Content-Type %q", ct)
				}
				got := report(t, body, false)
				if len(got) != len(tc.want) {
					t.Fatalf("report %q, want %q", got, tc.want)
				}
				for i := range got {
					if tc.want[i] != "" && got[i] != tc.want[i] {
						t.Fatalf("report %q, want %q", got, tc.want)
					}
				}
				if tc.want[0] == "" && (got[0] == "unpack ok" || !strings.HasPrefix(got[0], "unpack ")) {
					t.Fatalf("unpack line %q, want a failure", got[0])
				}
			}
			if got := e.logRefs("pub"); got != before {
				t.Fatalf("log refs changed:\n%s", got)
			}
			if got := e.seq("pub"); got != seq {
				t.Fatalf("log seq moved from %d to %d", seq, got)
			}
		})
	}

	// The same well-formed push is accepted, inside side-band-64k.
	body := pkt(base+" "+next+" refs/heads/main\x00report-status side-band-64k agent=test\n") + "0000" + string(good)
	resp, b := e.post("alice/pub", "git-receive-pack", "rw", []byte(body), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if got := report(t, b, true); strings.Join(got, "|") != "unpack ok|ok refs/heads/main" {
		t.Fatalf("report %q", got)
	}
	if got := e.seq("pub"); got != seq+1 {
		t.Fatalf("seq %d, want %d", got, seq+1)
	}
}

func TestFlushProbeAndGzip(t *testing.T) {
	e, src, base := seeded(t)
	for _, svc := range []string{"git-upload-pack", "git-receive-pack"} {
		resp, body := e.post("alice/pub", svc, "rw", []byte("0000"), nil)
		if resp.StatusCode != 200 || len(body) != 0 {
			t.Fatalf("%s probe: %d %q", svc, resp.StatusCode, body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/x-"+svc+"-result" {
			t.Fatalf("%s probe Content-Type %q", svc, ct)
		}
	}

	// A gzip-encoded push.
	next := commitFile(t, src, "c.txt", "c\n")
	raw := pkt(base+" "+next+" refs/heads/main\x00report-status\n") + "0000" + string(packOf(t, src, next, "^"+base))
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(raw))
	zw.Close()
	resp, body := e.post("alice/pub", "git-receive-pack", "rw", z.Bytes(), map[string]string{"Content-Encoding": "gzip"})
	if resp.StatusCode != 200 {
		t.Fatalf("gzip push: %d %s", resp.StatusCode, body)
	}
	if got := report(t, body, false); strings.Join(got, "|") != "unpack ok|ok refs/heads/main" {
		t.Fatalf("report %q", got)
	}

	// A gzip-encoded fetch (protocol v2 ls-refs).
	req := pkt("command=ls-refs\n") + "0001" + "0000"
	z.Reset()
	zw = gzip.NewWriter(&z)
	zw.Write([]byte(req))
	zw.Close()
	resp, body = e.post("alice/pub", "git-upload-pack", "", z.Bytes(), map[string]string{"Content-Encoding": "gzip", "Git-Protocol": "version=2"})
	if resp.StatusCode != 200 || !strings.Contains(string(body), next+" refs/heads/main") {
		t.Fatalf("gzip ls-refs: %d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("Cache-Control") == "" {
		t.Fatal("no Cache-Control")
	}

	// A body that claims gzip but is not.
	resp, _ = e.post("alice/pub", "git-upload-pack", "", []byte("0000"), map[string]string{"Content-Encoding": "gzip"})
	if resp.StatusCode != 400 {
		t.Fatalf("bad gzip: %d", resp.StatusCode)
	}
}

// casStore loses every index compare-and-swap: the fault a storm of
// concurrent pushes produces.
type casStore struct{ objstore.Store }

func (s casStore) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (objstore.Info, error) {
	return objstore.Info{}, objstore.ErrPreconditionFailed
}

func TestContentionAnswers503(t *testing.T) {
	e, src, base := seeded(t)
	// Same storage, but a log whose CAS always loses.
	lossy := wal.New(casStore{e.store}, wal.Options{MaxAttempts: 2, Sleep: func(context.Context, time.Duration) error { return nil }})
	h, err := githttp.NewHandler(githttp.Options{ServiceOptions: cacheadapter.Options(e.cache, lossy), Auth: e.auth})
	if err != nil {
		t.Fatal(err)
	}
	lossySrv := httptest.NewServer(h)
	defer lossySrv.Close()
	e.url = lossySrv.URL
	next := commitFile(t, src, "d.txt", "d\n")
	body := pkt(base+" "+next+" refs/heads/main\x00report-status\n") + "0000" + string(packOf(t, src, next, "^"+base))
	resp, b := e.post("alice/pub", "git-receive-pack", "rw", []byte(body), nil)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "retry") {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	// And the git client says the push failed.
	out, err := gitErr(t, src, "push", e.remote("alice/pub", "rw"), "main")
	if err == nil || !strings.Contains(out, "503") {
		t.Fatalf("git push under contention: %v\n%s", err, out)
	}
}
