//go:build unix

package main

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used so far, user and system; ok is false where
// it cannot be read.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// flushDisk asks the kernel to write every dirty page out and waits for it (sync(2)).
func flushDisk() { syscall.Sync() }
