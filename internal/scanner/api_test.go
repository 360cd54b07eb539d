package scanner_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/ghost-scm/ghost/internal/scanner"
)

func (f *fixture) api(t *testing.T, method, path, tenant string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+f.host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tenant != "" {
		req.Header.Set("Authorization", "Bearer "+f.tok[tenant])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

// TestServerPushRunsAndScanAPI pushes through a server whose commit hook
// starts push runs, lets a worker finish them, and reads them through the
// API; a full run is started through the API. Another tenant sees
// neither alice's runs nor her alerts, and cannot start a scan.
func TestServerPushRunsAndScanAPI(t *testing.T) {
	f := newFixture(t, fixtureOpts{scan: &scanner.Options{}})
	f.tenant("alice")
	f.tenant("bob")
	repo := f.repo("alice", "demo")
	want := history(t, f.remote("alice", "demo"), 0)
	s := f.srv.Scanner()
	w := f.worker(s, scanner.WorkerOptions{})
	// The hook starts runs in the background; the reconciler (idempotent
	// with it) makes sure all exist before the workers drain them.
	if _, err := s.Reconcile(context.Background(), "alice", repo.ID); err != nil {
		t.Fatal(err)
	}
	drain(t, s, w)

	code, body := f.api(t, "GET", "/api/repos/alice/demo/scans", "alice")
	scans, _ := body["scans"].([]any)
	if code != 200 || len(scans) != 7 {
		t.Fatalf("list scans: %d %v", code, body)
	}
	for _, sc := range scans {
		m := sc.(map[string]any)
		if m["state"] != "done" || m["kind"] != "push" {
			t.Fatalf("scan %v", m)
		}
	}
	if lag, _ := body["lag"].(map[string]any); lag["head_seq"] != 7.0 || lag["scanned_through_seq"] != 7.0 || lag["pending_pushes"] != 0.0 {
		t.Fatalf("scan lag %v, want every push of 7 scanned", body["lag"])
	}
	code, body = f.api(t, "GET", "/api/repos/alice/demo/alerts", "alice")
	if as, _ := body["alerts"].([]any); code != 200 || len(as) != len(want) {
		t.Fatalf("alerts: %d %v", code, body)
	}

	// Tenant isolation: bob sees nothing of alice's private repository.
	for _, p := range []string{"/api/repos/alice/demo/scans", "/api/repos/alice/demo/scans/1-push", "/api/repos/alice/demo/alerts"} {
		if code, _ := f.api(t, "GET", p, "bob"); code != http.StatusNotFound {
			t.Errorf("bob GET %s: %d, want 404", p, code)
		}
		if code, _ := f.api(t, "GET", p, ""); code != http.StatusNotFound && code != http.StatusUnauthorized {
			t.Errorf("anonymous GET %s: %d, want 404 or 401", p, code)
		}
	}
	if code, _ := f.api(t, "POST", "/api/repos/alice/demo/scans", "bob"); code != http.StatusNotFound {
		t.Errorf("bob POST scans: %d, want 404", code)
	}

	// A full run through the API: 201, then 200 for the same head.
	code, body = f.api(t, "POST", "/api/repos/alice/demo/scans", "alice")
	if code != http.StatusCreated || body["kind"] != "full" || body["id"] != "7-full" {
		t.Fatalf("start full: %d %v", code, body)
	}
	if code, _ = f.api(t, "POST", "/api/repos/alice/demo/scans", "alice"); code != http.StatusOK {
		t.Fatalf("start full again: %d", code)
	}
	drain(t, s, w)
	code, body = f.api(t, "GET", "/api/repos/alice/demo/scans/7-full", "alice")
	if code != 200 || body["state"] != "done" || body["blobs_scanned"].(float64) == 0 {
		t.Fatalf("full scan: %d %v", code, body)
	}
	code, body = f.api(t, "GET", "/api/repos/alice/demo/alerts", "alice")
	if as, _ := body["alerts"].([]any); code != 200 || len(as) != len(want) {
		t.Fatalf("alerts after the full run: %d %v", code, body)
	}
}
