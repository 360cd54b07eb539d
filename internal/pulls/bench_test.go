package pulls_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/pulls"
)

// BenchmarkListPage: the storage requests of one page of the open list
// (30, the API's default) and of the page after it, as the number of
// pull requests grows: flat, one LIST and a GET per pull request shown.
//
//	go test -run '^$' -bench ListPage -benchtime 20x ./internal/pulls/
func BenchmarkListPage(b *testing.B) {
	for _, total := range []int{100, 1000, 10000} {
		b.Run("prs="+strconv.Itoa(total), func(b *testing.B) {
			ctx := context.Background()
			fs := faultstore.New(memstore.New())
			st := pulls.NewStore(fs)
			const repo, head = "r-bench", "r-bench-fork"
			for i := range total {
				if _, err := st.Create(ctx, pulls.PullRequest{RepoID: repo, BaseRepo: "alice/app", Title: "pr " + strconv.Itoa(i), Author: "alice",
					Head: pulls.Branch{RepoID: head, Repo: "bob/app", Ref: "b" + strconv.Itoa(i)}, Base: "main"}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			var requests, shown int
			for range b.N {
				before := fs.Count(faultstore.OpGet) + fs.Count(faultstore.OpList)
				page, next, err := st.List(ctx, repo, pulls.FilterOpen, 0, 30)
				if err != nil || len(page) != 30 || next == 0 {
					b.Fatalf("page: %d, next %d, %v", len(page), next, err)
				}
				page2, _, err := st.List(ctx, repo, pulls.FilterOpen, next, 30)
				if err != nil || len(page2) != 30 {
					b.Fatalf("page 2: %d, %v", len(page2), err)
				}
				requests += fs.Count(faultstore.OpGet) + fs.Count(faultstore.OpList) - before
				shown += len(page) + len(page2)
			}
			b.ReportMetric(float64(requests)/float64(2*b.N), "requests/page")
			b.ReportMetric(float64(requests)/float64(shown), "requests/pr-shown")
		})
	}
}

// BenchmarkMergeability: the mergeability of a pull request that changes
// 100 files of a base that moved (git merge-tree --write-tree in a
// scratch area), as GET .../pulls/{n} computes it.
//
//	go test -run '^$' -bench Mergeability -benchtime 20x ./internal/pulls/
func BenchmarkMergeability(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b, false)
	var files []string
	for i := range 120 {
		files = append(files, fmt.Sprintf("dir%d/f%03d.txt", i%7, i), fmt.Sprintf("line 1 of %d\nline 2\nline 3\n", i))
	}
	e.commit("base", files...)
	e.push(e.repo, "main")
	e.gitc("checkout", "-q", "-b", "topic")
	var changed []string
	for i := range 100 {
		changed = append(changed, fmt.Sprintf("dir%d/f%03d.txt", i%7, i), fmt.Sprintf("line 1 of %d\nline 2, changed\nline 3\n", i))
	}
	e.commit("change 100 files", changed...)
	e.push(e.repo, "topic")
	e.gitc("checkout", "-q", "main")
	e.commit("main moves", "dir0/f119.txt", "moved\n")
	e.push(e.repo, "main")
	pr, err := e.pulls.Create(ctx, e.repo, pulls.NewPull{Head: e.repo, HeadRef: "topic", BaseRef: "main", Title: "100 files", Author: "alice"})
	if err != nil {
		b.Fatal(err)
	}
	if fs, err := e.pulls.Files(ctx, e.repo, pr, 1, 100); err != nil || len(fs) != 100 {
		b.Fatalf("files %d, %v", len(fs), err)
	}
	b.ResetTimer()
	for range b.N {
		st, err := e.pulls.Status(ctx, e.repo, pr)
		if err != nil || st.MergeableState != "clean" {
			b.Fatalf("status %+v, %v", st, err)
		}
	}
}

// BenchmarkMergeLatency: from a merge request to the base's ref moved,
// for a small pull request (one changed file) on a real history:
// GHOST_BENCH_REPO names a bare repository whose HEAD is pushed as main
// first (a small synthetic history without it). Reports p50 and p99.
//
//	GHOST_BENCH_REPO=/work/bench/git.git go test -run '^$' -bench MergeLatency -benchtime 40x -timeout 1h ./internal/pulls/
func BenchmarkMergeLatency(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b, false)
	if src := os.Getenv("GHOST_BENCH_REPO"); src != "" {
		e.gitc("fetch", "-q", src, "+HEAD:refs/heads/imported")
		e.gitc("reset", "-q", "--hard", "imported")
	} else {
		for i := range 50 {
			e.commit("history "+strconv.Itoa(i), fmt.Sprintf("f%02d.txt", i%10), strconv.Itoa(i)+"\n")
		}
	}
	e.push(e.repo, "main")
	var took []time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		branch := "small-" + strconv.Itoa(i)
		e.gitc("checkout", "-q", "-b", branch, "main")
		e.commit("small change "+strconv.Itoa(i), "ghost-bench-"+strconv.Itoa(i)+".txt", "change\n")
		e.push(e.repo, branch)
		e.gitc("checkout", "-q", "main")
		pr, err := e.pulls.Create(ctx, e.repo, pulls.NewPull{Head: e.repo, HeadRef: branch, BaseRef: "main", Title: "small " + strconv.Itoa(i), Author: "alice"})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if _, err := e.pulls.Merge(ctx, e.repo, pr.Number, pulls.MergeOptions{Method: pulls.MethodMerge, By: "bob"}); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	b.Logf("merge latencies in order: %v", took)
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(took[min(len(took)-1, len(took)*99/100)].Milliseconds()), "p99-ms")
}
