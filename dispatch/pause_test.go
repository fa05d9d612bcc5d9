package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"inbox/dispatch"
	"inbox/inbox"
)

// gated is a dispatch.Gate that is down while down is set, and holds each
// delivery until its answer comes on answers, or its timeout.
type gated struct {
	mu      sync.Mutex
	down    error
	started chan string
	answers chan error
}

func (g *gated) Ready() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.down
}

func (g *gated) set(err error) {
	g.mu.Lock()
	g.down = err
	g.mu.Unlock()
}

func (g *gated) Deliver(ctx context.Context, j inbox.Job) error {
	g.started <- j.ID
	select {
	case err := <-g.answers:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pausedGauge reads inbox_dispatch_paused.
func pausedGauge(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	return gauge(t, reg, "inbox_dispatch_paused")
}

// gauge reads the dispatcher's gauge name.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no " + name)
	return 0
}

// downOutcomes reads inbox_dispatch_deliveries_total{outcome="destination_down"}:
// the attempts that failed as the destination's outage, probes included.
func downOutcomes(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "inbox_dispatch_deliveries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == "destination_down" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatal("no inbox_dispatch_deliveries_total{outcome=\"destination_down\"}")
	return 0
}

// TestPauseWhileUnreachable: a destination goes away while one attempt is
// under way and more rows are claimed, waiting for the worker. The
// attempt under way fails (the connection dropped mid-publish) and counts;
// the rows held give their claims back with no attempt counted; while the
// destination stays away, for far longer than the whole schedule, nothing
// is claimed or attempted and inbox_dispatch_paused is 1. Once it is back
// every row is delivered, none parked.
func TestPauseWhileUnreachable(t *testing.T) {
	// Not parallel: the rows held must be given back within the 300 ms
	// the pause is watched for.
	c := newClock()
	ids := []string{"job_1", "job_2", "job_3", "job_4", "job_5"}
	s := storeWith(t, c, ids...)
	g := &gated{started: make(chan string, len(ids)), answers: make(chan error, len(ids))}
	reg := prometheus.NewRegistry()
	schedule := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}
	start(t, s, dispatch.Config{Destination: g, Workers: 1, MaxSlow: -1, Timeout: 5 * time.Second, Now: c.Now, Schedule: schedule, Registerer: reg})

	first := <-g.started
	held := int64(min(dispatch.HeldPerWorker, len(ids)))
	waitFor(t, "more rows claimed, waiting for the worker", func() bool {
		q, err := s.Queue(context.Background(), c.Now())
		return err == nil && q.InFlight == held
	})
	g.set(errors.New("broker unreachable"))
	g.answers <- errors.New("connection lost mid-publish")
	waitRetry(t, s, first, 1)
	waitFor(t, "paused", func() bool { return pausedGauge(t, reg) == 1 })
	for range 10 {
		c.Advance(150 * time.Millisecond) // the whole schedule, ten times over
		settleDown()
	}
	for _, id := range ids {
		e := row(t, s, id)
		switch {
		case e.Status != inbox.StatusNew || e.LeaseOwner != "":
			t.Errorf("%s while paused: %s, lease %q; want new, unclaimed", id, e.Status, e.LeaseOwner)
		case id == first && e.Attempts != 1:
			t.Errorf("%s, attempted as the destination went away: %d attempts, want 1", id, e.Attempts)
		case id != first && e.Attempts != 0:
			t.Errorf("%s while paused: %d attempts, want 0", id, e.Attempts)
		}
	}
	if n := len(g.started); n != 0 {
		t.Errorf("%d attempts started while paused", n)
	}

	g.set(nil)
	resumed := time.Now()
	for range ids {
		g.answers <- nil
	}
	waitFor(t, "every row done", func() bool {
		st, err := s.Stats(context.Background())
		return err == nil && st.ByStatus[inbox.StatusDone] == int64(len(ids))
	})
	t.Logf("every row done %s after the destination was back", time.Since(resumed))
	for _, id := range ids {
		want := int64(1)
		if id == first {
			want = 2
		}
		if e := row(t, s, id); e.Attempts != want {
			t.Errorf("%s done at attempt %d, want %d", id, e.Attempts, want)
		}
	}
	if got := pausedGauge(t, reg); got != 0 {
		t.Errorf("inbox_dispatch_paused = %v once back, want 0", got)
	}
}

