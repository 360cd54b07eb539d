//go:build linux

package gitexec

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// niceOf returns the niceness of a thread (tid 0: the calling one).
// Linux's getpriority returns 20 - nice, which glibc undoes and Go's
// syscall package does not.
func niceOf(tid int) int {
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil {
		return 0
	}
	return 20 - raw
}

// lowered is base + by, within the kernel's range.
func lowered(base, by int) int { return min(19, base+by) }

// lowerPriority raises the niceness of a started command by by, relative
// to the calling thread's: of its whole process group when it leads one
// (Runner's commands do, so that pack-objects children started before
// the call are included and later ones inherit), else of the process.
func lowerPriority(cmd *exec.Cmd, by int) {
	if by <= 0 || cmd.Process == nil {
		return
	}
	which := syscall.PRIO_PROCESS
	if a := cmd.SysProcAttr; a != nil && a.Setpgid && a.Pgid == 0 {
		which = syscall.PRIO_PGRP
	}
	// Best effort: a process that already exited has nothing to lower.
	_ = syscall.Setpriority(which, cmd.Process.Pid, lowered(niceOf(0), by))
}

// lowerThread raises the calling thread's niceness by by.
func lowerThread(by int) {
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), lowered(niceOf(0), by))
}

// LowerProcess raises the niceness of every thread of this process by
// by, for a process whose only work is background work (ghost worker,
// ghost gc). Linux keeps a niceness per thread and a new thread inherits
// its creator's, so after every existing thread is lowered, the threads
// the Go runtime starts later are too; two passes catch one started
// during the first.
func LowerProcess(by int) error {
	if by <= 0 {
		return nil
	}
	target := lowered(niceOf(0), by)
	for range 2 {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("lower priority: %w", err)
		}
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			// A thread that exited meanwhile is not an error.
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, target); err != nil && err != syscall.ESRCH {
				return fmt.Errorf("lower priority of thread %d: %w", tid, err)
			}
		}
	}
	return nil
}

// gettid is the calling thread's id.
func gettid() int { return syscall.Gettid() }
