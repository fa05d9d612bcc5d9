package dispatch_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"inbox/dispatch"
	"inbox/inbox"
)

// paced is a destination that takes every delivery, after delay when one
// is set.
type paced struct {
	delay atomic.Int64 // nanoseconds
	got   atomic.Int64
}

func (p *paced) Deliver(ctx context.Context, j inbox.Job) error {
	if d := time.Duration(p.delay.Load()); d > 0 {
		time.Sleep(d)
	}
	p.got.Add(1)
	return nil
}

// TestHeldRowsFollowTheDestination: a dispatcher whose workers run out of
// rows (a destination that answers at once) holds more rows a worker than
// HeldPerWorker, so that each transaction records and claims more; once
// the destination slows down and its rows wait for the worker, it holds
// HeldPerWorker again; inbox_dispatch_held_rows says so. Every row is
// delivered once, its attempt counted once.
func TestHeldRowsFollowTheDestination(t *testing.T) {
	t.Parallel()
	c := newClock()
	var ids []string
	for i := range 300 {
		ids = append(ids, fmt.Sprintf("job_%03d", i))
	}
	s := storeWith(t, c, ids...)
	dest := &paced{}
	const workers = 1
	reg := prometheus.NewRegistry()
	start(t, s, dispatch.Config{Destination: dest, Workers: workers, MaxSlow: -1, Timeout: 30 * time.Second, Now: c.Now, Registerer: reg})
	held := func() float64 { return gauge(t, reg, "inbox_dispatch_held_rows") }
	floor := int64(dispatch.HeldPerWorker * workers)
	inFlight := func() int64 {
		q, err := s.Queue(context.Background(), c.Now())
		if err != nil {
			t.Fatal(err)
		}
		return q.InFlight
	}
	waitFor(t, fmt.Sprintf("more than %d rows held for a worker that runs out of them", floor), func() bool {
		return inFlight() > floor && held() > float64(floor)
	})
	dest.delay.Store(int64(20 * time.Millisecond))
	waitFor(t, fmt.Sprintf("at most %d rows held once they wait for the worker", floor), func() bool {
		return inFlight() <= floor && held() <= float64(floor)
	})
	if got := dest.got.Load(); got > int64(len(ids))/2 {
		// At 20 ms a row, the rows held would come down to four by
		// running out: the count itself must have come down well before.
		t.Fatalf("%d of %d rows delivered before the rows held came down", got, len(ids))
	}
	dest.delay.Store(0)
	waitFor(t, "every row delivered", func() bool { return dest.got.Load() >= int64(len(ids)) })
	settleDown()
	if got := dest.got.Load(); got != int64(len(ids)) {
		t.Errorf("%d deliveries of %d rows", got, len(ids))
	}
	waitFor(t, "every row done, one attempt each", func() bool {
		for _, id := range ids {
			if e := row(t, s, id); e.Status != inbox.StatusDone || e.Attempts != 1 {
				return false
			}
		}
		return true
	})
	waitFor(t, "no row held", func() bool { return held() == 0 })
}
