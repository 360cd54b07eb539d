package githttp_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/githttp"
	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/gitsvc/cacheadapter"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// limitEnv is newEnv with a git wrapper (gitPath, "" for git itself),
// metrics, and handler options of the test's choosing.
func limitEnv(t *testing.T, gitPath string, opts func(*githttp.Options)) (*env, *prometheus.Registry) {
	t.Helper()
	e := &env{t: t, store: memstore.New()}
	e.log = wal.New(e.store, wal.Options{})
	reg := prometheus.NewRegistry()
	m := gitsvc.NewMetrics(reg)
	var err error
	e.cache, err = repocache.New(t.TempDir(), e.log, repocache.Options{Git: &gitexec.Runner{Path: gitPath}, Observe: cacheadapter.Observe(m)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.cache.Close)
	e.auth = &fakeAuth{repos: map[string]fakeRepo{
		"alice/pub":  {id: "pub", public: true},
		"alice/priv": {id: "priv"},
	}}
	o := githttp.Options{ServiceOptions: cacheadapter.Options(e.cache, e.log), Auth: e.auth}
	o.Metrics = m
	if opts != nil {
		opts(&o)
	}
	h, err := githttp.NewHandler(o)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	e.url = e.srv.URL
	return e, reg
}

// seed pushes one commit to alice/pub and returns the work tree.
func (e *env) seed() string {
	e.t.Helper()
	src := e.t.TempDir()
	git(e.t, src, "init", "-q", "--initial-branch=main")
	commitFile(e.t, src, "a.txt", "a\n")
	git(e.t, src, "push", "-q", e.remote("alice/pub", "rw"), "main")
	return src
}

// blockingGit writes a git wrapper: while the file it returns exists, a
// fetch's "git upload-pack --stateless-rpc <dir>" (not the advertisement)
// starts a child "sleep" instead, appends the wrapper's pid and the
// child's to the pid file, and waits for the child. Everything else runs
// git.
func blockingGit(t *testing.T) (gitPath, block, pids string) {
	t.Helper()
	dir := t.TempDir()
	block, pids = filepath.Join(dir, "block"), filepath.Join(dir, "pids")
	script := fmt.Sprintf(`#!/bin/sh
if [ "$1" = upload-pack ] && [ "$3" != --advertise-refs ] && [ -e %[1]q ]; then
	sleep 3600 &
	echo "$$ $!" >> %[2]q
	wait
	exit 1
fi
exec git "$@"
`, block, pids)
	gitPath = filepath.Join(dir, "git")
	if err := os.WriteFile(gitPath, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(block, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Whatever the test's outcome, no wrapper outlives it. The pids are
	// the wrappers' own (and their children's), recorded just now.
	t.Cleanup(func() {
		for _, pid := range readPids(t, pids) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return gitPath, block, pids
}

// waitFor polls cond until it holds; the test's own deadline bounds it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readPids returns the pids the blocking wrapper recorded.
func readPids(t *testing.T, path string) []int {
	b, _ := os.ReadFile(path)
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// lsRefs is a protocol v2 ls-refs request.
func lsRefs() []byte { return []byte(pkt("command=ls-refs\n") + "0001" + "0000") }

// fetchRequest posts an upload-pack request (protocol v2) with ctx.
func fetchRequest(ctx context.Context, url string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/alice/pub/git-upload-pack", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	req.Header.Set("Git-Protocol", "version=2")
	return http.DefaultClient.Do(req)
}

func TestPushOverLimitShowsInGitOutput(t *testing.T) {
	e, _ := limitEnv(t, "", func(o *githttp.Options) { o.MaxPushBytes = 64 << 10 })
	src := e.seed()
	seq := e.seq("pub")
	big := make([]byte, 16<<20)
	rand.Read(big)
	write(t, src, "big.bin", string(big))
	git(t, src, "add", ".")
	git(t, src, "commit", "-q", "-m", "big")
	out, err := gitErr(t, src, "push", e.remote("alice/pub", "rw"), "main")
	if err == nil {
		t.Fatalf("push over the limit succeeded:\n%s", out)
	}
	if !strings.Contains(out, "push exceeds the maximum allowed size of 64.0 KiB") || strings.Contains(out, "413") {
		t.Fatalf("git output does not show the limit:\n%s", out)
	}
	if got := e.seq("pub"); got != seq {
		t.Fatalf("log moved to seq %d", got)
	}
	t.Log(out)
}

func TestPushGzipBombIsCutAtTheLimit(t *testing.T) {
	const limit = 1 << 20
	e, reg := limitEnv(t, "", func(o *githttp.Options) { o.MaxPushBytes = limit })
	e.seed()
	seq := e.seq("pub")
	// 64 MiB of zeros after a command list: about 64 KiB compressed.
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	io.WriteString(zw, pkt(wal.ZeroID+" "+strings.Repeat("1", 40)+" refs/heads/bomb\x00report-status side-band-64k\n")+"0000PACK")
	zero := make([]byte, 1<<20)
	for range 64 {
		zw.Write(zero)
	}
	zw.Close()
	before := gauge(t, reg, "ghost_git_push_received_bytes_total")
	resp, body := e.post("alice/pub", "git-receive-pack", "rw", z.Bytes(), map[string]string{"Content-Encoding": "gzip"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	got := report(t, body, true)
	if len(got) != 2 || !strings.HasPrefix(got[0], "unpack push exceeds the maximum allowed size of 1.0 MiB") || got[1] != "ng refs/heads/bomb unpacker error" {
		t.Fatalf("report %q", got)
	}
	if !strings.Contains(string(body), "split the push") {
		t.Fatalf("no side-band message in %q", body)
	}
	// Decoding stopped one byte past the limit.
	if n := gauge(t, reg, "ghost_git_push_received_bytes_total") - before; n > limit+1 {
		t.Fatalf("%v bytes decoded, limit %d", n, limit)
	}
	if got := e.seq("pub"); got != seq {
		t.Fatalf("log moved to seq %d", got)
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestFetchRequestLimits(t *testing.T) {
	e, _ := limitEnv(t, "", func(o *githttp.Options) { o.MaxFetchRequestBytes = 4 << 10 })
	e.seed()
	var big strings.Builder
	big.WriteString(pkt("command=fetch\n") + "0001")
	for big.Len() < 8<<10 {
		big.WriteString(pkt("have " + strings.Repeat("a", 40) + "\n"))
	}
	big.WriteString("0000")
	resp, body := e.post("alice/pub", "git-upload-pack", "", []byte(big.String()), map[string]string{"Git-Protocol": "version=2"})
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized fetch request: %d %s", resp.StatusCode, body)
	}
	// Compressed, it is measured after decoding.
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(big.String()))
	zw.Close()
	resp, body = e.post("alice/pub", "git-upload-pack", "", z.Bytes(), map[string]string{"Git-Protocol": "version=2", "Content-Encoding": "gzip"})
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized gzip fetch request: %d %s", resp.StatusCode, body)
	}
	// A request within the limit is served.
	resp, body = e.post("alice/pub", "git-upload-pack", "", lsRefs(), map[string]string{"Git-Protocol": "version=2"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "refs/heads/main") {
		t.Fatalf("ls-refs: %d %s", resp.StatusCode, body)
	}
}

func TestMalformedBodiesAre400(t *testing.T) {
	e, _ := limitEnv(t, "", nil)
	e.seed()
	gz := func(b []byte) []byte {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(b)
		zw.Close()
		return z.Bytes()
	}
	push := []byte(pkt(wal.ZeroID+" "+strings.Repeat("1", 40)+" refs/heads/x\x00report-status\n") + "0000PACK")
	badCRC := gz(push)
	badCRC[len(badCRC)-8] ^= 0xff
	gzipped := map[string]string{"Content-Encoding": "gzip"}
	cases := []struct {
		name, service string
		body          []byte
		hdr           map[string]string
	}{
		{"upload-pack: gzip stream of zero bytes", "git-upload-pack", gz(nil), gzipped},
		{"upload-pack: empty body claiming gzip", "git-upload-pack", nil, gzipped},
		{"upload-pack: empty body", "git-upload-pack", nil, nil},
		{"upload-pack: truncated gzip", "git-upload-pack", gz(lsRefs())[:15], gzipped},
		{"upload-pack: not pkt-lines", "git-upload-pack", []byte("hello, git"), nil},
		{"upload-pack: truncated pkt-line", "git-upload-pack", []byte("0032want"), nil},
		{"receive-pack: not gzip", "git-receive-pack", []byte("0000"), gzipped},
		{"receive-pack: gzip with a bad checksum", "git-receive-pack", badCRC, gzipped},
		{"receive-pack: truncated gzip", "git-receive-pack", gz(push)[:20], gzipped},
		{"receive-pack: gzip stream of zero bytes", "git-receive-pack", gz(nil), gzipped},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := e.post("alice/pub", tc.service, "rw", tc.body, tc.hdr)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", resp.StatusCode, body)
			}
		})
	}
}

// rawPost opens a connection and sends the head of a POST whose body
// claims length bytes, plus the first bytes of that body.
func rawPost(t *testing.T, url, service string, length int, first string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /alice/pub/%s HTTP/1.1\r\nHost: x\r\nAuthorization: Basic %s\r\nContent-Type: application/x-%s-request\r\nContent-Length: %d\r\n\r\n%s",
		service, "eDpydw==", service, length, first)
	return c
}

// cutOff reports whether the server answered or closed c before the
// test's own (generous) deadline, and what it said.
func cutOff(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	b, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server waited for a stalled client (read %q)", b)
	}
	return string(b)
}

func TestStalledClientIsCutOff(t *testing.T) {
	e, _ := limitEnv(t, "", func(o *githttp.Options) { o.IOTimeout = 200 * time.Millisecond })
	e.seed()
	for _, svc := range []string{"git-upload-pack", "git-receive-pack"} {
		t.Run(svc, func(t *testing.T) {
			c := rawPost(t, e.url, svc, 1000, "0014command=ls-refs\n")
			if got := cutOff(t, c); got != "" && !strings.Contains(got, " 408 ") {
				t.Fatalf("answer %q", got)
			}
		})
	}
}

func TestTricklingFetchRequestIsCutOff(t *testing.T) {
	e, _ := limitEnv(t, "", func(o *githttp.Options) {
		o.IOTimeout = time.Hour
		o.FetchRequestTimeout = 300 * time.Millisecond
	})
	e.seed()
	c := rawPost(t, e.url, "git-upload-pack", 1<<20, "")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		// One byte every 20ms: each within the idle deadline.
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := c.Write([]byte("0")); err != nil {
				return
			}
		}
	}()
	if got := cutOff(t, c); got != "" && !strings.Contains(got, " 408 ") {
		t.Fatalf("answer %q", got)
	}
}

// slowReader hands out its bytes in small chunks with pauses between
// them: a slow but steady client.
type slowReader struct {
	b     []byte
	chunk int
	pause time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	time.Sleep(s.pause)
	n := copy(p[:min(len(p), s.chunk)], s.b)
	s.b = s.b[n:]
	return n, nil
}

func TestSteadyTransfersOutlastTheIdleTimeout(t *testing.T) {
	// A wrapper that makes every fetch think for a while before answering,
	// longer than the idle timeout: server time does not count.
	dir := t.TempDir()
	gitPath := filepath.Join(dir, "git")
	// The deadline is 1 s, not less, so the gaps below keep a wide margin
	// on a busy machine; the thinking (2 s) and the push (about 1.5 s) last
	// longer than it.
	os.WriteFile(gitPath, []byte("#!/bin/sh\nif [ \"$1\" = upload-pack ] && [ \"$3\" != --advertise-refs ]; then sleep 2; fi\nexec git \"$@\"\n"), 0o755)
	e, _ := limitEnv(t, gitPath, func(o *githttp.Options) { o.IOTimeout = time.Second })
	src := e.seed()
	base := gitOut(t, src, "rev-parse", "HEAD")
	big := make([]byte, 128<<10)
	rand.Read(big)
	next := commitFile(t, src, "big.bin", string(big))
	body := pkt(base+" "+next+" refs/heads/main\x00report-status\n") + "0000" + string(packOf(t, src, next, "^"+base))

	// A push body sent in small pieces, over far longer than the timeout.
	req, _ := http.NewRequest("POST", e.url+"/alice/pub/git-receive-pack", &slowReader{b: []byte(body), chunk: len(body)/20 + 1, pause: 75 * time.Millisecond})
	req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
	req.SetBasicAuth("x", "rw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Join(report(t, b, false), "|") != "unpack ok|ok refs/heads/main" {
		t.Fatalf("slow push: %d %q", resp.StatusCode, b)
	}

	// A clone whose server side takes longer than the timeout.
	dst := filepath.Join(t.TempDir(), "c")
	git(t, "", "clone", "-q", e.remote("alice/pub", ""), dst)
	if got := gitOut(t, dst, "rev-parse", "HEAD"); got != next {
		t.Fatalf("clone at %s, want %s", got, next)
	}
}

func TestDisconnectKillsGit(t *testing.T) {
	gitPath, _, pids := blockingGit(t)
	e, _ := limitEnv(t, gitPath, nil)
	e.seed()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := fetchRequest(ctx, e.url, lsRefs())
		if err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, "git to start", func() bool { return len(readPids(t, pids)) == 2 })
	procs := readPids(t, pids)
	cancel() // the client goes away
	<-done
	for _, pid := range procs {
		waitFor(t, fmt.Sprintf("process %d to exit", pid), func() bool { return !alive(pid) })
	}
}

