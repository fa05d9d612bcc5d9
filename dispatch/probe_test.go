package dispatch_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"inbox/dispatch"
	"inbox/inbox"
)

// TestProbeRejectedComesUp: a destination down (503) whose probe is
// answered with a refusal of that row (400: parked handler_rejected) is
// answering again: it comes up, and the rows after it are delivered.
func TestProbeRejectedComesUp(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := storeWith(t, c, "job_1")
	a := newApp(t, http.StatusServiceUnavailable, http.StatusBadRequest, http.StatusNoContent)
	reg := prometheus.NewRegistry()
	start(t, s, dispatch.Config{Destination: forward(t, a.URL, c), Now: c.Now, Registerer: reg})
	waitFor(t, "down", func() bool { return gauge(t, reg, "inbox_dispatch_destination_down") == 1 })
	c.Advance(time.Hour)
	waitFor(t, "the probe parked", func() bool { return row(t, s, "job_1").Status == inbox.StatusParked })
	if _, err := s.Put(context.Background(), inbox.Classify("", inbox.Named{}, []byte(body("job_2")), 1_800_000_000, rules)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the next row delivered", func() bool { return row(t, s, "job_2").Status == inbox.StatusDone })
	waitFor(t, "up", func() bool { return gauge(t, reg, "inbox_dispatch_destination_down") == 0 })
}
