// Package dispatch hands the inbox's new rows to the application, at least
// once each: it claims them on a lease, delivers each to one destination
// (an HTTP endpoint, a command, a stream), retries failures on a schedule,
// and parks a row the application keeps failing or refuses, for a person.
package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"inbox/inbox"
)

// Defaults for Config fields left zero.
const (
	DefaultWorkers = 4
	DefaultTimeout = 30 * time.Second
	DefaultLease   = 2 * time.Minute
	DefaultPoll    = 250 * time.Millisecond
	DefaultMaxSlow = 64
	// DefaultProgress is how often a working dispatcher logs what it did.
	DefaultProgress = 10 * time.Second
)

// maxError bounds the error text kept on a row (and logged).
const maxError = 1024

// Log field keys.
const (
	keyJob      = "job"
	keyAttempt  = "attempt"
	keyOutcome  = "outcome"
	keyCause    = "cause"
	keyRetryIn  = "retry_in"
	keyOwner    = "owner"
	keyRows     = "rows"
	keyDuration = "duration"
	keyDest     = "destination"
	keyKind     = "kind"
	keyDone     = "handed_on"
	keyRetried  = "retried"
	keyParked   = "parked"
	keyHeld     = "held"
)

// Store is what the dispatcher needs of the inbox.
type Store interface {
	Settle(ctx context.Context, owner string, settled []inbox.Settlement, claim inbox.Claim) ([]inbox.Job, int, error)
	Start(ctx context.Context, owner string, jobs []inbox.Job, now, until time.Time) ([]inbox.Job, error)
	NextDue(ctx context.Context) (time.Time, bool, error)
	Queue(ctx context.Context, now time.Time) (inbox.Queue, error)
	// SetDown records that the destination name is down since since, for
	// cause, so that the operator's commands (inbox stats, inbox alert
	// --down-for) see it; a zero since records that it is up.
	SetDown(ctx context.Context, name string, since time.Time, cause string) error
	// DownDestinations returns the destinations recorded down: a
	// dispatcher starting takes its destination's over, probing it first.
	DownDestinations(ctx context.Context) ([]inbox.DownDestination, error)
}

// Destination hands one job to the application.
type Destination interface {
	// Deliver returns nil once the application has taken the job. An error
	// made by Reject says the application will never take it; any other
	// error is retried. ctx carries the attempt's timeout.
	Deliver(ctx context.Context, j inbox.Job) error
}

// Reject marks err as the application's answer that the job must never be
// retried: the row is parked handler_rejected at once.
func Reject(err error) error { return &rejection{err: err, reason: inbox.ReasonHandlerRejected} }

// TooLarge marks err as the destination's answer that the job can never
// fit it (a NATS server's max_payload below the message): the row is
// parked too_large_for_destination at once, with no retry.
func TooLarge(err error) error {
	return &rejection{err: err, reason: inbox.ReasonTooLargeForDestination}
}

// rejection is err, for which the row is parked with reason at once.
type rejection struct {
	err    error
	reason inbox.Reason
}

func (r *rejection) Error() string { return r.err.Error() }
func (r *rejection) Unwrap() error { return r.err }

// Rejected reports whether err was made by Reject.
func Rejected(err error) bool {
	var r *rejection
	return errors.As(err, &r)
}

// Config configures a Dispatcher. Zero fields take the defaults.
type Config struct {
	Destination Destination
	// Workers is how many deliveries run at once.
	Workers int
	// Schedule is the wait before each retry of a failure that is the
	// row's (see Retry); after len(Schedule) retries such a failure parks
	// the row handler_failed. The destination's outages use none of it
	// (see breaker). Nil: DefaultSchedule; empty: no retries.
	Schedule []time.Duration
	// Timeout bounds one attempt.
	Timeout time.Duration
	// SlowAfter is how long an attempt runs holding one of Workers. Past
	// it the attempt goes on beside the workers (at most MaxSlow such at
	// once, each still within Timeout) and its worker takes the next row:
	// a destination that accepts and never answers holds a worker for
	// SlowAfter, not Timeout. Zero: fit the destination (see slowAfter).
	SlowAfter time.Duration
	// MaxSlow bounds the attempts running past SlowAfter beside the
	// workers. Zero: DefaultMaxSlow; negative: none, so an attempt holds
	// its worker until it ends.
	MaxSlow int
	// Lease is how long a claim holds; an attempt renews it as it starts.
	// An attempt takes at most Timeout, and its outcome is recorded after
	// it, so Lease must be at least twice Timeout; a row whose dispatcher
	// dies is claimable again when its lease runs out.
	Lease time.Duration
	// Poll is how often an idle dispatcher looks for due rows.
	Poll time.Duration
	// Owner names this dispatcher on the rows it claims; host:pid:random
	// when empty.
	Owner string
	// Now is the clock for claims, leases and the schedule; time.Now when nil.
	Now func() time.Time
	// Registerer, when set, gets the dispatcher's metrics.
	Registerer prometheus.Registerer
	// Name names the kind of destination in the log (forward, exec,
	// nats); "destination" when empty.
	Name string
	// Route names the destination and the rows it takes; its name is
	// inbox.DefaultDestination when empty.
	Route inbox.Route
	// Routes are every destination configured beside this one, Route
	// among them, by which a claim routes new rows; nil: Route alone.
	Routes []inbox.Route
	// Routing, when set, is the routing shared with the other
	// dispatchers of a Group, which a reload changes; it replaces Routes.
	// While Route is not among its routes (a reload removed the
	// destination) the dispatcher claims nothing.
	Routing *Routing
	// Rate bounds the attempts started a second; zero: no bound.
	Rate float64
	// Held, when set, returns why no delivery may be attempted now (an
	// operator paused the destination), or nil; it must return at once.
	// While it fails the dispatcher pauses as for a Gate.
	Held func() error
	// Progress is how often, while it works, the dispatcher logs at info
	// what it handed on, retried and parked since the last such line;
	// nothing while idle. Zero: DefaultProgress; negative: never.
	Progress time.Duration
}

