package process

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"inbox/admin"
	"inbox/config"
	"inbox/dispatch"
	"inbox/health"
	"inbox/inbox"
)

// connectTimeout bounds looking a broker up at start (brokerKind.atStart).
const connectTimeout = 10 * time.Second

// liveDestinations hands the rows on to the destinations last loaded: the
// flags' one, or the [[destination]] tables of --config, which a SIGHUP
// reads again. A reload stops, starts and restarts only the destinations
// it removes, adds and changes, and routes the rows by the new filters
// from then on (dispatch.Group.Replace).
type liveDestinations struct {
	group *dispatch.Group
	cur   atomic.Pointer[[]config.Destination]
	// parse reads the destinations again as at start (Config.ReadDestinations).
	parse func() ([]config.Destination, error)
	store dispatch.Store
	log   zerolog.Logger
	reg   prometheus.Registerer
	alone bool // inbox dispatch: see newDispatcher
	// maxBody is the largest body the sources hand on (see Config.MaxBody).
	maxBody int64
	// onSwap, when set, is told of each set a reload put into effect.
	onSwap func(cfgs []config.Destination)

	// watch, when set, records and checks the routing (see routingWatch).
	watch *routingWatch

	mu   sync.Mutex
	deps map[string][]health.Dependency // the running destinations' broker lines
}

// watchRouting has the destinations' routing recorded and checked on
// store while they run (see routingWatch). It records it once now, so
// that its names are known (inbox pause) as soon as the process is up.
func (l *liveDestinations) watchRouting(ctx context.Context, store routingStore) {
	l.watch = newRoutingWatch(store, l.routes, l.log)
	l.watch.record(ctx)
}

// routes are the routes of the destinations in effect.
func (l *liveDestinations) routes() []inbox.Route { return routesOf(l.configs()) }

// destinations makes the dispatchers of the run's destinations on store,
// their holds read from the run's store, alone for inbox dispatch (see
// newDispatcher); a reload reads them again. It fails as newDispatcher
// does, with nothing left made.
func (r *run) destinations(ctx context.Context, store dispatch.Store, alone bool) (*liveDestinations, error) {
	cfgs := r.cfg.Destinations
	l := &liveDestinations{group: dispatch.NewGroup(r.store.PausedDestinations, r.log), parse: r.cfg.ReadDestinations, store: store,
		log: r.log, reg: r.reg, alone: alone, maxBody: r.cfg.MaxBody, deps: map[string][]health.Dependency{}}
	members := make([]dispatch.Member, len(cfgs))
	for i, cfg := range cfgs {
		members[i] = l.member(ctx, cfg, routesOf(cfgs), true, len(cfgs) > 1)
	}
	if err := l.group.Start(members); err != nil {
		return nil, err
	}
	l.cur.Store(&cfgs)
	l.watchRouting(ctx, r.store)
	return l, nil
}

