package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"
)

// helperEnv makes the test binary, run again, into a process of several
// threads that waits to be killed: what a receiver looks like to pinning.
const helperEnv = "BENCH_TEST_THREADS_HELPER"

func TestThreadsHelper(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("run by the pinning tests")
	}
	for range 4 {
		go func() {
			runtime.LockOSThread() // a thread of its own, never given back
			select {}
		}()
	}
	for {
		if tids, err := threads(os.Getpid()); err == nil && len(tids) >= 5 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Println("ready")
	time.Sleep(time.Minute)
}

// startThreads starts the helper, pinned to cpu when cpu >= 0, waits until
// its threads are up, and kills it when the test ends.
func startThreads(t *testing.T, cpu int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestThreadsHelper$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if cpu >= 0 {
		err = startOnCPU(cmd, cpu)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	return cmd
}

func needPins(t *testing.T) pinning {
	t.Helper()
	p, err := choosePins()
	if err != nil {
		t.Skip(err)
	}
	if p.receiver == p.load {
		t.Fatalf("choosePins = %+v: the same CPU twice", p)
	}
	return p
}

// TestStartOnCPU: a child started on a CPU is held to it from the start,
// and the bench's own threads keep the CPUs they had.
func TestStartOnCPU(t *testing.T) {
	p := needPins(t)
	before, err := allowedCPUs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, cpu := range []int{p.receiver, p.load} {
		cmd := startThreads(t, cpu)
		got, err := allowedCPUs(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		tids, _ := threads(cmd.Process.Pid)
		t.Logf("child started on CPU %d: %d threads, may run on %s", cpu, len(tids), formatCPUs(got))
		if !slices.Equal(got, []int{cpu}) {
			t.Errorf("child may run on %v, want [%d]", got, cpu)
		}
	}
	after, err := allowedCPUs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after, before) {
		t.Errorf("the test's threads may run on %v after starting children, %v before", after, before)
	}
}

// TestPinThreads pins a process that is already running, every thread.
func TestPinThreads(t *testing.T) {
	p := needPins(t)
	cmd := startThreads(t, -1)
	if err := pinThreads(cmd.Process.Pid, p.load); err != nil {
		t.Fatal(err)
	}
	got, err := allowedCPUs(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{p.load}) {
		t.Errorf("pinned to %d, may run on %v", p.load, got)
	}
	if err := pinThreads(cmd.Process.Pid, 1023); err == nil {
		t.Error("pinned to CPU 1023, which this machine does not have: no error")
	}
}
