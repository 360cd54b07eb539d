package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/wal"
)

func newServer(t *testing.T) *server.Server {
	t.Helper()
	store, err := fsstore.Open(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(context.Background(), server.Options{Store: store, CacheDir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// seed creates tenant alice, a write token and the private repository
// alice/demo, returning the token.
func seed(t *testing.T, s *server.Server) (string, meta.Repo) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Meta().CreateTenant(ctx, "alice", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	tok, _, err := s.Meta().CreateToken(ctx, "alice", meta.ScopeWrite, "test")
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Meta().CreateRepo(ctx, "alice", "demo", false)
	if err != nil {
		t.Fatal(err)
	}
	return tok, r
}

// gitEnv is gittest's isolated git environment, with a home of its own.
func gitEnv(t testing.TB) []string { return gittest.Env(t.TempDir()) }

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(gittest.Git(t, gitEnv(t), dir, args...))
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServerRoutesAndMetrics(t *testing.T) {
	s := newServer(t)
	tok, _ := seed(t, s)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	host := strings.TrimPrefix(ts.URL, "http://")

	if code, body := get(t, ts.URL+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("healthz: %d %q", code, body)
	}
	if code, body := get(t, ts.URL+"/api/repos/alice/demo"); code != 404 || !strings.Contains(body, "error") {
		t.Fatalf("api: %d %q", code, body)
	}

	src := t.TempDir()
	git(t, src, "init", "-q", "--initial-branch=main")
	git(t, src, "commit", "-q", "--allow-empty", "-m", "one")
	git(t, src, "push", "-q", "http://x:"+tok+"@"+host+"/alice/demo.git", "main")
	git(t, "", "clone", "-q", "http://x:"+tok+"@"+host+"/alice/demo", filepath.Join(t.TempDir(), "c"))

	_, metrics := get(t, ts.URL+"/metrics")
	for _, want := range []string{
		`ghost_git_pushes_total{result="ok"} 1`,
		`ghost_wal_commit_cas_attempts_count 1`,
		`ghost_git_request_duration_seconds_count{code="200",service="git-receive-pack"}`,
		`ghost_git_request_duration_seconds_count{code="200",service="git-upload-pack"}`,
		`ghost_cache_materialize_seconds_count{outcome="rebuild"}`,
		`ghost_git_push_received_bytes_total `,
		`ghost_objstore_requests_total{op="put_if_match",result="ok"}`,
		`go_goroutines `,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestShutdownFinishesPushInFlight starts a push, begins a graceful
// shutdown while its body is still arriving, and checks the push lands
// and that new connections are refused.
func TestShutdownFinishesPushInFlight(t *testing.T) {
	s := newServer(t)
	tok, repo := seed(t, s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()

	src := t.TempDir()
	git(t, src, "init", "-q", "--initial-branch=main")
	git(t, src, "commit", "-q", "--allow-empty", "-m", "one")
	head := git(t, src, "rev-parse", "HEAD")
	pack := packObjects(t, src, head)
	cmds := pktLine(wal.ZeroID+" "+head+" refs/heads/main\x00report-status\n") + "0000"

	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", base+"/alice/demo/git-receive-pack", pr)
	req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
	req.SetBasicAuth("x", tok)
	type result struct {
		code int
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- result{code: resp.StatusCode, body: string(b)}
	}()
	pw.Write([]byte(cmds))
	pw.Write(pack[:len(pack)/2])
	time.Sleep(200 * time.Millisecond) // the request is in flight
	cancel()                           // SIGTERM
	time.Sleep(200 * time.Millisecond)
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("still accepting connections during shutdown")
	}
	pw.Write(pack[len(pack)/2:])
	pw.Close()
	res := <-done
	if res.err != nil || res.code != 200 || !strings.Contains(res.body, "ok refs/heads/main") {
		t.Fatalf("push during shutdown: %+v", res)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	x, err := s.Log().Head(context.Background(), repo.ID)
	if err != nil || x.Ref("refs/heads/main") != head {
		t.Fatalf("log after shutdown: %+v %v", x, err)
	}
}

func pktLine(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

func packObjects(t *testing.T, dir, rev string) []byte {
	return []byte(gittest.Input(t, gitEnv(t), dir, strings.NewReader(rev+"\n"), "pack-objects", "--revs", "--stdout", "-q"))
}
