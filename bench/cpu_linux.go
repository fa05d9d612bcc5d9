package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// cpuSetBits is CPU_SETSIZE, the CPUs a unix.CPUSet can name.
const cpuSetBits = 1024

// atClockTick is AT_CLKTCK in the ELF auxiliary vector: the kernel's
// USER_HZ, the unit of utime and stime in /proc stat.
const atClockTick = 17

// clockTicks is USER_HZ as the kernel passed it to this process.
func clockTicks() int64 {
	vec, err := unix.Auxv()
	if err != nil {
		return defaultClockTicks
	}
	for _, kv := range vec {
		if kv[0] == atClockTick && kv[1] > 0 {
			return int64(kv[1])
		}
	}
	return defaultClockTicks
}

// selfCPU is the user and system time this process has used, all its
// threads, its children not included.
func selfCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// choosePins picks two CPUs from those this process may run on: the first
// for the receivers, the second for the load generator. It fails with fewer
// than two.
func choosePins() (pinning, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return pinning{}, fmt.Errorf("-pin: sched_getaffinity: %w", err)
	}
	var cpus []int
	for cpu := 0; cpu < cpuSetBits && len(cpus) < 2; cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	if len(cpus) < 2 {
		return pinning{}, fmt.Errorf("-pin: needs two CPUs, this process may run on %d", set.Count())
	}
	return pinning{receiver: cpus[0], load: cpus[1]}, nil
}

// pinSelf confines every thread of this process to cpu and sets GOMAXPROCS
// to 1, as the Go runtime would for a process started on one CPU.
func pinSelf(cpu int) error {
	if err := pinThreads(os.Getpid(), cpu); err != nil {
		return err
	}
	runtime.GOMAXPROCS(1)
	return nil
}

// pinThreads confines every thread of pid to cpu. sched_setaffinity acts on
// one thread, and a thread starts with the mask of the thread that created
// it, so the threads are pinned pass after pass until a pass finds nothing
// left to change.
func pinThreads(pid, cpu int) error {
	var want unix.CPUSet
	want.Set(cpu)
	for range 20 {
		tids, err := threads(pid)
		if err != nil {
			return err
		}
		changed := false
		for _, tid := range tids {
			var got unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &got); err != nil {
				continue // the thread has exited
			}
			if got == want {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &want); err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue
				}
				return fmt.Errorf("pin thread %d to CPU %d: %w", tid, cpu, err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return fmt.Errorf("pin %d to CPU %d: its threads kept changing", pid, cpu)
}

// allowedCPUs lists the CPUs any thread of pid may run on.
func allowedCPUs(pid int) ([]int, error) {
	tids, err := threads(pid)
	if err != nil {
		return nil, err
	}
	var cpus []int
	for _, tid := range tids {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			continue
		}
		for cpu := 0; cpu < cpuSetBits; cpu++ {
			if set.IsSet(cpu) {
				cpus = append(cpus, cpu)
			}
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("affinity of %d: no thread could be read", pid)
	}
	return unionCPUs(cpus), nil
}

// threads lists the thread ids of pid.
func threads(pid int) ([]int, error) {
	dirs, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil || len(dirs) == 0 {
		return nil, fmt.Errorf("list threads of %d: no /proc/%d/task", pid, pid)
	}
	tids := make([]int, 0, len(dirs))
	for _, d := range dirs {
		if tid, err := strconv.Atoi(filepath.Base(d)); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// startOnCPU starts cmd confined to cpu from its first instruction: the
// child inherits the mask of the thread that forks it, so this goroutine
// holds its thread, narrows the thread's mask for the fork, and restores
// it. The Go runtime in the child then sees one CPU, as under taskset.
func startOnCPU(cmd *exec.Cmd, cpu int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var saved, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &saved); err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	startErr := cmd.Start()
	if err := unix.SchedSetaffinity(0, &saved); err != nil {
		// The run ends here: this thread, left on the receiver's CPU,
		// would carry load onto it.
		if startErr == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		return fmt.Errorf("restore affinity: %w", err)
	}
	return startErr
}
