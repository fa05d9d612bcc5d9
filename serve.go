package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/console"
	"inbox/deploy"
	"inbox/health"
	"inbox/inbox"
	"inbox/metrics"
	"inbox/receiver"
	"inbox/reconcile"
	"inbox/scheme"
)

// probeTimeout bounds a readiness probe's and a scrape's reads of the store.
const probeTimeout = 2 * time.Second

// defaultBodyTimeout is --body-timeout's default: a real delivery's few KiB
// arrive with the headers, so a body still missing after this stalled.
const defaultBodyTimeout = 2 * time.Second

func serveCommand(logOut io.Writer) *cli.Command {
	def := receiver.DefaultLimits()
	return &cli.Command{
		Name:  "serve",
		Usage: "receive webhooks",
		Description: `Verifies each delivery's signature, stores it once per job, parks what can
never be processed, and answers 204 only once the row is on disk. GET
/healthz, /readyz and /metrics answer on --admin-addr, or beside the
webhooks when it is not set. With --admin-addr, GET / there is a read-only
web console (rows per status, source, reason and destination, the last
24 hours, the queue, the secrets' last uses and each source's failed
verifications, missed and overdue jobs, the rows and each row with its
destinations); without it there is no console: it is never served beside
the webhooks. /readyz commits a probe as a delivery would
(a row into events, undone): after a commit failed for the store's reasons
(disk, lock, permission, connection), it writes as much as the failed
delivery did, and fails until such a commit succeeds; 401, 413, parked
bodies and --max-in-flight's 503s never touch it. SIGTERM or SIGINT stops it gracefully; a
second one at once. With a destination, it also hands the new rows on, as
inbox dispatch does (without one, run inbox dispatch beside it, or nothing
takes the rows). With --config, it serves every [[source]] of the file
instead, and the flags that describe the one Sume source (--secret, --path,
--tolerance, --event, --max-body, --max-request) are refused. SIGHUP reads
the file again: one that passes every check of start-up serves the next
requests (those in flight finish under the old one); one that fails any
is refused with one log line, and the running config stays. The file
must be a regular file of at most 1 MiB read within 5s (a FIFO, a device
or a hung mount is refused); a SIGHUP during a reload is logged and
reads the file once more after it. Secrets named
by env = ... come from serve's environment, which a reload cannot change.
With --admin-addr, GET /sources there lists the sources served now, as
inbox sources --admin prints them, and GET /destinations the destinations
(inbox destinations --admin). A serve that dispatches reloads its
[[destination]] tables too, as inbox dispatch does; a file refused for a
destination changes no source either.

` + destinationHelp + `

A delivery answered 503 because the store could not take it is remembered
and, once the store takes writes again, listed by inbox missed until the
key is delivered. ` + reconcileHelp + `

On PostgreSQL, serve starts even while the database cannot be reached
(connection refused or reset, a timeout, a name that does not resolve, the
server starting up or shutting down): it listens at once, answers every
verified delivery 503 with Retry-After and remembers its key, fails
/readyz, logs the outage once, and opens the store (migrations and checks)
by itself once the database answers. What the server refuses (the role or
password, a database that does not exist, synchronous_commit off) stops it
at once, as a URL that does not parse does. On SIGTERM while the database
hangs, it stops within --busy-timeout (the drain) and 7 s more; each
refused key it could not record is logged (source, key, job), to ask for
again with inbox redeliver.

Examples:
   SUME_COM_WEBHOOK_SIGNING_SECRET=whsec_current inbox serve
   SUME_COM_WEBHOOK_SIGNING_SECRET=old,new inbox serve --addr :8080 --db /var/lib/inbox/inbox.db
   inbox serve --admin-addr 127.0.0.1:8081 --max-in-flight 256
   inbox serve --max-body-memory 128MiB
   inbox serve --body-timeout 1s --read-timeout 8s
   inbox serve --event job.completed --event job.failed --max-body 2MiB
   inbox serve --forward-url http://127.0.0.1:3000/jobs --workers 8
   inbox serve --config /etc/inbox/inbox.toml --db /var/lib/inbox/inbox.db
   INBOX_DB='postgres://inbox:...@db.internal/inbox?sslmode=verify-full' inbox serve --db-max-conns 16
   SUME_API_KEY=... inbox serve --admin-addr 127.0.0.1:8081 --poll-every 1m --poll-backoff 5m --api-rate 2 --api-concurrency 4
   SUME_API_KEY=... inbox serve --api-url https://api.sume.com`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "listen address", EnvVars: []string{"INBOX_ADDR"}},
			&cli.StringFlag{Name: "admin-addr", Usage: "listen address for /healthz, /readyz, /metrics and the read-only web console at /; empty: serve the probes on --addr, and no console", EnvVars: []string{"INBOX_ADMIN_ADDR"}},
			config.DBFlag(),
			config.FileFlag("TOML file of [[source]] tables to serve, each at its own path, and [[destination]] tables to hand rows to; without it serve is the one Sume source --secret, --path, --tolerance, --event, --max-body and --max-request describe"),
			&cli.StringSliceFlag{Name: "secret", Usage: "signing secret; repeat or comma-separate to accept several during a rotation (prefer the environment variable: flags show in ps)", EnvVars: []string{"SUME_COM_WEBHOOK_SIGNING_SECRET"}},
			config.DurationFlag("tolerance", config.DefaultTolerance, "how far the signed timestamp may be from now, either way", "INBOX_TOLERANCE", config.Positive),
			config.EventsFlag(),
			config.MaxBodyFlag(),
			&cli.StringFlag{Name: "max-request", Value: "4MiB", Usage: "hard cap: larger requests get 413 and are not read", EnvVars: []string{"INBOX_MAX_REQUEST"}},
			&cli.StringFlag{Name: "path", Value: "/webhooks/sume", Usage: "the webhook path", EnvVars: []string{"INBOX_PATH"}},
			config.BusyTimeoutFlag("how long a delivery waits for another process's lock before the answer is 503; at most --read-timeout, so the 503 is written before the write deadline"),
			&cli.IntFlag{Name: "max-in-flight", Value: 512, Usage: "webhook requests verified and stored at once, all sources together (a body still arriving takes no place); beyond it the answer is 503 with Retry-After", EnvVars: []string{"INBOX_MAX_IN_FLIGHT"}},
			&cli.StringFlag{Name: "max-body-memory", Value: "64MiB", Usage: "webhook bodies held in memory at once, all sources together, each taking its bytes as they arrive (above 64 KiB a body may fill only three quarters); a body it cannot take gets 503 with Retry-After; at least twice the largest --max-request", EnvVars: []string{"INBOX_MAX_BODY_MEMORY"}},
			config.DurationFlag("read-header-timeout", def.ReadHeaderTimeout, "a client that has not sent its headers by then is disconnected", "INBOX_READ_HEADER_TIMEOUT", config.Positive),
			config.DurationFlag("read-timeout", def.ReadTimeout, "a request not wholly read by then, body included, is given up; answers are written within a second more", "INBOX_READ_TIMEOUT", config.Positive),
			config.DurationFlag("body-timeout", defaultBodyTimeout, "a body not in this long after its headers, plus a second per 64 KiB received, is given up (408) and holds no place in --max-in-flight meanwhile", "INBOX_BODY_TIMEOUT", config.Positive),
			logLevelFlag(),
		}, append(append(dbWriteFlags(), dispatchFlags()...), reconcileFlags()...)...),
		Action: func(c *cli.Context) error {
			cfg, err := parseServe(c)
			if err != nil {
				return err
			}
			log, err := newLogger(logOut, cfg.logLevel)
			if err != nil {
				return err
			}
			// Bind first: a busy port must not leave a new, empty database
			// behind.
			ln, aln, err := listen(cfg.addr, cfg.adminAddr)
			if err != nil {
				return err
			}
			defer closeAll(ln, aln)
			reg := newRegistry()
			m := metrics.New(reg)
			commits := &health.Commits{}
			ctx, stop := context.WithCancelCause(c.Context)
			defer stop(nil)
			store, err := openStore(ctx, cfg.db, storeOptions{
				schema:      schema,
				busyTimeout: cfg.busyTimeout,
				onCommit: func(c inbox.Commit) {
					m.Committed(c)
					commits.Committed(c)
				},
				onFileLost: logLost(log, describeDB(cfg.db), fileLost, fileBack),
				wait:       true,
				onDown:     logLost(log, describeDB(cfg.db), dbDown, dbBack),
				onFatal:    stop,
				pg:         cfg.pg,
			})
			if err != nil {
				return err
			}
			defer store.Close()
			return stoppedBy(ctx, runServe(ctx, cfg, store, serveDeps{ln: ln, aln: aln, reg: reg, metrics: m, commits: commits, log: log}))
		},
	}
}

