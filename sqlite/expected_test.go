package sqlite_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// TestExpectations walks an expectation's life: expected, already stored
// (done at once), claimed by one poller only, settled, stale settlements
// ignored, closed, and done by a delivery.
func TestExpectations(t *testing.T) {
	ctx := context.Background()
	clock := time.UnixMilli(1_700_000_000_000).UTC()
	s := sqlitetest.MustOpen(t, sqlite.Options{Now: func() time.Time { return clock }})
	if _, err := s.Put(ctx, job("job_early")); err != nil {
		t.Fatal(err)
	}
	due := clock.Add(time.Hour)
	got, err := s.Expect(ctx, []string{"job_a", "job_b", "job_early"}, "", due)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].State != inbox.ExpectWaiting || got[2].State != inbox.ExpectDone {
		t.Fatalf("expect = %+v, want job_a waiting and job_early done", got)
	}
	if _, err := s.Expect(ctx, []string{"sha256:abc"}, "", due); !errors.Is(err, inbox.ErrInvalidJobID) {
		t.Errorf("expect sha256:abc: %v, want ErrInvalidJobID", err)
	}

	// Nothing is due before its time.
	if polls, err := s.ClaimPolls(ctx, "p1", clock, clock.Add(time.Minute), 10); err != nil || len(polls) != 0 {
		t.Fatalf("claim before due = %+v, %v; want none", polls, err)
	}
	later := due.Add(time.Second)
	if over, err := s.Expected(ctx, later, true); err != nil || len(over) != 2 {
		t.Fatalf("overdue = %+v, %v; want job_a and job_b", over, err)
	}
	polls, err := s.ClaimPolls(ctx, "p1", later, later.Add(time.Minute), 10)
	if err != nil || len(polls) != 2 {
		t.Fatalf("claim = %+v, %v; want job_a and job_b", polls, err)
	}
	// A second poller finds them held until the lease ends.
	if other, err := s.ClaimPolls(ctx, "p2", later.Add(30*time.Second), later.Add(2*time.Minute), 10); err != nil || len(other) != 0 {
		t.Fatalf("second poller claimed %+v, %v; want none", other, err)
	}
	var a, b inbox.Poll
	for _, p := range polls {
		switch p.JobID {
		case "job_a":
			a = p
		case "job_b":
			b = p
		}
	}
	// job_b is delivered while its poll is under way: the settlement is stale.
	if _, err := s.Put(ctx, job("job_b")); err != nil {
		t.Fatal(err)
	}
	stale, err := s.SettlePolls(ctx, "p1", []inbox.PollResult{
		{Poll: a, Fate: inbox.PollRedelivered, At: later, Next: later.Add(10 * time.Minute), JobStatus: "COMPLETED"},
		{Poll: b, Fate: inbox.PollRedelivered, At: later, Next: later.Add(10 * time.Minute), JobStatus: "COMPLETED"},
	})
	if err != nil || stale != 1 {
		t.Fatalf("settle: stale %d, %v; want 1 (job_b delivered meanwhile)", stale, err)
	}
	all, err := s.Expected(ctx, later, false)
	if err != nil {
		t.Fatal(err)
	}
	byJob := map[string]inbox.Expectation{}
	for _, e := range all {
		byJob[e.JobID] = e
	}
	if e := byJob["job_a"]; e.State != inbox.ExpectWaiting || e.Redeliveries != 1 || e.Polls != 1 || e.JobStatus != "COMPLETED" || !e.NextPollAt.Equal(later.Add(10*time.Minute)) {
		t.Errorf("job_a = %+v, want waiting, one redelivery, next poll in 10m", e)
	}
	if e := byJob["job_b"]; e.State != inbox.ExpectDone || e.Redeliveries != 1 {
		t.Errorf("job_b = %+v, want done by its delivery, the redelivery asked for meanwhile counted", e)
	}

	// Polled again once due, and closed: the provider does not know it.
	at := later.Add(11 * time.Minute)
	polls, err = s.ClaimPolls(ctx, "p2", at, at.Add(time.Minute), 10)
	if err != nil || len(polls) != 1 || polls[0].JobID != "job_a" || polls[0].Attempt != 2 {
		t.Fatalf("second claim = %+v, %v; want job_a at poll 2", polls, err)
	}
	// The first poller's claim is gone.
	if stale, err := s.SettlePolls(ctx, "p1", []inbox.PollResult{{Poll: a, Fate: inbox.PollClose, At: at, Reason: "old"}}); err != nil || stale != 1 {
		t.Fatalf("settle of a lost claim: stale %d, %v; want 1", stale, err)
	}
	if _, err := s.SettlePolls(ctx, "p2", []inbox.PollResult{{Poll: polls[0], Fate: inbox.PollClose, At: at, Reason: "Sume does not know job_a"}}); err != nil {
		t.Fatal(err)
	}
	all, _ = s.Expected(ctx, at, false)
	for _, e := range all {
		if e.JobID == "job_a" && (e.State != inbox.ExpectClosed || e.Reason != "Sume does not know job_a") {
			t.Errorf("job_a = %+v, want closed with the reason", e)
		}
	}
	r, err := s.Reconciliation(ctx, at)
	if err != nil || r.Done != 2 || r.Closed != 1 || r.Waiting != 0 || r.Overdue != 0 {
		t.Errorf("reconciliation = %+v, %v; want 2 done, 1 closed", r, err)
	}
}
