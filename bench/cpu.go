package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// procStat is what the bench reads from /proc/<pid>/stat or
// /proc/<pid>/task/<tid>/stat.
type procStat struct {
	utime, stime uint64 // clock ticks in user and kernel mode; for a process, all its threads, live and exited
	processor    int    // the CPU the task last ran on
}

// Field numbers in proc(5), counting from 1 at the pid.
const (
	statUtime     = 14
	statStime     = 15
	statProcessor = 39
)

// parseStat parses one stat line. The command name, field 2, is in
// parentheses and may itself hold spaces and parentheses, so the fields are
// counted from the last ')'. It fails on a line cut short or a field that is
// not a number.
func parseStat(line []byte) (procStat, error) {
	end := bytes.LastIndexByte(line, ')')
	if end < 0 || bytes.IndexByte(line, '(') < 0 {
		return procStat{}, errors.New("parse stat: no command name in parentheses")
	}
	// fields[0] is field 3, the state.
	fields := strings.Fields(string(line[end+1:]))
	field := func(n int) (uint64, error) {
		if n-3 >= len(fields) {
			return 0, fmt.Errorf("parse stat: %d fields, want at least %d", len(fields)+2, n)
		}
		v, err := strconv.ParseUint(fields[n-3], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse stat: field %d: %w", n, err)
		}
		return v, nil
	}
	var s procStat
	var err error
	if s.utime, err = field(statUtime); err != nil {
		return procStat{}, err
	}
	if s.stime, err = field(statStime); err != nil {
		return procStat{}, err
	}
	cpu, err := field(statProcessor)
	if err != nil {
		return procStat{}, err
	}
	s.processor = int(cpu)
	return s, nil
}

// cpuTime converts ticks of utime plus stime at hz ticks a second.
func (s procStat) cpuTime(hz int64) time.Duration {
	ticks := s.utime + s.stime
	return time.Duration(ticks/uint64(hz))*time.Second + time.Duration(ticks%uint64(hz))*time.Second/time.Duration(hz)
}

// readStat reads /proc/<pid>/stat. It fails once the process is gone, and
// where there is no /proc.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, fmt.Errorf("read cpu time: %w", err)
	}
	return parseStat(b)
}

// threadStats reads the stat of each of pid's threads, by thread id. A
// thread that exits while it is read is left out.
func threadStats(pid int) (map[int]procStat, error) {
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("list threads of %d: no /proc/%d/task", pid, pid)
	}
	stats := make(map[int]procStat, len(paths))
	for _, p := range paths {
		tid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s, err := parseStat(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		stats[tid] = s
	}
	return stats, nil
}

// ranOn lists the CPUs that threads which used CPU time between two
// readings of their stats were last on, at the later one. A thread idle in
// between is left out: where it last ran says nothing of the window.
func ranOn(from, to map[int]procStat) []int {
	var cpus []int
	for tid, s := range to {
		if s.utime+s.stime > from[tid].utime+from[tid].stime {
			cpus = append(cpus, s.processor)
		}
	}
	return unionCPUs(cpus)
}