// serveConfig is what serve's flags and --config say, checked: all that
// runServe needs but the store and the listeners.
type serveConfig struct {
	db, logLevel    string
	addr, adminAddr string
	configFile      string // --config; "" without it
	sources         []config.Source
	// readableConfig, when set, is who besides this user can read the
	// --config file that holds secrets: warned of at start.
	readableConfig string
	limits         receiver.Limits
	bodyTimeout    time.Duration
	pg             pgOptions
	busyTimeout    time.Duration
	maxInFlight    int
	// bodyMemory bounds the bodies held in memory at once (--max-body-memory,
	// as typed in bodyMemoryText).
	bodyMemory     int64
	bodyMemoryText string
	reconcile      reconcileConfig
	// dispatch is the destinations' settings; none when neither a
	// destination flag nor a [[destination]] is set.
	dispatch []dispatchConfig
	// reparseDispatch reads them again, for a reload.
	reparseDispatch func() ([]dispatchConfig, error)
}

// parseServe reads serve's flags into a serveConfig. It fails, naming the
// flag, on any value serve cannot run with; it opens nothing and binds
// nothing.
func parseServe(c *cli.Context) (serveConfig, error) {
	if err := config.NoArgs(c); err != nil {
		return serveConfig{}, err
	}
	cfg := serveConfig{db: c.String("db"), logLevel: c.String("log-level"), configFile: c.String("config"), addr: c.String("addr"), adminAddr: c.String("admin-addr"),
		bodyTimeout: config.DurationOf(c, "body-timeout").Get(), busyTimeout: config.DurationOf(c, "busy-timeout").Get(), maxInFlight: c.Int("max-in-flight")}
	if err := checkLogLevel(cfg.logLevel); err != nil {
		return serveConfig{}, err
	}
	pg, err := parsePGOptions(c, cfg.db)
	if err != nil {
		return serveConfig{}, err
	}
	cfg.pg = pg
	rules, err := config.Rules(c)
	if err != nil {
		return serveConfig{}, err
	}
	maxRequest, err := config.ParseSize(c.String("max-request"))
	if err != nil {
		return serveConfig{}, fmt.Errorf("--max-request: %w", err)
	}
	if cfg.sources, err = serveSources(c, rules, maxRequest); err != nil {
		return serveConfig{}, err
	}
	if cfg.configFile != "" && valueSecrets(cfg.sources) {
		cfg.readableConfig = readableByOthers(cfg.configFile)
	}
	lim := receiver.DefaultLimits()
	header, read := config.DurationOf(c, "read-header-timeout"), config.DurationOf(c, "read-timeout")
	lim.ReadHeaderTimeout, lim.ReadTimeout = header.Get(), read.Get()
	lim.WriteTimeout = lim.ReadTimeout + time.Second
	if lim.ReadTimeout < lim.ReadHeaderTimeout {
		return serveConfig{}, fmt.Errorf("--read-header-timeout %q and --read-timeout %q: want 0 < header timeout <= read timeout", header, read)
	}
	cfg.limits = lim
	if cfg.bodyTimeout > lim.ReadTimeout {
		return serveConfig{}, config.DurationOf(c, "body-timeout").Errorf("want 0 < body timeout <= --read-timeout %q", read)
	}
	if cfg.maxInFlight < 1 {
		return serveConfig{}, fmt.Errorf("--max-in-flight must be at least 1, got %d", cfg.maxInFlight)
	}
	if most := lim.WriteTimeout - answerMargin; cfg.busyTimeout > most {
		// A delivery's 503 could not be written before the write deadline:
		// the sender would see a reset connection rather than a Retry-After.
		return serveConfig{}, config.DurationOf(c, "busy-timeout").Errorf("a delivery that waits that long for the lock gets its 503 after the %s write deadline (--read-timeout + 1s); want at most %s, or a longer --read-timeout", lim.WriteTimeout, most)
	}
	if cfg.bodyMemory, err = config.ParseSize(c.String("max-body-memory")); err != nil {
		return serveConfig{}, fmt.Errorf("--max-body-memory: %w", err)
	}
	cfg.bodyMemoryText = c.String("max-body-memory")
	if err := cfg.checkSources(cfg.sources); err != nil {
		return serveConfig{}, err
	}
	if cfg.reconcile, err = parseReconcile(c); err != nil {
		return serveConfig{}, err
	}
	largest := largestBody(cfg.sources)
	cfg.reparseDispatch = func() ([]dispatchConfig, error) {
		d, err := parseDispatch(c)
		if errors.Is(err, errNoDestination) {
			return nil, nil // serve only receives
		}
		for i := range d {
			d[i].maxBody = largest
		}
		return d, err
	}
	if cfg.dispatch, err = cfg.reparseDispatch(); err != nil {
		return serveConfig{}, err
	}
	return cfg, nil
}

