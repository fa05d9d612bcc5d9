package dispatch_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"inbox/dispatch"
	"inbox/inbox"
)

// gate is a destination whose deliveries wait until it is opened,
// counting the rows it is handed.
type gate struct {
	mu      sync.Mutex
	got     map[string]int
	entered chan string
	open    chan struct{}
}

func newGate(open bool) *gate {
	g := &gate{got: map[string]int{}, entered: make(chan string, 16), open: make(chan struct{})}
	if open {
		close(g.open)
	}
	return g
}

func (g *gate) Deliver(ctx context.Context, j inbox.Job) error {
	g.mu.Lock()
	g.got[j.ID]++
	g.mu.Unlock()
	g.entered <- j.ID
	<-g.open
	return nil
}

func (g *gate) count(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.got[id]
}

// groupRun runs g until the test ends.
func groupRun(t *testing.T, g *dispatch.Group) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
}

// TestGroupReplace changes the settings of a destination while its
// attempt is under way: Replace returns at once, the new dispatcher is
// made only once the old one has settled the attempt (never two at once),
// the row is delivered once, and the next row goes to the new one. A
// second Replace removes the destination: its dispatcher ends, and a row
// stored after it is handed to nobody.
func TestGroupReplace(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := storeWith(t, c, "job_1")
	c.Advance(90 * time.Second)
	var running, made atomic.Int32
	var overlap atomic.Bool
	member := func(settings string, dest dispatch.Destination) dispatch.Member {
		route := inbox.Route{Name: "app"}
		return dispatch.Member{Route: route, Settings: settings, Start: func(routing *dispatch.Routing, held func() error) (*dispatch.Dispatcher, func(), error) {
			if running.Add(1) > 1 {
				overlap.Store(true)
			}
			made.Add(1)
			d, err := dispatch.New(s, dispatch.Config{Destination: dest, Route: route, Routing: routing, Held: held, Now: c.Now, Poll: time.Millisecond}, zerolog.Nop())
			return d, func() { running.Add(-1) }, err
		}}
	}
	g := dispatch.NewGroup(func(context.Context) ([]string, error) { return nil, nil }, zerolog.Nop())
	old, next := newGate(false), newGate(true)
	if err := g.Start([]dispatch.Member{member("1", old)}); err != nil {
		t.Fatal(err)
	}
	groupRun(t, g)
	if id := <-old.entered; id != "job_1" {
		t.Fatalf("attempted %s, want job_1", id)
	}

	replaced := make(chan struct{})
	go func() {
		g.Replace([]dispatch.Member{member("2", next)})
		close(replaced)
	}()
	select {
	case <-replaced:
	case <-time.After(5 * time.Second):
		t.Fatal("Replace waited for the attempt under way")
	}
	settleDown()
	if n := made.Load(); n != 1 {
		t.Errorf("%d dispatchers made while the old one held an attempt, want the old one alone", n)
	}
	if d := g.Dispatcher("app"); d != nil {
		t.Error("Dispatcher returns the stopping one")
	}
	close(old.open)
	waitFor(t, "the new dispatcher", func() bool { return g.Dispatcher("app") != nil })
	if e := row(t, s, "job_1"); e.Status != inbox.StatusDone || old.count("job_1") != 1 || next.count("job_1") != 0 {
		t.Errorf("job_1 %s, delivered %d times by the old dispatcher and %d by the new, want done once by the old", e.Status, old.count("job_1"), next.count("job_1"))
	}
	if _, err := s.Put(context.Background(), inbox.Classify("", inbox.Named{}, []byte(body("job_2")), 1_800_000_000, rules)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "job_2 done", func() bool { return row(t, s, "job_2").Status == inbox.StatusDone })
	if next.count("job_2") != 1 || old.count("job_2") != 0 {
		t.Errorf("job_2 delivered %d times by the new dispatcher, %d by the old, want once by the new", next.count("job_2"), old.count("job_2"))
	}

	g.Replace(nil)
	waitFor(t, "the removed destination's dispatcher to end", func() bool { return running.Load() == 0 })
	if _, err := s.Put(context.Background(), inbox.Classify("", inbox.Named{}, []byte(body("job_3")), 1_800_000_000, rules)); err != nil {
		t.Fatal(err)
	}
	settleDown()
	if next.count("job_3") != 0 || row(t, s, "job_3").Status != inbox.StatusNew {
		t.Errorf("job_3 was handed to a removed destination")
	}
	if overlap.Load() {
		t.Error("two dispatchers of one destination ran at once")
	}
}
