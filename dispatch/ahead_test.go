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
// and never more than twice Workers of them. Stopped before it sends them,
// the dispatcher gives those rows back with their counts undone: each row
// then counts as many attempts as requests it made.
func TestAttemptsCountedAhead(t *testing.T) {
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
	// Two rows wait for the two workers (2 x Workers claimed), counted.
	waitFor(t, "the attempts of the rows waiting for a worker counted", func() bool {
		return attemptsOf(t, s, ids) == int64(len(sent)+workers)
	})
	for range 10 {
		settleDown()
		if n := attemptsOf(t, s, ids); n > int64(len(sent)+2*workers) {
			t.Fatalf("%d attempts counted with %d requests sent, want at most %d ahead", n, len(sent), 2*workers)
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
