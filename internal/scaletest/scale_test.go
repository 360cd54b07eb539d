package scaletest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The CI run: two installation sizes above what a sweep covers in one
// sweepEvery (so that both sweep all the time), one and eight nodes,
// twenty virtual minutes. The full run, with the sizes and node counts of
// docs/design.md §9.1 (a few minutes at 100k repositories, about half an
// hour and 6 GiB at 1M):
//
//	GHOST_SCALE=1000,10000,100000,1000000 GHOST_SCALE_NODES=1,10,100 \
//	  go test -run TestScale -timeout 3h -v ./internal/scaletest/
//
// GHOST_SCALE_OUT=file also writes the tables there. GHOST_SCALE_ALERTS=n
// populates n alerts on every size of at least 100,000 repositories in
// place of the default (as many as repositories, at most 1M). An alert
// takes 1,399 bytes of the (deflated) in-memory store: beside 1M
// repositories, 10 million made a live heap of about 15 GiB and took 13
// minutes to populate on two cores; set GOMEMLIMIT under the machine's
// memory (GOMEMLIMIT=20GiB on 23 GiB; docs/design.md §9.1).
func TestScale(t *testing.T) {
	sizes, nodes := []int{2000, 6000}, []int{1, 8}
	minutes := 20
	full := os.Getenv("GHOST_SCALE") != ""
	if full {
		sizes, nodes = ints(t, os.Getenv("GHOST_SCALE"), 10), []int{1, 10, 100}
		if v := os.Getenv("GHOST_SCALE_NODES"); v != "" {
			nodes = ints(t, v, 1)
		}
		minutes = 60
	}
	var report strings.Builder
	var keep float64
	type row struct {
		p    population
		ops  []op
		idle []idleResult
	}
	var rows []row
	for i, size := range sizes {
		p := population{repos: size, perTenant: 10, alerts: size, demoAlerts: 500, runs: size / 2, runRepos: max(1, size/200)}
		if size >= 100000 {
			// 1M alerts and 100k runs at most: see docs/design.md §9.1 on
			// the bound.
			p.alerts, p.runs, p.runRepos = min(size, 1000000), 100000, 1000
			if v := os.Getenv("GHOST_SCALE_ALERTS"); v != "" {
				p.alerts = ints(t, v, 0)[0]
			}
		}
		c := newCluster(t, p)
		if i == 0 {
			// etcd's client keeps each node's election session alive by the
			// wall clock; measured once, with a shorter time-to-live in CI.
			ttl, d := 3*time.Second, 3*time.Second
			if full {
				ttl, d = leaderTTL, 2*leaderTTL
			}
			keep = c.measureKeepAlive(t, ttl, d) * ttl.Seconds() / leaderTTL.Seconds()
		}
		r := row{p: p, ops: c.ops(t, p.demoAlerts)}
		for _, n := range nodes {
			r.idle = append(r.idle, c.idle(t, n, time.Duration(minutes)*time.Minute, keep))
		}
		rows = append(rows, r)
	}
	// Requests per operation, by installation size.
	fmt.Fprintf(&report, "Requests per operation (object store GET/PUT/LIST/DELETE, etcd), by repositories:\n\n| operation |")
	for _, r := range rows {
		fmt.Fprintf(&report, " %d |", r.p.repos)
	}
	fmt.Fprintf(&report, "\n| --- |%s\n", strings.Repeat(" --- |", len(rows)))
	for k := range rows[0].ops {
		fmt.Fprintf(&report, "| %s |", rows[0].ops[k].name)
		for _, r := range rows {
			fmt.Fprintf(&report, " %s |", perOp(r.ops[k]))
		}
		report.WriteString("\n")
	}
	fmt.Fprintf(&report, "\nIdle requests a second (object store, etcd incl. %.3f keep-alives a node), %d virtual minutes:\n\n", keep, minutes)
	fmt.Fprintf(&report, "| repositories | nodes | store, a node | store, leader | store, total | etcd, a node | etcd, total |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		for _, x := range r.idle {
			tot, lead := x.rate(x.total), x.rate(x.leader)
			follow := rates{}
			if x.nodes > 1 {
				follow = x.rate(x.follow)
				follow.Get, follow.Put, follow.List, follow.Delete, follow.Etcd = follow.Get/float64(x.nodes-1), follow.Put/float64(x.nodes-1), follow.List/float64(x.nodes-1), follow.Delete/float64(x.nodes-1), follow.Etcd/float64(x.nodes-1)
			}
			fmt.Fprintf(&report, "| %d | %d | %.3f | %.3f | %.3f | %.3f | %.3f |\n", r.p.repos, x.nodes,
				follow.store(), lead.store(), tot.store(), follow.Etcd+keep, tot.Etcd+x.keep)
		}
	}
	last := rows[len(rows)-1]
	costTable(t, &report, last.p, last.ops, last.idle[len(last.idle)-1])
	t.Log("\n" + report.String())
	if out := os.Getenv("GHOST_SCALE_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(report.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !full {
		checkFlat(t, rows[0].ops, rows[1].ops)
		for k := range rows[0].idle {
			a, b := rows[0].idle[k], rows[1].idle[k]
			if ra, rb := a.rate(a.total).store(), b.rate(b.total).store(); rb > ra*1.05+0.01 {
				t.Errorf("%d nodes idle: %.3f object-store requests a second at %d repositories, %.3f at %d: it grows", a.nodes, ra, rows[0].p.repos, rb, rows[1].p.repos)
			}
		}
	}
}