// Dispatcher delivers the inbox's new rows to one destination.
type Dispatcher struct {
	store   Store
	cfg     Config
	log     zerolog.Logger
	metrics *metrics
	times   *durations
	tally   progress
	limit   *rate.Limiter // nil: no Rate
	retry   Retry
	brk     *breaker
	// What the workers saw, for Run to size the rows it holds (see
	// heldPerWorker): starved, a worker that had made an attempt found no
	// row waiting for it; waitedLong, a worker took a row that had waited
	// longer than heldWait.
	starved, waitedLong atomic.Bool
}

// progress counts the outcomes since the dispatcher last logged them.
type progress struct {
	done, retried, parked atomic.Int64
}

// report logs, once per Progress, the outcomes counted since the last
// line, and how many rows this dispatcher holds; nothing when there were
// none. last is when it last looked.
func (d *Dispatcher) report(last *time.Time, held int, force bool) {
	if d.cfg.Progress < 0 || (!force && time.Since(*last) < d.cfg.Progress) {
		return
	}
	*last = time.Now()
	done, retried, parked := d.tally.done.Swap(0), d.tally.retried.Swap(0), d.tally.parked.Swap(0)
	if done == 0 && retried == 0 && parked == 0 {
		return
	}
	d.log.Info().Int64(keyDone, done).Int64(keyRetried, retried).Int64(keyParked, parked).
		Int(keyHeld, held).Msg("dispatch progress")
}

// New returns a Dispatcher and registers its metrics. It fails when no
// destination is set, a setting is out of range, or the metrics cannot be
// registered (a second dispatcher on one registry).
func New(store Store, cfg Config, log zerolog.Logger) (*Dispatcher, error) {
	if cfg.Destination == nil {
		return nil, errors.New("dispatch: no destination")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	reg := cfg.Registerer
	if reg != nil {
		reg = prometheus.WrapRegistererWith(prometheus.Labels{keyDest: cfg.Route.Name}, reg)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	d := &Dispatcher{store: store, cfg: cfg, metrics: m, times: &durations{}, retry: NewRetry(cfg.Schedule), brk: newBreaker(),
		log: log.With().Str(keyDest, cfg.Route.Name).Str(keyKind, cfg.Name).Logger()}
	if cfg.Rate > 0 {
		d.limit = rate.NewLimiter(rate.Limit(cfg.Rate), max(1, int(cfg.Rate)))
	}
	return d, nil
}

// Check returns what New would refuse of cfg's settings, its Destination
// and metrics aside, registering nothing: a reload checks the new
// destinations with it before it stops any running one.
func Check(cfg Config) error {
	_, err := cfg.withDefaults()
	return err
}

// withDefaults returns cfg with the defaults in its zero fields, or why a
// setting is out of range.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Schedule == nil {
		cfg.Schedule = DefaultSchedule()
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Lease == 0 {
		cfg.Lease = max(DefaultLease, 2*cfg.Timeout)
	}
	if cfg.Poll == 0 {
		cfg.Poll = DefaultPoll
	}
	switch {
	case cfg.MaxSlow == 0:
		cfg.MaxSlow = DefaultMaxSlow
	case cfg.MaxSlow < 0:
		cfg.MaxSlow = 0
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Name == "" {
		cfg.Name = "destination"
	}
	if cfg.Progress == 0 {
		cfg.Progress = DefaultProgress
	}
	if cfg.Route.Name == "" {
		cfg.Route.Name = inbox.DefaultDestination
	}
	if cfg.Routing == nil {
		if len(cfg.Routes) == 0 {
			cfg.Routes = []inbox.Route{cfg.Route}
		}
		if err := inbox.CheckRoutes(cfg.Routes); err != nil {
			return Config{}, fmt.Errorf("dispatch: %w", err)
		}
		if !includes(cfg.Routes, cfg.Route.Name) {
			return Config{}, fmt.Errorf("dispatch: destination %q is not among the routes", cfg.Route.Name)
		}
		cfg.Routing = NewRouting(cfg.Routes)
	}
	if cfg.Rate < 0 {
		return Config{}, fmt.Errorf("dispatch: negative rate %v", cfg.Rate)
	}
	switch {
	case cfg.Workers < 1 || cfg.Workers > 1024:
		return Config{}, fmt.Errorf("dispatch: workers %d out of range 1..1024", cfg.Workers)
	case cfg.Timeout < 0 || cfg.Poll < 0 || cfg.SlowAfter < 0:
		return Config{}, errors.New("dispatch: timeout, slow-after and poll must be positive")
	case cfg.MaxSlow > 4096:
		return Config{}, fmt.Errorf("dispatch: max slow %d out of range 0..4096", cfg.MaxSlow)
	case cfg.Lease < 2*cfg.Timeout:
		return Config{}, fmt.Errorf("dispatch: lease %s must be at least twice the timeout %s", cfg.Lease, cfg.Timeout)
	}
	for _, d := range cfg.Schedule {
		if d < 0 {
			return Config{}, fmt.Errorf("dispatch: negative retry delay %s", d)
		}
	}
	if cfg.Owner == "" {
		cfg.Owner = newOwner()
	}
	return cfg, nil
}

// newOwner names this process: host, pid and a random part, so two runs
// with the same pid never take each other's claims for their own.
func newOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b))
}

