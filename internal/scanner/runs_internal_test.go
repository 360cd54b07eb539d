package scanner

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// TestRunsReadsOnlyThePage: with 300 pushes' runs and a full run among
// them, a page of five reads five descriptors and a handful of listings,
// newest first, and a large page lists every run in order.
func TestRunsReadsOnlyThePage(t *testing.T) {
	ctx := context.Background()
	fs := faultstore.New(memstore.New())
	log := wal.New(fs, wal.Options{})
	const repo = "r1"
	if err := log.Init(ctx, repo); err != nil {
		t.Fatal(err)
	}
	id := strings.Repeat("ab", 20)
	zero := strings.Repeat("0", 40)
	for i := range 300 {
		tr := wal.Transition{Ref: "refs/heads/x", Old: zero, New: id}
		if i%2 == 1 {
			tr = wal.Transition{Ref: "refs/heads/x", Old: id, New: zero}
		}
		if _, err := log.Commit(ctx, repo, wal.Push{Transitions: []wal.Transition{tr}, Pack: strings.NewReader(""), PackSize: 0}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(Options{Store: fs, Log: log, Alerts: alerts.New(fs), Coord: func() coord.Backend { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 300; seq++ {
		if _, err := s.Start(ctx, Spec{Tenant: "alice", RepoID: repo, Kind: KindPush, Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Start(ctx, Spec{Tenant: "alice", RepoID: repo, Kind: KindFull, Seq: 150}); err != nil {
		t.Fatal(err)
	}

	gets, lists := fs.Count(faultstore.OpGet), fs.Count(faultstore.OpList)
	page, err := s.Runs(ctx, repo, 5)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range page {
		got = append(got, fmt.Sprintf("%d-%s", st.Seq, st.Kind))
	}
	if strings.Join(got, " ") != "300-push 299-push 298-push 297-push 296-push" {
		t.Fatalf("page %v, want the five newest", got)
	}
	if g, l := fs.Count(faultstore.OpGet)-gets, fs.Count(faultstore.OpList)-lists; g > 6 || l > 3 {
		t.Fatalf("a page of 5 took %d GETs and %d LISTs, want at most 6 and 3", g, l)
	}

	all, err := s.Runs(ctx, repo, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 301 || all[0].Seq != 300 || all[300].Seq != 1 {
		t.Fatalf("%d runs from %d to %d, want 301 from 300 to 1", len(all), all[0].Seq, all[len(all)-1].Seq)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq > all[i-1].Seq {
			t.Fatalf("runs out of order at %d: %d after %d", i, all[i].Seq, all[i-1].Seq)
		}
	}
}