func perOp(o op) string {
	per := o.per
	if per == 0 {
		return fmt.Sprintf("%d/%d/%d/%d, %d", o.c.Get, o.c.Put, o.c.List, o.c.Delete, o.c.Etcd)
	}
	return fmt.Sprintf("%.1f/%.1f/%.1f/%.1f, %.1f", float64(o.c.Get)/per, float64(o.c.Put)/per, float64(o.c.List)/per, float64(o.c.Delete)/per, float64(o.c.Etcd)/per)
}

// checkFlat fails when an operation costs more on the larger installation.
func checkFlat(t *testing.T, small, large []op) {
	t.Helper()
	for k := range small {
		a, b := small[k].c, large[k].c
		if b.store() > a.store()+2 || b.Etcd > a.Etcd+2 {
			t.Errorf("%s: %v on the smaller installation, %v on the larger", small[k].name, a, b)
		}
	}
}

func ints(t *testing.T, s string, least int) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < least {
			t.Fatalf("%q: want numbers of at least %d, comma-separated", s, least)
		}
		out = append(out, n)
	}
	return out
}

// Prices of Amazon S3 Standard in US East (N. Virginia), from
// https://aws.amazon.com/s3/pricing/ as quoted on 13 March 2026
// (https://cloudburn.io/blog/amazon-s3-pricing): PUT, COPY, POST and LIST
// requests $0.005 per 1,000; GET and SELECT $0.0004 per 1,000; DELETE
// free; storage $0.023 per GB-month for the first 50 TB.
const (
	pricePutList = 0.005 / 1000
	priceGet     = 0.0004 / 1000
	priceGBMonth = 0.023
)

// The example of issue 22: 10k pushes and 100k clones an hour. A clone is
// counted as on a cold node (the upper bound: a node that served the
// repository before pays the warm figure), and every push is scanned.
const (
	pushesPerHour = 10000
	clonesPerHour = 100000
	hoursPerMonth = 730
)

// costTable turns the counts into dollars a month at the prices above.
func costTable(t *testing.T, w *strings.Builder, p population, ops []op, idle idleResult) {
	find := func(name string) counts {
		for _, o := range ops {
			if o.name == name {
				return o.c
			}
		}
		t.Fatalf("cost table: no operation %q", name)
		return counts{}
	}
	idleRate := idle.rate(idle.total)
	type line struct {
		what        string
		putList, gt float64 // requests an hour
	}
	push, scan, clone := find("push (one commit)"), find("push scan (its run, to done)"), find("clone, cold node")
	lines := []line{
		{"pushes", pushesPerHour * float64(push.Put+push.List), pushesPerHour * float64(push.Get)},
		{"their scans", pushesPerHour * float64(scan.Put+scan.List), pushesPerHour * float64(scan.Get)},
		{"clones (cold node)", clonesPerHour * float64(clone.Put+clone.List), clonesPerHour * float64(clone.Get)},
		{fmt.Sprintf("idle loops, %d nodes", idle.nodes), 3600 * (idleRate.Put + idleRate.List), 3600 * idleRate.Get},
	}
	fmt.Fprintf(w, "\nCost a month at S3 Standard us-east-1 prices ($%.4f per 1,000 PUT/LIST, $%.4f per 1,000 GET), %d repositories, %d pushes and %d clones an hour, %d nodes:\n\n",
		pricePutList*1000, priceGet*1000, p.repos, pushesPerHour, clonesPerHour, idle.nodes)
	fmt.Fprintf(w, "| what | PUT+LIST an hour | GET an hour | $ a month |\n| --- | ---: | ---: | ---: |\n")
	var total float64
	for _, l := range lines {
		usd := hoursPerMonth * (l.putList*pricePutList + l.gt*priceGet)
		total += usd
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.2f |\n", l.what, l.putList, l.gt, usd)
	}
	fmt.Fprintf(w, "| requests in all | | | %.2f |\n", total)
	fmt.Fprintf(w, "\nStorage is $%.3f per GB-month: at an average of 10 MiB a repository, %d repositories are %.0f GB, $%.0f a month.\n",
		priceGBMonth, p.repos, float64(p.repos)*10/1024, float64(p.repos)*10/1024*priceGBMonth)
}