// checkSources refuses sources serve cannot serve beside its other
// settings: a path the mux cannot take or that hides a probe, a request
// cap --max-body-memory cannot hold twice. serve runs it at start and on
// each reload.
func (cfg serveConfig) checkSources(sources []config.Source) error {
	budget := receiver.NewBudget(cfg.bodyMemory)
	for _, src := range sources {
		if err := checkPath(src.Path, cfg.adminAddr == ""); err != nil {
			return err
		}
		if !budget.Holds(src.HardCap) {
			return fmt.Errorf("--max-body-memory %s: want at least twice the request cap of source %s (--max-request or max_request, %d bytes)", cfg.bodyMemoryText, src.Name, src.HardCap)
		}
	}
	return nil
}

// serveDeps are what serve made before the store: the listeners (aln nil
// without --admin-addr), the metrics, the record of the store's commits
// that readiness follows (the store's OnCommit feeds it) and the logger.
type serveDeps struct {
	ln, aln net.Listener
	reg     *prometheus.Registry
	metrics *metrics.Metrics
	commits *health.Commits
	log     zerolog.Logger
}

// runServe serves cfg's sources on store until ctx is done, then drains
// the requests in flight, stops the dispatcher and saves the secret uses.
// It closes store before it returns.
func runServe(ctx context.Context, cfg serveConfig, store inbox.Store, deps serveDeps) error {
	log, reg, m := deps.log, deps.reg, deps.metrics
	// From the start, so that a SIGHUP never ends serve.
	hup, stopHangups := hangups()
	defer stopHangups()
	if cfg.readableConfig != "" {
		log.Warn().Str("config", cfg.configFile).Msg("the config holds secrets (value = ...) and is readable by " + cfg.readableConfig + ": chmod 0600 it, or use env = ...")
	}
	storeMetrics := metrics.NewStoreCollector(store, probeTimeout, nil)
	reg.MustRegister(storeMetrics)
	refusals := reconcile.NewRefusals(reconcile.DefaultMaxRefusals, nil)
	metrics.Refusals(reg, refusals.Len, refusals.Dropped)
	reg.MustRegister(metrics.NewReconcileCollector(store, probeTimeout, nil))
	rec, err := newReconciler(cfg.reconcile, store, refusals, log, reg)
	if err != nil {
		return err
	}
	// The dispatcher shares the store, so its writes go through the
	// store's one writer, in the receiver's commits. Without a destination
	// it has none, until a reload adds one.
	dests, err := newLiveDestinations(ctx, cfg.dispatch, cfg.reparseDispatch, observedQueue{store, deps.commits, false}, store.PausedDestinations, log, reg, false)
	if err != nil {
		return err
	}
	dests.watchRouting(ctx, store)
	// One count for every source: --max-in-flight bounds the process.
	inFlight, receiving := new(atomic.Int64), new(atomic.Int64)
	budget := receiver.NewBudget(cfg.bodyMemory)
	// Without --admin-addr the probes answer beside the webhooks, in
	// every set of sources a reload makes.
	var probes *http.ServeMux
	if deps.aln == nil {
		probes = http.NewServeMux()
		handleOps(probes, store, deps.commits, reg, log, dests.dependencies)
	}
	live := &liveSources{check: cfg.checkSources, grace: cfg.limits.WriteTimeout + time.Second, log: log}
	live.build = func(sources []config.Source) (*sourceSet, error) {
		set := &sourceSet{sources: sources, mux: http.NewServeMux()}
		for _, src := range sources {
			h, err := receiver.NewHandler(store, receiver.Config{
				Source:      src.Name,
				Scheme:      src.Scheme,
				Keys:        src.Keys,
				Accepted:    src.Accepted,
				Rules:       src.Rules,
				HardCap:     src.HardCap,
				MaxInFlight: cfg.maxInFlight,
				InFlight:    inFlight,
				Receiving:   receiving,
				Budget:      budget,
				BodyTimeout: cfg.bodyTimeout,
				OnAnswer:    m.Answered(src.Name),
				OnSkew:      m.Skewed(src.Name),
				OnRefused:   refusals.Add,
			}, log)
			if err != nil {
				return nil, fmt.Errorf("source %s: %w", src.Name, err)
			}
			set.handlers = append(set.handlers, h)
			set.mux.Handle(src.Path, h)
		}
		if probes != nil {
			for _, p := range []string{"GET /healthz", "GET /readyz", "GET /metrics"} {
				set.mux.Handle(p, probes)
			}
		}
		return set, nil
	}
	set, err := live.build(cfg.sources)
	if err != nil {
		return err
	}
	live.cur.Store(set)
	metrics.InFlight(reg, func() int { return int(inFlight.Load() + receiving.Load()) })
	var web http.Handler = live
	ops := http.NewServeMux()
	if deps.aln != nil {
		handleOps(ops, store, deps.commits, reg, log, dests.dependencies)
		handleExpect(cfg.reconcile.apiURL, ops, store, log)
		handleSources(ops, live, store, log)
		handleDestinations(ops, dests)
		var cons atomic.Pointer[console.Console]
		cons.Store(console.New(store, consoleConfig(cfg, cfg.sources, cfg.dispatch), log))
		live.onSwap = func(sources []config.Source) {
			cons.Store(console.New(store, consoleConfig(cfg, sources, dests.configs()), log))
		}
		dests.onSwap = func(cfgs []dispatchConfig) {
			cons.Store(console.New(store, consoleConfig(cfg, live.sources(), cfgs), log))
		}
		ops.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { cons.Load().ServeHTTP(w, r) }))
	}
	endpoints := []receiver.Endpoint{{Name: "webhooks", Listener: deps.ln, Handler: web}}
	if deps.aln != nil {
		endpoints = append(endpoints, receiver.Endpoint{Name: "admin", Listener: deps.aln, Handler: ops})
	}
	for _, src := range cfg.sources {
		log.Info().Str("db", describeDB(cfg.db)).Str("source", src.Name).Str("scheme", src.Scheme.Name()).Str("path", src.Path).
			Strs("events", src.Rules.Events).Bool("dispatch", len(cfg.dispatch) > 0).Msg("starting")
	}
	// The dispatcher and the recorder outlive the receiver's drain: they
	// stop once Serve has returned, so the last requests' rows can still
	// be handed on and their secret uses are saved.
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	recorded := make(chan error, 1)
	go func() {
		recorded <- recordVerifications(bg, store, live.secretUses, live.unverified, secretUsePeriod, cfg.reconcile.loop.WriteTimeout)
	}()
	// A file any step refuses changes none.
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		reloadOnHangup(bg, hup, cfg.configFile, log, live.reload, dests.reload)
	}()
	dispatched := make(chan error, 1)
	go func() { dispatched <- dests.run(bg) }()
	reconciled := make(chan error, 1)
	go func() { reconciled <- rec.Run(bg) }()
	// The row counts are read in the background: a scrape of a large
	// inbox then takes no longer than of an empty one.
	counted := make(chan error, 1)
	go func() { counted <- storeMetrics.Run(bg) }()
	serveErr := receiver.Serve(ctx, cfg.limits, log, endpoints...)
	cancel()
	<-reloaded
	if err := errors.Join(serveErr, <-dispatched, <-recorded, <-reconciled, <-counted, store.Close()); err != nil {
		return err
	}
	log.Info().Msg("stopped")
	return nil
}

