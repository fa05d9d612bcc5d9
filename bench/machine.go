package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// describeMachine names what the numbers were measured on.
func describeMachine() string {
	cpu := procField("/proc/cpuinfo", "model name")
	if cpu == "" {
		cpu = "unknown CPU"
	}
	s := fmt.Sprintf("%d CPUs (%s), %s/%s, %s", runtime.NumCPU(), cpu, runtime.GOOS, runtime.GOARCH, runtime.Version())
	if kernel, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		s += ", kernel " + strings.TrimSpace(string(kernel))
	}
	if mem := procField("/proc/meminfo", "MemTotal"); mem != "" {
		s += ", " + mem + " RAM"
	}
	return s
}

// procField returns the value of the first "key: value" line in a /proc
// file, or "" when there is none.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// fsyncProbes is how many appends the fsync probe times.
const fsyncProbes = 100

// describeFsync times appends of 4 KiB, each followed by fsync, in dir,
// where the databases live: every commit with synchronous=FULL pays at
// least one of these, so it is the floor under commit-each's latency.
func describeFsync(dir string) string {
	f, err := os.Create(filepath.Join(dir, "fsync-probe"))
	if err != nil {
		return fmt.Sprintf("not measured: %v", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := make([]byte, 4096)
	times := make([]time.Duration, 0, fsyncProbes)
	for range fsyncProbes {
		start := time.Now()
		if _, err := f.Write(page); err != nil {
			return fmt.Sprintf("not measured: %v", err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Sprintf("not measured: %v", err)
		}
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	return fmt.Sprintf("p50 %s, p99 %s (%d appends of 4 KiB, each then fsync, in %s)",
		ms(times[len(times)/2]), ms(times[len(times)*99/100]), fsyncProbes, os.TempDir())
}

// ms formats a latency in milliseconds to 0.01 ms.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// loadAvg is the 1-minute load average (/proc/loadavg), "?" where there is
// none: how busy the machine was around a run.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
