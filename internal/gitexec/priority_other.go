//go:build !linux

package gitexec

import "os/exec"

// Elsewhere background work keeps its budget and its pauses, and runs at
// the node's priority.

func lowerPriority(*exec.Cmd, int) {}

func lowerThread(int) {}

// LowerProcess does nothing where threads carry no priority of their
// own that ghost knows how to set.
func LowerProcess(int) error { return nil }

func gettid() int { return 0 }
