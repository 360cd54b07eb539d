package cli

import (
	"fmt"
	"runtime"
	"time"

	"github.com/spf13/pflag"

	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/gitexec"
)

// backgroundFlags are ghost serve's settings of how background work
// (compaction, in-process scan workers) yields to serving
// (docs/adr/0051-geometric-checkpoints.md).
type backgroundFlags struct {
	nice  int
	procs int
	pause time.Duration
}

func (b *backgroundFlags) register(f *pflag.FlagSet) {
	config.IntVar(f, &b.nice, "background-nice", "GHOST_BACKGROUND_NICE", gitexec.DefaultBackgroundNice,
		"how much lower than serving's the CPU priority of background git processes and scan threads is (0: the same)")
	config.IntVar(f, &b.procs, "background-git-processes", "GHOST_BACKGROUND_GIT_PROCESSES", gitexec.DefaultBackgroundProcesses(),
		"background git processes (compaction, scans) running at once, apart from the git request slots (0: no cap)")
	config.DurationVar(f, &b.pause, "background-max-pause", "GHOST_BACKGROUND_MAX_PAUSE", gitexec.DefaultMaxPause,
		"how long background work waits for git requests in progress before each step (0: it never waits)")
}

// err reports a setting out of range.
func (b *backgroundFlags) err() error {
	if b.nice < 0 || b.nice > 19 || b.procs < 0 || b.pause < 0 {
		return usageErrorf("--background-nice must be 0 to 19, --background-git-processes and --background-max-pause must not be negative")
	}
	return nil
}

// options maps the flags' 0 ("off") to the options' negative values.
func (b *backgroundFlags) options() gitexec.BackgroundOptions {
	off := func(v int) int {
		if v == 0 {
			return -1
		}
		return v
	}
	o := gitexec.BackgroundOptions{Nice: off(b.nice), Processes: off(b.procs), MaxPause: b.pause}
	if b.pause == 0 {
		o.MaxPause = -1
	}
	return o
}

// registerNice adds --nice to a command whose whole process is background
// work (ghost worker, ghost gc, ghost repo compact).
func registerNice(f *pflag.FlagSet, p *int) {
	config.IntVar(f, p, "nice", "GHOST_NICE", gitexec.DefaultBackgroundNice,
		"lower this process's CPU priority by this much, so that serving on the same machine comes first (0 to 19)")
}

// lowerProcess applies --nice through env.LowerPriority; a failure is
// reported and otherwise ignored, since the work is the same at any
// priority.
func lowerProcess(env *Env, n int) error {
	if n < 0 || n > 19 {
		return usageErrorf("--nice must be 0 to 19")
	}
	if env.LowerPriority == nil || n == 0 {
		return nil
	}
	if err := env.LowerPriority(n); err != nil {
		fmt.Fprintf(env.Stderr, "ghost: %v (running at the usual priority)\n", err)
	}
	return nil
}

// defaultScanWorkers is serve's default of in-process scan workers: two,
// but one on a machine of two CPUs or fewer, where a second worker would
// take a CPU from serving (issue 19).
func defaultScanWorkers() int { return max(1, min(2, runtime.NumCPU()/2)) }