// TestForwardRefusedHeld: the HTTP destination is no Gate (its failures
// may come from the row), yet a refused connection is its outage, not the
// row's: the row waits with no attempt counted, however long, never
// parked, the destination shows down, and once the application listens
// again the probe delivers the row at its first attempt.
func TestForwardRefusedHeld(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	c := newClock()
	s := storeWith(t, c, "job_1")
	reg := prometheus.NewRegistry()
	f, err := dispatch.NewForward(url, "", c.Now)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := any(f).(dispatch.Gate); ok {
		t.Error("the HTTP destination is a Gate")
	}
	d := start(t, s, dispatch.Config{Destination: f, Now: c.Now, Schedule: []time.Duration{time.Millisecond}, Registerer: reg})
	waitFor(t, "down", func() bool { return gauge(t, reg, "inbox_dispatch_destination_down") == 1 })
	for i := range 3 { // several probes, each failing
		before := downOutcomes(t, reg)
		c.Advance(time.Minute)
		waitFor(t, fmt.Sprintf("probe %d failed and given back", i+1), func() bool {
			return downOutcomes(t, reg) > before && row(t, s, "job_1").LeaseOwner == ""
		})
	}
	if e := row(t, s, "job_1"); e.Status != inbox.StatusNew || e.Attempts != 0 {
		t.Fatalf("row %+v, want new with no attempt counted while the destination is down", e)
	}
	if ok, detail := d.State(context.Background()); ok || !strings.Contains(detail, "down") {
		t.Errorf("state %v %q, want down", ok, detail)
	}
	a := &app{statuses: []int{http.StatusNoContent}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { a.hits.Add(1) }))
	if srv.Listener, err = net.Listen("tcp", ln.Addr().String()); err != nil {
		t.Skip("the port was taken meanwhile:", err)
	}
	srv.Start()
	defer srv.Close()
	c.Advance(time.Hour)
	waitFor(t, "done", func() bool { return row(t, s, "job_1").Status == inbox.StatusDone })
	if e := row(t, s, "job_1"); e.Attempts != 1 {
		t.Errorf("done at attempt %d, want 1: the outage counted attempts", e.Attempts)
	}
	waitFor(t, "up", func() bool { return gauge(t, reg, "inbox_dispatch_destination_down") == 0 })
	if got := pausedGauge(t, reg); got != 0 {
		t.Errorf("inbox_dispatch_paused = %v, want 0", got)
	}
}

// hang is a destination that never answers, until its attempt times out.
type hang struct{}

func (hang) Deliver(ctx context.Context, _ inbox.Job) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestTimeoutNeverParks: a destination that times out every attempt is
// down, not the row's failure: with no retries left (every attempt the
// last) the row is never parked, and its timed-out attempts, whose
// requests may have reached the application, stay counted.
func TestTimeoutNeverParks(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := storeWith(t, c, "job_1")
	reg := prometheus.NewRegistry()
	start(t, s, dispatch.Config{Destination: hang{}, Now: c.Now, Schedule: []time.Duration{}, Timeout: 50 * time.Millisecond, Registerer: reg})
	waitFor(t, "down", func() bool { return gauge(t, reg, "inbox_dispatch_destination_down") == 1 })
	for i := range 3 { // several probes, each timing out
		before := downOutcomes(t, reg)
		c.Advance(time.Hour)
		waitFor(t, fmt.Sprintf("probe %d timed out and recorded", i+1), func() bool {
			return downOutcomes(t, reg) > before && row(t, s, "job_1").LeaseOwner == ""
		})
	}
	e := row(t, s, "job_1")
	if e.Status != inbox.StatusNew || e.Attempts < 1 {
		t.Errorf("row %+v, want new with its timed-out attempts counted", e)
	}
}
