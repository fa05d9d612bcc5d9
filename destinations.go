package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"inbox/admin"
	"inbox/dispatch"
	"inbox/health"
	"inbox/inbox"
)

// liveDestinations hands the rows on to the destinations last loaded: the
// flags' one, or the [[destination]] tables of --config, which a SIGHUP
// reads again. A reload stops, starts and restarts only the destinations
// it removes, adds and changes, and routes the rows by the new filters
// from then on (dispatch.Group.Replace).
type liveDestinations struct {
	group *dispatch.Group
	cur   atomic.Pointer[[]dispatchConfig]
	// parse reads the destinations again as at start; it fails as
	// parseDispatch does.
	parse func() ([]dispatchConfig, error)
	store dispatch.Store
	log   zerolog.Logger
	reg   prometheus.Registerer
	alone bool // inbox dispatch: see newDispatcher
	// onSwap, when set, is told of each set a reload put into effect.
	onSwap func(cfgs []dispatchConfig)

	// watch, when set, records and checks the routing (see routingWatch).
	watch *routingWatch

	mu   sync.Mutex
	deps map[string][]health.Dependency // the running destinations' NATS lines
}

// watchRouting has the destinations' routing recorded and checked on
// store while they run (see routingWatch). It records it once now, so
// that its names are known (inbox pause) as soon as the process is up.
func (l *liveDestinations) watchRouting(ctx context.Context, store routingStore) {
	l.watch = newRoutingWatch(store, l.routes, l.log)
	l.watch.record(ctx)
}

// routes are the routes of the destinations in effect.
func (l *liveDestinations) routes() []inbox.Route {
	var rs []inbox.Route
	for _, cfg := range l.configs() {
		rs = append(rs, cfg.route)
	}
	return rs
}

// newLiveDestinations makes the dispatchers of cfgs on store, their holds
// read with paused, to run with run; parse reads them again on a reload.
// It fails as newDispatcher does, with nothing left made.
func newLiveDestinations(ctx context.Context, cfgs []dispatchConfig, parse func() ([]dispatchConfig, error), store dispatch.Store, paused func(context.Context) ([]string, error), log zerolog.Logger, reg prometheus.Registerer, alone bool) (*liveDestinations, error) {
	l := &liveDestinations{group: dispatch.NewGroup(paused, log), parse: parse, store: store, log: log, reg: reg, alone: alone,
		deps: map[string][]health.Dependency{}}
	members := make([]dispatch.Member, len(cfgs))
	for i, cfg := range cfgs {
		members[i] = l.member(ctx, cfg, true, len(cfgs) > 1)
	}
	if err := l.group.Start(members); err != nil {
		return nil, err
	}
	l.cur.Store(&cfgs)
	return l, nil
}

// member is cfg's member of the group; first at start (see newDispatcher),
// named when its errors must say which destination they are of.
func (l *liveDestinations) member(ctx context.Context, cfg dispatchConfig, first, named bool) dispatch.Member {
	name := cfg.route.Name
	return dispatch.Member{Route: cfg.route, Settings: cfg.settings(),
		Start: func(routing *dispatch.Routing, held func() error) (*dispatch.Dispatcher, func(), error) {
			d, release, deps, err := newDispatcher(ctx, cfg, l.store, routing, held, l.log, l.reg, l.alone, first)
			if err != nil {
				if named {
					err = fmt.Errorf("destination %s: %w", name, err)
				}
				return nil, nil, err
			}
			l.mu.Lock()
			l.deps[name] = deps
			l.mu.Unlock()
			return d, func() {
				l.mu.Lock()
				delete(l.deps, name)
				l.mu.Unlock()
				release()
			}, nil
		}}
}

// configs returns the destinations in effect.
func (l *liveDestinations) configs() []dispatchConfig { return *l.cur.Load() }

// run hands rows on until ctx is done, as dispatch.Group.Run does.
func (l *liveDestinations) run(ctx context.Context) error {
	if l.watch == nil {
		return l.group.Run(ctx)
	}
	wctx, stop := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		l.watch.run(wctx)
	}()
	err := l.group.Run(ctx)
	stop()
	<-watched
	return err
}

// dependencies are what /readyz shows of the destinations in effect: a
// line per destination (dispatching, paused by an operator, unreachable,
// or starting while a reload restarts it), after its NATS connection's.
func (l *liveDestinations) dependencies() []health.Dependency {
	l.mu.Lock()
	defer l.mu.Unlock()
	var deps []health.Dependency
	for _, cfg := range l.configs() {
		name := cfg.route.Name
		deps = append(deps, l.deps[name]...)
		deps = append(deps, health.Dependency{Name: "destination " + name, State: func(ctx context.Context) (bool, string) {
			return l.state(ctx, name)
		}})
	}
	if l.watch != nil {
		deps = append(deps, l.watch.dependencies()...)
	}
	return deps
}

// state says how the destination name stands, as its /readyz line does.
func (l *liveDestinations) state(ctx context.Context, name string) (bool, string) {
	d := l.group.Dispatcher(name)
	if d == nil {
		return false, "starting"
	}
	return d.State(ctx)
}

// reload is the destinations' reloadStep: it reads the destinations of
// file as at start, and checks each as its dispatcher would, making
// nothing; applying puts them into effect (see liveDestinations).
func (l *liveDestinations) reload(file string) (func(), error) {
	cfgs, err := l.parse()
	if err != nil {
		return nil, err
	}
	for _, cfg := range cfgs {
		if err := cfg.check(); err != nil {
			return nil, fmt.Errorf("config %s: destination %s: %w", file, cfg.route.Name, err)
		}
	}
	return func() {
		members := make([]dispatch.Member, len(cfgs))
		names := make([]string, len(cfgs))
		for i, cfg := range cfgs {
			members[i] = l.member(context.Background(), cfg, false, true)
			names[i] = cfg.route.Name
		}
		l.group.Replace(members)
		l.cur.Store(&cfgs)
		if l.onSwap != nil {
			l.onSwap(cfgs)
		}
		if l.watch != nil {
			l.watch.reloaded()
		}
		l.log.Info().Str("config", file).Strs("destinations", names).Msg("reloaded destinations: the rows routed from now on go by the new ones")
	}, nil
}

// describe is what GET /destinations and inbox destinations show of the
// destinations in effect: names, kinds, filters, knobs and states, never
// a secret, a URL or a command.
func (l *liveDestinations) describe(ctx context.Context) []admin.DestinationRow {
	var rows []admin.DestinationRow
	for _, cfg := range l.configs() {
		_, state := l.state(ctx, cfg.route.Name)
		r := admin.DestinationRow{Name: cfg.route.Name, Kind: cfg.kind(), Sources: cfg.route.Sources, Events: cfg.route.Events,
			Workers: cfg.workers, Timeout: cfg.timeout.String(), RetrySchedule: dispatch.FormatSchedule(cfg.schedule),
			Rate: cfg.rate, Signed: cfg.forwardSecret != "", State: state}
		rows = append(rows, r)
	}
	return rows
}

// handleDestinations serves GET /destinations on the admin address: a
// JSON line per destination in effect, as inbox destinations --json
// prints it.
func handleDestinations(mux *http.ServeMux, live *liveDestinations) {
	mux.HandleFunc("GET /destinations", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), probeTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		for _, row := range live.describe(ctx) {
			if err := enc.Encode(row); err != nil {
				return
			}
		}
	})
}
