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
	// Not parallel: the probe must be answered and given back within the
	// 300 ms it is given.
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

// TestReloadWhileDownProbesFirst: a reload that changes the settings of
// a destination that is down leaves its new dispatcher probing it with one
// row first, still recorded down; a reload that removes it deletes its
// record, so that nothing shows it down for good.
func TestReloadWhileDownProbesFirst(t *testing.T) {
	// Not parallel: the probe must be answered and given back within the
	// 300 ms it is given.
	c := newClock()
	s := storeWith(t, c, "job_1", "job_2", "job_3", "job_4", "job_5", "job_6", "job_7", "job_8")
	a := newApp(t, http.StatusInternalServerError)
	member := func(settings string) dispatch.Member {
		route := inbox.Route{Name: "app"}
		return dispatch.Member{Route: route, Settings: settings, Start: func(routing *dispatch.Routing, held func() error) (*dispatch.Dispatcher, func(), error) {
			d, err := dispatch.New(s, dispatch.Config{Destination: forward(t, a.URL, c), Route: route, Routing: routing, Held: held,
				Now: c.Now, Poll: time.Millisecond, Registerer: prometheus.NewRegistry()}, zerolog.Nop())
			return d, func() {}, err
		}}
	}
	recorded := func() bool {
		down, err := s.DownDestinations(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return len(down) == 1 && down[0].Name == "app"
	}
	g := dispatch.NewGroup(func(context.Context) ([]string, error) { return nil, nil }, zerolog.Nop())
	if err := g.Start([]dispatch.Member{member("1")}); err != nil {
		t.Fatal(err)
	}
	groupRun(t, g)
	waitFor(t, "app recorded down", recorded)

	g.Replace([]dispatch.Member{member("2")})
	waitFor(t, "the new dispatcher", func() bool { return g.Dispatcher("app") != nil })
	before, counted := a.hits.Load(), attempts(t, s)
	c.Advance(time.Hour)
	time.Sleep(300 * time.Millisecond)
	if n := a.hits.Load() - before; n > 1 {
		t.Errorf("%d requests into the outage after the reload, want one probe", n)
	}
	if n := attempts(t, s) - counted; n > 0 {
		t.Errorf("%d more attempts counted after the reload into the outage, want none", n)
	}
	if !recorded() {
		t.Error("app no longer recorded down after a reload that kept it")
	}

	g.Replace(nil)
	waitFor(t, "the removed destination's record deleted", func() bool { return !recorded() })
}
