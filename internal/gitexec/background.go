package gitexec

import (
	"context"
	"os/exec"
	"runtime"
	"sync"
	"time"
)

// Background is a node's one mechanism that makes background work
// (compaction, secret scanning, garbage collection) yield to serving
// (git fetches and pushes), docs/adr/0051-geometric-checkpoints.md:
//
//   - its git processes run at a lower CPU priority (niceness raised by
//     Nice; on Linux their I/O priority follows the niceness), and so do
//     the threads its Go code scans on (LowerThread);
//   - at most Processes of them run at once, a budget of their own, apart
//     from the git request slots of serving;
//   - before one starts, and at the yield points of background loops
//     (Pause), background work waits while a git request is being served
//     or waits for a slot, for at most MaxPause, so it cannot starve.
//
// Serving requests are counted by the git service (Serving). The zero
// value is not usable; NewBackground is. A nil *Background yields
// nothing: its methods start processes as they are.
type Background struct {
	nice     int
	maxPause time.Duration
	slots    chan struct{} // nil: no cap

	mu      sync.Mutex
	serving int
	idle    chan struct{} // closed when serving drops to 0
	waiting int           // background starts waiting for a slot
	pausing int           // background steps waiting for serving now
	paused  time.Duration // total time background work waited for serving
	pauses  int64
}

// BackgroundOptions tune a Background. Zero values take the defaults;
// negative ones switch a mechanism off.
type BackgroundOptions struct {
	// Nice is how much lower than this process's the CPU priority of
	// background git processes and scanning threads is (default 10;
	// negative: the same).
	Nice int
	// Processes caps the background git processes running at once
	// (default DefaultBackgroundProcesses; negative: no cap).
	Processes int
	// MaxPause bounds how long background work waits for serving to go
	// idle before each step (default DefaultMaxPause; negative: it never
	// waits).
	MaxPause time.Duration
}

// Defaults of BackgroundOptions.
const (
	DefaultBackgroundNice = 10
	// DefaultMaxPause lets a clone or a push of a few seconds finish
	// before background work takes the CPU again, while background work
	// under a steady stream of requests still makes progress: one step
	// per pause at worst.
	DefaultMaxPause = 10 * time.Second
)

// DefaultBackgroundProcesses is the default cap on background git
// processes: half the CPUs, at least one. Each of them (pack-objects
// above all) may use every CPU; the cap keeps the sum of their
// scheduler weights small next to a request's.
func DefaultBackgroundProcesses() int { return max(1, runtime.NumCPU()/2) }

// NewBackground returns a Background with opts.
func NewBackground(opts BackgroundOptions) *Background {
	if opts.Nice == 0 {
		opts.Nice = DefaultBackgroundNice
	}
	if opts.Processes == 0 {
		opts.Processes = DefaultBackgroundProcesses()
	}
	if opts.MaxPause == 0 {
		opts.MaxPause = DefaultMaxPause
	}
	b := &Background{nice: max(opts.Nice, 0), maxPause: max(opts.MaxPause, 0)}
	if opts.Processes > 0 {
		b.slots = make(chan struct{}, opts.Processes)
	}
	return b
}

// Serving records that the node has started serving a git request (or
// queued one for a git slot); call the returned func when it is done.
// Background work pauses while any is in progress.
func (b *Background) Serving() (done func()) {
	if b == nil {
		return func() {}
	}
	b.mu.Lock()
	b.serving++
	if b.serving == 1 {
		b.idle = make(chan struct{})
	}
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.serving--
			if b.serving == 0 {
				close(b.idle)
			}
			b.mu.Unlock()
		})
	}
}

// Pause waits until no git request is being served, at most MaxPause.
// Background loops call it between steps (a scan between batches); it
// returns ctx's error if ctx ends first, and nil otherwise, also when it
// stopped waiting because MaxPause ran out.
func (b *Background) Pause(ctx context.Context) error {
	if b == nil {
		return ctx.Err()
	}
	b.mu.Lock()
	if b.serving == 0 || b.maxPause == 0 {
		b.mu.Unlock()
		return ctx.Err()
	}
	idle := b.idle
	b.pausing++
	b.mu.Unlock()
	start := time.Now()
	t := time.NewTimer(b.maxPause)
	defer t.Stop()
	var err error
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
		err = ctx.Err()
	}
	b.mu.Lock()
	b.pausing--
	b.paused += time.Since(start)
	b.pauses++
	b.mu.Unlock()
	return err
}

// acquire takes a background slot, waiting as long as it takes.
func (b *Background) acquire(ctx context.Context) (release func(), err error) {
	if b.slots == nil {
		return func() {}, nil
	}
	select {
	case b.slots <- struct{}{}:
	default:
		b.mu.Lock()
		b.waiting++
		b.mu.Unlock()
		select {
		case b.slots <- struct{}{}:
		case <-ctx.Done():
			err = ctx.Err()
		}
		b.mu.Lock()
		b.waiting--
		b.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	var once sync.Once
	return func() { once.Do(func() { <-b.slots }) }, nil
}

// Start starts cmd as background work: it pauses for serving (Pause),
// takes a background slot, starts cmd and lowers its priority. Call
// release after cmd.Wait returns. A runner from Runner starts its
// processes through it (Cmd.Start, Cmd.Wait release). A flow
// must not start a second background process while it holds one: with
// a cap of one, it would wait for itself.
func (b *Background) Start(ctx context.Context, cmd *exec.Cmd) (release func(), err error) {
	if b == nil {
		return func() {}, cmd.Start()
	}
	if err := b.Pause(ctx); err != nil {
		return nil, err
	}
	release, err = b.acquire(ctx)
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		release()
		return nil, err
	}
	lowerPriority(cmd, b.nice)
	return release, nil
}

// LowerThread locks the calling goroutine to its OS thread and lowers
// that thread's CPU priority by Nice, so that CPU-bound Go code (secret
// scanning) yields to serving as the git processes of background work
// do. The goroutine must never unlock the thread: when it exits, the Go
// runtime ends the thread with it, so the lower priority never passes
// to other goroutines. Where threads have no priority of their own, it
// only locks.
func (b *Background) LowerThread() {
	runtime.LockOSThread()
	if b != nil && b.nice > 0 {
		lowerThread(b.nice)
	}
}

// Runner returns a runner like base whose processes are background work:
// each one starts through Start and releases its slot when it ends.
func (b *Background) Runner(base *Runner) *Runner {
	r := &Runner{}
	if base != nil {
		*r = *base
	}
	r.bg = b
	return r
}

// BackgroundStats is a snapshot of a Background, for metrics.
type BackgroundStats struct {
	Serving int // git requests in progress
	Running int // background git processes running
	Waiting int // background git processes waiting for a slot
	Pausing int // background steps waiting for serving now
	// Paused is the total time background work waited for serving, over
	// Pauses waits.
	Paused time.Duration
	Pauses int64
}

// Stats returns a snapshot of b.
func (b *Background) Stats() BackgroundStats {
	if b == nil {
		return BackgroundStats{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return BackgroundStats{Serving: b.serving, Running: len(b.slots), Waiting: b.waiting, Pausing: b.pausing, Paused: b.paused, Pauses: b.pauses}
}
