package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
	"inbox/postgres"
)

// TestSettleHeldRow: a row another session holds (FOR UPDATE) fails only
// its own settlement, at the busy timeout, with an *inbox.PartialError
// naming it; the other settlements and the claim commit without it. Once
// the row is let go its settlement is recorded, once, and its attempt
// counted once.
func TestSettleHeldRow(t *testing.T) {
	t.Parallel()
	dsn := migratedURL(t)
	s := mustOpen(t, dsn, postgres.Options{BusyTimeout: 500 * time.Millisecond})
	ctx := context.Background()
	for _, id := range []string{"job_1", "job_2", "job_3"} {
		if _, err := s.Put(ctx, job(id)); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	jobs, _, err := s.Settle(ctx, "w", nil, inbox.Claim{Now: now, Until: now.Add(time.Minute), Max: 2})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claim: %v, %v", jobs, err)
	}
	started, err := s.Start(ctx, "w", jobs, now, now.Add(time.Minute))
	if err != nil || len(started) != 2 {
		t.Fatalf("start: %v, %v", started, err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT id FROM events WHERE id = $1 FOR UPDATE`, started[0].ID); err != nil {
		t.Fatal(err)
	}
	var settled []inbox.Settlement
	for _, j := range started {
		settled = append(settled, inbox.Settlement{Job: j, Fate: inbox.FateDone, At: time.Now()})
	}
	begin := time.Now()
	more, stale, err := s.Settle(ctx, "w", settled, inbox.Claim{Now: time.Now(), Until: time.Now().Add(time.Minute), Max: 5})
	var partial *inbox.PartialError
	if !errors.As(err, &partial) || len(partial.Held) != 1 || partial.Held[0].Job.ID != started[0].ID {
		t.Fatalf("settle beside a held row: %v; want a PartialError naming %s", err, started[0].ID)
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("settle beside a held row took %s, want about the busy timeout", took)
	}
	if stale != 0 || len(more) != 1 || more[0].ID != "job_3" {
		t.Errorf("settle beside a held row: stale %d, claimed %v; want 0 and job_3", stale, more)
	}
	if e, err := s.Get(ctx, started[1].ID); err != nil || e.Status != inbox.StatusDone {
		t.Errorf("the row not held: %+v %v, want done", e, err)
	}
	if _, err := conn.Exec(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if _, stale, err := s.Settle(ctx, "w", partial.Held, inbox.Claim{}); err != nil || stale != 0 {
		t.Fatalf("settle the row let go: stale %d, %v", stale, err)
	}
	for _, j := range started {
		if e, err := s.Get(ctx, j.ID); err != nil || e.Status != inbox.StatusDone || e.Attempts != 1 {
			t.Errorf("%s = %+v %v, want done after 1 attempt", j.ID, e, err)
		}
	}
}
