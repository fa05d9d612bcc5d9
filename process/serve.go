package process

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"inbox/config"
	"inbox/console"
	"inbox/metrics"
	"inbox/receiver"
	"inbox/reconcile"
)

// serve serves the sources on the store until ctx is done, then drains
// the requests in flight, stops the dispatcher and saves the secret uses.
// It closes the store before it returns.
func (r *run) serve(ctx context.Context) error {
	cfg, log, reg, store := r.cfg, r.log, r.reg, r.store
	if cfg.File != "" && valueSecrets(cfg.Sources) {
		if who := readableByOthers(cfg.File); who != "" {
			log.Warn().Str("config", cfg.File).Msg("the config holds secrets (value = ...) and is readable by " + who + ": chmod 0600 it, or use env = ...")
		}
	}
	storeMetrics := metrics.NewStoreCollector(store, probeTimeout, nil)
	reg.MustRegister(storeMetrics)
	r.refusals = reconcile.NewRefusals(reconcile.DefaultMaxRefusals, nil)
	metrics.Refusals(reg, r.refusals.Len, r.refusals.Dropped)
	reg.MustRegister(metrics.NewReconcileCollector(store, probeTimeout, nil))
	rec, err := newReconciler(cfg.Reconcile, store, r.refusals, log, reg)
	if err != nil {
		return err
	}
	// The dispatcher shares the store, so its writes go through the
	// store's one writer, in the receiver's commits. Without a destination
	// it has none, until a reload adds one.
	dests, err := r.destinations(ctx, observedQueue{store, r.commits, false}, false)
	if err != nil {
		return err
	}
	r.deps = withReplica(dests.dependencies, r.watchReplica())
	live := r.sources(dests)
	set, err := live.build(cfg.Sources)
	if err != nil {
		return err
	}
	live.cur.Store(set)
	endpoints := []receiver.Endpoint{{Name: "webhooks", Listener: r.ln, Handler: live}}
	if r.aln != nil {
		endpoints = append(endpoints, receiver.Endpoint{Name: "admin", Listener: r.aln, Handler: r.adminMux(live, dests)})
	}
	for _, src := range cfg.Sources {
		log.Info().Str("db", cfg.DB).Str("source", src.Name).Str("scheme", src.Scheme.Name()).Str("path", src.Path).
			Strs("events", src.Rules.Events).Bool("dispatch", len(cfg.Destinations) > 0).Msg("starting")
	}
	// The dispatcher and the recorder outlive the receiver's drain: they
	// stop once Serve has returned, so the last requests' rows can still
	// be handed on and their secret uses are saved.
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	recorded := make(chan error, 1)
	go func() {
		recorded <- recordVerifications(bg, store, live.secretUses, live.unverified, secretUsePeriod, cfg.Reconcile.Loop.WriteTimeout)
	}()
	// A file any step refuses changes none.
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		reloadOnHangup(bg, r.hup, cfg.File, log, live.reload, dests.reload)
	}()
	dispatched := make(chan error, 1)
	go func() { dispatched <- dests.run(bg) }()
	reconciled := make(chan error, 1)
	go func() { reconciled <- rec.Run(bg) }()
	// The row counts are read in the background: a scrape of a large
	// inbox then takes no longer than of an empty one.
	counted := make(chan error, 1)
	go func() { counted <- storeMetrics.Run(bg) }()
	serveErr := receiver.Serve(ctx, cfg.Limits, log, endpoints...)
	cancel()
	<-reloaded
	if err := errors.Join(serveErr, <-dispatched, <-recorded, <-reconciled, <-counted, store.Close()); err != nil {
		return err
	}
	log.Info().Msg("stopped")
	return nil
}