// unionCPUs sorts the CPUs of any number of lists into one, each once.
func unionCPUs(lists ...[]int) []int {
	var all []int
	for _, l := range lists {
		all = append(all, l...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// formatCPUs prints a CPU list as "0" or "0,1"; "?" when unknown.
func formatCPUs(cpus []int) string {
	if len(cpus) == 0 {
		return "?"
	}
	parts := make([]string, len(cpus))
	for i, c := range cpus {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}

// defaultClockTicks is USER_HZ on every Linux most machines run, used when
// the auxiliary vector does not say.
const defaultClockTicks = 100

// cpuReading is the CPU time the receiver and the load generator (this
// process) had used at one moment, and their threads' stats.
type cpuReading struct {
	at                           time.Time
	receiver, load               time.Duration
	receiverThreads, loadThreads map[int]procStat // nil when they could not be read
	err                          error            // the first read that failed; the reading is then unusable
	// server is the CPU time of the PostgreSQL server's processes the run
	// makes work for, by pid: nil when the receiver has no server.
	server    map[int]time.Duration
	serverErr error // why server could not be read
}

// cpuMeter reads the CPU time of the receiver's processes (one, or each
// replica's) and of this one.
type cpuMeter struct {
	pids   []int
	hz     int64        // clock ticks a second in /proc stat
	server *serverMeter // the PostgreSQL server's processes, when the receiver uses one
}

func newCPUMeter(pids ...int) cpuMeter { return cpuMeter{pids: pids, hz: clockTicks()} }

// read takes one reading. The receiver's time is utime+stime from its
// processes' /proc stat, summed; this process's time comes from
// getrusage, in microseconds.
func (m cpuMeter) read() cpuReading {
	r := cpuReading{at: time.Now()}
	for _, pid := range m.pids {
		s, err := readStat(pid)
		if err != nil {
			r.err = err
			return r
		}
		r.receiver += s.cpuTime(m.hz)
	}
	var err error
	if r.load, err = selfCPU(); err != nil {
		r.err = err
		return r
	}
	// Where threads ran is only reported, so a failed read leaves it
	// unknown. Thread ids are unique across processes.
	for _, pid := range m.pids {
		ts, err := threadStats(pid)
		if err != nil {
			r.receiverThreads = nil
			break
		}
		if r.receiverThreads == nil {
			r.receiverThreads = map[int]procStat{}
		}
		maps.Copy(r.receiverThreads, ts)
	}
	r.loadThreads, _ = threadStats(os.Getpid())
	if m.server != nil {
		r.server, r.serverErr = m.server.read(context.Background())
	}
	return r
}

// cpuWindow is the CPU used between two readings, and the deliveries (204
// answers) that arrived between them.
type cpuWindow struct {
	wall               time.Duration
	receiver, load     time.Duration
	delivered          int64
	receiverOn, loadOn []int
	// server is the PostgreSQL server's CPU time on the run's behalf
	// (serverBetween); serverOK is false when the receiver has none or it
	// could not be read, serverErr then saying why (nil for none).
	server    time.Duration
	serverOK  bool
	serverErr error
}

// cpuBetween is the window from one reading to a later one. It fails when
// either reading failed or the counters went backwards (not the same
// process).
func cpuBetween(from, to cpuReading, delivered int64) (cpuWindow, error) {
	switch {
	case from.err != nil:
		return cpuWindow{}, from.err
	case to.err != nil:
		return cpuWindow{}, to.err
	case to.receiver < from.receiver || to.load < from.load || to.at.Before(from.at):
		return cpuWindow{}, errors.New("cpu time went backwards")
	}
	w := cpuWindow{
		wall:       to.at.Sub(from.at),
		receiver:   to.receiver - from.receiver,
		load:       to.load - from.load,
		delivered:  delivered,
		receiverOn: ranOn(from.receiverThreads, to.receiverThreads),
		loadOn:     ranOn(from.loadThreads, to.loadThreads),
	}
	switch {
	case from.serverErr != nil:
		w.serverErr = from.serverErr
	case to.serverErr != nil:
		w.serverErr = to.serverErr
	case from.server != nil && to.server != nil:
		w.server, w.serverOK = serverBetween(from.server, to.server), true
	}
	return w, nil
}

// perDelivery divides CPU time by the deliveries it served; false when
// there were none, so that nothing delivered never looks free.
func perDelivery(cpu time.Duration, delivered int64) (time.Duration, bool) {
	if delivered <= 0 {
		return 0, false
	}
	return cpu / time.Duration(delivered), true
}

// cores is the CPU time as a share of the wall time: 1.0 is one core busy
// throughout.
func cores(cpu, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return cpu.Seconds() / wall.Seconds()
}

// us formats a duration in microseconds to 0.1 µs.
func us(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}

// pinning is where -pin runs each side: every receiver on one CPU, the load
// generator on another.
type pinning struct{ receiver, load int }
