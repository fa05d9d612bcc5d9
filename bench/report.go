package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// The targets for inbox, measured side by side at targetConns.
const (
	targetConns          = 32
	targetVsStoreNothing = 0.50
	// Under -pin, inbox and store-nothing each have one CPU.
	targetVsStoreNothingPinned = 0.45
	targetVsCommitEach         = 4.0
	targetP99                  = 10 * time.Millisecond
	// With -repeat, inbox's rate at that share of repeats against its
	// rate with every delivery new.
	targetVsAllNew = 0.95
	targetPeakRSS  = 100 << 20
	// "Flat over the run": the last RSS sample at most this much above the
	// first one after the warmup.
	targetRSSGrowth = 0.10

	// Several replicas, one PostgreSQL: inbox on PostgreSQL against a
	// receiver committing each request in a transaction of its own.
	targetPGVsCommitEach = 1.3
	targetPGP99          = 25 * time.Millisecond
	// The CPU per delivery of inbox on PostgreSQL, its server's processes
	// counted, at most this share of commit-each-pg's.
	targetPGCPUVsCommitEach = 0.70
)

// report prints the table of results, then inbox against its targets.
func report(w io.Writer, cfg config, results []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "receiver\tdeliveries/s\tp50\tp99\tpeak RSS\tRSS first\tRSS last\terrors\tconns opened\trows stored")
	for _, r := range results {
		rows := "-"
		if r.rows >= 0 {
			rows = fmt.Sprintf("%d (%d acked new)", r.rows, r.load.ackedNew)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n",
			r.label(cfg), r.load.rate(), latency(r.load.hist, 0.50), latency(r.load.hist, 0.99),
			mib(r.peak), mib(r.firstRSS()), mib(r.lastRSS()), r.load.errors(), r.load.dials, rows)
	}
	tw.Flush()
	fmt.Fprintln(w, "\ndeliveries/s: 204s to requests started after the warmup; p50/p99 over those; RSS first: the first")
	fmt.Fprintln(w, "sample after the warmup; errors (non-204 answers, transport errors): over the whole run.")
	for _, r := range results {
		if r.load.errors() > 0 {
			fmt.Fprintf(w, "%s errors: %s\n", r.label(cfg), describeErrors(r.load))
		}
	}
	fmt.Fprintln(w)
	reportCPU(w, cfg, results)
	if cfg.verbose {
		for _, r := range results {
			fmt.Fprintf(w, "%s RSS each second (MiB):", r.label(cfg))
			for _, s := range r.samples {
				fmt.Fprintf(w, " %.1f", float64(s.rss)/(1<<20))
			}
			fmt.Fprintln(w)
		}
	}
	reportTargets(w, cfg, results)
	reportPGTargets(w, cfg, results)
}