// sources makes serve's live sources: one count and one memory budget for
// every source (--max-in-flight and --max-body-memory bound the process),
// and, without an admin address, the probes beside the webhooks in every
// set a reload makes.
func (r *run) sources(dests *liveDestinations) *liveSources {
	cfg, log, m := r.cfg, r.log, r.metrics
	inFlight, receiving := new(atomic.Int64), new(atomic.Int64)
	budget := receiver.NewBudget(cfg.BodyMemory)
	metrics.InFlight(r.reg, func() int { return int(inFlight.Load() + receiving.Load()) })
	var probes *http.ServeMux
	if r.aln == nil {
		probes = http.NewServeMux()
		handleOps(probes, r.store, r.commits, r.reg, log, r.deps)
	}
	live := &liveSources{check: cfg.CheckSources, read: ReadSources, grace: cfg.Limits.WriteTimeout + time.Second, log: log}
	live.build = func(sources []config.Source) (*sourceSet, error) {
		set := &sourceSet{sources: sources, mux: http.NewServeMux()}
		for _, src := range sources {
			h, err := receiver.NewHandler(r.store, receiver.Config{
				Source:      src.Name,
				Scheme:      src.Scheme,
				Keys:        src.Keys,
				Accepted:    src.Accepted,
				Rules:       src.Rules,
				HardCap:     src.HardCap,
				MaxInFlight: cfg.MaxInFlight,
				InFlight:    inFlight,
				Receiving:   receiving,
				Budget:      budget,
				BodyTimeout: cfg.BodyTimeout,
				OnAnswer:    m.Answered(src.Name),
				OnSkew:      m.Skewed(src.Name),
				OnRefused:   r.refusals.Add,
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
	return live
}

// adminMux is serve's admin address: the probes, /metrics, POST /expect,
// GET /sources and /destinations, and the console at /, which each
// reload of the sources or the destinations makes anew.
func (r *run) adminMux(live *liveSources, dests *liveDestinations) *http.ServeMux {
	cfg, store, log := r.cfg, r.store, r.log
	ops := http.NewServeMux()
	handleOps(ops, store, r.commits, r.reg, log, r.deps)
	handleExpect(cfg.Reconcile.APIURL, ops, store, log)
	handleSources(ops, live, store, log)
	handleDestinations(ops, dests)
	var cons atomic.Pointer[console.Console]
	cons.Store(console.New(store, r.consoleConfig(live, cfg.Sources, cfg.Destinations), log))
	live.onSwap = func(sources []config.Source) {
		cons.Store(console.New(store, r.consoleConfig(live, sources, dests.configs()), log))
	}
	dests.onSwap = func(ds []config.Destination) {
		cons.Store(console.New(store, r.consoleConfig(live, live.sources(), ds), log))
	}
	ops.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { cons.Load().ServeHTTP(w, req) }))
	return ops
}

// consoleConfig is what the console shows of sources and the destinations
// dests: the sources and their secrets' fingerprints, when live's handlers
// last verified a delivery with each, the store and the destinations,
// never a secret.
func (r *run) consoleConfig(live *liveSources, sources []config.Source, dests []config.Destination) console.Config {
	c := console.Config{DB: r.cfg.DB, SecretUses: live.uses}
	if rs, ok := r.store.(replicated); ok {
		rep := rs.Replica()
		c.Replica = func() console.Replica {
			st := rep.Status()
			return console.Replica{URL: st.URL, Sync: st.Sync, Lag: time.Duration(st.Lag * float64(time.Second)).Round(100 * time.Millisecond),
				LastSuccess: st.LastSuccess, Errors: st.Errors, Error: st.Error}
		}
	}
	for _, src := range sources {
		c.Sources = append(c.Sources, console.Source{Name: src.Name, Path: src.Path, Scheme: src.Scheme.Name(), Keys: src.Keys})
	}
	var names []string
	for _, d := range dests {
		names = append(names, d.Name+" ("+d.Kind()+")")
	}
	c.Destination = strings.Join(names, ", ")
	return c
}

// CheckSources refuses sources serve cannot serve beside cfg's other
// settings: a path the mux cannot take or that hides a probe, a request
// cap --max-body-memory cannot hold twice. Serve's flags are checked with
// it at start, and each reload's file.
func (cfg Config) CheckSources(sources []config.Source) error {
	budget := receiver.NewBudget(cfg.BodyMemory)
	for _, src := range sources {
		if err := checkPath(src.Path, cfg.AdminAddr == ""); err != nil {
			return err
		}
		if !budget.Holds(src.HardCap) {
			return fmt.Errorf("--max-body-memory %s: want at least twice the request cap of source %s (--max-request or max_request, %d bytes)", cfg.BodyMemoryText, src.Name, src.HardCap)
		}
	}
	return nil
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