func TestGitSlotsQueueThen503(t *testing.T) {
	gitPath, block, pids := blockingGit(t)
	e, reg := limitEnv(t, gitPath, func(o *githttp.Options) {
		o.MaxGitProcesses = 1
		o.GitQueue = 1
		o.GitQueueTimeout = time.Hour
	})
	e.seed()

	// A holds the only slot.
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	go func() {
		if resp, err := fetchRequest(ctxA, e.url, lsRefs()); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, "A to run git", func() bool { return len(readPids(t, pids)) == 2 })

	// B waits in the queue.
	var wg sync.WaitGroup
	wg.Add(1)
	var statusB int
	go func() {
		defer wg.Done()
		resp, err := fetchRequest(context.Background(), e.url, lsRefs())
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statusB = resp.StatusCode
	}()
	waitFor(t, "B to queue", func() bool { return gauge(t, reg, "ghost_git_queue_waiting") == 1 })

	// C finds the slot and the queue taken.
	resp, err := fetchRequest(context.Background(), e.url, lsRefs())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("C: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// So does an advertisement.
	resp, err = http.Get(e.url + "/alice/pub/info/refs?service=git-upload-pack")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("info/refs: %d", resp.StatusCode)
	}

	// A goes away; B gets the slot and is served.
	os.Remove(block)
	cancelA()
	wg.Wait()
	if statusB != http.StatusOK {
		t.Fatalf("B: %d", statusB)
	}
	if n := gauge(t, reg, "ghost_git_busy_rejections_total"); n != 2 {
		t.Fatalf("%v busy rejections, want 2", n)
	}
}