// reportCPU prints the CPU time each receiver and the load generator used
// per delivery over the measured window, and where they ran.
func reportCPU(w io.Writer, cfg config, results []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "receiver\tCPU/delivery\tserver CPU/delivery\twith server\tload CPU/delivery\treceiver CPU\tload CPU\tdeliveries\tran on\tload ran on\tload avg"
	if cfg.pin {
		head += "\tpinned to\tload pinned to"
	}
	fmt.Fprintln(tw, head)
	for _, r := range results {
		c := r.load.cpu
		if r.load.cpuErr != nil {
			fmt.Fprintf(tw, "%s\tn/a\tn/a\tn/a\tn/a\tn/a\tn/a\t-\t?\t?\t%s", r.label(cfg), r.loadAvg)
		} else {
			server, with := "-", "-"
			if c.serverOK {
				server, with = perDeliveryText(c.server, c.delivered), perDeliveryText(c.receiver+c.server, c.delivered)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f cores\t%.2f cores\t%d\t%s\t%s\t%s", r.label(cfg),
				perDeliveryText(c.receiver, c.delivered), server, with, perDeliveryText(c.load, c.delivered),
				cores(c.receiver, c.wall), cores(c.load, c.wall), c.delivered, formatCPUs(c.receiverOn), formatCPUs(c.loadOn), r.loadAvg)
		}
		if cfg.pin {
			fmt.Fprintf(tw, "\t%s\t%s", formatCPUs(r.pinnedTo), formatCPUs(r.loadPinnedTo))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nCPU/delivery: the receiver process's utime+stime (/proc/<pid>/stat) from the end of the warmup")
	fmt.Fprintln(w, "until every sender stopped, over the 204s answered in that time; load CPU/delivery: the bench's own")
	fmt.Fprintln(w, "(getrusage) over the same time. cores: CPU time over wall time. ran on: the CPUs that the threads")
	fmt.Fprintln(w, "which used CPU in that time were last on at its end. server CPU/delivery: on PostgreSQL, the")
	fmt.Fprintln(w, "server's processes over the same time: the receiver's backends (by application_name) and the")
	fmt.Fprintln(w, "server's own (WAL writer, checkpointer, ...), which also serve anything else on the server;")
	fmt.Fprintln(w, "with server: the two summed. load avg: the 1-minute load average as the run started -> ended.")
	for _, r := range results {
		if r.load.cpuErr != nil {
			fmt.Fprintf(w, "%s CPU time not measured: %v\n", r.label(cfg), r.load.cpuErr)
		} else if r.load.cpu.serverErr != nil {
			fmt.Fprintf(w, "%s server CPU time not measured: %v\n", r.label(cfg), r.load.cpu.serverErr)
		}
	}
}

// cpuWithServer is a run's receiver CPU time per delivery with its
// PostgreSQL server's; false when either was not measured.
func (r result) cpuWithServer() (time.Duration, bool) {
	if r.load.cpuErr != nil || !r.load.cpu.serverOK {
		return 0, false
	}
	return perDelivery(r.load.cpu.receiver+r.load.cpu.server, r.load.cpu.delivered)
}

// cpuPerDelivery is a run's receiver CPU time per delivery; false when it
// was not measured or nothing was delivered.
func (r result) cpuPerDelivery() (time.Duration, bool) {
	if r.load.cpuErr != nil {
		return 0, false
	}
	return perDelivery(r.load.cpu.receiver, r.load.cpu.delivered)
}

func perDeliveryText(cpu time.Duration, delivered int64) string {
	d, ok := perDelivery(cpu, delivered)
	if !ok {
		return "-"
	}
	return us(d)
}

// reportTargets judges inbox against the targets. Ratios compare runs of
// the same round, which are closest in time; with several rounds the
// verdict is on the median ratio and p99, and on the worst RSS.
func reportTargets(w io.Writer, cfg config, results []result) {
	byRound := map[int]map[string]result{}
	for _, r := range results {
		if byRound[r.round] == nil {
			byRound[r.round] = map[string]result{}
		}
		byRound[r.round][r.name] = r
	}
	var vsStoreNothing, vsCommitEach, vsGroupCommit, groupVsStoreNothing, p99s []float64
	var cpuUS, cpuVsStoreNothing, vsAllNew, allNewP99s []float64
	var peak int64
	var errs int64
	var worst result
	worstGrowth := math.Inf(-1)
	for _, round := range slices.Sorted(maps.Keys(byRound)) {
		in, ok := byRound[round][nameInbox]
		if !ok {
			return
		}
		if sn, ok := byRound[round][storeNothing]; ok && sn.load.rate() > 0 {
			vsStoreNothing = append(vsStoreNothing, in.load.rate()/sn.load.rate())
		}
		if ce, ok := byRound[round][commitEach]; ok && ce.load.rate() > 0 {
			vsCommitEach = append(vsCommitEach, in.load.rate()/ce.load.rate())
		}
		if gc, ok := byRound[round][groupCommit]; ok && gc.load.rate() > 0 {
			vsGroupCommit = append(vsGroupCommit, in.load.rate()/gc.load.rate())
			if sn, ok := byRound[round][storeNothing]; ok && sn.load.rate() > 0 {
				groupVsStoreNothing = append(groupVsStoreNothing, gc.load.rate()/sn.load.rate())
			}
		}
		if c, ok := in.cpuPerDelivery(); ok {
			cpuUS = append(cpuUS, float64(c)/float64(time.Microsecond))
			if sn, ok := byRound[round][storeNothing]; ok {
				if snc, ok := sn.cpuPerDelivery(); ok && snc > 0 {
					cpuVsStoreNothing = append(cpuVsStoreNothing, float64(c)/float64(snc))
				}
			}
		}
		if an, ok := byRound[round][nameInboxAllNew]; ok {
			if an.load.rate() > 0 {
				vsAllNew = append(vsAllNew, in.load.rate()/an.load.rate())
			}
			allNewP99s = append(allNewP99s, p99ms(an.load.hist))
		}
		p99s = append(p99s, p99ms(in.load.hist))
		peak = max(peak, in.peak)
		errs += in.load.errors()
		if first := in.firstRSS(); first > 0 {
			if g := float64(in.lastRSS()-first) / float64(first); g > worstGrowth {
				worstGrowth, worst = g, in
			}
		}
	}

	fmt.Fprintln(w)
	if cfg.conns != targetConns {
		fmt.Fprintf(w, "(the targets are stated at %d connections; this run used %d)\n", targetConns, cfg.conns)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "inbox\tmeasured\ttarget\t")
	if len(vsStoreNothing) > 0 {
		m, target := median(vsStoreNothing), targetVsStoreNothing
		if cfg.pin {
			target = targetVsStoreNothingPinned
		}
		fmt.Fprintf(tw, "vs store-nothing\t%s\t>= %.2f\t%s\n", spread(vsStoreNothing, "%.2f"), target, verdict(m >= target))
	}
	if len(vsCommitEach) > 0 {
		m := median(vsCommitEach)
		fmt.Fprintf(tw, "vs commit-each\t%s\t>= %.0fx\t%s\n", spread(vsCommitEach, "%.2fx"), targetVsCommitEach, verdict(m >= targetVsCommitEach))
	}
	if len(vsGroupCommit) > 0 {
		fmt.Fprintf(tw, "vs group-commit\t%s\t-\t\n", spread(vsGroupCommit, "%.2f"))
	}
	if len(groupVsStoreNothing) > 0 {
		fmt.Fprintf(tw, "group-commit vs store-nothing\t%s\t-\t\n", spread(groupVsStoreNothing, "%.2f"))
	}
	m := median(p99s)
	fmt.Fprintf(tw, "p99\t%s\t<= %s\t%s\n", spread(p99s, "%.2f ms"), ms(targetP99), verdict(m <= float64(targetP99)/float64(time.Millisecond)))
	if peak > 0 {
		fmt.Fprintf(tw, "peak RSS\t%s\t< %s\t%s\n", mib(peak), mib(targetPeakRSS), verdict(peak < targetPeakRSS))
	}
	if !math.IsInf(worstGrowth, -1) {
		fmt.Fprintf(tw, "RSS first -> last\t%s -> %s (%+.1f%%)\tgrowth <= %.0f%%\t%s\n",
			mib(worst.firstRSS()), mib(worst.lastRSS()), 100*worstGrowth, 100*targetRSSGrowth, verdict(worstGrowth <= targetRSSGrowth))
	}
	fmt.Fprintf(tw, "errors\t%d\t0\t%s\n", errs, verdict(errs == 0))
	if len(cpuUS) > 0 {
		fmt.Fprintf(tw, "CPU/delivery\t%s\t-\t\n", spread(cpuUS, "%.1f µs"))
	}
	if len(cpuVsStoreNothing) > 0 {
		fmt.Fprintf(tw, "CPU/delivery vs store-nothing\t%s\t-\t\n", spread(cpuVsStoreNothing, "%.2fx"))
	}
	if len(vsAllNew) > 0 {
		fmt.Fprintf(tw, "at %g%% repeats vs all new\t%s\t>= %.2f\t%s\n", 100*cfg.repeat, spread(vsAllNew, "%.2f"), targetVsAllNew, verdict(median(vsAllNew) >= targetVsAllNew))
	}
	if len(allNewP99s) > 0 {
		fmt.Fprintf(tw, "p99 all new\t%s\t-\t\n", spread(allNewP99s, "%.2f ms"))
	}
	tw.Flush()
	if len(p99s) > 1 {
		fmt.Fprintln(w, "(ratios and p99: median over rounds, range in brackets; peak RSS and RSS growth: the worst round)")
	}
}

// p99ms is the p99 latency in milliseconds; +Inf when nothing was
// delivered, so that no latency target can be met.
func p99ms(h *histogram) float64 {
	if h.n == 0 {
		return math.Inf(1)
	}
	return float64(h.quantile(0.99)) / float64(time.Millisecond)
}

// label names a run in the table.
func (r result) label(cfg config) string {
	if cfg.rounds == 1 {
		return r.name
	}
	return fmt.Sprintf("%s #%d", r.name, r.round)
}

// firstRSS is the first sample taken after the warmup (the first sample
// when the run was shorter): what "flat over the run" starts from.
func (r result) firstRSS() int64 {
	for _, s := range r.samples {
		if s.at >= r.warmup {
			return s.rss
		}
	}
	if len(r.samples) > 0 {
		return r.samples[0].rss
	}
	return 0
}

// lastRSS is the sample taken as the load ended.
func (r result) lastRSS() int64 {
	if len(r.samples) == 0 {
		return 0
	}
	return r.samples[len(r.samples)-1].rss
}

func describeErrors(r loadResult) string {
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(r.statuses)) {
		parts = append(parts, fmt.Sprintf("%d status %d", r.statuses[code], code))
	}
	if r.transportErrs > 0 {
		parts = append(parts, fmt.Sprintf("%d transport (first: %v)", r.transportErrs, r.firstErr))
	}
	return strings.Join(parts, ", ")
}

// median returns the middle value (the mean of the two middle ones for an
// even count); vals must not be empty.
func median(vals []float64) float64 {
	s := slices.Sorted(slices.Values(vals))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread prints one value as is, several as their median and range.
func spread(vals []float64, format string) string {
	if len(vals) == 1 {
		return fmt.Sprintf(format, vals[0])
	}
	return fmt.Sprintf(format+" ["+format+" to "+format+"]", median(vals), slices.Min(vals), slices.Max(vals))
}

// latency prints a quantile, or "-" when no request was measured.
func latency(h *histogram, q float64) string {
	if h.n == 0 {
		return "-"
	}
	return ms(h.quantile(q))
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

func mib(b int64) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// reportPGTargets judges inbox on PostgreSQL against its targets, round by
// round as reportTargets does, and shows two replicas against one and
// PostgreSQL against SQLite. Without an inbox-pg run it says why.
func reportPGTargets(w io.Writer, cfg config, results []result) {
	byRound := map[int]map[string]result{}
	ran := map[string]bool{}
	for _, r := range results {
		if byRound[r.round] == nil {
			byRound[r.round] = map[string]result{}
		}
		byRound[r.round][r.name] = r
		ran[r.name] = true
	}
	if !ran[nameInboxPG] && !ran[nameInboxPGx2] {
		if ran[commitEachPG] {
			fmt.Fprintln(w, "\ninbox on PostgreSQL: not measured in this run")
			for _, n := range cfg.notes {
				fmt.Fprintf(w, "(%s)\n", n)
			}
		}
		return
	}
	var vsCommitEach, p99s, x2VsOne, x2P99s, vsSQLite []float64
	var cpuVsCommitEach, cpuWith, ceCPUWith, cpuReceiver, ceCPUReceiver []float64
	var w4VsOne, w4CPUVsOne, w4P99s []float64
	var errs int64
	for _, round := range slices.Sorted(maps.Keys(byRound)) {
		rs := byRound[round]
		if pg, ok := rs[nameInboxPG]; ok {
			if ce, ok := rs[commitEachPG]; ok && ce.load.rate() > 0 {
				vsCommitEach = append(vsCommitEach, pg.load.rate()/ce.load.rate())
			}
			usOf := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
			if c, ok := pg.cpuPerDelivery(); ok {
				cpuReceiver = append(cpuReceiver, usOf(c))
			}
			if c, ok := pg.cpuWithServer(); ok {
				cpuWith = append(cpuWith, usOf(c))
				if ce, ok := rs[commitEachPG]; ok {
					if cec, ok := ce.cpuWithServer(); ok && cec > 0 {
						cpuVsCommitEach = append(cpuVsCommitEach, float64(c)/float64(cec))
					}
				}
			}
			if ce, ok := rs[commitEachPG]; ok {
				if c, ok := ce.cpuPerDelivery(); ok {
					ceCPUReceiver = append(ceCPUReceiver, usOf(c))
				}
				if c, ok := ce.cpuWithServer(); ok {
					ceCPUWith = append(ceCPUWith, usOf(c))
				}
			}
			if sq, ok := rs[nameInbox]; ok && sq.load.rate() > 0 {
				vsSQLite = append(vsSQLite, pg.load.rate()/sq.load.rate())
			}
			p99s = append(p99s, p99ms(pg.load.hist))
			errs += pg.load.errors()
			if w4, ok := rs[nameInboxPGw4]; ok && pg.load.rate() > 0 {
				w4VsOne = append(w4VsOne, w4.load.rate()/pg.load.rate())
				w4P99s = append(w4P99s, p99ms(w4.load.hist))
				errs += w4.load.errors()
				c4, ok4 := w4.cpuWithServer()
				c1, ok1 := pg.cpuWithServer()
				if ok4 && ok1 && c1 > 0 {
					w4CPUVsOne = append(w4CPUVsOne, float64(c4)/float64(c1))
				}
			}
			if x2, ok := rs[nameInboxPGx2]; ok && pg.load.rate() > 0 {
				x2VsOne = append(x2VsOne, x2.load.rate()/pg.load.rate())
			}
		}
		if x2, ok := rs[nameInboxPGx2]; ok {
			x2P99s = append(x2P99s, p99ms(x2.load.hist))
			errs += x2.load.errors()
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "inbox on PostgreSQL\tmeasured\ttarget\t")
	if len(vsCommitEach) > 0 {
		m := median(vsCommitEach)
		fmt.Fprintf(tw, "vs commit-each-pg\t%s\t>= %.1fx\t%s\n", spread(vsCommitEach, "%.2fx"), targetPGVsCommitEach, verdict(m >= targetPGVsCommitEach))
	}
	if len(cpuVsCommitEach) > 0 {
		m := median(cpuVsCommitEach)
		fmt.Fprintf(tw, "CPU/delivery with server vs commit-each-pg\t%s\t<= %.2f\t%s\n", spread(cpuVsCommitEach, "%.2f"), targetPGCPUVsCommitEach, verdict(m <= targetPGCPUVsCommitEach))
	}
	if len(p99s) > 0 {
		m := median(p99s)
		fmt.Fprintf(tw, "p99\t%s\t<= %s\t%s\n", spread(p99s, "%.2f ms"), ms(targetPGP99), verdict(m <= float64(targetPGP99)/float64(time.Millisecond)))
	}
	figure(tw, "CPU/delivery with server", cpuWith, "%.1f µs")
	figure(tw, "commit-each-pg's with server", ceCPUWith, "%.1f µs")
	figure(tw, "CPU/delivery, receiver only", cpuReceiver, "%.1f µs")
	figure(tw, "commit-each-pg's, receiver only", ceCPUReceiver, "%.1f µs")
	fmt.Fprintf(tw, "errors (every inbox-pg run)\t%d\t0\t%s\n", errs, verdict(errs == 0))
	figure(tw, "four writers vs one", w4VsOne, "%.2fx")
	figure(tw, "CPU/delivery with server, four writers vs one", w4CPUVsOne, "%.2f")
	figure(tw, "p99 four writers", w4P99s, "%.2f ms")
	figure(tw, "two replicas vs one", x2VsOne, "%.2fx")
	figure(tw, "p99 two replicas", x2P99s, "%.2f ms")
	figure(tw, "vs inbox on SQLite", vsSQLite, "%.2fx")
	tw.Flush()
}

// figure prints a line of a targets table for a figure with no target:
// its median and range over the rounds, when it was measured at all.
func figure(tw io.Writer, name string, vals []float64, format string) {
	if len(vals) > 0 {
		fmt.Fprintf(tw, "%s\t%s\t-\t\n", name, spread(vals, format))
	}
}
