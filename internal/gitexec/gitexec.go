// Package gitexec runs the git binary for ghost's cache and transport.
//
// Every git process ghost starts goes through a Runner so that all of them
// get the same hygiene: the caller's context (cancellation kills the
// process), a sanitized environment (no inherited GIT_* variables, no
// system or user config, no prompts, C locale so messages are stable), and
// stderr captured into the returned error instead of being lost.
package gitexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ghost-scm/ghost/internal/ids"
)

// Runner starts git processes. The zero value runs "git" from PATH.
type Runner struct {
	// Path is the git binary; empty means "git" looked up in PATH.
	Path string
	// bg, when set, makes every process background work
	// (Background.Runner).
	bg *Background
	// HostConfig lets the system and global git configuration apply, for
	// a command a user runs on their own repositories (ghost scan: a
	// safe.directory of theirs must hold). The server never sets it.
	// Replace refs are ignored and inherited GIT_* variables dropped all
	// the same.
	HostConfig bool
}

// maxStderr bounds how much of a process's stderr is kept for errors: the
// tail is what explains a failure.
const maxStderr = 32 << 10

// Error reports a git process that failed, with what it said.
type Error struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		return fmt.Sprintf("git %s: %v", strings.Join(e.Args, " "), e.Err)
	}
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.Args, " "), e.Err, msg)
}

func (e *Error) Unwrap() error { return e.Err }

// ExitCode is the exit status of a git process that ran and failed (err
// from Run, Wait or Output, wrapped or not), or -1 when err is nil or
// not an exit: callers branch on git's documented statuses (merge-base
// --is-ancestor's 1, merge-tree's 1 for conflicts) without importing
// os/exec themselves.
func ExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// Cmd is a prepared git process whose stderr is captured. Start, Run,
// Output and Wait are exec.Cmd's, except that a background runner's
// process waits for its turn before it starts and gives its slot back
// when it has been waited for (Background).
type Cmd struct {
	*exec.Cmd
	args    []string
	stderr  *TailBuffer
	ctx     context.Context
	bg      *Background
	release func()
}

// Start starts the process (through Background.Start for a background
// runner's).
func (c *Cmd) Start() error {
	if c.bg == nil {
		return c.Cmd.Start()
	}
	release, err := c.bg.Start(c.ctx, c.Cmd)
	if err != nil {
		return err
	}
	c.release = release
	return nil
}

// Wait waits for the process and frees its background slot.
func (c *Cmd) Wait() error {
	err := c.Cmd.Wait()
	if c.release != nil {
		c.release()
	}
	return err
}

// Run starts the process and waits for it.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Output runs the process and returns its stdout.
func (c *Cmd) Output() ([]byte, error) {
	if c.Stdout != nil {
		return nil, errors.New("gitexec: Stdout already set")
	}
	var out bytes.Buffer
	c.Stdout = &out
	err := c.Run()
	return out.Bytes(), err
}

// Command prepares git with args, run in dir (GIT_DIR is set to dir, so dir
// must be a bare repository or empty for commands that need none). env is
// added to the sanitized base environment.
func (r *Runner) Command(ctx context.Context, dir string, env []string, args ...string) *Cmd {
	path := r.Path
	if path == "" {
		path = "git"
	}
	c := exec.CommandContext(ctx, path, args...)
	c.Env = append(baseEnv(dir, r.HostConfig), env...)
	if dir != "" {
		c.Dir = dir
	}
	// On cancellation ask git to stop, then kill it; WaitDelay keeps Wait
	// from hanging on pipes held open by a grandchild (pack-objects).
	// Where the platform allows, git runs in a process group of its own
	// and the signal goes to the whole group, so that a client that
	// disconnects also stops upload-pack's pack-objects, which would
	// otherwise go on walking history (docs/adr/0015-git-resource-limits.md).
	c.Cancel = func() error { return c.Process.Signal(syscall.SIGTERM) }
	setProcessGroup(c)
	c.WaitDelay = 10 * time.Second
	tb := &TailBuffer{Max: maxStderr}
	c.Stderr = tb
	return &Cmd{Cmd: c, args: args, stderr: tb, ctx: ctx, bg: r.bg}
}

// Wrap turns a failure of the process into an *Error carrying its stderr.
// A nil err stays nil.
func (c *Cmd) Wrap(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Args: c.args, Stderr: c.stderr.String(), Err: err}
}

// StderrText returns what the process has written to stderr so far (its tail).
func (c *Cmd) StderrText() string { return c.stderr.String() }

// Run runs git to completion, feeding it stdin (may be nil), and returns
// its stdout. Use it only for commands whose output is small (ref lists,
// object names); stream anything else through Command.
func (r *Runner) Run(ctx context.Context, dir string, env []string, stdin io.Reader, args ...string) ([]byte, error) {
	c := r.Command(ctx, dir, env, args...)
	var out bytes.Buffer
	c.Stdin = stdin
	c.Stdout = &out
	if err := c.Run(); err != nil {
		if ctx.Err() != nil {
			err = errors.Join(ctx.Err(), err)
		}
		return out.Bytes(), c.Wrap(err)
	}
	return out.Bytes(), nil
}

// baseEnv is the process environment without any GIT_* variable, plus
// settings that make git independent of the host's configuration (unless
// hostConfig) and of replace refs.
func baseEnv(dir string, hostConfig bool) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GIT_") || strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG=") {
			continue
		}
		env = append(env, kv)
	}
	if !hostConfig {
		env = append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	}
	env = append(env,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_NO_REPLACE_OBJECTS=1",
		"LC_ALL=C",
	)
	if dir != "" {
		env = append(env, "GIT_DIR="+dir)
	}
	return env
}

// TailBuffer is an io.Writer that keeps only the last Max bytes written.
// It is safe for concurrent use.
type TailBuffer struct {
	Max int
	mu  sync.Mutex
	b   []byte
}

func (t *TailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.Max; t.Max > 0 && over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String returns the retained bytes.
func (t *TailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// ParsePackName reads git index-pack's "pack\t<hash>" (or "keep\t<hash>")
// output line and returns the pack's hash.
func ParsePackName(out string) (string, error) {
	line := strings.TrimSpace(out)
	_, h, ok := strings.Cut(line, "\t")
	if !ok || !ids.IsObjectID(h) {
		return "", fmt.Errorf("unexpected index-pack output %q", line)
	}
	return h, nil
}
