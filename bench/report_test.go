package main

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fakeRun is a run that delivered n in 1 s of measurement at a latency of
// lat, its receiver using cpu over the window.
func fakeRun(name string, round int, n int64, lat, cpu time.Duration) result {
	h := newHistogram()
	for range n {
		h.add(lat)
	}
	return result{name: name, round: round, rows: -1, load: loadResult{
		hist: h, measured: time.Second, delivered: n, dials: 32,
		cpu: cpuWindow{wall: time.Second, receiver: cpu, load: cpu / 4, delivered: n, receiverOn: []int{0}, loadOn: []int{1}},
	}}
}

func TestReportCPUAndRepeats(t *testing.T) {
	cfg := config{conns: 32, rounds: 3, repeat: 0.5, allNew: true}
	var results []result
	// inbox: 125, 100, 150 µs a delivery against store-nothing's 25 µs:
	// 5x, 4x, 6x, median 5x. At 0.5 repeats against all new: 0.8, 0.9,
	// 0.7, median 0.8.
	for i, c := range []struct {
		inbox, allNew int64
		inboxCPU      time.Duration
	}{
		{8000, 10000, time.Second},
		{9000, 10000, 900 * time.Millisecond},
		{7000, 10000, 1050 * time.Millisecond},
	} {
		round := i + 1
		results = append(results,
			fakeRun(nameInbox, round, c.inbox, 2*time.Millisecond, c.inboxCPU),
			fakeRun(nameInboxAllNew, round, c.allNew, 3*time.Millisecond, time.Second),
			fakeRun(storeNothing, round, 40000, time.Millisecond, time.Second))
	}
	var out bytes.Buffer
	report(&out, cfg, results)
	t.Log("\n" + out.String())
	for _, want := range []string{
		`inbox #1 +125\.0 µs +- +- +31\.2 µs +1\.00 cores +0\.25 cores +8000 +0 +1`,
		`store-nothing #2 +25\.0 µs`,
		`CPU/delivery +125\.0 µs \[100\.0 µs to 150\.0 µs\]`,
		`CPU/delivery vs store-nothing +5\.00x \[4\.00x to 6\.00x\]`,
		`at 50% repeats vs all new +0\.80 \[0\.70 to 0\.90\]`,
		`p99 all new +3\.\d\d ms`,
		`vs store-nothing +0\.20 \[0\.17 to 0\.23\]`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("no line matching %q", want)
		}
	}

	// A run whose CPU was not measured shows n/a and why, and drops out
	// of the ratio rather than counting as free.
	noWindow := errors.New("no window")
	results[0].load.cpuErr = noWindow
	out.Reset()
	report(&out, cfg, results)
	if !strings.Contains(out.String(), "inbox #1 CPU time not measured: "+noWindow.Error()) {
		t.Errorf("no note of the unmeasured run:\n%s", out.String())
	}
	if !regexp.MustCompile(`CPU/delivery vs store-nothing +5\.00x \[4\.00x to 6\.00x\]`).MatchString(out.String()) {
		t.Errorf("ratio with one round unmeasured: want the median of 4x and 6x:\n%s", out.String())
	}
}

