package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"inbox/health"
	"inbox/inbox"
)

// routingStore is what a routingWatch uses of the store.
type routingStore interface {
	Destinations(ctx context.Context, now time.Time) ([]inbox.DestinationStats, error)
	RecordRouting(ctx context.Context, owner string, routes []inbox.Route, now time.Time) error
	Routings(ctx context.Context, since time.Time) ([]inbox.Routing, error)
}

// strandedEvery is how often a routingWatch counts the unfinished pairs
// (a read of every pair) between starts and reloads.
const strandedEvery = time.Minute

// routingWatch records the destination table this dispatcher routes new
// rows by (inbox.Routing) at start, at each reload and every
// inbox.RoutingBeat, and says, in a warn line and on /readyz, what the
// live dispatchers' tables leave undone: a destination with unfinished
// pairs that none of them has (its rows would wait for good, unsaid), and
// two dispatchers routing by different tables (a destination only one has
// gets only the rows that one routes).
type routingWatch struct {
	store  routingStore
	owner  string
	routes func() []inbox.Route
	log    zerolog.Logger
	now    func() time.Time
	// checks asks the watch to record and check now, after a reload.
	checks chan struct{}

	mu        sync.Mutex
	stranded  []inbox.Stranded
	conflict  []inbox.RoutingTable
	counted   time.Time
	saidConfl string
	saidStr   string
	// dispatched: the process has had destinations, so a reload that
	// removes them all still says what waits for them.
	dispatched bool
}

// newRoutingWatch watches the routing routes returns, on store.
func newRoutingWatch(store routingStore, routes func() []inbox.Route, log zerolog.Logger) *routingWatch {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	b := make([]byte, 4)
	rand.Read(b)
	return &routingWatch{store: store, owner: fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b)),
		routes: routes, log: log, now: time.Now, checks: make(chan struct{}, 1)}
}

// reloaded asks for a check now: the routing changed.
func (w *routingWatch) reloaded() {
	select {
	case w.checks <- struct{}{}:
	default:
	}
}

// record records the routing once, bounded by a second: at start, before
// run.
func (w *routingWatch) record(ctx context.Context) {
	routes := w.routes()
	if len(routes) == 0 {
		return
	}
	w.mu.Lock()
	w.dispatched = true
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := w.store.RecordRouting(ctx, w.owner, routes, w.now()); err != nil {
		w.log.Debug().Err(err).Msg("record this dispatcher's routing")
	}
}

// run records and checks until ctx is done, then forgets this
// dispatcher's routing, so that the others no longer count it.
func (w *routingWatch) run(ctx context.Context) {
	w.step(ctx, true)
	t := time.NewTicker(inbox.RoutingBeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			w.forget()
			return
		case <-w.checks:
			w.step(ctx, true)
		case <-t.C:
			w.step(ctx, false)
		}
	}
}

// forget removes the routing this process recorded, if any.
func (w *routingWatch) forget() {
	w.mu.Lock()
	dispatched := w.dispatched
	w.mu.Unlock()
	if !dispatched {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := w.store.RecordRouting(ctx, w.owner, nil, w.now()); err != nil {
		w.log.Debug().Err(err).Msg("forget this dispatcher's routing")
	}
}

// step records the routing and checks the live ones; all, at a start or
// a reload, also counts the unfinished pairs and says every finding
// again, where a beat says only what changed.
func (w *routingWatch) step(ctx context.Context, all bool) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	now := w.now()
	routes := w.routes()
	if len(routes) == 0 {
		routes = nil // forgotten: this process hands nothing on
	}
	w.mu.Lock()
	w.dispatched = w.dispatched || routes != nil
	dispatched := w.dispatched
	w.mu.Unlock()
	if !dispatched {
		// A serve that never dispatched (inbox dispatch runs beside it)
		// writes nothing and says nothing of the dispatchers' tables.
		return
	}
	if err := w.store.RecordRouting(ctx, w.owner, routes, now); err != nil {
		w.log.Debug().Err(err).Msg("record this dispatcher's routing")
		return
	}
	live, err := w.store.Routings(ctx, now.Add(-inbox.RoutingLive))
	if err != nil {
		w.log.Debug().Err(err).Msg("read the dispatchers' routings")
		return
	}
	if routes != nil && !slices.ContainsFunc(live, func(r inbox.Routing) bool { return r.Owner == w.owner }) {
		live = append(live, inbox.Routing{Owner: w.owner, Routes: routes, SeenAt: now})
	}
	conflict := inbox.ConflictingRoutings(live)
	w.mu.Lock()
	count := all || now.Sub(w.counted) >= strandedEvery
	stranded := w.stranded
	w.mu.Unlock()
	if count {
		stats, err := w.store.Destinations(ctx, now)
		if err != nil {
			w.log.Debug().Err(err).Msg("count the destinations' pairs")
			return
		}
		stranded = inbox.StrandedDestinations(stats, inbox.LiveNames(live))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.conflict, w.stranded = conflict, stranded
	if count {
		w.counted = now
	}
	if key := describeConflict(conflict, w.owner); key != "" && (all || key != w.saidConfl) {
		w.log.Warn().Str("tables", key).Msg("the running dispatchers route new rows by different destination tables: each row goes to the destinations of whichever routed it, so a destination only some have misses rows; give every dispatcher the same [[destination]] tables (inbox replay --destination NAME --config FILE makes the pairs it missed)")
		w.saidConfl = key
	} else if key == "" {
		w.saidConfl = ""
	}
	var names []string
	for _, s := range stranded {
		names = append(names, s.Name)
	}
	key := strings.Join(names, ",")
	if key != "" && (all || key != w.saidStr) {
		for _, s := range stranded {
			w.log.Warn().Str("destination", s.Name).Int64("unfinished", s.New).
				Msg("destination " + s.Name + " has unfinished rows and no running dispatcher has it: they wait until a config names it again (add it back, or see inbox stats and inbox replay --help)")
		}
	}
	w.saidStr = key
}

// describeConflict says the tables of conflict, this dispatcher's marked,
// or "" for none.
func describeConflict(conflict []inbox.RoutingTable, owner string) string {
	var parts []string
	for _, t := range conflict {
		s := "[" + strings.Join(t.Destinations, ", ") + "]"
		if slices.Contains(t.Owners, owner) {
			s += " (this dispatcher's)"
		}
		parts = append(parts, fmt.Sprintf("%d routing by %s", len(t.Owners), s))
	}
	return strings.Join(parts, "; ")
}

// dependencies are the /readyz lines of what the watch found: one per
// destination no running dispatcher has, and one when the dispatchers'
// tables differ. They never gate readiness: taking webhooks does not
// wait on them.
func (w *routingWatch) dependencies() []health.Dependency {
	w.mu.Lock()
	defer w.mu.Unlock()
	var deps []health.Dependency
	for _, s := range w.stranded {
		detail := fmt.Sprintf("%d unfinished rows wait and no running dispatcher has it (see inbox alert)", s.New)
		deps = append(deps, health.Dependency{Name: "destination " + s.Name, State: func(context.Context) (bool, string) { return false, detail }})
	}
	if len(w.conflict) > 0 {
		detail := "dispatchers route by different destination tables: " + describeConflict(w.conflict, w.owner)
		deps = append(deps, health.Dependency{Name: "routing", State: func(context.Context) (bool, string) { return false, detail }})
	}
	return deps
}
