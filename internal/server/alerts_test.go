package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestServerServesAlerts: serve mounts the alert endpoints (issue 13 §4),
// which answer 501 when a handler is built without them.
func TestServerServesAlerts(t *testing.T) {
	s := newServer(t)
	tok, _ := seed(t, s)
	ts := httptest.NewServer(s.Handler()) // 127.0.0.1
	defer ts.Close()
	req, err := http.NewRequest("GET", ts.URL+"/api/repos/alice/demo/alerts", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("x", tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || strings.TrimSpace(b.String()) != `{"alerts":[]}` {
		t.Fatalf("alerts of a repository without any: %d %s", resp.StatusCode, b.String())
	}
}
