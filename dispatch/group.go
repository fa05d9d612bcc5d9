package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"inbox/inbox"
)

// HoldPoll is how often a Group reads which destinations an operator
// paused: a pause or resume reaches every running dispatcher within it.
const HoldPoll = time.Second

// Member is one destination of a Group: its route, what its dispatcher is
// made with, and how.
type Member struct {
	Route inbox.Route
	// Settings names what the dispatcher is made with, the filters aside
	// (the Group's Routing carries those): a Replace that leaves them as
	// they were leaves the dispatcher running.
	Settings string
	// Start makes the dispatcher, on routing and held by held (its
	// Config.Routing and Config.Held), and what releases the destination
	// once the dispatcher has run (a NATS connection). It fails as New
	// does.
	Start func(routing *Routing, held func() error) (d *Dispatcher, release func(), err error)
}

// Group is the dispatchers of every configured destination, one each: a
// row is handed to each destination whose filters take it, and each works
// at its own pace, so one that fails or is paused holds back no other.
// Replace changes the destinations while it runs.
type Group struct {
	holds   *Holds
	routing *Routing
	log     zerolog.Logger
	changes chan change
	stopped chan struct{} // closed when Run returns
	running atomic.Int64  // dispatchers running

	mu    sync.Mutex
	slots map[string]*slot
	// paces are the rate limiters of the destinations with a rate, by
	// name, kept across the dispatchers a Replace restarts (see pace).
	paces map[string]*rate.Limiter
}

// slot is one destination name of a Group: the member configured under it
// now (nil once a Replace removed it) and the dispatcher running for it,
// which may be one a Replace is stopping.
type slot struct {
	want *Member
	run  *instance
}

// instance is one dispatcher of a slot.
type instance struct {
	member   Member
	d        *Dispatcher
	release  func()
	cancel   context.CancelFunc
	stopping bool
}

// exit is an instance whose Run returned err.
type exit struct {
	name string
	in   *instance
	err  error
}

// change is a Replace for Run to carry out; done is closed once the new
// routes are in effect.
type change struct {
	members []Member
	done    chan struct{}
}

// NewGroup returns a Group with no destination, whose holds are read with
// paused (see Holds).
func NewGroup(paused func(context.Context) ([]string, error), log zerolog.Logger) *Group {
	return &Group{holds: NewHolds(paused), routing: NewRouting(nil), log: log,
		changes: make(chan change), stopped: make(chan struct{}), slots: map[string]*slot{},
		paces: map[string]*rate.Limiter{}}
}

