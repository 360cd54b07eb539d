package api

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/ghost-scm/ghost/internal/scanner"
)

// pageScans is a Scans that records the page sizes it is asked for.
type pageScans struct {
	Scans
	limits []int
}

func (p *pageScans) Runs(_ context.Context, _ string, limit int) ([]scanner.Status, error) {
	p.limits = append(p.limits, limit)
	return nil, nil
}

func (p *pageScans) Lag(context.Context, string) (scanner.Lag, error) { return scanner.Lag{}, nil }

// TestScanListPageIsCapped: a request for a huge page of scan runs asks
// for at most maxScansPage (issue 19 item 4).
func TestScanListPageIsCapped(t *testing.T) {
	f := newFixture(t)
	ps := &pageScans{}
	srv := httptest.NewServer(NewHandler(f.s, nil, WithScans(ps))) // 127.0.0.1
	t.Cleanup(srv.Close)
	f.srv = srv
	if _, err := f.s.CreateRepo(context.Background(), "alice", "pub", true); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"", "?per_page=5", "?per_page=100000"} {
		if r := f.do("GET", "/api/repos/alice/pub/scans"+q, f.aliceW, ""); r.status != 200 {
			t.Fatalf("GET scans%s: %d %s", q, r.status, r.body)
		}
	}
	if want := []int{maxScansPage, 5, maxScansPage}; len(ps.limits) != 3 || ps.limits[0] != want[0] || ps.limits[1] != want[1] || ps.limits[2] != want[2] {
		t.Fatalf("page sizes asked for: %v, want %v", ps.limits, want)
	}
}
