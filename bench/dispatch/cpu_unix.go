//go:build unix

package main

import (
	"syscall"
	"time"
)

// selfCPU is the user and system time this process has used, all its
// threads; ok is false when the system cannot tell.
func selfCPU() (cpu time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
