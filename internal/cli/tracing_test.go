package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
)

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: it decodes
// what ghost exports, as a collector would.
type otlpReceiver struct {
	mu    sync.Mutex
	spans map[string][]map[string]string // name -> attributes of each span
	srv   *httptest.Server
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{spans: map[string][]map[string]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		b, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		var msg coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					attrs := map[string]string{}
					for _, kv := range rs.GetResource().GetAttributes() {
						attrs["resource."+kv.GetKey()] = kv.GetValue().GetStringValue()
					}
					for _, kv := range sp.GetAttributes() {
						v := kv.GetValue().GetStringValue()
						if v == "" {
							v = strings.TrimSpace(kv.GetValue().String())
						}
						attrs[kv.GetKey()] = v
					}
					r.spans[sp.GetName()] = append(r.spans[sp.GetName()], attrs)
				}
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ = proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Write(b)
	})) // 127.0.0.1
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for n := range r.spans {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// TestServeExportsTraces: with OTEL_EXPORTER_OTLP_ENDPOINT set, serve
// exports a span per push and fetch (HTTP) and per scanned shard, with
// the repository and the service's name, to an OTLP receiver on loopback
// (issue 21 §4). Nothing leaves 127.0.0.1.
func TestServeExportsTraces(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("the git binary is not on PATH (exec.LookPath(\"git\") failed)")
	}
	rcv := newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	t.Setenv("OTEL_SERVICE_NAME", "ghost-test")
	t.Setenv("GHOST_S3_BUCKET", "")
	dir := t.TempDir()
	base, stop := startServe(t, dir, "--data-dir", dir, "--scan-workers", "1", "--log-level", "warn")
	ms := metaStore(t, dir)
	ctx := context.Background()
	if _, err := ms.CreateTenant(ctx, "alice", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	tok, _, err := ms.CreateToken(ctx, "alice", meta.ScopeWrite, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ms.CreateRepo(ctx, "alice", "app", false); err != nil {
		t.Fatal(err)
	}
	env := gittest.Env(t.TempDir())
	src := filepath.Join(t.TempDir(), "src")
	gittest.Generate(t, env, src, gittest.Shape{Commits: 2, Files: 2, BlobBytes: 100})
	u, _ := url.Parse(base + "/alice/app.git")
	u.User = url.UserPassword("x", tok)
	gittest.Git(t, env, src, "push", "-q", u.String(), "main")
	gittest.Git(t, env, "", "clone", "-q", u.String(), filepath.Join(t.TempDir(), "copy"))

	want := []string{"git fetch", "git fetch refs", "git push", "git push refs", "scan shard"}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got := rcv.names()
		missing := false
		for _, w := range want {
			missing = missing || !slices.Contains(got, w)
		}
		if !missing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans %v, want %v", got, want)
		}
	}
	if code := stop(); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	push := rcv.spans["git push"][0]
	if push["ghost.repo"] != "alice/app" || push["ghost.transport"] != "http" || push["resource.service.name"] != "ghost-test" || !strings.Contains(push["http.response.status_code"], "200") {
		t.Errorf("push span %v", push)
	}
	if sc := rcv.spans["scan shard"][0]; sc["ghost.scan.kind"] != "push" {
		t.Errorf("scan span %v", sc)
	}
}