// Start makes the dispatchers of members, before Run, which releases them
// once they have run. It fails, with no dispatcher left made, when the
// routes of members are refused (inbox.CheckRoutes) or a member's Start
// fails, with its error.
func (g *Group) Start(members []Member) error {
	if err := g.routing.Set(routes(members)); err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	made := map[string]*instance{}
	for _, m := range members {
		in, err := g.make(m)
		if err != nil {
			for _, in := range made {
				in.d.metrics.unregister()
				in.release()
			}
			return err
		}
		made[m.Route.Name] = in
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range members {
		g.slots[m.Route.Name] = &slot{want: &m, run: made[m.Route.Name]}
	}
	return nil
}

// make makes the dispatcher of m, pacing it with its destination's
// limiter (pace).
func (g *Group) make(m Member) (*instance, error) {
	d, release, err := m.Start(g.routing, g.holds.Held(m.Route.Name))
	if err != nil {
		return nil, err
	}
	d.limit = g.pace(m.Route.Name, d.limit)
	return &instance{member: m, d: d, release: release}, nil
}

// pace returns the limiter of destination name's dispatchers, set to
// limit's rate and burst (nil, no rate, for nil). It is one limiter for
// every dispatcher the destination has had: a reload that restarts the
// destination (a knob changed, the rate itself or not) keeps the
// attempts it started lately, rather than starting a new dispatcher
// with a full burst; so a SIGHUP a second cannot lift the rate.
func (g *Group) pace(name string, limit *rate.Limiter) *rate.Limiter {
	if limit == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	kept := g.paces[name]
	if kept == nil {
		g.paces[name] = limit
		return limit
	}
	kept.SetLimit(limit.Limit())
	kept.SetBurst(limit.Burst())
	return kept
}

// routes returns the routes of members.
func routes(members []Member) []inbox.Route {
	rs := make([]inbox.Route, len(members))
	for i, m := range members {
		rs[i] = m.Route
	}
	return rs
}

// Replace makes members the Group's destinations, while Run runs, and
// returns once their routes are in effect: every claim from then on
// routes new rows by them, none under way routes by the old ones. The
// dispatcher of a destination members lacks stops claiming, finishes the
// attempts under way, gives back the rows it holds unstarted, and ends,
// and the destination's down record is deleted; one whose Settings
// changed does so too, and its new dispatcher starts once it has ended,
// so no row is held by both, taking over the outage of a destination
// down (probing it first); one added starts at once;
// one unchanged goes on. A new dispatcher that cannot be made is logged,
// and its destination's rows wait. Replace returns at once when Run has
// returned. members' routes must pass inbox.CheckRoutes.
func (g *Group) Replace(members []Member) {
	c := change{members: members, done: make(chan struct{})}
	select {
	case g.changes <- c:
	case <-g.stopped:
		return
	}
	select {
	case <-c.done:
	case <-g.stopped:
	}
}

// Dispatcher returns the dispatcher running for destination name, or nil
// while there is none (a Replace is restarting it, or it could not be
// made).
func (g *Group) Dispatcher(name string) *Dispatcher {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.slots[name]; s != nil && s.run != nil && !s.run.stopping {
		return s.run.d
	}
	return nil
}

// Run runs every dispatcher of g, and the reading of its holds, until ctx
// is done, carrying out each Replace meanwhile, and returns once each
// dispatcher has finished what it started, with their errors joined. A
// dispatcher a Replace stopped that could not record what it had done is
// logged.
func (g *Group) Run(ctx context.Context) error {
	defer close(g.stopped)
	exited := make(chan exit)
	launch := func(name string, in *instance) {
		ictx, cancel := context.WithCancel(ctx)
		in.cancel = cancel
		g.running.Add(1)
		go func() { exited <- exit{name: name, in: in, err: in.d.Run(ictx)} }()
	}
	g.mu.Lock()
	for name, s := range g.slots {
		if s.run != nil {
			launch(name, s.run)
		}
	}
	g.mu.Unlock()
	var hwg sync.WaitGroup
	hctx, stopHolds := context.WithCancel(ctx)
	hwg.Go(func() { g.holds.Run(hctx, func() bool { return g.running.Load() > 0 }) })
	defer func() {
		stopHolds()
		hwg.Wait()
	}()
	var errs []error
	done := ctx.Done()
	for {
		var c change
		var e exit
		select {
		case c = <-g.changes:
		case e = <-exited:
		case <-done:
			done = nil // the dispatchers stop by themselves: wait for them
		}
		switch {
		case c.done != nil:
			g.replace(ctx, c, launch)
		case e.in != nil:
			g.running.Add(-1)
			g.mu.Lock()
			if s := g.slots[e.name]; s != nil && s.run == e.in {
				s.run = nil
			}
			g.mu.Unlock()
			e.in.cancel()
			e.in.d.metrics.unregister()
			e.in.release()
			if g.removed(ctx, e.name) {
				// No dispatcher is to take its outage over.
				e.in.d.forgetDown(ctx)
			}
			switch {
			case ctx.Err() != nil:
				errs = append(errs, e.err)
			case e.err != nil:
				g.log.Error().Err(e.err).Str(keyDest, e.name).Msg("stopped for a reload, with outcomes not recorded (delivered again after their lease)")
			default:
				g.log.Info().Str(keyDest, e.name).Msg("stopped for a reload: what it held is settled")
			}
			g.ended(ctx, e.name, launch)
		}
		if ctx.Err() != nil && g.running.Load() == 0 {
			return errors.Join(errs...)
		}
	}
}

// removed reports whether a Replace removed the destination name while
// ctx runs: no dispatcher is wanted for it.
func (g *Group) removed(ctx context.Context, name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.slots[name]
	return ctx.Err() == nil && (s == nil || s.want == nil)
}

// replace carries out c, as Replace says, from Run.
func (g *Group) replace(ctx context.Context, c change, launch func(string, *instance)) {
	next := map[string]*Member{}
	for _, m := range c.members {
		next[m.Route.Name] = &m
	}
	g.mu.Lock()
	for name, s := range g.slots {
		if m := next[name]; s.run != nil && !s.run.stopping && (m == nil || m.Settings != s.run.member.Settings) {
			s.run.stopping = true
			s.run.cancel()
		}
	}
	g.mu.Unlock()
	// The stopping dispatchers claim no more: the routes they are not
	// among let them only settle.
	if err := g.routing.Set(routes(c.members)); err != nil {
		g.log.Error().Err(err).Msg("dispatch: the new destinations' routes are refused")
	}
	close(c.done)
	g.mu.Lock()
	for name, s := range g.slots {
		s.want = next[name]
	}
	for name, m := range next {
		if g.slots[name] == nil {
			g.slots[name] = &slot{want: m}
		}
	}
	g.mu.Unlock()
	for name := range next {
		g.ended(ctx, name, launch)
	}
}

// ended starts the dispatcher wanted for name once none runs for it, or
// forgets name when none is wanted.
func (g *Group) ended(ctx context.Context, name string, launch func(string, *instance)) {
	g.mu.Lock()
	s := g.slots[name]
	switch {
	case s == nil || s.run != nil || ctx.Err() != nil:
		g.mu.Unlock()
		return
	case s.want == nil:
		delete(g.slots, name)
		g.mu.Unlock()
		return
	}
	m := *s.want
	g.mu.Unlock()
	in, err := g.make(m)
	if err != nil {
		g.log.Error().Err(err).Str(keyDest, name).Msg("cannot start the destination: its rows wait")
		return
	}
	g.mu.Lock()
	s.run = in
	g.mu.Unlock()
	launch(name, in)
}

// Holds is which destinations an operator paused (inbox pause), as last
// read from the store, shared by the dispatchers of a Group.
type Holds struct {
	read   func(context.Context) ([]string, error)
	paused atomic.Pointer[map[string]bool]
}

// NewHolds returns Holds that read the paused destinations with read.
func NewHolds(read func(context.Context) ([]string, error)) *Holds {
	h := &Holds{read: read}
	h.paused.Store(&map[string]bool{})
	return h
}

// errHeld is why a paused destination's dispatcher attempts nothing.
var errHeld = errors.New("paused by an operator (inbox resume resumes it)")

// Held returns the Config.Held of the destination name.
func (h *Holds) Held(name string) func() error {
	return func() error {
		if h.Paused(name) {
			return errHeld
		}
		return nil
	}
}

// Paused reports whether the destination name was paused when last read.
func (h *Holds) Paused(name string) bool { return (*h.paused.Load())[name] }

// Run reads the paused destinations every HoldPoll, while active says a
// dispatcher runs, until ctx is done. A read that fails keeps what the
// last one found: the claims themselves pass over a paused destination's
// rows.
func (h *Holds) Run(ctx context.Context, active func() bool) {
	t := time.NewTicker(HoldPoll)
	defer t.Stop()
	for {
		if active() {
			if names, err := h.read(ctx); err == nil {
				m := make(map[string]bool, len(names))
				for _, n := range names {
					m[n] = true
				}
				h.paused.Store(&m)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
