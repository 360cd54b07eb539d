//go:build unix

package pushprotect

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time used so far by this process and the children
// it has waited for (the git processes): unlike wall time, it does not
// grow when other jobs load a shared machine.
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(children.Utime) + tv(children.Stime)
}
