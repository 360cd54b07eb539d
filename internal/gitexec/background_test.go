package gitexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPauseWaitsForServing: Pause returns at once when nothing is
// served, waits for a request in progress to finish, gives up after
// MaxPause, and stops when its context ends.
func TestPauseWaitsForServing(t *testing.T) {
	ctx := context.Background()
	b := NewBackground(BackgroundOptions{MaxPause: time.Hour})
	if err := b.Pause(ctx); err != nil || b.Stats().Pauses != 0 {
		t.Fatalf("idle: %v, %+v", err, b.Stats())
	}
	done := b.Serving()
	b.Serving()() // a second request, already over
	paused := make(chan error, 1)
	go func() { paused <- b.Pause(ctx) }()
	select {
	case err := <-paused:
		t.Fatalf("Pause returned while a request was served: %v", err)
	case <-time.After(50 * time.Millisecond): // not a timed assertion: it must not return at all
	}
	done()
	done() // idempotent
	if err := <-paused; err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); s.Serving != 0 || s.Pauses != 1 {
		t.Fatalf("stats %+v", s)
	}

	short := NewBackground(BackgroundOptions{MaxPause: 10 * time.Millisecond})
	defer short.Serving()()
	if err := short.Pause(ctx); err != nil {
		t.Fatalf("a pause that ran out: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Pause(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled idle pause: %v", err)
	}
	defer b.Serving()()
	if err := b.Pause(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pause: %v", err)
	}
	off := NewBackground(BackgroundOptions{MaxPause: -1})
	defer off.Serving()()
	if err := off.Pause(ctx); err != nil || off.Stats().Pauses != 0 {
		t.Fatal("a Background without pauses paused")
	}
}

// TestBackgroundBudget: with one slot, a second background git process
// starts only once the first has been waited for, and a start waiting
// for a slot gives up with its context.
func TestBackgroundBudget(t *testing.T) {
	ctx := context.Background()
	b := NewBackground(BackgroundOptions{Processes: 1, MaxPause: -1})
	r := b.Runner(&Runner{})
	first := r.Command(ctx, "", nil, "hash-object", "--stdin")
	stdin, err := first.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	first.Stdout = io.Discard
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, "", nil, strings.NewReader("x"), "hash-object", "--stdin")
		started <- err
	}()
	for b.Stats().Waiting != 1 {
		runtime.Gosched()
	}
	if s := b.Stats(); s.Running != 1 {
		t.Fatalf("stats %+v", s)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Run(cctx, "", nil, nil, "version"); !errors.Is(err, context.Canceled) {
		t.Fatalf("start without a slot after its context ended: %v", err)
	}
	stdin.Close()
	if err := first.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); s.Running != 0 || s.Waiting != 0 {
		t.Fatalf("slots not returned: %+v", s)
	}
	// Output and a failed start give their slot back too.
	if _, err := r.Command(ctx, "", nil, "version").Output(); err != nil {
		t.Fatal(err)
	}
	bad := b.Runner(&Runner{Path: "/nonexistent/git"})
	if err := bad.Command(ctx, "", nil, "version").Run(); err == nil {
		t.Fatal("a missing binary started")
	}
	if s := b.Stats(); s.Running != 0 {
		t.Fatalf("slots not returned: %+v", s)
	}
}

// niceOfPid reads a process's niceness from /proc (field 19 of stat).
func niceOfPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	n, err := strconv.Atoi(f[16]) // field 19 counts from 1 and includes pid and comm
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBackgroundPriority: a background git process runs Nice lower than
// this process, a foreground one does not, and LowerThread lowers only
// the thread of the goroutine that calls it.
func TestBackgroundPriority(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("priorities are set on Linux only")
	}
	ctx := context.Background()
	own := niceOfPid(t, "/proc/self/stat")
	if own+3 > 19 {
		t.Skipf("this process already runs at nice %d", own)
	}
	b := NewBackground(BackgroundOptions{Nice: 3, MaxPause: -1})
	for _, tc := range []struct {
		r    *Runner
		want int
	}{{&Runner{}, own}, {b.Runner(&Runner{}), own + 3}} {
		cmd := tc.r.Command(ctx, "", nil, "hash-object", "--stdin")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		got := niceOfPid(t, fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Fatalf("git runs at nice %d, want %d", got, tc.want)
		}
	}
	// A plain exec.Cmd (the secret scanner's) through Start.
	cmd := exec.Command("git", "hash-object", "--stdin")
	stdin, _ := cmd.StdinPipe()
	release, err := b.Start(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	got := niceOfPid(t, fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	stdin.Close()
	cmd.Wait()
	release()
	if got != own+3 {
		t.Fatalf("exec.Cmd through Start runs at nice %d, want %d", got, own+3)
	}

	// LowerThread lowers the thread it runs on. The goroutine holds its
	// thread and ends without unlocking it, so the lowered thread exits
	// with it; one that lands on the main thread (whose nice is the
	// process's in /proc/self/stat) holds it until the test ends and
	// another goroutine tries.
	type niceness struct {
		thread, process int
		main            bool
	}
	ch := make(chan niceness)
	held := make(chan struct{})
	defer close(held)
	var n niceness
	for try := 0; ; try++ {
		go func() {
			runtime.LockOSThread()
			if gettid() == os.Getpid() {
				ch <- niceness{main: true}
				<-held
				runtime.UnlockOSThread()
				return
			}
			b.LowerThread()
			ch <- niceness{thread: niceOfPid(t, fmt.Sprintf("/proc/self/task/%d/stat", gettid())), process: niceOfPid(t, "/proc/self/stat")}
		}()
		if n = <-ch; !n.main {
			break
		}
		if try == 10 {
			t.Fatal("every goroutine ran on the main thread")
		}
	}
	if n.thread != own+3 || n.process != own {
		t.Fatalf("after LowerThread: thread at nice %d, process at %d; want %d and %d", n.thread, n.process, own+3, own)
	}
}

// TestLowerProcess runs a child of this test binary that lowers itself
// and then starts a new thread: every thread, the new one too, runs at
// the lower priority.
func TestLowerProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("priorities are set on Linux only")
	}
	if os.Getenv("GHOST_GITEXEC_LOWER_CHILD") == "1" {
		return
	}
	own := niceOfPid(t, "/proc/self/stat")
	if own+4 > 19 {
		t.Skipf("this process already runs at nice %d", own)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLowerProcessChild$")
	cmd.Env = append(os.Environ(), "GHOST_GITEXEC_LOWER_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("threads at nice %d", own+4); !strings.Contains(string(out), want) {
		t.Fatalf("child says %q, want %q", out, want)
	}
}

// TestLowerProcessChild is TestLowerProcess's child.
func TestLowerProcessChild(t *testing.T) {
	if os.Getenv("GHOST_GITEXEC_LOWER_CHILD") != "1" {
		t.Skip("run by TestLowerProcess")
	}
	if err := LowerProcess(4); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // a thread of its own, made after the call
		<-done
	}()
	defer close(done)
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, e := range ents {
		seen[niceOfPid(t, "/proc/self/task/"+e.Name()+"/stat")] = true
	}
	if len(seen) != 1 {
		t.Fatalf("threads at different priorities: %v", seen)
	}
	for n := range seen {
		fmt.Printf("threads at nice %d\n", n)
	}
}
