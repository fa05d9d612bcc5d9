// Package storetest is the one suite every inbox store runs: the
// behaviour of the store's public contract, through its exported methods
// only, on whatever database the caller opens (riverqueue/river's
// riverdrivertest, litestream's client suite).
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"inbox/inbox"
)

// Options are what the suite asks of the store it opens.
type Options struct {
	// Now is the store's clock: every time the store stamps (received_at,
	// last_seen_at, updated_at) and, on a store that leases by its own
	// clock, when a claim is due and when its lease ends. The suite moves
	// it to the Claim.Now and Settlement.At it passes, so a store that
	// takes those times from the caller and one that takes them from its
	// clock agree.
	Now func() time.Time
}

// Run runs the suite as subtests of t. open returns a new, empty store
// with opts applied; it closes the store when its test ends (the suite
// also closes some itself, so Close must be safe to call twice).
//
// A store that does not support Reprocess returns an error wrapping
// errors.ErrUnsupported from it; the suite then skips, saying so, the tests
// that need it.
//
// Each test opens a store of its own and moves only its own clock, so the
// tests run beside one another, as many at once as -parallel allows.
func Run(t *testing.T, open func(t *testing.T, opts Options) inbox.Store) {
	o := opener(open)
	for _, g := range []struct {
		name string
		run  func(*testing.T, opener)
	}{
		{"put", runPut},
		{"queue", runQueue},
		{"purge", runPurge},
		{"read", runRead},
		{"count", runCount},
		{"reprocess", runReprocess},
		{"reconcile", runReconcile},
		{"destinations", runDestinations},
		{"replay", runReplay},
		{"dismiss", runDismiss},
		{"roundtrip", runRoundTrip},
		{"pair state", runPairState},
		{"alerts", runAlerts},
	} {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			g.run(t, o)
		})
	}
}

type opener func(t *testing.T, opts Options) inbox.Store

// Clock is a clock the suite moves by hand.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Add moves the clock on by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// t0 is where each test's clock starts: whole milliseconds, as stores keep.
var t0 = time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)

// env is one test's store and its clock.
type env struct {
	t     *testing.T
	s     inbox.Store
	clock *Clock
}

// at opens a store whose clock starts at start.
func (o opener) at(t *testing.T, start time.Time) *env {
	t.Helper()
	c := &Clock{now: start}
	return &env{t: t, s: o(t, Options{Now: c.Now}), clock: c}
}

// fresh opens a store whose clock starts at t0.
func (o opener) fresh(t *testing.T) *env { return o.at(t, t0) }

var rules = inbox.Rules{Events: []string{"job.completed", "job.failed", "job.canceled"}, MaxBody: 1 << 20}

const deliveryTS = 1_800_000_000

func jobBody(id string) string {
	return fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED"}`, id)
}

func job(id string) inbox.Delivery {
	return inbox.Classify("", inbox.Named{}, []byte(jobBody(id)), deliveryTS, rules)
}

func classify(body string) inbox.Delivery {
	return inbox.Classify("", inbox.Named{}, []byte(body), deliveryTS, rules)
}

func (e *env) put(d inbox.Delivery) inbox.Result {
	e.t.Helper()
	res, err := e.s.Put(context.Background(), d)
	if err != nil {
		e.t.Fatalf("put %s: %v", d.Key, err)
	}
	return res
}

// putAll stores the bodies concurrently, so group commit keeps it quick.
func (e *env) putAll(bodies ...string) {
	e.t.Helper()
	ds := make([]inbox.Delivery, len(bodies))
	for i, b := range bodies {
		ds[i] = classify(b)
	}
	e.putTogether(ds...)
}

// putTogether stores the deliveries concurrently: a store that commits in
// groups writes them in one.
func (e *env) putTogether(ds ...inbox.Delivery) {
	e.t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(ds))
	for i, d := range ds {
		wg.Go(func() {
			_, errs[i] = e.s.Put(context.Background(), d)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			e.t.Fatalf("put %s: %v", ds[i].Key, err)
		}
	}
}

// queued puts the jobs one millisecond apart, so they queue in that order.
func (e *env) queued(ids ...string) {
	e.t.Helper()
	for _, id := range ids {
		e.put(job(id))
		e.clock.Add(time.Millisecond)
	}
}

func (e *env) get(id string) inbox.Event {
	e.t.Helper()
	ev, err := e.s.Get(context.Background(), id)
	if err != nil {
		e.t.Fatalf("get %s: %v", id, err)
	}
	return ev
}

func (e *env) gone(id string) bool {
	e.t.Helper()
	_, err := e.s.Get(context.Background(), id)
	if err != nil && !errors.Is(err, inbox.ErrNotFound) {
		e.t.Fatalf("get %s: %v", id, err)
	}
	return errors.Is(err, inbox.ErrNotFound)
}

// claim claims up to n rows for owner at now, leased for lease; it moves
// the store's clock to now first.
func (e *env) claim(owner string, now time.Time, lease time.Duration, n int) []inbox.Job {
	e.t.Helper()
	e.clock.Set(now)
	jobs, _, err := e.s.Settle(context.Background(), owner, nil, inbox.Claim{Now: now, Until: now.Add(lease), Max: n})
	if err != nil {
		e.t.Fatalf("claim: %v", err)
	}
	return jobs
}

// start starts the attempts of jobs for owner at now, the lease renewed
// to run out at until; it moves the store's clock to now first.
func (e *env) start(owner string, jobs []inbox.Job, now, until time.Time) []inbox.Job {
	e.t.Helper()
	e.clock.Set(now)
	started, err := e.s.Start(context.Background(), owner, jobs, now, until)
	if err != nil {
		e.t.Fatalf("start: %v", err)
	}
	return started
}

// startOne starts j for owner at now and reports whether it started.
func (e *env) startOne(owner string, j inbox.Job, now, until time.Time) (inbox.Job, bool) {
	e.t.Helper()
	started := e.start(owner, []inbox.Job{j}, now, until)
	if len(started) == 0 {
		return j, false
	}
	return started[0], true
}

// started starts the next attempt at the row id that owner claimed.
func (e *env) started(owner, id string, now, until time.Time) inbox.Job {
	e.t.Helper()
	j, ok := e.startOne(owner, inbox.Job{ID: id, Attempt: int(e.get(id).Attempts) + 1}, now, until)
	if !ok {
		e.t.Fatalf("start %s for %s: not started", id, owner)
	}
	return j
}

// settle records settled for owner at the clock's time set to at, and
// returns how many were stale.
func (e *env) settle(owner string, at time.Time, settled ...inbox.Settlement) int {
	e.t.Helper()
	e.clock.Set(at)
	_, stale, err := e.s.Settle(context.Background(), owner, settled, inbox.Claim{})
	if err != nil {
		e.t.Fatalf("settle: %v", err)
	}
	return stale
}

func (e *env) stats() inbox.Stats {
	e.t.Helper()
	st, err := e.s.Stats(context.Background())
	if err != nil {
		e.t.Fatalf("stats: %v", err)
	}
	return st
}

// ids names the jobs as id#attempt, sorted.
func ids(jobs []inbox.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = fmt.Sprintf("%s#%d", j.ID, j.Attempt)
	}
	slices.Sort(out)
	return out
}

// keyed classifies body as a delivery of a KindKeyed source whose scheme
// named key and event.
func keyed(source, key, event string, body []byte, deliveryTS int64, r inbox.Rules) inbox.Delivery {
	r.Kind = inbox.KindKeyed
	return inbox.Classify(source, inbox.Named{Key: key, Event: event}, body, deliveryTS, r)
}