// Owner returns the name this dispatcher claims rows under.
func (d *Dispatcher) Owner() string { return d.cfg.Owner }

// Run delivers rows until ctx is done, pausing while a Gate destination
// cannot be reached (see Gate), then stops claiming, lets the
// attempts under way finish (each within Timeout), records their outcomes,
// gives back the rows it claimed but did not start, and returns, leaving
// the destination recorded down if it is (see takeOverDown). A failure
// to write is logged and retried while running; Run returns an error only
// when, stopping, it could not record what it had done (those rows are
// delivered again once their leases run out).
func (d *Dispatcher) Run(ctx context.Context) error {
	d.takeOverDown(ctx)
	// Rows claimed and not yet settled: up to maxHeldPerWorker a worker
	// (one under way, the rest waiting for it), plus one per attempt gone
	// on beside the workers.
	capacity := maxHeldPerWorker*d.cfg.Workers + d.cfg.MaxSlow
	jobs := make(chan inbox.Job, capacity)
	results := make(chan inbox.Settlement, capacity)
	p := &pool{
		slots: make(chan struct{}, d.cfg.MaxSlow),
		wake:  make(chan struct{}, 1),
	}
	// ahead holds a token for each attempt counted and not yet handed to
	// the destination: what a crash can cost (see runStarter).
	ahead := make(chan struct{}, d.ahead())
	ready := make(chan counted, cap(ahead))
	var starter, wg sync.WaitGroup
	starter.Go(func() { d.runStarter(ctx, jobs, ready, results, ahead) })
	for range d.cfg.Workers {
		wg.Go(func() { d.work(ctx, ready, results, ahead, p, &wg) })
	}
	defer func() {
		close(jobs)
		starter.Wait()
		close(ready)
		wg.Wait()
	}()
	d.log.Info().Str(keyOwner, d.cfg.Owner).Int("workers", d.cfg.Workers).Int("max_slow", d.cfg.MaxSlow).Msg("dispatching")

	var (
		held     int // claimed and not yet settled
		heldBody int // the bytes of their bodies
		// perWorker is how many rows to hold a worker, heldPerWorker to
		// maxHeldPerWorker (see resize).
		perWorker = heldPerWorker
		pending   []inbox.Settlement
		failing   time.Time // when writes started failing; zero while they succeed
		stopping  bool
		stopBy    time.Time
		paused    pause
		outage    downRecord
		reported  = time.Now()
	)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		pending = drain(results, pending)
		if !stopping && ctx.Err() != nil {
			stopping = true
			// Attempts under way get their timeout, then a bounded time to
			// record their outcomes.
			stopBy = time.Now().Add(d.cfg.Timeout + 10*time.Second)
			d.log.Info().Int(keyRows, held).Msg("stopping: finishing the attempts under way")
		}
		if stopping && held == 0 {
			d.report(&reported, held, true)
			// A destination still down stays recorded so: the dispatcher
			// after this one (a restart, a reload that changed it) takes
			// it over and probes it first, rather than sending at full
			// speed into the outage. One up is recorded up.
			d.watchDown(context.WithoutCancel(ctx), &outage)
			return nil
		}
		d.report(&reported, held, false)

		want := 0
		if !stopping {
			want = max(0, perWorker*d.cfg.Workers+len(p.slots)-(held-len(pending)))
		}
		if !stopping && d.check(&paused) {
			want = 0 // the destination is away: claim nothing, settle the rest
		}
		down, probe := d.watchDown(ctx, &outage)
		if down {
			// Down: claim nothing but the one row that probes it.
			want = min(want, probe)
		}
		// With outcomes to record the transaction is written anyway, and
		// its claim finds what is due: no read to ask first.
		if want > 0 && len(pending) == 0 && !d.due(ctx) {
			want = 0
		}
		claimed := 0
		if len(pending) > 0 || want > 0 {
			// The claim counts the attempts of as many rows as may be
			// counted ahead now (a token of ahead each), which go to the
			// workers at once; the starter counts the rest. With a Rate
			// the starter counts them all, each in its turn.
			// A row's last attempt is never counted ahead (LastAttempt):
			// it is counted by itself, just before it is sent (counted.last).
			start := 0
			for d.limit == nil && d.retry.Retries() && !down && start < want && tryTake(ahead) {
				start++
			}
			// Not cut short by ctx: a claim that commits after Settle gave
			// up would hold its rows until the lease runs out. A write
			// waits at most the store's busy timeout.
			now := d.cfg.Now()
			got, unsettled, err := d.settle(context.WithoutCancel(ctx), now, pending, want, start)
			switch {
			case err != nil && stopping && time.Now().After(stopBy):
				return fmt.Errorf("dispatch: stopping: %d outcomes not recorded (delivered again after their lease): %w", len(unsettled), err)
			case err != nil && failing.IsZero():
				d.log.Error().Err(err).Msg("cannot write to the inbox: retrying")
				failing = time.Now()
			case err == nil && !failing.IsZero():
				d.log.Info().Dur(keyDuration, time.Since(failing)).Msg("writing to the inbox again")
				failing = time.Time{}
			}
			if len(unsettled) < len(pending) || len(got) > 0 {
				// What was recorded is done with, even when some
				// settlements were not (their rows held by another
				// session): those are settled again.
				held -= len(pending) - len(unsettled)
				heldBody -= bodies(pending) - bodies(unsettled)
				pending = append(pending[:0], unsettled...)
				for _, j := range got {
					held++
					heldBody += len(j.Body)
					switch {
					case j.Started():
						start--
						ready <- counted{job: j, at: now, queued: time.Now()}
					default:
						jobs <- j
					}
				}
				claimed = len(got)
			}
			for range start {
				<-ahead // the tokens of attempts not counted
			}
		}
		perWorker = d.resize(perWorker, want > 0, claimed > 0 && claimed == want, heldBody)
		d.metrics.held.Set(float64(held))
		if claimed > 0 && claimed == want && failing.IsZero() {
			continue // more may be due
		}
		if len(pending) > 0 && failing.IsZero() {
			continue
		}

		wait := d.cfg.Poll
		if !paused.since.IsZero() || !outage.since.IsZero() {
			wait = min(wait, pauseCheck)
		}
		if !failing.IsZero() {
			wait = max(wait, time.Second)
		}
		timer.Reset(wait)
		var done <-chan struct{}
		if !stopping {
			done = ctx.Done()
		}
		select {
		case r := <-results:
			pending = append(pending, r)
		case <-p.wake: // a worker is free again: claim for it
		case <-timer.C:
		case <-done:
		}
		timer.Stop()
	}
}

