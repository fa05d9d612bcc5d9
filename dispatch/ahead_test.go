package dispatch_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"inbox/dispatch"
	"inbox/inbox"
	"inbox/sqlite"
)

// attemptsOf sums the attempts counted on the rows of ids.
func attemptsOf(t *testing.T, s *sqlite.Store, ids []string) int64 {
	t.Helper()
	var n int64
	for _, id := range ids {
		n += row(t, s, id).Attempts
	}
	return n
}

// TestAttemptsCountedAhead: while every worker's attempt is under way, the
// attempts of the rows claimed for the workers to take next are counted
// already, so that no worker waits for a commit before its next request,
// and, the workers never running out of rows, never more than
// dispatch.HeldPerWorker times Workers of them. Stopped before it sends them,
// the dispatcher gives those rows back with their counts undone: each row
// then counts as many attempts as requests it made.
func TestAttemptsCountedAhead(t *testing.T) {
	t.Parallel()
	c := newClock()
	var ids []string
	for i := range 20 {
		ids = append(ids, fmt.Sprintf("job_%02d", i))
	}
	s := storeWith(t, c, ids...)
	g := &gated{started: make(chan string, len(ids)), answers: make(chan error, len(ids))}
	const workers = 2
	d, err := dispatch.New(s, dispatch.Config{Destination: g, Workers: workers, MaxSlow: -1, Timeout: 30 * time.Second,
		Now: c.Now, Poll: time.Millisecond}, zerolog.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	var sent []string
	for range workers {
		sent = append(sent, <-g.started)
	}
	// The rows that wait for the two workers (HeldPerWorker x Workers
	// claimed in all), counted.
	ahead := dispatch.HeldPerWorker * workers
	waitFor(t, "the attempts of the rows waiting for a worker counted", func() bool {
		return attemptsOf(t, s, ids) == int64(ahead)
	})
	for range 10 {
		settleDown()
		if n := attemptsOf(t, s, ids); n > int64(ahead) {
			t.Fatalf("%d attempts counted with %d requests sent, want at most %d", n, len(sent), ahead)
		}
	}
	if n := len(g.started); n != 0 {
		t.Fatalf("%d more requests while the workers were busy", n)
	}

	// Stop, then answer the requests under way: the rows counted ahead go
	// back uncounted.
	cancel()
	for range workers {
		g.answers <- nil
	}
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	done <- nil
	sent = append(sent, drainIDs(g.started)...)
	requests := map[string]int64{}
	for _, id := range sent {
		requests[id]++
	}
	for _, id := range ids {
		e := row(t, s, id)
		if e.Attempts != requests[id] || e.LeaseOwner != "" {
			t.Errorf("%s: %d attempts, lease %q, after %d requests; want one attempt per request, no lease", id, e.Attempts, e.LeaseOwner, requests[id])
		}
		if requests[id] > 0 && e.Status != inbox.StatusDone {
			t.Errorf("%s: %s after its request was answered, want done", id, e.Status)
		}
	}
}

// drainIDs returns what c holds now, without waiting.
func drainIDs(c chan string) []string {
	var out []string
	for {
		select {
		case id := <-c:
			out = append(out, id)
		default:
			return out
		}
	}
}

// TestCountedRowThatWaitedIsClaimedAnew: a row counted ahead waits for the
// one worker, held by an attempt, longer than half the timeout. Its lease
// ran from its count, so it is not sent on it: it is given back, its
// count undone, and claimed anew, so that its attempt runs on a lease
// renewed for it, and it still counts one attempt per request.
func TestCountedRowThatWaitedIsClaimedAnew(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := storeWith(t, c, "job_1", "job_2")
	g := &gated{started: make(chan string, 4), answers: make(chan error, 4)}
	const timeout, lease = 2 * time.Second, time.Minute
	start(t, s, dispatch.Config{Destination: g, Workers: 1, MaxSlow: -1, Timeout: timeout, Lease: lease, Now: c.Now})
	first := <-g.started
	second := "job_2"
	if first == second {
		second = "job_1"
	}
	waitFor(t, "the waiting row counted", func() bool { return row(t, s, second).Attempts == 1 })
	c.Advance(10 * timeout)
	g.answers <- nil
	if got := <-g.started; got != second {
		t.Fatalf("delivered %s, want %s", got, second)
	}
	e := row(t, s, second)
	if min := c.Now().Add(lease - timeout/2); e.Attempts != 1 || e.LeaseUntil.Before(min) {
		t.Errorf("%s under way: %d attempts, lease until %s; want 1 attempt, a lease until %s or later", second, e.Attempts, e.LeaseUntil, min)
	}
	g.answers <- nil
	waitFor(t, "both done", func() bool {
		return row(t, s, "job_1").Status == inbox.StatusDone && row(t, s, "job_2").Status == inbox.StatusDone
	})
	for _, id := range []string{"job_1", "job_2"} {
		if e := row(t, s, id); e.Attempts != 1 {
			t.Errorf("%s done after %d attempts, want 1", id, e.Attempts)
		}
	}
}