// TestReportPGTargets judges inbox on PostgreSQL against commit-each-pg
// with the server's CPU counted on both sides: 150 µs (receiver 90, server
// 60) against commit-each-pg's 250 µs (70 and 180) is 0.60, met, though
// the receiver alone costs more.
func TestReportPGTargets(t *testing.T) {
	cfg := config{conns: 32, rounds: 1}
	pg := fakeRun(nameInboxPG, 1, 7000, 5*time.Millisecond, 7000*90*time.Microsecond)
	pg.load.cpu.server, pg.load.cpu.serverOK = 7000*60*time.Microsecond, true
	ce := fakeRun(commitEachPG, 1, 5000, 6*time.Millisecond, 5000*70*time.Microsecond)
	ce.load.cpu.server, ce.load.cpu.serverOK = 5000*180*time.Microsecond, true
	var out bytes.Buffer
	report(&out, cfg, []result{pg, ce})
	t.Log("\n" + out.String())
	for _, want := range []string{
		`inbox-pg +90\.0 µs +60\.0 µs +150\.0 µs`,
		`commit-each-pg +70\.0 µs +180\.0 µs +250\.0 µs`,
		`vs commit-each-pg +1\.40x +>= 1\.3x +met`,
		`CPU/delivery with server vs commit-each-pg +0\.60 +<= 0\.70 +met`,
		`CPU/delivery with server +150\.0 µs`,
		`CPU/delivery, receiver only +90\.0 µs`,
		`commit-each-pg's with server +250\.0 µs`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("no line matching %q", want)
		}
	}

	// Four writers beside one: their rates and CPU side by side.
	w4 := fakeRun(nameInboxPGw4, 1, 3500, 8*time.Millisecond, 3500*120*time.Microsecond)
	w4.load.cpu.server, w4.load.cpu.serverOK = 3500*105*time.Microsecond, true
	out.Reset()
	report(&out, cfg, []result{pg, ce, w4})
	for _, want := range []string{
		`four writers vs one +0\.50x`,
		`CPU/delivery with server, four writers vs one +1\.50`,
		`p99 four writers +8\.\d\d ms`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("no line matching %q:\n%s", want, out.String())
		}
	}

	// Without the server's time on one side there is no CPU verdict.
	ce.load.cpu.serverOK, ce.load.cpu.serverErr = false, errors.New("not on this machine")
	out.Reset()
	report(&out, cfg, []result{pg, ce})
	if strings.Contains(out.String(), "with server vs commit-each-pg") {
		t.Errorf("a CPU verdict without commit-each-pg's server time:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "commit-each-pg server CPU time not measured: not on this machine") {
		t.Errorf("no note of the unmeasured server time:\n%s", out.String())
	}
}

// TestReportGroupCommit sets inbox's rate against group-commit's, and
// group-commit's against store-nothing's, round by round: 8,000 and 9,000
// against 10,000 and 12,500 (0.80 and 0.72, median 0.76), which against
// 40,000 are 0.25 and 0.3125 (median 0.28125).
func TestReportGroupCommit(t *testing.T) {
	cfg := config{conns: 32, rounds: 2}
	var results []result
	for i, c := range []struct{ inbox, group int64 }{{8000, 10000}, {9000, 12500}} {
		round := i + 1
		results = append(results,
			fakeRun(nameInbox, round, c.inbox, 2*time.Millisecond, time.Second),
			fakeRun(groupCommit, round, c.group, 2*time.Millisecond, time.Second),
			fakeRun(storeNothing, round, 40000, time.Millisecond, time.Second))
	}
	var out bytes.Buffer
	report(&out, cfg, results)
	t.Log("\n" + out.String())
	for _, want := range []string{
		`vs group-commit +0\.76 \[0\.72 to 0\.80\]`,
		`group-commit vs store-nothing +0\.28 \[0\.25 to 0\.31\]`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("no line matching %q", want)
		}
	}
}

// TestReportSQLiteTargets judges inbox against store-nothing at 0.50, or
// 0.45 under -pin, with p99 at most 10 ms, and a share of repeats at 0.95
// of the all-new rate: 0.47 of store-nothing is missed unpinned and met
// pinned; 0.96 of all new is met, 0.94 missed.
func TestReportSQLiteTargets(t *testing.T) {
	for _, c := range []struct {
		pin             bool
		allNew          int64
		want, wantMatch string
	}{
		{false, 19583, `vs store-nothing +0\.47 +>= 0\.50 +MISSED`, `at 50% repeats vs all new +0\.96 +>= 0\.95 +met`},
		{true, 20000, `vs store-nothing +0\.47 +>= 0\.45 +met`, `at 50% repeats vs all new +0\.94 +>= 0\.95 +MISSED`},
	} {
		cfg := config{conns: 32, rounds: 1, repeat: 0.5, allNew: true, pin: c.pin}
		results := []result{
			fakeRun(nameInbox, 1, 18800, 9*time.Millisecond, time.Second),
			fakeRun(nameInboxAllNew, 1, c.allNew, 9*time.Millisecond, time.Second),
			fakeRun(storeNothing, 1, 40000, time.Millisecond, time.Second),
		}
		var out bytes.Buffer
		report(&out, cfg, results)
		for _, want := range []string{c.want, c.wantMatch, `p99 +\d+\.\d\d ms +<= 10\.00 ms +met`} {
			if !regexp.MustCompile(want).MatchString(out.String()) {
				t.Errorf("pin %v: no line matching %q in:\n%s", c.pin, want, out.String())
			}
		}
	}
}
