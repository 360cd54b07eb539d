package lfs

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/objstore/countstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
)

// BenchmarkForkRefs copies the LFS references of a repository of 500
// objects of 1 KiB to a fork on a filesystem store: within the tenant
// (a reference per object, the same object) and across tenants (the
// destination's own object, a hard link, admitted against its usage).
// The references are "read": reading every reference once, a page at a
// time (Handler.Objects), and "put": writing one reference-sized record
// per object, 8 at once, what any copy of the references must do. Store
// requests per object are reported as req/obj.
//
//	go test -run XXX -bench ForkRefs ./internal/lfs
func BenchmarkForkRefs(b *testing.B) {
	const n = 500
	ctx := context.Background()
	fs, err := fsstore.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	var calls atomic.Int64
	store := countstore.New(fs, func(string, error) { calls.Add(1) })
	h, err := New(Options{Store: store, Auth: tableAuth{}})
	if err != nil {
		b.Fatal(err)
	}
	src := h.Repo(access.Grant{RepoID: "01SRC", Tenant: "alice", Level: access.Write})
	for i := range n {
		data := append(bytes.Repeat([]byte{'x'}, 1000), fmt.Sprint(i)...)
		if err := src.Put(ctx, oidOf(data), int64(len(data)), bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
	forks := NewForks(store, ForkOptions{})
	report := func(b *testing.B, before int64) {
		b.ReportMetric(float64(calls.Load()-before)/float64(b.N)/n, "req/obj")
	}
	b.Run("read", func(b *testing.B) {
		before := calls.Load()
		for i := 0; i < b.N; i++ {
			after := ""
			for {
				page, next, err := h.Objects(ctx, "01SRC", after, MaxListPage)
				if err != nil || len(page) == 0 {
					b.Fatal(err, len(page))
				}
				if after = next; after == "" {
					break
				}
			}
		}
		report(b, before)
	})
	// What a fork cannot do without: write one reference-sized record per
	// object, as many at once as the fork does.
	b.Run("put", func(b *testing.B) {
		before := calls.Load()
		for i := 0; i < b.N; i++ {
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(DefaultForkParallel)
			for j := range n {
				g.Go(func() error {
					_, err := store.Put(gctx, fmt.Sprintf("lfs/refs/01PUT%d/%064d", i, j), strings.NewReader(`{"size":1003}`), 13)
					return err
				})
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
		}
		report(b, before)
	})
	tenants := 0
	for _, across := range []bool{false, true} {
		b.Run(map[bool]string{false: "within", true: "across"}[across], func(b *testing.B) {
			before := calls.Load()
			for i := 0; i < b.N; i++ {
				dst := "alice"
				if across { // a tenant that holds none of the objects yet
					tenants++
					dst = fmt.Sprintf("bob%d", tenants)
				}
				if err := forks.CopyToFork(ctx, "alice", "01SRC", dst, fmt.Sprintf("01F%s%d%d", dst, b.N, i)); err != nil {
					b.Fatal(err)
				}
			}
			report(b, before)
		})
	}
}
