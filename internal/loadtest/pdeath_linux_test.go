//go:build linux

package loadtest

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill the child when the thread that
// started it goes, as when a timeout kills the test binary: a server a
// test started never outlives it. (A Go thread can also end while the
// binary runs, but only one locked to a goroutine that exits, which the
// tests that start servers do not do.)
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
