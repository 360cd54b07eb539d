package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/server"
)

// TestNameResolutionOutageIs503 is a fault injection (faultstore): while
// the object store does not answer reads of the repository's name
// record, git, the API and the web UI answer 503 (retry later), never 500
// and never 404, for the owner and for an anonymous visitor alike.
func TestNameResolutionOutageIs503(t *testing.T) {
	fs := faultstore.New(memstore.New())
	s, err := server.New(context.Background(), server.Options{Store: fs, CacheDir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tok, _ := seed(t, s)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()

	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if (c.Op == faultstore.OpGet || c.Op == faultstore.OpGetRange) && strings.HasPrefix(c.Key, "meta/repos/") {
			return faultstore.Fault{Outcome: faultstore.Lost}
		}
		return faultstore.Fault{}
	})
	for _, path := range []string{
		"/alice/demo.git/info/refs?service=git-upload-pack",
		"/alice/demo.git/info/refs?service=git-receive-pack",
		"/api/repos/alice/demo",
		"/alice/demo",
	} {
		for _, auth := range []bool{true, false} {
			req, _ := http.NewRequest("GET", ts.URL+path, nil)
			if auth {
				req.SetBasicAuth("x", tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("GET %s (auth %v) during a store outage: %d, want 503", path, auth, resp.StatusCode)
			}
		}
	}
}

// TestPushFailureWording is a fault injection (faultstore): a push whose
// failure certainly changed nothing says so, and only one whose index
// write's outcome could not be learned says it may have been applied.
func TestPushFailureWording(t *testing.T) {
	for _, c := range []struct {
		name string
		plan func(n *int) faultstore.Plan
		want string
		not  string
	}{
		{"entry put refused", func(*int) faultstore.Plan {
			return func(c faultstore.Call) faultstore.Fault {
				if c.Op == faultstore.OpPut && strings.Contains(c.Key, "/entries/") {
					return faultstore.Fault{Outcome: faultstore.Refused}
				}
				return faultstore.Fault{}
			}
		}, "the push was not applied", "may or may not"},
		{"entry put lost", func(*int) faultstore.Plan {
			return func(c faultstore.Call) faultstore.Fault {
				if c.Op == faultstore.OpPut && strings.Contains(c.Key, "/entries/") {
					return faultstore.Fault{Outcome: faultstore.Lost}
				}
				return faultstore.Fault{}
			}
		}, "nothing was changed", "may or may not"},
		{"index write landed, then the store went dark", func(n *int) faultstore.Plan {
			return func(c faultstore.Call) faultstore.Fault {
				if c.Op == faultstore.OpPutIfMatch && strings.HasSuffix(c.Key, "/index") {
					*n = 1
					return faultstore.Fault{Outcome: faultstore.LandedThenError}
				}
				if *n > 0 && strings.HasSuffix(c.Key, "/index") {
					return faultstore.Fault{Outcome: faultstore.Lost}
				}
				return faultstore.Fault{}
			}
		}, "may or may not have been applied", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := faultstore.New(memstore.New())
			s, err := server.New(context.Background(), server.Options{Store: fs, CacheDir: filepath.Join(t.TempDir(), "cache")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			tok, _ := seed(t, s)
			// git shows only the status of a failed RPC; the message is in
			// the body, which the recorder keeps.
			var body strings.Builder
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
					s.Handler().ServeHTTP(w, r)
					return
				}
				rec := httptest.NewRecorder()
				s.Handler().ServeHTTP(rec, r)
				body.WriteString(rec.Body.String())
				for k, v := range rec.Header() {
					w.Header()[k] = v
				}
				w.WriteHeader(rec.Code)
				w.Write(rec.Body.Bytes())
			}))
			defer ts.Close()
			dir := t.TempDir()
			git(t, dir, "init", "-q", "-b", "main")
			git(t, dir, "commit", "-q", "--allow-empty", "-m", "one")
			n := 0
			fs.SetPlan(c.plan(&n))
			out, err := gittest.Combined(gitEnv(t), dir, nil, "push", "http://x:"+tok+"@"+strings.TrimPrefix(ts.URL, "http://")+"/alice/demo.git", "main")
			if err == nil {
				t.Fatalf("push succeeded:\n%s", out)
			}
			if msg := body.String(); !strings.Contains(msg, c.want) || c.not != "" && strings.Contains(msg, c.not) {
				t.Fatalf("push answer does not say %q (or says %q): %q\n%s", c.want, c.not, msg, out)
			}
		})
	}
}