// bodies is the bytes of the bodies of the jobs settled.
func bodies(settled []inbox.Settlement) int {
	n := 0
	for _, st := range settled {
		n += len(st.Job.Body)
	}
	return n
}

// resize returns how many rows to hold a worker from now, given perWorker
// until now, whether a claim was asked for and whether it took all it
// asked for (more may be due), and the bytes of the bodies held. Held rows
// that waited long for a worker (a slow destination) halve it, down to
// heldPerWorker; workers that ran out of rows while the claim found more
// double it, up to maxHeldPerWorker, while the bodies held are under
// heldBodies; past heldBodies it is back to heldPerWorker. Workers that
// ran out of rows because the queue did (a claim short of what it asked)
// are no sign of a fast destination: that is forgotten, so that the next
// burst does not find the count grown behind a destination that has gone
// slow meanwhile. With a Rate it stays: the workers wait for their turn,
// not for rows, and more rows held would only wait for it too.
func (d *Dispatcher) resize(perWorker int, asked, full bool, heldBody int) int {
	if asked && !full {
		d.starved.Store(false)
	}
	switch {
	case heldBody > heldBodies:
		d.starved.Store(false)
		return heldPerWorker
	case d.waitedLong.Swap(false):
		d.starved.Store(false)
		return max(heldPerWorker, perWorker/2)
	case full && d.limit == nil && d.starved.Swap(false):
		return min(maxHeldPerWorker, perWorker*2)
	}
	return perWorker
}