// answerMargin is what a 503 needs after the busy timeout to reach the
// sender before the write deadline: the answer itself, and the reading of
// a body that took its time.
const answerMargin = time.Second

// What logLost says of a SQLite file that went from its path, and of a
// PostgreSQL that cannot be reached at start.
const (
	fileLost = "database file lost: nothing is written (deliveries get 503) and /readyz fails until it is back at its path"
	fileBack = "database file back at its path: writing again"
	dbDown   = "database cannot be reached: every write fails (deliveries get 503, their keys kept for inbox missed; no row is handed on) and /readyz fails until it answers; then the store opens by itself"
	dbBack   = "database reached: the store is open"
)

// logLost logs, once each time, that the database went away (lost, with
// the error) and that it is back.
func logLost(log zerolog.Logger, db, lost, back string) func(error) {
	return func(err error) {
		if err != nil {
			log.Error().Err(err).Str("db", db).Msg(lost)
			return
		}
		log.Info().Str("db", db).Msg(back)
	}
}

// stoppedBy returns err on one line, or the store's own error when that is
// what stopped ctx: a store opened in the background found a configuration
// it cannot work with once its database answered (what failed after it,
// for want of the store, was logged).
func stoppedBy(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if err == nil {
		return nil
	}
	return oneLine{err}
}

