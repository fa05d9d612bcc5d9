//go:build !linux

package main

import (
	"errors"
	"os/exec"
	"time"
)

// errNeedsLinux: CPU time per process and CPU affinity are read and set
// through Linux interfaces.
var errNeedsLinux = errors.New("needs Linux")

func clockTicks() int64 { return defaultClockTicks }

func selfCPU() (time.Duration, error) { return 0, errNeedsLinux }

func choosePins() (pinning, error) {
	return pinning{}, errors.New("-pin: needs Linux (sched_setaffinity)")
}

func pinSelf(cpu int) error { return errNeedsLinux }

func pinThreads(pid, cpu int) error { return errNeedsLinux }

func allowedCPUs(pid int) ([]int, error) { return nil, errNeedsLinux }

func startOnCPU(cmd *exec.Cmd, cpu int) error { return errNeedsLinux }
