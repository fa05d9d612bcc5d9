// Command bench measures inbox side by side with reference receivers built
// from this program: store-nothing, which verifies and answers;
// group-commit, which stores key and body through inbox's group commit;
// and commit-each, which commits every request in a transaction of its
// own. It starts each receiver as its own process on a fresh database,
// one after another, drives signed deliveries at it over keep-alive
// connections, and prints deliveries/s, p50 and p99 latency, RSS and CPU
// time per delivery for each, and the ratios. docs/benchmarks.md says
// what it measures and records runs. bench/ is a Go module of its own,
// which replaces inbox with the folder above: from the repository's root,
//
//	go -C bench run .
//	go -C bench run . -duration 60s -conns 32
//	go -C bench run . -only inbox -duration 5s
//	go -C bench run . -pin -rounds 3
//	go -C bench run . -repeat 0.5 -rounds 3
//	go -C bench run . -postgres postgres://postgres@127.0.0.1:5432/test?sslmode=disable -rounds 3
//	go -C bench run . -prefill 5000000 -order inbox
//
// With -postgres it also runs inbox on PostgreSQL (serve --db postgres://...),
// two inbox replicas on that one database with the load split across both,
// and commit-each-pg, which commits each request in a PostgreSQL
// transaction of its own; each run on a schema of its own, dropped after.
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"inbox/bench/internal/inboxmod"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == referenceArg {
		if err := runReference(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench reference:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

const nameInbox = "inbox"

// nameInboxAllNew is inbox run again in each round with no repeats, when
// -repeat is given, to set its rate at that share against its all-new rate.
const nameInboxAllNew = "inbox-all-new"

// defaultRepeat is the share of repeats in the load unless -repeat says.
const defaultRepeat = 0.1

// inbox with a file:// replica beside its database (serve --replica), in
// the default mode and with --replica-sync: the cost of replicating, set
// against inbox in the same run. They run only when -order names them.
const (
	nameInboxReplica     = "inbox-replica"
	nameInboxReplicaSync = "inbox-replica-sync"
)

// receiverNames lists the receivers in the default order.
func receiverNames() []string { return []string{nameInbox, storeNothing, groupCommit, commitEach} }

// buildTimeout bounds `go build` of inbox, which compiles SQLite the first
// time on a cold cache.
const buildTimeout = 5 * time.Minute

// config is the parsed command line.
type config struct {
	conns       int
	duration    time.Duration
	warmup      time.Duration
	bodySize    int
	maxRequests int64
	randomIDs   bool
	rounds      int
	receivers   []string
	verbose     bool
	repeat      float64 // share of deliveries that repeat a job already sent
	allNew      bool    // also run inbox with no repeats (-repeat given)
	pin         bool
	pins        pinning // where -pin runs each side, once chosen
	postgres    string  // the database of the PostgreSQL receivers; "" runs none
	prefill     int64   // rows inbox's SQLite database holds before each run
	dispatch    []int   // -dispatch: worker counts to run ./bench/dispatch at, after the receivers
	dispatchN   int     // rows each of those ingests and drains
	notes       []string
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	var only, order string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.conns, "conns", 32, "concurrent senders, each on its own keep-alive connection")
	fs.DurationVar(&cfg.duration, "duration", 20*time.Second, "how long each receiver is measured, after the warmup")
	fs.DurationVar(&cfg.warmup, "warmup", 2*time.Second, "load before measuring starts, not counted")
	fs.IntVar(&cfg.bodySize, "body-size", 1024, "body size in bytes (at least the JSON around the padding)")
	fs.Int64Var(&cfg.maxRequests, "max-requests", 10_000_000, "stop a receiver's run after this many requests, warmup included")
	fs.IntVar(&cfg.rounds, "rounds", 1, "run every receiver this many times, interleaved, and judge the targets on the medians")
	fs.BoolVar(&cfg.randomIDs, "random-ids", false, "job ids in random order (like UUIDs) instead of ascending per sender")
	fs.StringVar(&only, "only", "", "run one receiver: inbox, store-nothing or commit-each")
	fs.StringVar(&order, "order", strings.Join(receiverNames(), ","), "receivers to run, one after another, comma-separated")
	fs.BoolVar(&cfg.verbose, "v", false, "also print every RSS sample")
	fs.Float64Var(&cfg.repeat, "repeat", defaultRepeat, "share of deliveries that repeat a job already sent, like a provider's retry storm (e.g. -repeat 0.5);\n"+
		"given, inbox also runs with every delivery new in each round, and its rate is reported against that")
	fs.StringVar(&cfg.postgres, "postgres", os.Getenv("INBOX_BENCH_POSTGRES"), "a postgres:// URL (env INBOX_BENCH_POSTGRES): also run "+
		strings.Join(postgresNames(), ", ")+" on it,\neach on a schema of its own, dropped after")
	prefillEnv, prefillEnvErr := envInt("INBOX_BENCH_PREFILL")
	fs.Int64Var(&cfg.prefill, "prefill", prefillEnv, "rows inbox's SQLite database already holds when each of its runs starts (env INBOX_BENCH_PREFILL),\n"+
		"stored through SQL before serve starts: the check that a full inbox takes deliveries as fast as an empty one (e.g. -prefill 5000000)")
	fs.BoolVar(&cfg.pin, "pin", false, "pin each receiver to one CPU and the load generator to another (needs two CPUs, Linux):\n"+
		"the fair way to compare CPU per delivery on a small machine")
	var dispatchList string
	fs.StringVar(&dispatchList, "dispatch", "", "after the receivers, also measure the dispatcher (bench/dispatch, SQLite, HTTP sink) at these\n"+
		"--workers counts, comma-separated (e.g. -dispatch 4,32): its ingest and drain rates and CPU per row, -rounds times each")
	fs.IntVar(&cfg.dispatchN, "dispatch-rows", 20000, "rows each -dispatch run ingests and drains")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `Usage: go -C bench run . [flags]

Builds inbox, then runs it and three reference receivers (store-nothing,
group-commit, commit-each) one after another on fresh temporary databases,
drives signed deliveries at each from 127.0.0.1, and prints throughput,
latency, RSS and the CPU time each receiver and the load generator use per
delivery.

  go -C bench run . -pin -rounds 3        each receiver on one CPU, the load on another
  go -C bench run . -repeat 0.5 -rounds 3 one delivery in two a repeat, against all new
  go -C bench run . -postgres 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' -rounds 3
                                          inbox on PostgreSQL (one replica, two, one with four writers), and commit-each-pg
  go -C bench run . -prefill 5000000 -order inbox
                                          inbox on a database that already holds 5 million rows
  go -C bench run . -rounds 3 -order inbox,inbox-replica,inbox-replica-sync
                                          inbox against itself replicating to a file:// replica, and with --replica-sync
  go -C bench run . -rounds 3 -dispatch 4,32
                                          then the dispatcher at 4 and 32 workers against the ingest rate

Flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q (see -help)", fs.Args())
	}
	prefillGiven := false
	fs.Visit(func(f *flag.Flag) { prefillGiven = prefillGiven || f.Name == "prefill" })
	if prefillEnvErr != nil && !prefillGiven {
		return config{}, prefillEnvErr
	}
	switch {
	case cfg.conns < 1 || cfg.conns > 1024:
		return config{}, fmt.Errorf("-conns %d: want 1 to 1024", cfg.conns)
	case cfg.duration <= 0 || cfg.duration > time.Hour:
		return config{}, fmt.Errorf("-duration %s: want more than 0 and at most 1h", cfg.duration)
	case cfg.warmup < 0 || cfg.warmup > 10*time.Minute:
		return config{}, fmt.Errorf("-warmup %s: want 0 to 10m", cfg.warmup)
	case cfg.bodySize < 0 || cfg.bodySize > 1<<20:
		return config{}, fmt.Errorf("-body-size %d: want 0 to 1 MiB (inbox parks larger bodies)", cfg.bodySize)
	case cfg.rounds < 1 || cfg.rounds > 100:
		return config{}, fmt.Errorf("-rounds %d: want 1 to 100", cfg.rounds)
	case cfg.maxRequests < 1:
		return config{}, fmt.Errorf("-max-requests %d: want at least 1", cfg.maxRequests)
	case !(cfg.repeat >= 0 && cfg.repeat < 1):
		return config{}, fmt.Errorf("-repeat %v: want at least 0 and less than 1 (a share of deliveries)", cfg.repeat)
	case cfg.prefill < 0 || cfg.prefill > maxPrefill:
		return config{}, fmt.Errorf("-prefill %d: want 0 to %d rows", cfg.prefill, maxPrefill)
	case cfg.dispatchN < 1 || cfg.dispatchN > 1_000_000:
		return config{}, fmt.Errorf("-dispatch-rows %d: want 1 to 1000000", cfg.dispatchN)
	}
	workers, err := parseWorkers(dispatchList)
	if err != nil {
		return config{}, err
	}
	cfg.dispatch = workers
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "repeat" && cfg.repeat > 0 {
			cfg.allNew = true
		}
	})
	orderGiven := false
	fs.Visit(func(f *flag.Flag) { orderGiven = orderGiven || f.Name == "order" })
	if cfg.postgres != "" {
		if err := checkPostgresURL(cfg.postgres); err != nil {
			return config{}, err
		}
		if !orderGiven {
			order += "," + strings.Join(postgresNames(), ",")
		}
	}
	if only != "" {
		order = only
	}
	known := append(append(receiverNames(), postgresNames()...), nameInboxReplica, nameInboxReplicaSync)
	for name := range strings.SplitSeq(order, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(known, name) {
			return config{}, fmt.Errorf("unknown receiver %q: want one of %s", name, strings.Join(known, ", "))
		}
		if slices.Contains(postgresNames(), name) && cfg.postgres == "" {
			return config{}, fmt.Errorf("receiver %q needs -postgres (or INBOX_BENCH_POSTGRES)", name)
		}
		if slices.Contains(cfg.receivers, name) {
			return config{}, fmt.Errorf("receiver %q listed twice", name)
		}
		cfg.receivers = append(cfg.receivers, name)
	}
	return cfg, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	// Nothing may hang: the whole run has a deadline that covers the build
	// and, for each receiver, starting, the load, and stopping.
	perReceiver := cfg.warmup + cfg.duration + startTimeout + stopTimeout + requestTimeout + 30*time.Second
	deadline := buildTimeout + time.Duration(cfg.rounds*runsPerRound(cfg))*perReceiver
	if len(cfg.dispatch) > 0 {
		deadline += buildTimeout + time.Duration(cfg.rounds*len(cfg.dispatch))*dispatchRoundTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()

	dir, err := os.MkdirTemp("", "inbox-bench-")
	if err != nil {
		return fmt.Errorf("temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)

	fmt.Fprintf(stdout, "command: %s\n", commandLine(args))
	fmt.Fprintf(stdout, "machine: %s\n", describeMachine())
	fmt.Fprintf(stdout, "fsync:   %s\n", describeFsync(dir))
	if cfg.postgres != "" {
		pg, err := describePostgres(ctx, cfg.postgres)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "pg:      %s\n", pg)
	}
	ids := "ascending per sender"
	if cfg.randomIDs {
		ids = "in random order"
	}
	fmt.Fprintf(stdout, "load:    %d keep-alive connections, %d-byte bodies, job ids %s, %s;\n         %s warmup, then %s measured, per receiver\n",
		cfg.conns, cfg.bodySize, ids, describeRepeat(cfg), cfg.warmup, cfg.duration)
	if cfg.rounds > 1 {
		fmt.Fprintf(stdout, "         %d rounds, each running every receiver once, in order\n", cfg.rounds)
	}

	specs, err := receiverSpecs(ctx, &cfg, dir, stderr)
	if err != nil {
		return err
	}
	var template string
	if cfg.prefill > 0 && slices.ContainsFunc(specs, func(s receiverSpec) bool { return s.prefill }) {
		fmt.Fprintf(stderr, "bench: pre-filling a database with %d rows\n", cfg.prefill)
		start := time.Now()
		if template, err = prefillTemplate(ctx, dir, cfg.prefill, cfg.bodySize); err != nil {
			return err
		}
		fi, err := os.Stat(template)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "prefill: inbox's database holds %d done rows (%d-byte bodies, %.1f GiB) when each of its runs starts; made in %s\n",
			cfg.prefill, cfg.bodySize, float64(fi.Size())/(1<<30), time.Since(start).Round(time.Second))
	}
	for _, n := range cfg.notes {
		fmt.Fprintf(stdout, "note:    %s\n", n)
	}
	// Pinned after the build, which would otherwise inherit one CPU.
	if cfg.pin {
		if cfg.pins, err = choosePins(); err != nil {
			return err
		}
		if err := pinSelf(cfg.pins.load); err != nil {
			return fmt.Errorf("-pin: %w", err)
		}
		fmt.Fprintf(stdout, "pin:     each receiver on CPU %d, the load generator on CPU %d (GOMAXPROCS 1 on each side)\n",
			cfg.pins.receiver, cfg.pins.load)
	}
	fmt.Fprintln(stdout)
	secret, err := randomHex(16)
	if err != nil {
		return err
	}
	env := childEnv(secret)
	var results []result
	for round := 1; round <= cfg.rounds; round++ {
		for _, spec := range specs {
			fmt.Fprintf(stderr, "bench: round %d of %d: %s: %s warmup + %s at %d connections\n",
				round, cfg.rounds, spec.name, cfg.warmup, cfg.duration, cfg.conns)
			res, err := measure(ctx, spec, cfg, secret, env, dir, template)
			if err != nil {
				switch {
				case errors.Is(err, context.DeadlineExceeded):
					err = fmt.Errorf("%w (the run's deadline is %s)", err, deadline)
				case errors.Is(err, context.Canceled):
					err = errors.New("interrupted")
				}
				return fmt.Errorf("%s: %w", spec.name, err)
			}
			res.round = round
			results = append(results, res)
		}
	}
	report(stdout, cfg, results)
	return runDispatch(ctx, cfg, stdout, stderr)
}

// runsPerRound counts the receiver runs in a round: inbox-all-new is one
// more.
func runsPerRound(cfg config) int {
	if cfg.allNew && slices.Contains(cfg.receivers, nameInbox) {
		return len(cfg.receivers) + 1
	}
	return len(cfg.receivers)
}

// describeRepeat says what share of the load repeats a job.
func describeRepeat(cfg config) string {
	s := fmt.Sprintf("%g%% repeats", 100*cfg.repeat)
	if runsPerRound(cfg) > len(cfg.receivers) {
		s += " (" + nameInboxAllNew + ": none)"
	}
	return s
}

// receiverSpec says how to start one receiver.
type receiverSpec struct {
	name   string
	argv   func(addr, db string) []string
	table  string  // where it keeps one row per job; "" when it stores nothing
	repeat float64 // share of its deliveries that are repeats
	// pg runs it on a fresh schema of -postgres, db its URL, rather than
	// on a fresh file.
	pg bool
	// replicas is how many copies run at once on the one database, each
	// on its own address, the load split across them; 0 is one.
	replicas int
	// prefill: it starts on a copy of the -prefill database (inbox on
	// SQLite).
	prefill bool
}

// receiverSpecs builds inbox when it is to run, and describes each receiver.
// With cfg.allNew, inbox-all-new runs right after inbox, closest in time.
// inbox-pg and inbox-pg-x2 are left out, with a note in cfg.notes, while
// the inbox binary cannot open a PostgreSQL store from --db.
func receiverSpecs(ctx context.Context, cfg *config, dir string, stderr io.Writer) ([]receiverSpec, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the bench binary: %w", err)
	}
	var bin string
	inbox := func() (func(addr, db string) []string, error) {
		if bin == "" {
			fmt.Fprintln(stderr, "bench: building inbox")
			if bin, err = buildInbox(ctx, dir); err != nil {
				return nil, err
			}
		}
		return func(addr, db string) []string {
			// warn: a log line per request would measure the log's I/O.
			return []string{bin, "serve", "--addr", addr, "--db", db, "--log-level", "warn"}
		}, nil
	}
	var specs []receiverSpec
	for _, name := range cfg.receivers {
		switch name {
		case nameInboxPG, nameInboxPGx2, nameInboxPGw4:
			ok, err := inboxOnPostgres(ctx)
			if err != nil {
				return nil, err
			}
			if !ok {
				cfg.notes = append(cfg.notes, name+" not run: this inbox's --db takes no postgres:// URL yet (its main package does not link inbox/postgres)")
				continue
			}
			argv, err := inbox()
			if err != nil {
				return nil, err
			}
			spec := receiverSpec{name: name, table: "events", argv: argv, repeat: cfg.repeat, pg: true}
			switch name {
			case nameInboxPGx2:
				spec.replicas = 2
			case nameInboxPGw4:
				spec.argv = func(addr, db string) []string { return append(argv(addr, db), "--db-writers", "4") }
			}
			specs = append(specs, spec)
		case commitEachPG:
			specs = append(specs, receiverSpec{name: name, table: "deliveries", repeat: cfg.repeat, pg: true, argv: func(addr, db string) []string {
				return []string{self, referenceArg, commitEachPG, addr, db}
			}})
		case nameInbox:
			argv, err := inbox()
			if err != nil {
				return nil, err
			}
			specs = append(specs, receiverSpec{name: name, table: "events", argv: argv, repeat: cfg.repeat, prefill: true})
			if cfg.allNew {
				specs = append(specs, receiverSpec{name: nameInboxAllNew, table: "events", argv: argv, prefill: true})
			}
		case nameInboxReplica, nameInboxReplicaSync:
			argv, err := inbox()
			if err != nil {
				return nil, err
			}
			specs = append(specs, receiverSpec{name: name, table: "events", repeat: cfg.repeat, argv: func(addr, db string) []string {
				args := append(argv(addr, db), "--replica", "file://"+db+".replica")
				if name == nameInboxReplicaSync {
					args = append(args, "--replica-sync")
				}
				return args
			}})
		case storeNothing:
			specs = append(specs, receiverSpec{name: name, repeat: cfg.repeat, argv: func(addr, db string) []string {
				return []string{self, referenceArg, storeNothing, addr, db}
			}})
		case commitEach, groupCommit:
			specs = append(specs, receiverSpec{name: name, table: "deliveries", repeat: cfg.repeat, argv: func(addr, db string) []string {
				return []string{self, referenceArg, name, addr, db}
			}})
		}
	}
	return specs, nil
}

// buildInbox builds the inbox binary from the module root into dir.
func buildInbox(ctx context.Context, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	root, err := inboxmod.Dir(ctx)
	if err != nil {
		return "", fmt.Errorf("build inbox: %w", err)
	}
	bin := filepath.Join(dir, "inbox")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build inbox: %w\n%s", err, out)
	}
	return bin, nil
}

// childEnv is the bench's environment for the receivers, with the signing
// secret set and any INBOX_* settings removed: the command line alone
// decides how inbox runs.
func childEnv(secret string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "INBOX_") || strings.HasPrefix(kv, refSecretEnv+"=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, refSecretEnv+"="+secret)
}

// result is one receiver's run.
type result struct {
	name    string
	round   int
	load    loadResult
	warmup  time.Duration
	samples []rssSample // once a second from the start of the load, and one at its end
	peak    int64       // VmHWM at the end of the load; 0 when unknown
	rows    int64       // rows stored after the run; -1 when it stores nothing
	// With -pin, the CPUs the receiver's and the bench's threads were
	// allowed on as the load ended, read back from the kernel.
	pinnedTo, loadPinnedTo []int
	loadAvg                string // the 1-minute load average as the load started -> ended
}

// measure starts one receiver (all its replicas) on a fresh database, or
// on a copy of template when it is set and the receiver takes one, loads
// it, and stops it. The receiver is stopped on every path out, and its
// database removed.
func measure(ctx context.Context, spec receiverSpec, cfg config, secret string, env []string, dir, template string) (result, error) {
	runID, err := randomHex(4)
	if err != nil {
		return result{}, err
	}
	db := filepath.Join(dir, spec.name+".db")
	var schema pgSchema
	if spec.pg {
		if schema, err = newSchema(ctx, cfg.postgres, runID); err != nil {
			return result{}, err
		}
		defer schema.drop()
		db = schema.url()
	} else {
		defer removeDB(db)
		if spec.prefill && template != "" {
			if err := copyDB(template, db); err != nil {
				return result{}, fmt.Errorf("copy the pre-filled database: %w", err)
			}
		}
	}
	cpu := -1
	if cfg.pin {
		cpu = cfg.pins.receiver
	}
	var children []*child
	defer func() {
		for _, c := range children {
			c.stop()
		}
	}()
	var urls []string
	var pids []int
	for i := range max(spec.replicas, 1) {
		addr, err := freeAddr()
		if err != nil {
			return result{}, err
		}
		name := spec.name
		if spec.replicas > 1 {
			name = fmt.Sprintf("%s replica %d", spec.name, i+1)
		}
		c, err := startChild(name, spec.argv(addr, db), env, cpu)
		if err != nil {
			return result{}, err
		}
		children = append(children, c)
		if cfg.pin {
			// A thread the runtime made while the fork's thread was narrowed
			// would carry load onto the receiver's CPU.
			if err := pinThreads(os.Getpid(), cfg.pins.load); err != nil {
				return result{}, fmt.Errorf("-pin: %w", err)
			}
		}
		if err := c.waitListening(ctx, addr); err != nil {
			return result{}, err
		}
		urls = append(urls, "http://"+addr+refPath)
		pids = append(pids, c.cmd.Process.Pid)
	}

	// A receiver that exits ends its load at once.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, c := range children {
		go func() {
			select {
			case <-c.done:
				cancel()
			case <-lctx.Done():
			}
		}()
	}
	meter := newCPUMeter(pids...)
	if spec.pg {
		meter.server = &serverMeter{dsn: cfg.postgres, appName: schema.name, hz: meter.hz}
	}
	start := time.Now()
	sampled := make(chan []rssSample, 1)
	sctx, stopSampling := context.WithCancel(lctx)
	go func() { sampled <- sampleRSS(sctx, start, pids...) }()

	avgBefore := loadAvg()
	lr := load{
		urls:        urls,
		secret:      secret,
		runID:       runID,
		randomIDs:   cfg.randomIDs,
		repeats:     newRepeatSchedule(spec.repeat),
		conns:       cfg.conns,
		bodySize:    cfg.bodySize,
		warmup:      cfg.warmup,
		duration:    cfg.duration,
		maxRequests: cfg.maxRequests,
		meter:       meter.read,
	}.run(lctx)
	stopSampling()
	res := result{name: spec.name, load: lr, warmup: cfg.warmup, samples: <-sampled, rows: -1,
		loadAvg: avgBefore + " -> " + loadAvg()}

	// Checked first: an interrupt reaches the receiver too, and then it is
	// the reason the receiver exited.
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	for _, c := range children {
		select {
		case <-c.done:
			return result{}, c.exitError()
		default:
		}
	}
	if m, err := readMemories(pids); err == nil {
		res.peak = m.peak
		res.samples = append(res.samples, rssSample{at: time.Since(start), rss: m.rss})
	}
	if cfg.pin {
		// Read back rather than assumed: what the kernel holds the
		// threads to is what was measured.
		for _, pid := range pids {
			if res.pinnedTo, err = allowedCPUs(pid); err != nil {
				return result{}, fmt.Errorf("-pin: %w", err)
			}
			if !slices.Equal(res.pinnedTo, []int{cfg.pins.receiver}) {
				return result{}, fmt.Errorf("-pin: %s ran on CPUs %s, want %d", spec.name, formatCPUs(res.pinnedTo), cfg.pins.receiver)
			}
		}
		if res.loadPinnedTo, err = allowedCPUs(os.Getpid()); err != nil {
			return result{}, fmt.Errorf("-pin: %w", err)
		}
		if !slices.Equal(res.loadPinnedTo, []int{cfg.pins.load}) {
			return result{}, fmt.Errorf("-pin: the load generator ran on CPUs %s, want %d", formatCPUs(res.loadPinnedTo), cfg.pins.load)
		}
	}
	for _, c := range children {
		c.stop()
	}
	switch {
	case spec.table == "":
	case spec.pg:
		if res.rows, err = schema.countRows(ctx, spec.table); err != nil {
			return result{}, err
		}
	default:
		if res.rows, err = countRows(ctx, db, spec.table); err != nil {
			return result{}, err
		}
		if spec.prefill && template != "" {
			res.rows -= cfg.prefill // the run's own rows, beside its acked new ones
		}
	}
	return res, nil
}

// removeDB removes a receiver's database so a long run does not fill the
// disk with the previous receiver's rows.
func removeDB(path string) {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
}

// commandLine is how this run was invoked, for the record, with any
// URL's password hidden.
func commandLine(args []string) string {
	parts := []string{"go", "run", "./bench"}
	for _, a := range args {
		a = redactURL(a)
		if strings.ContainsAny(a, " \t\"'$\\") {
			a = fmt.Sprintf("%q", a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// countRows counts the rows a receiver left in its database, to show that
// what it acknowledged was stored.
func countRows(ctx context.Context, path, table string) (int64, error) {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(3000)&_pragma=query_only(ON)")
	if err != nil {
		return 0, fmt.Errorf("count rows: %w", err)
	}
	defer db.Close()
	var n int64
	// table is one of this program's constants, never input.
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		return 0, fmt.Errorf("count rows in %s: %w", path, err)
	}
	return n, nil
}

// envInt reads an integer setting from the environment variable name: 0
// when it is unset.
func envInt(name string) (int64, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: want a number of rows", name, v)
	}
	return n, nil
}
