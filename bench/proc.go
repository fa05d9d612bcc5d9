package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// How long a receiver gets to start listening, and to exit after SIGTERM
// (inbox lets requests in flight finish first) before it is killed.
const (
	startTimeout = 30 * time.Second
	stopTimeout  = 10 * time.Second
)

// child is a receiver process.
type child struct {
	name string
	cmd  *exec.Cmd
	out  *tail
	done chan struct{} // closed once the process has exited
	err  error         // how it exited; read only after done
}

// startChild starts argv with env and keeps the end of its output. With
// cpu at 0 or more the process runs on that CPU alone.
func startChild(name string, argv, env []string, cpu int) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	c := &child{name: name, cmd: cmd, out: &tail{max: 16 << 10}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	// If the bench itself is killed, its receivers must not outlive it.
	cmd.SysProcAttr = dieWithParent()
	start := cmd.Start
	if cpu >= 0 {
		start = func() error { return startOnCPU(cmd, cpu) }
	}
	if err := start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// waitListening returns once addr accepts a connection. It fails when the
// process exits first or does not listen within startTimeout. Polling the
// port works for every receiver alike: inbox at --log-level warn does not
// log its address.
func (c *child) waitListening(ctx context.Context, addr string) error {
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-c.done:
			return c.exitError()
		case <-deadline.C:
			return fmt.Errorf("%s did not listen on %s within %s:\n%s", c.name, addr, startTimeout, c.out)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// exitError describes an exit that nobody asked for.
func (c *child) exitError() error {
	return fmt.Errorf("%s exited (%v):\n%s", c.name, c.err, c.out)
}

// stop asks the process to exit, kills it after stopTimeout, and waits.
func (c *child) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(stopTimeout):
		c.cmd.Process.Kill()
		<-c.done
	}
}

// memory is what /proc says about a process's resident set, in bytes.
type memory struct {
	rss  int64 // VmRSS: now
	peak int64 // VmHWM: the high-water mark over the process's life
}

// readMemory reads VmRSS and VmHWM from /proc/<pid>/status. It fails where
// there is no /proc (peak RSS is measured on Linux only).
func readMemory(pid int) (memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, fmt.Errorf("read memory: %w", err)
	}
	defer f.Close()
	var m memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return memory{}, fmt.Errorf("read memory: %s: %w", key, err)
		}
		if key == "VmRSS" {
			m.rss = kb << 10
		} else {
			m.peak = kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		return memory{}, fmt.Errorf("read memory: %w", err)
	}
	if m.rss == 0 || m.peak == 0 {
		return memory{}, errors.New("read memory: no VmRSS or VmHWM in /proc status")
	}
	return m, nil
}

// rssSample is the resident set at some time into the run.
type rssSample struct {
	at  time.Duration
	rss int64
}

// sampleRSS records the RSS of pids, summed, once a second until ctx is
// done, then returns the samples. A failed read ends the sampling early
// (a process is gone, or there is no /proc).
func sampleRSS(ctx context.Context, start time.Time, pids ...int) []rssSample {
	var samples []rssSample
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		m, err := readMemories(pids)
		if err != nil {
			return samples
		}
		samples = append(samples, rssSample{at: time.Since(start), rss: m.rss})
		select {
		case <-ctx.Done():
			return samples
		case <-tick.C:
		}
	}
}

// readMemories sums the memory of pids: for replicas, what they take
// together (their peaks summed, an upper bound on their joint peak).
func readMemories(pids []int) (memory, error) {
	var sum memory
	for _, pid := range pids {
		m, err := readMemory(pid)
		if err != nil {
			return memory{}, err
		}
		sum.rss += m.rss
		sum.peak += m.peak
	}
	return sum, nil
}

// freeAddr returns a loopback address with a port that was free a moment
// ago. Another process could take it before the receiver does; the
// receiver then fails to start and the run stops with its message.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// tail keeps the last max bytes written to it: enough of a receiver's
// output to explain a failure, without growing over a long run.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
