package dispatch_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"inbox/dispatch"
	"inbox/inbox"
)

// TestRestartWhileDownProbesFirst: a dispatcher stopped while its
// destination is down (a reload that changes the destination, a
// restart) leaves its successor probing it with one row first, not
// sending at full speed into the outage.
func TestRestartWhileDownProbesFirst(t *testing.T) {
	c := newClock()
	s := storeWith(t, c, "job_1", "job_2", "job_3", "job_4", "job_5", "job_6", "job_7", "job_8")
	a := newApp(t, http.StatusInternalServerError)
	reg := prometheus.NewRegistry()
	cfg := dispatch.Config{Destination: forward(t, a.URL, c), Now: c.Now, Poll: time.Millisecond, Registerer: reg}
	d, err := dispatch.New(s, cfg, zerolog.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	waitFor(t, "down", func() bool { return gauge(t, reg, "inbox_dispatch_destination_down") == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	before, counted := a.hits.Load(), attempts(t, s)
	cfg.Registerer = prometheus.NewRegistry()
	start(t, s, cfg)
	c.Advance(time.Hour)
	time.Sleep(300 * time.Millisecond)
	if n := a.hits.Load() - before; n > 1 {
		t.Errorf("%d requests into the outage after the restart, want one probe", n)
	}
	if n := attempts(t, s) - counted; n > 0 {
		t.Errorf("%d more attempts counted after the restart into the outage, want none", n)
	}
}

func attempts(t *testing.T, s interface {
	Get(context.Context, string) (inbox.Event, error)
}) int64 {
	var n int64
	for i := 1; i <= 8; i++ {
		e, err := s.Get(context.Background(), fmt.Sprintf("job_%d", i))
		if err != nil {
			t.Fatal(err)
		}
		n += e.Attempts
	}
	return n
}
