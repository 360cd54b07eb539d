//go:build unix

package gitexec

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts the command as the leader of a new process group
// and makes cancellation signal the whole group.
func setProcessGroup(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGTERM) }
}