// counted is a job whose attempt was counted at at, for a worker to make.
type counted struct {
	job inbox.Job
	at  time.Time
	// queued is when it was handed to the workers, on this process's
	// clock (not Config.Now): how long it waited for one.
	queued time.Time
	// last: the job's last attempt, not counted yet. Its worker counts it
	// just before sending it (Store.Start of it alone), so that a
	// dispatcher that dies costs no row its last attempt unsent. One that
	// dies between that count and the outcome (the request sent or not)
	// leaves the row to be claimed again past its last attempt: that one
	// is made too (a last attempt as well), never parked unattempted, so a
	// row is parked for failing only after a request for it failed.
	last bool
}

// tryTake puts a token in c if there is room, and reports whether it did.
func tryTake(c chan struct{}) bool {
	select {
	case c <- struct{}{}:
		return true
	default:
		return false
	}
}

// pool holds the attempts gone on beside the workers: a slot each.
type pool struct {
	slots chan struct{}
	wake  chan struct{} // told when an attempt has gone aside
}

// aside takes a slot for an attempt to go on beside the workers, and
// reports whether one was free.
func (p *pool) aside() bool {
	select {
	case p.slots <- struct{}{}:
	default:
		return false
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return true
}

// due reports whether a row may be claimed now. When it cannot tell, it
// says yes: the claim will find out.
func (d *Dispatcher) due(ctx context.Context) bool {
	next, ok, err := d.store.NextDue(ctx)
	if err != nil {
		return true
	}
	return ok && !next.After(d.cfg.Now())
}

// settle records pending and claims up to want rows at now in one transaction,
// counting the attempts of up to start of them, and returns the jobs
// claimed and the settlements not recorded: all of
// pending when it fails, those whose rows another session held when the
// store recorded the rest (inbox.PartialError).
func (d *Dispatcher) settle(ctx context.Context, now time.Time, pending []inbox.Settlement, want, start int) (got []inbox.Job, unsettled []inbox.Settlement, err error) {
	var stale int
	d.cfg.Routing.claim(func(routes []inbox.Route) {
		if !includes(routes, d.cfg.Route.Name) {
			want, start = 0, 0 // a reload removed this destination: it only settles
		}
		got, stale, err = d.store.Settle(ctx, d.cfg.Owner, pending, inbox.Claim{Now: now, Until: now.Add(d.cfg.Lease), Max: want,
			Destination: d.cfg.Route.Name, Routes: routes, Start: start, LastAttempt: d.retry.Attempts() - 1})
	})
	var partial *inbox.PartialError
	switch {
	case errors.As(err, &partial):
		unsettled = partial.Held
	case err != nil:
		return nil, pending, err
	}
	if stale > 0 {
		// Another dispatcher took these rows over after our leases ran
		// out; it delivers them again.
		d.log.Warn().Int(keyRows, stale).Msg("outcomes recorded after the lease ran out were dropped")
		d.metrics.stale.Add(float64(stale))
	}
	return got, unsettled, err
}

// work delivers the jobs ready hands it, their attempts counted, until
// ready is closed, giving back each one's token of ahead as it hands it to
// the destination. Once ctx is done, while the destination is away, or
// when a job waited more than half of Timeout since its count (its lease
// renewed then, so that the attempt and its outcome fit in it), it gives
// them back instead, their counts undone (inbox.FateUnsent). An
// attempt that runs past slowAfter goes on beside the workers while a slot
// of p is free, and work takes the next job; wg owns the goroutines it
// starts.
func (d *Dispatcher) work(ctx context.Context, ready <-chan counted, results chan<- inbox.Settlement, ahead chan struct{}, p *pool, wg *sync.WaitGroup) {
	attempted := false
	for {
		c, ok := d.next(ready, attempted)
		if !ok {
			return
		}
		j := c.job
		if c.last {
			// Counted now, just before it is sent; given back
			// unattempted when it may not start.
			now := d.cfg.Now()
			var started []inbox.Job
			var err error
			if ctx.Err() == nil && d.reachable() == nil && d.brk.ready(time.Now()) == nil {
				// Not cut short by ctx: an error must mean nothing was counted.
				started, err = d.store.Start(context.WithoutCancel(ctx), d.cfg.Owner, []inbox.Job{j}, now, now.Add(d.cfg.Lease))
				if err != nil {
					d.log.Warn().Err(err).Str(keyJob, j.ID).Msg("cannot count the attempt: giving the row back")
				}
			}
			if len(started) != 1 {
				<-ahead
				results <- release(j, now)
				continue
			}
			j, c.at = started[0], now
		}
		// A row that waited long for a worker (every one held by an
		// attempt that could not go aside) no longer has the lease its
		// attempt and outcome need: it is given back, to be claimed anew.
		// While the destination is down only its one probe is sent.
		if now := d.cfg.Now(); ctx.Err() != nil || d.reachable() != nil || now.Sub(c.at) > d.cfg.Timeout/2 || !d.brk.admit(j.ID, time.Now()) {
			<-ahead
			results <- unsent(j, now)
			continue
		}
		<-ahead
		attempted = true // not before: a row given back unsent is no sign of a fast destination
		done := make(chan inbox.Settlement, 1)
		began := time.Now()
		wg.Go(func() { done <- d.attempt(ctx, j) })
		if st, ok := d.await(done, began); ok {
			results <- st
			continue
		}
		if !p.aside() {
			results <- <-done
			continue
		}
		d.metrics.slow.Inc()
		d.log.Debug().Str(keyJob, j.ID).Int(keyAttempt, j.Attempt).Msg("slow: the attempt goes on beside the workers")
		wg.Go(func() {
			st := <-done
			<-p.slots
			d.metrics.slow.Dec()
			results <- st
		})
	}
}

// next takes the next job of ready, telling Run what it saw (see resize):
// that the worker ran out of rows, when it had made an attempt before
// (so not while the first claim is being written), and that the row had
// waited long for it. ok is false once ready is closed.
func (d *Dispatcher) next(ready <-chan counted, attempted bool) (c counted, ok bool) {
	select {
	case c, ok = <-ready:
	default:
		if attempted {
			d.starved.Store(true)
		}
		c, ok = <-ready
	}
	if ok && time.Since(c.queued) > heldWait {
		d.waitedLong.Store(true)
	}
	return c, ok
}

// await waits for the attempt begun at began to end, and returns its
// settlement, or ok false once it has run past slowAfter. The threshold is
// looked at again every slowCheck, as the destination's answers come in:
// an attempt begun before any did is not held to the first guess.
func (d *Dispatcher) await(done <-chan inbox.Settlement, began time.Time) (st inbox.Settlement, ok bool) {
	timer := time.NewTimer(min(d.slowAfter(), slowCheck))
	defer timer.Stop()
	for {
		select {
		case st := <-done:
			return st, true
		case <-timer.C:
		}
		left := d.slowAfter() - time.Since(began)
		if left <= 0 {
			return inbox.Settlement{}, false
		}
		timer.Reset(min(left, slowCheck))
	}
}

// maxStartBatch bounds the attempts one Store.Start counts, and
// maxStartsInFlight the Store.Start calls under way at once.
const (
	maxStartBatch     = 256
	maxStartsInFlight = 4
)

// The rows the dispatcher holds, claimed and not yet settled, for each
// worker: one under way and the rest waiting for it. A row is held from
// the transaction that claims it to the one that records its outcome,
// about two transactions' time, so the rows held bound the rate: at two a
// worker, 32 workers on a 2-vCPU machine handed on 0.71 of the ingest
// rate, their transactions about 25 rows each; at four, 0.81 to 0.92; at
// sixteen, 0.94 to 1.10 (go -C bench run ./dispatch, docs/benchmarks.md). So
// a dispatcher holds heldPerWorker a worker, and more, up to
// maxHeldPerWorker, while its workers run out of rows (a fast
// destination), the bodies held under heldBodies; rows that wait longer
// than heldWait for a worker (a slow destination, where holding more only
// has them wait, leased, and be given back past half of Timeout) bring it
// down again.
const (
	heldPerWorker    = 4
	maxHeldPerWorker = 16
	heldBodies       = 32 << 20
	heldWait         = 100 * time.Millisecond
)

// ahead is how many attempts the dispatcher may have counted and not yet
// handed to the destination: maxHeldPerWorker times Workers, the most rows
// it holds, counted with the claim that takes them. Their counts are written
// with the claim (or by the starter), while the workers send the rows
// before them, so no worker waits for a commit before its next request,
// and no row waits for a count of its own; a dispatcher that dies costs
// at most that many rows an attempt never sent. Given back unsent, a
// row's count is undone (inbox.FateUnsent).
func (d *Dispatcher) ahead() int { return maxHeldPerWorker * d.cfg.Workers }

// runStarter counts the attempts of the jobs Run claimed, before any is
// made, and hands the jobs counted to the workers on ready; it gives a
// job back unattempted (on results) when it may not start: stopping, the
// destination away, the claim gone. Each count takes a token of ahead,
// which the worker gives back as it hands the job to the destination, so
// at most cap(ahead) attempts are ever counted and not yet made. The jobs
// that come while a count is being written are counted together in the
// next one: one statement, one commit shared with whatever else the store
// writes then, for all of them. It returns once jobs is closed and its
// counts are written.
func (d *Dispatcher) runStarter(ctx context.Context, jobs <-chan inbox.Job, ready chan<- counted, results chan<- inbox.Settlement, ahead chan struct{}) {
	// Several counts may wait for the writer at once, so that each of its
	// transactions carries one, beside the outcomes and the claims.
	inFlight := make(chan struct{}, maxStartsInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	for j := range jobs {
		ahead <- struct{}{}
		if !d.mayStart(ctx, j, results, ahead) {
			continue
		}
		if d.isLast(j) {
			ready <- counted{job: j, at: d.cfg.Now(), last: true, queued: time.Now()}
			continue
		}
		batch := []inbox.Job{j}
	fill:
		for d.limit == nil && len(batch) < maxStartBatch && tryTake(ahead) {
			select {
			case j, ok := <-jobs:
				if ok && d.mayStart(ctx, j, results, ahead) {
					if d.isLast(j) {
						ready <- counted{job: j, at: d.cfg.Now(), last: true, queued: time.Now()}
						break fill
					}
					batch = append(batch, j)
					continue
				}
				if !ok {
					<-ahead
				}
				break fill
			default:
				<-ahead
				break fill
			}
		}
		inFlight <- struct{}{}
		wg.Go(func() {
			d.start(ctx, batch, ready, results, ahead)
			<-inFlight
		})
	}
}

// isLast reports whether j's attempt is the last its schedule allows, or
// past it (the last one's outcome lost to a crash, or the schedule cut
// short since), or a probe of the destination down: one never counted
// ahead of its worker (counted.last), so a crash while it is down costs
// no row an attempt.
func (d *Dispatcher) isLast(j inbox.Job) bool {
	if since, _, _ := d.brk.down(time.Now()); !since.IsZero() {
		return true
	}
	return d.retry.Last(j.Attempt)
}

// mayStart reports whether j's attempt may be counted now, holding a token
// of ahead; if not, it gives j back unattempted and the token with it.
// With a Rate it waits for its turn.
func (d *Dispatcher) mayStart(ctx context.Context, j inbox.Job, results chan<- inbox.Settlement, ahead chan struct{}) bool {
	// Stopping, or the destination is away: no attempt is made, so none is
	// counted.
	ok := ctx.Err() == nil && d.reachable() == nil && d.brk.ready(time.Now()) == nil
	if ok && d.limit != nil {
		ok = d.limit.Wait(ctx) == nil
	}
	if !ok {
		<-ahead
		results <- release(j, d.cfg.Now())
	}
	return ok
}

// start counts the attempts of batch, each holding a token of ahead, and
// hands the jobs counted to ready. A job whose attempt was not counted,
// its claim gone or the count not written, is given back unattempted, its
// token with it.
func (d *Dispatcher) start(ctx context.Context, batch []inbox.Job, ready chan<- counted, results chan<- inbox.Settlement, ahead chan struct{}) {
	now := d.cfg.Now()
	// Not cut short by ctx: an error must mean nothing was counted.
	started, err := d.store.Start(context.WithoutCancel(ctx), d.cfg.Owner, batch, now, now.Add(d.cfg.Lease))
	if err != nil {
		d.log.Warn().Err(err).Int(keyRows, len(batch)).Msg("cannot count the attempts: giving the rows back")
	}
	byID := make(map[string]inbox.Job, len(started))
	for _, j := range started {
		byID[j.ID] = j
	}
	for _, j := range batch {
		if s, ok := byID[j.ID]; ok {
			delete(byID, j.ID) // a second copy of one claim does not start
			ready <- counted{job: s, at: now, queued: time.Now()}
			continue
		}
		if err == nil {
			d.log.Warn().Str(keyJob, j.ID).Msg("the claim ran out before the attempt started: giving the row back")
		}
		<-ahead
		results <- release(j, d.cfg.Now())
	}
}

// release is the settlement that gives j back unattempted.
func release(j inbox.Job, now time.Time) inbox.Settlement {
	return inbox.Settlement{Job: j, Fate: inbox.FateRelease, At: now}
}

// unsent is the settlement that gives j back, its attempt counted yet
// never made, with the count undone.
func unsent(j inbox.Job, now time.Time) inbox.Settlement {
	return inbox.Settlement{Job: j, Fate: inbox.FateUnsent, At: now}
}

// attempt delivers j once. The attempt is not cut short when ctx is done
// (so stopping does not turn deliveries under way into failures); it has
// Timeout.
func (d *Dispatcher) attempt(ctx context.Context, j inbox.Job) inbox.Settlement {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Timeout)
	defer cancel()
	start := time.Now()
	err := d.cfg.Destination.Deliver(actx, j)
	took := time.Since(start)
	d.metrics.duration.Observe(took.Seconds())
	if err == nil {
		d.times.add(took)
	}
	if err != nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		// A timeout is the destination's: an application too busy, or
		// away behind a proxy that holds the connection.
		err = timedOut(fmt.Errorf("timed out after %s: %w", d.cfg.Timeout, err))
	}
	return d.outcome(j, err)
}

