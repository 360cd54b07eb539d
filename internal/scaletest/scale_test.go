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
// GHOST_SCALE_OUT=file also writes the tables there.
func TestScale(t *testing.T) {
	sizes, nodes := []int{2000, 6000}, []int{1, 8}
	minutes := 20
	full := os.Getenv("GHOST_SCALE") != ""
	if full {
		sizes, nodes = ints(t, os.Getenv("GHOST_SCALE")), []int{1, 10, 100}
		if v := os.Getenv("GHOST_SCALE_NODES"); v != "" {
			nodes = ints(t, v)
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

func ints(t *testing.T, s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 10 {
			t.Fatalf("%q: want numbers of at least 10, comma-separated", s)
		}
		out = append(out, n)
	}
	return out
}
