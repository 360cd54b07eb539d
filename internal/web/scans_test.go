package web_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/api"
	"github.com/ghost-scm/ghost/internal/scanner"
	"github.com/ghost-scm/ghost/internal/web"
)

// fakeScans answers fixed runs for one repository.
type fakeScans struct {
	repoID string
	runs   []scanner.Status
	lag    scanner.Lag
	err    error
}

func (f *fakeScans) Lag(ctx context.Context, repoID string) (scanner.Lag, error) {
	if f.err != nil {
		return scanner.Lag{}, f.err
	}
	return f.lag, nil
}

func (f *fakeScans) Runs(ctx context.Context, repoID string, limit int) ([]scanner.Status, error) {
	if f.err != nil {
		return nil, f.err
	}
	if repoID != f.repoID {
		return nil, nil
	}
	return f.runs, nil
}

func TestScanRuns(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	scans := &fakeScans{repoID: f.priv.ID, runs: []scanner.Status{{
		Run:   scanner.Run{Kind: scanner.KindFull, Seq: 7, CreatedAt: time.Now().Add(-time.Hour)},
		State: "active", ShardsTotal: 8, ShardsDone: 3, ShardsLeased: 2, Blobs: 1200, Bytes: 5 << 20,
		Findings: 4, Covered: 0.375, Rate: 2 << 20, ETA: 90 * time.Second,
		Parked: []scanner.ParkedShard{{Shard: "s1", Reason: "<boom>"}},
	}}, lag: scanner.Lag{Head: 9, Watermark: 6, Seqs: 3, Oldest: time.Now().Add(-2 * time.Hour)}}
	h, err := web.New(context.Background(), web.Options{Store: f.store, Auth: f.meta, Repos: f.meta, Authz: f.meta, Cache: f.cache, Scans: scans, API: api.NewHandler(f.meta, nil)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string, signedIn bool) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if signedIn {
			c := f.signedIn(f.alice)
			u, _ := url.Parse(f.srv.URL)
			for _, ck := range c.hc.Jar.Cookies(u) {
				req.AddCookie(ck)
			}
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, body := get("/alice/priv/-/scans", true)
	if code != 200 {
		t.Fatalf("scans page: %d", code)
	}
	for _, want := range []string{"full at seq 7", "active", "37.5%", "shards 3/8 done, 2 running", "about 1m30s left", "1200 blobs, 5.0 MiB", "1 shard(s) parked", `href="/alice/priv/-/scans"`,
		"3 push(es) not scanned yet: scanned through seq 6 of 9; the oldest waiting was pushed 2 hours ago"} {
		if !strings.Contains(body, want) {
			t.Errorf("scans page lacks %q", want)
		}
	}
	if code, _ := get("/alice/priv/-/scans", false); code != 404 {
		t.Errorf("private scans to anonymous: %d", code)
	}
	if code, _ := get("/alice/nope/-/scans", true); code != 404 {
		t.Errorf("missing repository: %d", code)
	}
	if code, _ := get("/alice/pub/-/scans", false); code != 404 {
		t.Errorf("public scans to anonymous: %d", code)
	}
	scans.lag = scanner.Lag{Head: 9, Watermark: 9}
	if code, body := get("/alice/pub/-/scans", true); code != 200 || !strings.Contains(body, "No scan runs.") || !strings.Contains(body, "Every push is scanned (through seq 9)") {
		t.Errorf("no runs: %d", code)
	}
	scans.err = errors.New("etcd down")
	if code, _ := get("/alice/pub/-/scans", true); code != http.StatusServiceUnavailable {
		t.Errorf("scanner failure: %d", code)
	}
	// Without a scanner there is no page and no tab, even for the owner.
	alice := f.signedIn(f.alice)
	res, _ := alice.get("/alice/pub/-/scans")
	if res.StatusCode != 404 {
		t.Errorf("no scanner: %d", res.StatusCode)
	}
	if _, body := alice.get("/alice/pub"); strings.Contains(body, "/-/scans") {
		t.Error("a tab for scan runs without a scanner")
	}
}
