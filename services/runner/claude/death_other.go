//go:build !linux

package claude

import "syscall"

// stopWithParent does nothing where the system has no parent-death signal:
// a session outlives a killed runner until its turn ends.
func stopWithParent(*syscall.SysProcAttr) {}