// member is cfg's member of the group; first at start (see newDispatcher),
// named when its errors must say which destination they are of.
func (l *liveDestinations) member(ctx context.Context, cfg config.Destination, routes []inbox.Route, first, named bool) dispatch.Member {
	name := cfg.Name
	return dispatch.Member{Route: cfg.Route(), Settings: settings(cfg),
		Start: func(routing *dispatch.Routing, held func() error) (*dispatch.Dispatcher, func(), error) {
			d, release, deps, err := l.newDispatcher(ctx, cfg, routes, routing, held, first)
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
func (l *liveDestinations) configs() []config.Destination { return *l.cur.Load() }

// run hands rows on until ctx is done, as dispatch.Group.Run does, the
// routing watched meanwhile.
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
// or starting while a reload restarts it), after its broker connection's.
func (l *liveDestinations) dependencies() []health.Dependency {
	l.mu.Lock()
	defer l.mu.Unlock()
	var deps []health.Dependency
	for _, cfg := range l.configs() {
		name := cfg.Name
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
		if err := check(cfg); err != nil {
			return nil, fmt.Errorf("config %s: destination %s: %w", file, cfg.Name, err)
		}
	}
	return func() {
		members := make([]dispatch.Member, len(cfgs))
		names := make([]string, len(cfgs))
		for i, cfg := range cfgs {
			members[i] = l.member(context.Background(), cfg, routesOf(cfgs), false, true)
			names[i] = cfg.Name
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
		_, state := l.state(ctx, cfg.Name)
		r := admin.DestinationRow{Name: cfg.Name, Kind: cfg.Kind(), Sources: cfg.Sources, Events: cfg.Events,
			Workers: cfg.Workers, Timeout: cfg.Timeout.String(), RetrySchedule: dispatch.FormatSchedule(cfg.Schedule()),
			Rate: cfg.Rate, Signed: cfg.Secret != "", State: state}
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

// routesOf is every destination's route.
func routesOf(cfgs []config.Destination) []inbox.Route {
	var routes []inbox.Route
	for _, cfg := range cfgs {
		routes = append(routes, cfg.Route())
	}
	return routes
}

// newDispatcher builds the dispatcher cfg describes, on l's store, routing
// by routing among routes and held by held. The returned close releases the destination
// once the dispatcher has run; the dependencies are what /readyz shows of
// the destination (a broker's connection). A broker that cannot be
// reached never stops it: the connection is made in the background. alone
// is inbox dispatch, whose only work is the hand-off: the connection
// gates its readiness, and at start (first) a broker that answers it can
// never take a job (a NATS server with no stream over the subject) stops
// it; inside serve that is only logged and shown, since webhooks never
// wait on it, and a destination a reload starts is not looked up at all
// (its readiness line says how it stands).
// It fails when a destination or the dispatcher refuses its settings.
func (l *liveDestinations) newDispatcher(ctx context.Context, cfg config.Destination, routes []inbox.Route, routing *dispatch.Routing, held func() error, first bool) (*dispatch.Dispatcher, func(), []health.Dependency, error) {
	var dest dispatch.Destination
	var deps []health.Dependency
	var err error
	closeDest := func() {}
	switch {
	case cfg.URL != "":
		dest, err = dispatch.NewForward(cfg.URL, cfg.Secret, nil)
	case cfg.Exec != "":
		dest, err = dispatch.NewExec(cfg.Exec, cfg.Withheld)
	default:
		var k brokerKind
		if k, err = kindOf(cfg); err == nil {
			dest, closeDest, deps, err = l.broker(ctx, k, cfg, first)
		}
	}
	if err != nil {
		return nil, nil, nil, err
	}
	dc := dispatcherConfig(cfg, dest, routes)
	dc.Registerer, dc.Routing, dc.Held = l.reg, routing, held
	d, err := dispatch.New(l.store, dc, l.log)
	if err != nil {
		closeDest()
		return nil, nil, nil, err
	}
	return d, closeDest, deps, nil
}

// dispatcherConfig is the dispatcher's Config of cfg, handing rows to
// dest, routing by cfg.Route() among routes.
func dispatcherConfig(cfg config.Destination, dest dispatch.Destination, routes []inbox.Route) dispatch.Config {
	maxSlow := 0 // the default
	if cfg.MaxSlow != nil {
		maxSlow = *cfg.MaxSlow
		if maxSlow == 0 {
			maxSlow = -1 // none
		}
	}
	return dispatch.Config{
		Destination: dest,
		Workers:     cfg.Workers,
		Schedule:    cfg.Schedule(),
		Timeout:     cfg.Timeout,
		SlowAfter:   cfg.SlowAfter,
		MaxSlow:     maxSlow,
		Lease:       cfg.Lease,
		Name:        cfg.Kind(),
		Route:       cfg.Route(),
		Routes:      routes,
		Rate:        cfg.Rate,
	}
}

// CheckDestinations returns what newDispatcher would refuse of any of
// cfgs, making nothing (no connection, no metrics), so that a command line
// (and inbox --check) is refused before the process starts: a broker's
// URL that no server could take, a knob the dispatcher refuses. The error
// names a table's destination, never a password.
func CheckDestinations(cfgs []config.Destination) error {
	for _, cfg := range cfgs {
		if err := check(cfg); err != nil {
			if cfg.FromFlags {
				return err
			}
			return fmt.Errorf("destination %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// check returns what newDispatcher would refuse of cfg, without making
// anything (no connection, no metrics).
func check(cfg config.Destination) error {
	var err error
	switch {
	case cfg.URL != "":
		_, err = dispatch.NewForward(cfg.URL, cfg.Secret, nil)
	case cfg.Exec != "":
		_, err = dispatch.NewExec(cfg.Exec, cfg.Withheld)
	default:
		var k brokerKind
		if k, err = kindOf(cfg); err == nil {
			err = k.check(cfg)
		}
	}
	if err != nil {
		return err
	}
	return dispatch.Check(dispatcherConfig(cfg, nil, nil))
}

// settings names what cfg's dispatcher is made with, its filters aside
// (dispatch.Member.Settings): a digest, as it covers the secrets.
func settings(cfg config.Destination) string {
	maxSlow := dispatcherConfig(cfg, nil, nil).MaxSlow
	cfg.Sources, cfg.Events, cfg.MaxSlow = nil, nil, nil
	sum := sha256.Sum256(fmt.Appendf(nil, "%#v %d", cfg, maxSlow))
	return hex.EncodeToString(sum[:])
}