// outcome decides what becomes of j after an attempt that returned err.
func (d *Dispatcher) outcome(j inbox.Job, err error) inbox.Settlement {
	now := d.cfg.Now()
	st := inbox.Settlement{Job: j, At: now}
	log := d.log.With().Str(keyJob, j.ID).Int(keyAttempt, j.Attempt).Logger()
	var outcome string
	v, due := verdictRow, time.Time{}
	switch {
	case err == nil:
		if d.brk.succeeded(j.ID) {
			d.log.Info().Msg("destination up again: resuming")
		}
	case Rejected(err):
		if d.brk.refused(j.ID) {
			d.log.Info().Str(keyCause, errorText(err)).Msg("destination up again: it answers, refusing this row: resuming")
		}
	default:
		var tripped, up bool
		v, due, tripped, up = d.brk.failed(j, err, d.retry.Last(j.Attempt), time.Now())
		if up {
			d.log.Info().Str(keyCause, errorText(err)).Msg("destination up again: it answers, this row's failure is its own: resuming")
		}
		if tripped {
			d.log.Warn().Str(keyCause, errorText(err)).Msg("destination down: its rows wait, no attempt counted, probing it")
		}
	}
	switch {
	case err == nil:
		st.Fate, outcome = inbox.FateDone, outcomeDone
		log.Debug().Str(keyOutcome, outcome).Msg("delivered")
	case v == verdictDown && reached(err):
		// The destination's failure, whose request may have reached it:
		// the attempt counts, but the row waits for the probe, never parked.
		st.Fate, st.RetryAt, st.Error, outcome = inbox.FateRetry, d.cfg.Now().Add(time.Until(due)), errorText(err), outcomeDown
		log.Debug().Str(keyOutcome, outcome).Str(keyCause, st.Error).Msg("destination down: attempt timed out, retried once it is up")
	case v == verdictDown:
		// The destination's failure: the row waits, its attempt given back.
		st.Fate, st.RetryAt, st.Error, outcome = inbox.FateUnsent, d.cfg.Now().Add(time.Until(due)), errorText(err), outcomeDown
		log.Debug().Str(keyOutcome, outcome).Str(keyCause, st.Error).Msg("destination down: attempt given back")
	case v == verdictUnsure:
		// A timed-out one may have reached the application: it stays
		// counted, as for a destination down.
		wait := max(d.retry.Wait(j.Attempt), retryAfter(err))
		st.Fate, st.RetryAt, st.Error, outcome = inbox.FateUnsent, now.Add(wait), errorText(err), outcomeDown
		if reached(err) {
			st.Fate = inbox.FateRetry
		}
		log.Info().Str(keyOutcome, outcome).Str(keyCause, st.Error).Dur(keyRetryIn, wait).
			Msg("last attempt failed as others just did: given back once")
	case Rejected(err):
		var r *rejection
		errors.As(err, &r)
		st.Fate, st.Reason, st.Error, outcome = inbox.FatePark, r.reason, errorText(err), string(r.reason)
		log.Warn().Str(keyOutcome, outcome).Str(keyCause, st.Error).Msg("rejected: parked")
	case d.retry.Last(j.Attempt):
		st.Fate, st.Reason, st.Error, outcome = inbox.FatePark, inbox.ReasonHandlerFailed, errorText(err), outcomeFailed
		log.Warn().Str(keyOutcome, outcome).Str(keyCause, st.Error).Msg("failed every attempt: parked")
	default:
		wait := max(d.retry.Wait(j.Attempt), retryAfter(err))
		st.Fate, st.RetryAt, st.Error, outcome = inbox.FateRetry, now.Add(wait), errorText(err), outcomeRetry
		log.Info().Str(keyOutcome, outcome).Str(keyCause, st.Error).Dur(keyRetryIn, wait).Msg("failed: retrying")
	}
	d.metrics.deliveries.WithLabelValues(outcome).Inc()
	switch st.Fate {
	case inbox.FateDone:
		d.tally.done.Add(1)
	case inbox.FateRetry, inbox.FateUnsent:
		d.tally.retried.Add(1)
	default:
		d.tally.parked.Add(1)
	}
	if st.Fate == inbox.FateDone || st.Fate == inbox.FatePark {
		d.metrics.attempts.Observe(float64(j.Attempt))
	}
	return st
}

// errorText bounds an error for the row and the log.
func errorText(err error) string {
	s := strings.ToValidUTF8(err.Error(), "?")
	if len(s) <= maxError {
		return s
	}
	cut := maxError
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// drain adds the results waiting in results to pending, without waiting.
func drain(results <-chan inbox.Settlement, pending []inbox.Settlement) []inbox.Settlement {
	for {
		select {
		case r := <-results:
			pending = append(pending, r)
		default:
			return pending
		}
	}
}
