// Package process runs inbox's long-lived process from a Config carried
// as data: serve is the run with sources (it receives, and hands rows on
// when it has destinations), dispatch the run without (it only hands rows
// on). It holds, once for both, the ops endpoints (/healthz, /readyz,
// /metrics, /destinations, /sources, /expect, the console), the reload on
// SIGHUP, the live sources and the live destinations. It knows no flag:
// main turns the commands' flags into a Config, and a reload reads the
// file again through the funcs the Config gives.
package process

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"inbox/config"
	"inbox/health"
	"inbox/inbox"
	"inbox/metrics"
	"inbox/receiver"
	"inbox/reconcile"
	"inbox/sume"
)

// Config is what a run needs, checked: all but the store, which Open opens.
type Config struct {
	Log zerolog.Logger
	// DB is the store as logs show it (no password).
	DB string
	// Open opens the store, its observers told of commits, a lost file, a
	// database down and a fatal refusal (see stores.Options).
	Open func(ctx context.Context, o StoreObservers) (inbox.Store, error)
	// Addr is where the webhooks are served (serve only); AdminAddr, when
	// set, where the ops endpoints are (serve answers the probes on Addr
	// without it).
	Addr, AdminAddr string
	// File is --config, "" without it: what a SIGHUP reads again.
	File string
	// Sources are served on Addr; none is the run of inbox dispatch.
	Sources     []config.Source
	Limits      receiver.Limits
	BodyTimeout time.Duration
	MaxInFlight int
	// BodyMemory bounds the bodies held in memory at once
	// (--max-body-memory, as typed in BodyMemoryText).
	BodyMemory     int64
	BodyMemoryText string
	Reconcile      Reconcile
	// Destinations are where the rows are handed on; none: serve only
	// receives (until a reload adds one).
	Destinations []config.Destination
	// ReadDestinations reads them again, as at start, for a reload.
	ReadDestinations func() ([]config.Destination, error)
	// MaxBody is the largest body the sources hand on, which a NATS
	// destination checks against its server's max_payload at start.
	MaxBody int64
}

// StoreObservers are what a run has the store tell it.
type StoreObservers struct {
	OnCommit        func(inbox.Commit)
	OnFileLost      func(error)
	OnDown, OnFatal func(error)
}

// Reconcile is what the polling flags say, checked.
type Reconcile struct {
	Loop   reconcile.Config // without Refusals, API and OnRequest
	APIURL string
	// API is the Sume client with --api-key; nil without it: no polling.
	API *sume.Client
}

// receives reports whether cfg is serve's run, with sources.
func (cfg Config) receives() bool { return len(cfg.Sources) > 0 }

// Run runs cfg until ctx is done: serve's run when cfg has sources,
// dispatch's without. It binds its addresses before it opens the store (a
// busy port must not leave a new, empty database behind), and returns the
// store's own error when that is what stopped it.
func Run(ctx context.Context, cfg Config) error {
	// From the start, so that a SIGHUP never ends the process.
	hup, stopHangups := hangups()
	defer stopHangups()
	ln, aln, err := listen(cfg.Addr, cfg.AdminAddr)
	if err != nil {
		return err
	}
	defer closeAll(ln, aln)
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	r := &run{cfg: cfg, log: cfg.Log, reg: newRegistry(), commits: &health.Commits{}, ln: ln, aln: aln, hup: hup}
	obs := StoreObservers{OnCommit: r.commits.Committed, OnFileLost: logLost(r.log, cfg.DB, fileLost, fileBack),
		OnDown: logLost(r.log, cfg.DB, dbDown, dbBack), OnFatal: stop}
	if cfg.receives() {
		r.metrics = metrics.New(r.reg)
		obs.OnCommit = func(c inbox.Commit) {
			r.metrics.Committed(c)
			r.commits.Committed(c)
		}
	}
	store, err := cfg.Open(ctx, obs)
	if err != nil {
		return err
	}
	defer store.Close()
	r.store = store
	if cfg.receives() {
		return stoppedBy(ctx, r.serve(ctx))
	}
	return stoppedBy(ctx, r.dispatch(ctx))
}

// run is what a Run made before it serves.
type run struct {
	cfg      Config
	log      zerolog.Logger
	reg      *prometheus.Registry
	metrics  *metrics.Metrics    // serve's
	refusals *reconcile.Refusals // serve's
	commits  *health.Commits     // what readiness follows
	ln, aln  net.Listener        // aln nil without an admin address
	hup      <-chan os.Signal
	store    inbox.Store
	deps     func() []health.Dependency // what /readyz shows beside the store (serve's)
}

// probeTimeout bounds a readiness probe's and a scrape's reads of the store.
const probeTimeout = 2 * time.Second

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

// stoppedBy returns err, or the store's own error when that is what
// stopped ctx: a store opened in the background found a configuration it
// cannot work with once its database answered (what failed after it, for
// want of the store, was logged).
func stoppedBy(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// newRegistry returns a registry with the Go runtime's and the process's
// metrics.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// listen binds addr, when it is not empty (serve), and adminAddr, when it
// is not empty (nil listeners otherwise). On failure nothing stays bound.
func listen(addr, adminAddr string) (ln, aln net.Listener, err error) {
	if addr != "" {
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, nil, fmt.Errorf("--addr: %w", err)
		}
	}
	if adminAddr == "" {
		return ln, nil, nil
	}
	if aln, err = net.Listen("tcp", adminAddr); err != nil {
		closeAll(ln)
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

// handleOps adds the probes and /metrics to mux: /healthz while the process
// serves, /readyz while store takes a write like the real ones commits
// has seen (and the dependencies deps returns say how they stand), /metrics what reg gathers.
func handleOps(mux *http.ServeMux, store health.Prober, commits *health.Commits, reg prometheus.Gatherer, log zerolog.Logger, deps func() []health.Dependency) {
	mux.Handle("GET /healthz", health.Live())
	mux.Handle("GET /readyz", health.ReadyWith(store, commits, probeTimeout, log, deps))
	mux.Handle("GET /metrics", metrics.Handler(reg, log))
}

// newReconciler builds the loop rc describes, which records refusals
// (when refusals is not nil) and, with an API key, polls overdue
// expectations. It fails when reconcile.New refuses the settings.
func newReconciler(rc Reconcile, store reconcile.Store, refusals *reconcile.Refusals, log zerolog.Logger, reg prometheus.Registerer) (*reconcile.Reconciler, error) {
	cfg := rc.Loop
	cfg.Refusals = refusals
	if rc.API != nil {
		cfg.API = rc.API
		cfg.OnRequest = metrics.NewReconcile(reg).Requested
		log.Info().Str("api_url", rc.API.BaseURL).Msg("polling overdue expected jobs")
	}
	r, err := reconcile.New(store, cfg, log)
	if err != nil {
		return nil, fmt.Errorf("--poll-every, --poll-backoff, --api-concurrency, --api-rate: %w", err)
	}
	return r, nil
}

// handleExpect adds POST /expect to mux: applications register the jobs
// they started there. A status URL must be on apiURL's host (--api-url).
func handleExpect(apiURL string, mux *http.ServeMux, store reconcile.Expecter, log zerolog.Logger) {
	client := &sume.Client{BaseURL: apiURL}
	check := func(u string) error {
		_, err := client.CheckStatusURL(u)
		return err
	}
	mux.Handle("POST /expect", reconcile.ExpectHandler(store, check, nil, log))
}
