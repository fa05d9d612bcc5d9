package dispatch_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"inbox/dispatch"
	"inbox/inbox"
	"inbox/scheme"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

var rules = inbox.Rules{Events: []string{"job.completed", "job.failed", "job.canceled"}, MaxBody: 1 << 20}

// clock is a time the test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func body(id string) string {
	return fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED","payload":{"artifacts":[]}}`, id)
}

// storeWith opens a store on the clock holding a new row for each id.
func storeWith(t *testing.T, c *clock, ids ...string) *sqlite.Store {
	t.Helper()
	s := sqlitetest.MustOpen(t, sqlite.Options{Now: c.Now})
	for _, id := range ids {
		if _, err := s.Put(context.Background(), inbox.Classify("", inbox.Named{}, []byte(body(id)), 1_800_000_000, rules)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// start runs a dispatcher until the test ends, and checks that it stops
// cleanly.
func start(t *testing.T, s *sqlite.Store, cfg dispatch.Config) *dispatch.Dispatcher {
	t.Helper()
	if cfg.Poll == 0 {
		cfg.Poll = time.Millisecond
	}
	d, err := dispatch.New(s, cfg, zerolog.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return d
}

// waitFor polls cond until it holds, for up to 10 s of real time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// settleDown gives a dispatcher that should do nothing a moment to do it
// anyway: many of its 1 ms polls.
func settleDown() { time.Sleep(30 * time.Millisecond) }

// waitRetry waits until the failure of the attempt'th attempt at id is
// recorded, so that the clock moves on from the time it was recorded at.
func waitRetry(t *testing.T, s *sqlite.Store, id string, attempt int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("attempt %d at %s recorded", attempt, id), func() bool {
		e := row(t, s, id)
		return e.Attempts == attempt && e.LeaseOwner == "" && e.LastError != ""
	})
}

func row(t *testing.T, s *sqlite.Store, id string) inbox.Event {
	t.Helper()
	e, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// app is an httptest application that answers with the statuses it is
// given in turn (the last one from then on) and records what it got.
type app struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	got      []*http.Request
	bodies   []string
	hits     atomic.Int64
}

func newApp(t *testing.T, statuses ...int) *app {
	a := &app{statuses: statuses}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		status := a.statuses[0]
		if len(a.statuses) > 1 {
			a.statuses = a.statuses[1:]
		}
		a.got = append(a.got, r)
		a.bodies = append(a.bodies, string(b))
		a.mu.Unlock()
		a.hits.Add(1)
		w.WriteHeader(status)
		fmt.Fprint(w, "boom\x1b[31m")
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *app) requests() ([]*http.Request, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*http.Request(nil), a.got...), append([]string(nil), a.bodies...)
}

func forward(t *testing.T, url string, c *clock) *dispatch.Forward {
	t.Helper()
	f, err := dispatch.NewForward(url, "", c.Now)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRetryScheduleThenPark fails every attempt and walks the clock through
// the default schedule: each retry comes exactly when it is due, and the
// fifth failure parks the row handler_failed for good.
func TestRetryScheduleThenPark(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := storeWith(t, c, "job_1")
	a := newApp(t, http.StatusInternalServerError)
	start(t, s, dispatch.Config{Destination: forward(t, a.URL, c), Now: c.Now})

	for i, wait := range dispatch.DefaultSchedule() {
		attempt := int64(i + 1)
		waitRetry(t, s, "job_1", attempt)
		e := row(t, s, "job_1")
		if e.Status != inbox.StatusNew || !e.NextAttemptAt.Equal(c.Now().Add(wait)) {
			t.Fatalf("after attempt %d: %+v, want new, next attempt in %s", attempt, e, wait)
		}
		if e.LastError != "HTTP 500 Internal Server Error: boom [31m" {
			t.Errorf("last error %q", e.LastError)
		}
		c.Advance(wait - time.Millisecond)
		settleDown()
		if got := a.hits.Load(); got != attempt {
			t.Fatalf("%d requests before the retry was due, want %d", got, attempt)
		}
		c.Advance(time.Millisecond)
	}
	waitFor(t, "the row parked", func() bool { return row(t, s, "job_1").Status == inbox.StatusParked })
	e := row(t, s, "job_1")
	if e.Reason != inbox.ReasonHandlerFailed || e.Attempts != 5 || e.LastError == "" || e.LeaseOwner != "" {
		t.Errorf("parked row = %+v, want handler_failed after 5 attempts, the last error kept", e)
	}
	c.Advance(24 * time.Hour)
	settleDown()
	if got := a.hits.Load(); got != 5 {
		t.Errorf("%d requests, want 5: a parked row was retried", got)
	}
	reqs, _ := a.requests()
	for i, r := range reqs {
		if got := r.Header.Get(dispatch.HeaderAttempt); got != strconv.Itoa(i+1) {
			t.Errorf("request %d: attempt header %q", i, got)
		}
	}
}

// TestFailThenSucceed: the application fails twice, then takes the job;
// the row is done at the clock's time, and each request carried the body
// and the job's headers.
func TestFailThenSucceed(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := storeWith(t, c, "job_1")
	a := newApp(t, http.StatusInternalServerError, http.StatusRequestTimeout, http.StatusNoContent)
	start(t, s, dispatch.Config{Destination: forward(t, a.URL, c), Now: c.Now, Schedule: []time.Duration{time.Second, time.Minute}})
	waitRetry(t, s, "job_1", 1)
	c.Advance(time.Second)
	waitRetry(t, s, "job_1", 2)
	c.Advance(time.Minute)
	waitFor(t, "done", func() bool { return row(t, s, "job_1").Status == inbox.StatusDone })
	e := row(t, s, "job_1")
	if !e.DoneAt.Equal(c.Now()) || e.Attempts != 3 || e.LeaseOwner != "" {
		t.Errorf("done row = %+v", e)
	}
	reqs, bodies := a.requests()
	for i, r := range reqs {
		if bodies[i] != body("job_1") || r.Method != http.MethodPost ||
			r.Header.Get("Content-Type") != "application/json" ||
			r.Header.Get(dispatch.HeaderIdempotencyKey) != "job_1" ||
			r.Header.Get(dispatch.HeaderEvent) != "job.completed" ||
			r.Header.Get(scheme.HeaderWebhookSignature) != "" {
			t.Errorf("request %d: %s %v %q", i, r.Method, r.Header, bodies[i])
		}
	}
}

// TestRejectedParksAtOnce: a 4xx other than 408 and 429 parks the row
// handler_rejected after one attempt.
func TestRejectedParksAtOnce(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := storeWith(t, c, "job_1")
	a := newApp(t, http.StatusUnprocessableEntity)
	start(t, s, dispatch.Config{Destination: forward(t, a.URL, c), Now: c.Now})
	waitFor(t, "parked", func() bool { return row(t, s, "job_1").Status == inbox.StatusParked })
	if e := row(t, s, "job_1"); e.Reason != inbox.ReasonHandlerRejected || e.Attempts != 1 ||
		e.LastError != "HTTP 422 Unprocessable Entity: boom [31m" {
		t.Errorf("row = %+v", e)
	}
	c.Advance(time.Hour)
	settleDown()
	if a.hits.Load() != 1 {
		t.Errorf("%d requests, want 1", a.hits.Load())
	}
}

// TestLeaseExpiry: rows claimed by a dispatcher that died are delivered
// once their lease runs out, not before. The one it had started an attempt
// at counts that attempt; the one it only claimed costs none, and its first
// delivery says attempt 1.
func TestLeaseExpiry(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := storeWith(t, c, "job_1", "job_2", "job_3")
	ctx := context.Background()
	dead, _, err := s.Settle(ctx, "dead", nil, inbox.Claim{Now: c.Now(), Until: c.Now().Add(time.Minute), Max: 2})
	if err != nil || len(dead) != 2 {
		t.Fatal(dead, err)
	}
	for _, j := range dead {
		if j.ID != "job_2" {
			continue
		}
		if started, err := s.Start(ctx, "dead", []inbox.Job{j}, c.Now(), c.Now().Add(time.Minute)); err != nil || len(started) != 1 {
			t.Fatal(started, err)
		}
	}
	if e := row(t, s, "job_2"); e.Attempts != 1 {
		t.Fatalf("job_2 attempts = %d after its start, want 1", e.Attempts)
	}
	a := newApp(t, http.StatusOK)
	start(t, s, dispatch.Config{Destination: forward(t, a.URL, c), Now: c.Now})
	waitFor(t, "job_3 done", func() bool { return row(t, s, "job_3").Status == inbox.StatusDone })
	c.Advance(time.Minute - time.Millisecond)
	settleDown()
	for _, id := range []string{"job_1", "job_2"} {
		if e := row(t, s, id); e.Status != inbox.StatusNew || e.LeaseOwner != "dead" {
			t.Fatalf("%s = %+v, want still held by the dead dispatcher", id, e)
		}
	}
	c.Advance(time.Millisecond)
	for id, want := range map[string]int64{"job_1": 1, "job_2": 2} {
		waitFor(t, id+" done", func() bool { return row(t, s, id).Status == inbox.StatusDone })
		if e := row(t, s, id); e.Attempts != want {
			t.Errorf("%s attempts = %d, want %d", id, e.Attempts, want)
		}
	}
	reqs, _ := a.requests()
	for _, r := range reqs {
		id, attempt := r.Header.Get(dispatch.HeaderRowID), r.Header.Get(dispatch.HeaderAttempt)
		if (id == "job_2") != (attempt == "2") || (id != "job_2" && attempt != "1") {
			t.Errorf("%s delivered as attempt %s", id, attempt)
		}
	}
}

// TestLastAttemptLost: when the dispatcher died during a row's last
// attempt (its request sent or not), the row is not parked unattempted
// once its lease runs out: it is sent once more, past the schedule, and
// that request's outcome decides: done when it is taken, parked
// handler_failed only when it fails.
func TestLastAttemptLost(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status int
		want   inbox.Status
	}{{http.StatusOK, inbox.StatusDone}, {http.StatusInternalServerError, inbox.StatusParked}} {
		c := newClock()
		s := storeWith(t, c, "job_1")
		ctx := context.Background()
		schedule := []time.Duration{time.Second}
		for attempt := 1; ; attempt++ {
			jobs, _, err := s.Settle(ctx, "dead", nil, inbox.Claim{Now: c.Now(), Until: c.Now().Add(time.Minute), Max: 1})
			if err != nil || len(jobs) != 1 {
				t.Fatal(jobs, err)
			}
			if attempt == len(schedule)+1 {
				if _, err := s.Start(ctx, "dead", jobs, c.Now(), c.Now().Add(time.Minute)); err != nil {
					t.Fatal(err)
				}
				break
			}
			if _, _, err := s.Settle(ctx, "dead", []inbox.Settlement{{Job: jobs[0], Fate: inbox.FateRetry, At: c.Now(), RetryAt: c.Now()}}, inbox.Claim{}); err != nil {
				t.Fatal(err)
			}
		}
		a := newApp(t, tt.status)
		start(t, s, dispatch.Config{Destination: forward(t, a.URL, c), Now: c.Now, Schedule: schedule})
		c.Advance(time.Minute)
		waitFor(t, string(tt.want), func() bool { return row(t, s, "job_1").Status == tt.want })
		e := row(t, s, "job_1")
		if a.hits.Load() != 1 || e.Attempts != 3 || (tt.want == inbox.StatusParked) != (e.Reason == inbox.ReasonHandlerFailed) {
			t.Errorf("answering %d: row = %+v after %d requests, want %s by one request, attempt 3", tt.status, e, a.hits.Load(), tt.want)
		}
	}
}

// blocking is a destination that holds each delivery until released.
type blocking struct {
	started chan string
	release chan struct{}
}

func (b *blocking) Deliver(ctx context.Context, j inbox.Job) error {
	b.started <- j.ID
	<-b.release
	return nil
}

// TestStopFinishesAndReleases stops a dispatcher mid-delivery: the attempt
// under way finishes and is recorded, the rows claimed but not started go
// back to the queue as they were.
func TestStopFinishesAndReleases(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := storeWith(t, c, "job_1", "job_2", "job_3")
	b := &blocking{started: make(chan string, 3), release: make(chan struct{})}
	d, err := dispatch.New(s, dispatch.Config{Destination: b, Workers: 1, Now: c.Now, Poll: time.Millisecond}, zerolog.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	first := <-b.started
	// The one worker's row and those held for it, as many as there are.
	held := int64(min(dispatch.HeldPerWorker, 3))
	waitFor(t, "the rows held for the worker claimed", func() bool {
		q, err := s.Queue(context.Background(), c.Now())
		return err == nil && q.InFlight == held
	})
	cancel()
	settleDown()
	close(b.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"job_1", "job_2", "job_3"} {
		e := row(t, s, id)
		switch {
		case id == first && (e.Status != inbox.StatusDone || e.Attempts != 1):
			t.Errorf("%s, delivered when stopped: %+v, want done", id, e)
		case id != first && (e.Status != inbox.StatusNew || e.Attempts != 0 || e.LeaseOwner != ""):
			t.Errorf("%s: %+v, want new, unclaimed, no attempt", id, e)
		}
	}
}

// TestMetrics checks the counters after a run. The queue's gauges are the
// store collector's (metrics.TestStoreGauges).
func TestMetrics(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := storeWith(t, c, "job_ok", "job_bad")
	c.Advance(90 * time.Second)
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(dispatch.HeaderIdempotencyKey) == "job_bad" {
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	cfg := dispatch.Config{Destination: forward(t, srv.URL, c), Now: c.Now, Registerer: reg}
	if _, err := dispatch.New(s, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if _, err := dispatch.New(s, cfg, zerolog.Nop()); err == nil {
		t.Error("a second dispatcher registered on the same registry")
	}

	reg = prometheus.NewRegistry()
	cfg.Registerer = reg
	start(t, s, cfg)
	waitFor(t, "both settled", func() bool {
		st, err := s.Stats(context.Background())
		return err == nil && st.ByStatus[inbox.StatusNew] == 0
	})
	want := `
# HELP inbox_dispatch_deliveries_total Delivery attempts by outcome: done, retry, destination_down (the destination's outage: given back, no attempt counted), handler_failed (parked: no attempt left), handler_rejected (parked: the application said never retry), too_large_for_destination (parked: the destination can never take it).
# TYPE inbox_dispatch_deliveries_total counter
inbox_dispatch_deliveries_total{destination="default",outcome="destination_down"} 0
inbox_dispatch_deliveries_total{destination="default",outcome="done"} 1
inbox_dispatch_deliveries_total{destination="default",outcome="handler_failed"} 0
inbox_dispatch_deliveries_total{destination="default",outcome="handler_rejected"} 1
inbox_dispatch_deliveries_total{destination="default",outcome="retry"} 0
inbox_dispatch_deliveries_total{destination="default",outcome="too_large_for_destination"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "inbox_dispatch_deliveries_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(reg, "inbox_dispatch_attempts"); got != 1 {
		t.Errorf("attempts histogram: %d series", got)
	}
	cfg.Registerer = nil
	if _, err := dispatch.New(s, cfg, zerolog.Nop()); err != nil {
		t.Errorf("no registerer: %v", err)
	}
}
