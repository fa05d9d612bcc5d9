package dispatch

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"inbox/inbox"
)

type never struct{}

func (never) Deliver(_ context.Context, _ inbox.Job) error { return nil }

// TestUnsureTimeoutStaysCounted: a row's last attempt that timed out (its
// request may have reached the application) just after another row's did
// is given back once, yet its attempt stays counted: Inbox-Attempt never
// repeats for a request that may have had effects.
func TestUnsureTimeoutStaysCounted(t *testing.T) {
	t.Parallel()
	d, err := New(nil, Config{Destination: never{}, Schedule: []time.Duration{time.Second}}, zerolog.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	timeout := timedOut(errors.New("timed out after 30s: context deadline exceeded"))
	now := time.Now()
	for _, id := range []string{"s1", "s2"} { // each hangs the application alone: suspects
		d.brk.failed(job(id, 1), timeout, false, now)
		d.brk.admit("good-"+id, now.Add(time.Hour))
		d.brk.succeeded("good-" + id)
	}
	d.brk.failed(job("s1", 1), timeout, false, now)
	st := d.outcome(job("s2", 2), timeout)
	if st.Fate == inbox.FateUnsent {
		t.Errorf("fate %v: a timed-out attempt's count undone", st.Fate)
	}
	if st.Fate == inbox.FatePark {
		t.Errorf("parked at once, want given back once")
	}
}