func TestGitQueueWaitEnds(t *testing.T) {
	gitPath, _, pids := blockingGit(t)
	e, _ := limitEnv(t, gitPath, func(o *githttp.Options) {
		o.MaxGitProcesses = 1
		o.GitQueue = 1
		o.GitQueueTimeout = 50 * time.Millisecond
	})
	e.seed()
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	go func() {
		if resp, err := fetchRequest(ctxA, e.url, lsRefs()); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, "A to run git", func() bool { return len(readPids(t, pids)) == 2 })
	ctxB, cancelB := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancelB()
	resp, err := fetchRequest(ctxB, e.url, lsRefs())
	if err != nil {
		t.Fatalf("B never got an answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("B after waiting: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func TestBearerAuthOnGitEndpoints(t *testing.T) {
	e, _ := limitEnv(t, "", nil)
	src := t.TempDir()
	git(t, src, "init", "-q", "--initial-branch=main")
	commitFile(t, src, "a.txt", "a\n")
	url := e.remote("alice/priv", "")
	git(t, src, "-c", "http.extraHeader=Authorization: Bearer rw", "push", "-q", url, "main")
	dst := filepath.Join(t.TempDir(), "c")
	git(t, "", "-c", "http.extraHeader=Authorization: Bearer ro", "clone", "-q", url, dst)
	if a, b := gitOut(t, src, "rev-parse", "HEAD"), gitOut(t, dst, "rev-parse", "HEAD"); a != b {
		t.Fatalf("clone at %s, want %s", b, a)
	}
	// A bad bearer token is refused like a bad password.
	req, _ := http.NewRequest("GET", e.url+"/alice/priv/info/refs?service=git-upload-pack", nil)
	req.Header.Set("Authorization", "Bearer bogus")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bogus bearer: %d", resp.StatusCode)
	}
}

func TestDeleteCurrentBranchIsRefused(t *testing.T) {
	e, _ := limitEnv(t, "", nil)
	src := e.seed()
	git(t, src, "push", "-q", e.remote("alice/pub", "rw"), "main:topic")
	before := e.logRefs("pub")
	out, err := gitErr(t, src, "push", e.remote("alice/pub", "rw"), ":main")
	if err == nil {
		t.Fatalf("deleting the current branch succeeded:\n%s", out)
	}
	if !strings.Contains(out, "[remote rejected] main (deletion of the current branch prohibited)") {
		t.Fatalf("git output:\n%s", out)
	}
	if got := e.logRefs("pub"); got != before {
		t.Fatalf("log refs changed:\n%s", got)
	}
	// Another branch can go.
	git(t, src, "push", "-q", e.remote("alice/pub", "rw"), "--delete", "topic")
	if got := e.logRefs("pub"); strings.Contains(got, "topic") {
		t.Fatalf("topic not deleted:\n%s", got)
	}
}

func TestStalledReaderIsCutOff(t *testing.T) {
	e, _ := limitEnv(t, "", func(o *githttp.Options) { o.IOTimeout = 200 * time.Millisecond })
	src := e.seed()
	big := make([]byte, 8<<20)
	rand.Read(big)
	tip := commitFile(t, src, "big.bin", string(big))
	git(t, src, "push", "-q", e.remote("alice/pub", "rw"), "main")

	body := pkt("command=fetch\n") + "0001" + pkt("no-progress\n") + pkt("want "+tip+"\n") + pkt("done\n") + "0000"
	c, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /alice/pub/git-upload-pack HTTP/1.1\r\nHost: x\r\nGit-Protocol: version=2\r\nContent-Type: application/x-git-upload-pack-request\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// The client stops reading for far longer than the idle timeout.
	time.Sleep(2 * time.Second)
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return // cut off before the headers even arrived
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server neither finished nor gave up")
	}
	if err == nil {
		t.Fatalf("the whole response (%d bytes) arrived: the stalled client was not cut off", n)
	}
}

func TestLargeFetchRequestIsSpooledAndRemoved(t *testing.T) {
	e, _ := limitEnv(t, "", nil)
	src := e.seed()
	tip := gitOut(t, src, "rev-parse", "HEAD")
	// 10000 haves (about 500 KiB): past what is held in memory.
	var b strings.Builder
	b.WriteString(pkt("command=fetch\n") + "0001" + pkt("no-progress\n") + pkt("want "+tip+"\n"))
	for i := range 10000 {
		b.WriteString(pkt(fmt.Sprintf("have %040x\n", i+1)))
	}
	b.WriteString(pkt("done\n") + "0000")
	resp, body := e.post("alice/pub", "git-upload-pack", "", []byte(b.String()), map[string]string{"Git-Protocol": "version=2"})
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("packfile\n")) {
		t.Fatalf("large fetch: %d %.200q", resp.StatusCode, body)
	}
	if left, _ := filepath.Glob(filepath.Join(e.cache.Dir(), "tmp", "fetch-*")); len(left) != 0 {
		t.Fatalf("spool left behind: %v", left)
	}
}
