package clustertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one process of the cluster that the test started and may kill,
// stop, continue and restart. Every signal goes to the pid the test
// started, never to a name or a group.
type proc struct {
	name    string // node0, etcd1, gateway, ...
	kind    string // node, etcd, gateway
	argv    []string
	env     []string
	logPath string
	// ready reports whether a started process serves; start polls it.
	ready func(ctx context.Context) error

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when cmd has exited
	stopped  bool          // SIGSTOPped and not yet continued
	expected bool          // the test asked for the exit it is about to see
	starts   int
	// unexpected records exits the test did not cause: a process that
	// dies by itself is a finding.
	unexpected []string
}

// start runs the process and waits until ready says it serves, or
// timeout. Output is appended to the process's log file.
func (p *proc) start(timeout time.Duration) error {
	p.mu.Lock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			p.mu.Unlock()
			return fmt.Errorf("%s: already running as pid %d", p.name, p.cmd.Process.Pid)
		}
	}
	p.starts++
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	fmt.Fprintf(log, "=== clustertest: start %d of %s at %s\n", p.starts, p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		p.mu.Unlock()
		return fmt.Errorf("%s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.stopped, p.expected = cmd, done, false, false
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(log, "=== clustertest: %s pid %d exited at %s: %v\n", p.name, cmd.Process.Pid, time.Now().Format(time.RFC3339Nano), err)
		log.Close()
		p.mu.Lock()
		if !p.expected {
			p.unexpected = append(p.unexpected, fmt.Sprintf("pid %d exited by itself: %v", cmd.Process.Pid, err))
		}
		p.mu.Unlock()
		close(done)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		select {
		case <-done:
			return fmt.Errorf("%s exited while starting; log tail:\n%s", p.name, tail(p.logPath, 30))
		default:
		}
		if last = p.ready(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v: %v; log tail:\n%s", p.name, timeout, last, tail(p.logPath, 30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pid is the running process's id, 0 when it is not running.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// signal sends sig to the process the test started; it reports false when
// that process is not running.
func (p *proc) signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		p.expected = true
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return false
	}
	switch sig {
	case syscall.SIGSTOP:
		p.stopped = true
	case syscall.SIGCONT:
		p.stopped = false
	}
	return true
}

// kill SIGKILLs the process and waits for it to be gone.
func (p *proc) kill() {
	if p.signal(syscall.SIGKILL) {
		<-p.doneCh()
	}
}

// stop SIGSTOPs the process; cont resumes it.
func (p *proc) stop() bool { return p.signal(syscall.SIGSTOP) }
func (p *proc) cont() bool { return p.signal(syscall.SIGCONT) }

func (p *proc) doneCh() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// running reports whether the process is alive and not stopped.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.stopped {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// shutdown continues a stopped process, asks it to exit (SIGTERM) and
// kills it if it has not after grace.
func (p *proc) shutdown(grace time.Duration) {
	if p.pid() == 0 {
		return
	}
	p.cont()
	p.signal(syscall.SIGTERM)
	select {
	case <-p.doneCh():
	case <-time.After(grace):
		p.kill()
	}
}

// unexpectedExits returns the exits the test did not cause.
func (p *proc) unexpectedExits() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.unexpected...)
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freeAddr returns a loopback address nothing listens on now. A process
// restarted after a fault binds the same address again.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// dialReady is a readiness probe for a process that serves TCP on addr.
func dialReady(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// lookBin finds an executable on PATH or in $GOPATH/bin (where go install
// puts it).
func lookBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		return "", err
	}
	for _, dir := range filepath.SplitList(strings.TrimSpace(string(gopath))) {
		p := filepath.Join(dir, "bin", name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", errors.New(name + " is neither on PATH nor in $(go env GOPATH)/bin")
}
