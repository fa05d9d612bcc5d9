package main

import (
	"errors"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// statLine builds a stat line as proc(5) lays it out, with comm, utime,
// stime and processor set and every other field a small number.
func statLine(comm string, utime, stime, processor string) string {
	f := make([]string, 52)
	for i := range f {
		f[i] = "7"
	}
	f[0], f[1], f[2] = "4242", "("+comm+")", "S"
	f[statUtime-1], f[statStime-1], f[statProcessor-1] = utime, stime, processor
	return strings.Join(f, " ") + "\n"
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name    string
		line    string
		want    procStat
		wantErr bool
	}{
		{name: "plain", line: statLine("inbox", "1234", "567", "1"), want: procStat{utime: 1234, stime: 567, processor: 1}},
		// A command may hold spaces and ')': counting fields from the first
		// ')' or by spaces would read the wrong ones.
		{name: "spaces and parens in comm", line: statLine("a) 9 9 (b c", "10", "20", "3"), want: procStat{utime: 10, stime: 20, processor: 3}},
		{name: "empty comm", line: statLine("", "0", "0", "0"), want: procStat{}},
		{name: "cut short", line: strings.Join(strings.Fields(statLine("x", "1", "2", "0"))[:20], " "), wantErr: true},
		{name: "utime not a number", line: statLine("x", "-1", "2", "0"), wantErr: true},
		{name: "stime not a number", line: statLine("x", "1", "2.5", "0"), wantErr: true},
		{name: "no parens", line: "4242 inbox S 1 2 3", wantErr: true},
		{name: "empty", line: "", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.line))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parseStat = %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("parseStat = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestReadStatSelf reads this test's own /proc stat: the layout parseStat
// expects is the kernel's, and the CPU time it gives agrees with getrusage.
func TestReadStatSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	// Burn 300 ms of CPU (not of wall time, which a busy machine
	// stretches) so both clocks have something to count.
	start, err := selfCPU()
	if err != nil {
		t.Fatal(err)
	}
	for giveUp := time.Now().Add(30 * time.Second); time.Now().Before(giveUp); {
		if now, err := selfCPU(); err != nil || now-start >= 300*time.Millisecond {
			break
		}
	}
	s, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	ru, err := selfCPU()
	if err != nil {
		t.Fatal(err)
	}
	fromStat := s.cpuTime(clockTicks())
	t.Logf("CPU time from /proc/self/stat %s, from getrusage %s, on CPU %d, USER_HZ %d", fromStat, ru, s.processor, clockTicks())
	// stat counts in ticks (10 ms at USER_HZ 100) and is read first.
	if fromStat < 250*time.Millisecond || fromStat > ru+50*time.Millisecond {
		t.Errorf("stat says %s, getrusage %s: want at least 250ms and within a tick or so of getrusage", fromStat, ru)
	}
	if s.processor < 0 || s.processor >= 1024 {
		t.Errorf("processor %d out of range", s.processor)
	}
	threads, err := threadStats(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(threads) < 2 {
		t.Errorf("%d threads in a Go test process, want several", len(threads))
	}
}

func TestCPUTime(t *testing.T) {
	for _, tc := range []struct {
		s    procStat
		hz   int64
		want time.Duration
	}{
		{procStat{utime: 12345, stime: 5}, 100, 123*time.Second + 500*time.Millisecond},
		{procStat{utime: 1, stime: 0}, 100, 10 * time.Millisecond},
		{procStat{utime: 3, stime: 0}, 1024, 3 * time.Second / 1024},
		{procStat{utime: 250, stime: 250}, 250, 2 * time.Second},
		{procStat{}, 100, 0},
	} {
		if got := tc.s.cpuTime(tc.hz); got != tc.want {
			t.Errorf("%+v at %d Hz = %s, want %s", tc.s, tc.hz, got, tc.want)
		}
	}
}

func TestPerDelivery(t *testing.T) {
	for _, tc := range []struct {
		cpu       time.Duration
		delivered int64
		want      time.Duration
		ok        bool
	}{
		// The figures: 125 µs and 28 µs a delivery.
		{time.Second, 8000, 125 * time.Microsecond, true},
		{2520 * time.Millisecond, 90000, 28 * time.Microsecond, true},
		{0, 10, 0, true},
		{time.Second, 0, 0, false}, // nothing delivered is not free
		{time.Second, -1, 0, false},
	} {
		got, ok := perDelivery(tc.cpu, tc.delivered)
		if got != tc.want || ok != tc.ok {
			t.Errorf("perDelivery(%s, %d) = %s, %v, want %s, %v", tc.cpu, tc.delivered, got, ok, tc.want, tc.ok)
		}
	}
}

func TestCPUBetween(t *testing.T) {
	t0 := time.Now()
	from := cpuReading{at: t0, receiver: 3 * time.Second, load: time.Second,
		receiverThreads: map[int]procStat{10: {utime: 5, processor: 0}, 11: {utime: 9, processor: 1}},
		loadThreads:     map[int]procStat{20: {stime: 1, processor: 0}}}
	to := cpuReading{at: t0.Add(2 * time.Second), receiver: 4500 * time.Millisecond, load: 1600 * time.Millisecond,
		// 10 ran (on 0); 11 was idle, its last CPU 1 is from before; 12 is new and ran on 0.
		receiverThreads: map[int]procStat{10: {utime: 7, processor: 0}, 11: {utime: 9, processor: 1}, 12: {stime: 1, processor: 0}},
		loadThreads:     map[int]procStat{20: {stime: 2, processor: 1}}}
	w, err := cpuBetween(from, to, 12000)
	if err != nil {
		t.Fatal(err)
	}
	if w.wall != 2*time.Second || w.receiver != 1500*time.Millisecond || w.load != 600*time.Millisecond || w.delivered != 12000 {
		t.Errorf("window = %+v, want 2s wall, 1.5s receiver, 600ms load, 12000 delivered", w)
	}
	if !slices.Equal(w.receiverOn, []int{0}) || !slices.Equal(w.loadOn, []int{1}) {
		t.Errorf("ran on %v and %v, want [0] and [1]", w.receiverOn, w.loadOn)
	}
	if got, _ := perDelivery(w.receiver, w.delivered); got != 125*time.Microsecond {
		t.Errorf("receiver per delivery %s, want 125µs", got)
	}
	if got := cores(w.receiver, w.wall); got != 0.75 {
		t.Errorf("cores %v, want 0.75", got)
	}

	failed := errors.New("gone")
	if _, err := cpuBetween(from, cpuReading{err: failed}, 1); !errors.Is(err, failed) {
		t.Errorf("failed later reading: err %v, want %v", err, failed)
	}
	if _, err := cpuBetween(cpuReading{err: failed}, to, 1); !errors.Is(err, failed) {
		t.Errorf("failed earlier reading: err %v, want %v", err, failed)
	}
	if _, err := cpuBetween(to, from, 1); err == nil {
		t.Error("readings in the wrong order: no error")
	}
}

func TestFormatCPUs(t *testing.T) {
	if got := formatCPUs(unionCPUs([]int{3, 1}, []int{1, 0})); got != "0,1,3" {
		t.Errorf("got %q, want 0,1,3", got)
	}
	if got := formatCPUs(nil); got != "?" {
		t.Errorf("got %q, want ?", got)
	}
}