// newRegistry returns a registry with the Go runtime's and the process's
// metrics.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// handleOps adds the probes and /metrics to mux: /healthz while the process
// serves, /readyz while store takes a write like the real ones commits
// has seen (and the dependencies deps returns say how they stand), /metrics what reg gathers.
func handleOps(mux *http.ServeMux, store health.Prober, commits *health.Commits, reg prometheus.Gatherer, log zerolog.Logger, deps func() []health.Dependency) {
	mux.Handle("GET /healthz", health.Live())
	mux.Handle("GET /readyz", health.ReadyWith(store, commits, probeTimeout, log, deps))
	mux.Handle("GET /metrics", metrics.Handler(reg, log))
}

// consoleConfig is what the console shows of cfg with sources and the
// destinations dispatch: the sources and their secrets' fingerprints, the
// store and the destinations, never a secret.
func consoleConfig(cfg serveConfig, sources []config.Source, dispatch []dispatchConfig) console.Config {
	c := console.Config{DB: describeDB(cfg.db)}
	for _, src := range sources {
		c.Sources = append(c.Sources, console.Source{Name: src.Name, Path: src.Path, Scheme: src.Scheme.Name(), Keys: src.Keys})
	}
	var dests []string
	for _, d := range dispatch {
		dests = append(dests, d.route.Name+" ("+d.kind()+")")
	}
	c.Destination = strings.Join(dests, ", ")
	return c
}

