package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// fault is one entry of the seeded schedule: SIGKILL (restarted after
// Down) or SIGSTOP (SIGCONT after Down) of one process, or of two etcd
// members at once, which costs the cluster its quorum.
type fault struct {
	At      time.Duration // after the load started
	Action  string        // kill or stop
	Targets []string      // process names
	Down    time.Duration

	Started time.Time
	Healed  time.Time
	Err     string // a restart that failed
}

func (f fault) String() string {
	return fmt.Sprintf("+%5.1fs %-4s %-13s for %.1fs", f.At.Seconds(), f.Action, strings.Join(f.Targets, "+"), f.Down.Seconds())
}

// faultClasses are the kinds of fault: what is hit, and how.
var faultClasses = func() (cs [][2]string) {
	for _, target := range []string{"node", "etcd", "etcd-quorum", "gateway"} {
		for _, action := range []string{"kill", "stop"} {
			cs = append(cs, [2]string{target, action})
		}
	}
	return cs
}()

// schedule draws n faults from rng, spread over the middle 90% of the
// load: one in each of n equal slots, at a random point of it. When n
// allows, every class of fault occurs at least once, in a random slot;
// the other faults hit a node (40%), an etcd member (25%), two members at
// once (10%) or the gateway (25%), killed or stopped alike.
func schedule(rng *rand.Rand, n int, load time.Duration, nodes, members int) []fault {
	lo, hi := load/20, load-load/20
	slot := (hi - lo) / time.Duration(max(n, 1))
	classes := make([][2]string, n)
	for i := range classes {
		if i < len(faultClasses) {
			classes[i] = faultClasses[i]
			continue
		}
		target := "gateway"
		switch r := rng.Float64(); {
		case r < 0.40:
			target = "node"
		case r < 0.65:
			target = "etcd"
		case r < 0.75:
			target = "etcd-quorum"
		}
		classes[i] = [2]string{target, []string{"kill", "stop"}[rng.IntN(2)]}
	}
	rng.Shuffle(n, func(i, j int) { classes[i], classes[j] = classes[j], classes[i] })
	var fs []fault
	for i, cl := range classes {
		f := fault{At: lo + time.Duration(i)*slot + time.Duration(rng.Int64N(int64(slot))), Action: cl[1]}
		switch cl[0] {
		case "node":
			f.Targets = []string{fmt.Sprintf("node%d", rng.IntN(nodes))}
		case "etcd":
			f.Targets = []string{fmt.Sprintf("etcd%d", rng.IntN(members))}
		case "etcd-quorum":
			a := rng.IntN(members)
			b := (a + 1 + rng.IntN(members-1)) % members
			f.Targets = []string{fmt.Sprintf("etcd%d", a), fmt.Sprintf("etcd%d", b)}
		default:
			f.Targets = []string{"gateway"}
		}
		if f.Action == "kill" {
			f.Down = time.Second + time.Duration(rng.Int64N(int64(5*time.Second)))
		} else {
			f.Down = time.Second + time.Duration(rng.Int64N(int64(7*time.Second)))
		}
		fs = append(fs, f)
	}
	return fs
}

// runFaults executes the schedule against the cluster's processes, one
// fault at a time, and heals each before the next: a killed process is
// started again on the same address and data, a stopped one continued.
// It returns the faults as they ran.
func runFaults(ctx context.Context, c *cluster, fs []fault, start time.Time) []fault {
	byName := map[string]*proc{}
	for _, p := range c.procs() {
		byName[p.name] = p
	}
	out := make([]fault, 0, len(fs))
	for _, f := range fs {
		sleepCtx(ctx, time.Until(start.Add(f.At)))
		if ctx.Err() != nil {
			break
		}
		f.Started = time.Now()
		for _, name := range f.Targets {
			switch f.Action {
			case "kill":
				byName[name].kill()
			case "stop":
				byName[name].stop()
			}
		}
		sleepCtx(ctx, f.Down)
		var errs []string
		for _, name := range f.Targets {
			p := byName[name]
			switch f.Action {
			case "kill":
				if err := restart(p); err != nil {
					errs = append(errs, err.Error())
				}
			case "stop":
				p.cont()
			}
		}
		f.Healed = time.Now()
		f.Err = strings.Join(errs, "; ")
		out = append(out, f)
	}
	return out
}

// restart starts a killed process again, retrying a start that fails
// (an address not yet free, a member that exits while rejoining).
func restart(p *proc) error {
	var err error
	for range 3 {
		if err = p.start(90 * time.Second); err == nil {
			return nil
		}
		if p.pid() != 0 {
			p.kill()
		}
		time.Sleep(time.Second)
	}
	return err
}

// faultCounts tallies faults by action and kind of target.
func faultCounts(fs []fault) string {
	counts := map[string]int{}
	for _, f := range fs {
		kind := strings.TrimRight(f.Targets[0], "0123456789")
		if len(f.Targets) > 1 {
			kind = "etcd-quorum"
		}
		counts[f.Action+" "+kind]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	return fmt.Sprintf("%d faults (%s)", len(fs), strings.Join(parts, ", "))
}
