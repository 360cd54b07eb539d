//go:build !unix

package gitexec

import "os/exec"

// setProcessGroup is a no-op where process groups are not available:
// cancellation then signals git itself only.
func setProcessGroup(c *exec.Cmd) {}