// listen binds addr and, when it is not empty, adminAddr (aln nil then). On
// failure nothing stays bound.
func listen(addr, adminAddr string) (ln, aln net.Listener, err error) {
	if ln, err = net.Listen("tcp", addr); err != nil {
		return nil, nil, fmt.Errorf("--addr: %w", err)
	}
	if adminAddr == "" {
		return ln, nil, nil
	}
	if aln, err = net.Listen("tcp", adminAddr); err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("--admin-addr: %w", err)
	}
	return ln, aln, nil
}

// closeAll closes the listeners that are not nil; Serve closes them too, so
// this only matters on the way out before it.
func closeAll(lns ...net.Listener) {
	for _, ln := range lns {
		if ln != nil {
			ln.Close()
		}
	}
}

// secretUsePeriod is how often serve saves when each secret last verified
// a delivery, and the requests that failed verification: cheap, and fine
// enough to tell when an old secret can go or a rotation broke. A flood of
// forgeries costs no more writes than one.
const secretUsePeriod = time.Minute

// recordVerifications saves the secret uses, then the failed
// verifications, every period (serve's is secretUsePeriod) and once more
// when ctx is done, within last, then returns the last save's error. uses
// returns the secret uses, and what to call once they are saved;
// unverified takes the failures since its last call, which are kept, one
// run a source, until a save takes them. The uses go first: a run the
// store holds is over once a delivery verified after it began.
func recordVerifications(ctx context.Context, store inbox.Store, uses func() ([]inbox.SecretUse, func()), unverified func() []inbox.Unverified, every, last time.Duration) error {
	pending := map[string]inbox.Unverified{}
	save := func(ctx context.Context) error {
		for _, run := range unverified() {
			if run.Count > 0 {
				pending[run.Source] = pending[run.Source].Add(run)
			}
		}
		u, saved := uses()
		if err := store.RecordSecretUses(ctx, u); err != nil {
			return err
		}
		saved()
		runs := slices.Collect(maps.Values(pending))
		if err := store.RecordUnverified(ctx, runs); err != nil {
			return err
		}
		clear(pending)
		return nil
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			save(ctx) // a failed save is retried at the next tick, with the same times and failures
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), last)
			defer cancel()
			return save(sctx)
		}
	}
}

// serveSources returns the sources of --config, or without it the one Sume
// source the flags describe, as serve has always served it.
func serveSources(c *cli.Context, rules inbox.Rules, maxRequest int64) ([]config.Source, error) {
	if file := c.String("config"); file != "" {
		if err := config.Excludes(c, "secret", "path", "tolerance", "event", "max-body", "max-request"); err != nil {
			return nil, err
		}
		return fileSources(file)
	}
	secrets, err := config.SplitList(c.StringSlice("secret"))
	if err != nil {
		return nil, fmt.Errorf("signing secret: %w", err)
	}
	if len(secrets) == 0 {
		return nil, errors.New("no signing secret: set SUME_COM_WEBHOOK_SIGNING_SECRET (or --secret), or give --config")
	}
	if slices.ContainsFunc(secrets, deploy.Placeholder) {
		return nil, errors.New("SUME_COM_WEBHOOK_SIGNING_SECRET (or --secret) holds the placeholder of the shipped inbox.env: set it to the signing secret from Sume's dashboard")
	}
	keys := make([]scheme.Secret, len(secrets))
	entries := make([]config.SecretEntry, len(secrets))
	for i, s := range secrets {
		keys[i] = scheme.Secret{Key: []byte(s)}
		entries[i] = config.SecretEntry{Env: "SUME_COM_WEBHOOK_SIGNING_SECRET", Key: keys[i].Key}
	}
	return []config.Source{{Name: inbox.DefaultSource, Path: c.String("path"), Scheme: scheme.Sume{Tolerance: config.DurationOf(c, "tolerance").Get()},
		Keys: keys, Rules: rules, HardCap: maxRequest, Accepted: http.StatusNoContent, Secrets: entries}}, nil
}

// valueSecrets reports whether any source has a secret written in the file
// itself (value = ...) rather than named by env.
func valueSecrets(sources []config.Source) bool {
	for _, src := range sources {
		for _, e := range src.Secrets {
			if e.Env == "" {
				return true
			}
		}
	}
	return false
}

// readableByOthers says who besides this process's user and group can read
// file ("others", "its group"), or "" when nobody else (or it cannot tell).
func readableByOthers(file string) string {
	fi, err := os.Stat(file)
	if err != nil {
		return ""
	}
	perm := fi.Mode().Perm()
	if perm&0o004 != 0 {
		return "others"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && perm&0o040 != 0 && int(st.Gid) != os.Getgid() {
		return "its group"
	}
	return ""
}

// checkPath refuses a webhook path the mux cannot take as a plain path, or
// that would shadow a probe served beside it.
func checkPath(path string, sharesAdmin bool) error {
	if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \t{}") {
		return fmt.Errorf("--path must start with / and hold no spaces or braces, got %q", path)
	}
	if sharesAdmin && (path == "/healthz" || path == "/readyz" || path == "/metrics") {
		return fmt.Errorf("--path %s would hide a probe: choose another, or set --admin-addr", path)
	}
	return nil
}

// largestBody is the largest body sources hand on: their max_body (or
// --max-body), or, with none, their request cap.
func largestBody(sources []config.Source) int64 {
	var most int64
	for _, src := range sources {
		b := src.Rules.MaxBody
		if b <= 0 {
			b = src.HardCap
		}
		most = max(most, b)
	}
	return most
}
