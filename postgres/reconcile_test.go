package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/postgres"
)

// TestRefusalKeptWhenTheDeliveryFails: clearing a refusal is part of the
// delivery's transaction, so a commit that fails keeps it.
func TestRefusalKeptWhenTheDeliveryFails(t *testing.T) {
	t.Parallel()
	dsn := migratedURL(t)
	s := mustOpen(t, dsn, postgres.Options{BusyTimeout: busy})
	ctx := context.Background()
	now := time.Now()
	if err := s.RecordRefusals(ctx, []inbox.Refusal{{Key: "job_a", JobID: "job_a", First: now, Last: now, Count: 1}}); err != nil {
		t.Fatal(err)
	}
	// A trigger that fails every insert into events stands in for a
	// database that cannot commit the delivery.
	schema := searchPath(dsn)
	exec(t, dsn, `CREATE FUNCTION `+schema+`.fail() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'disk on fire'; END$$`)
	exec(t, dsn, `CREATE TRIGGER fail BEFORE INSERT ON `+schema+`.events FOR EACH ROW EXECUTE FUNCTION `+schema+`.fail()`)
	if _, err := s.Put(ctx, job("job_a")); err == nil {
		t.Fatal("put succeeded through the failing trigger")
	}
	if missed, err := s.Missed(ctx, time.Time{}); err != nil || len(missed) != 1 {
		t.Fatalf("after a failed delivery, missed = %+v, %v; want job_a kept", missed, err)
	}
	exec(t, dsn, `DROP TRIGGER fail ON `+schema+`.events`)
	if _, err := s.Put(ctx, job("job_a")); err != nil {
		t.Fatal(err)
	}
	if missed, err := s.Missed(ctx, time.Time{}); err != nil || len(missed) != 0 {
		t.Fatalf("after the delivery, missed = %+v, %v; want none", missed, err)
	}
}

// TestRefusalOfAStoredKeyIsNotMissed: a refusal that a replica wrote while
// another stored the key (each transaction saw neither the other's row)
// is not reported missed, nor counted.
func TestRefusalOfAStoredKeyIsNotMissed(t *testing.T) {
	t.Parallel()
	dsn := testURL(t)
	s := mustOpen(t, dsn, postgres.Options{})
	ctx := context.Background()
	if _, err := s.Put(ctx, job("job_a")); err != nil {
		t.Fatal(err)
	}
	exec(t, dsn, `INSERT INTO `+searchPath(dsn)+`.refusals (source, key, job_id, first_refused_at, last_refused_at, refusals)
		VALUES ('sume', 'job_a', 'job_a', 1, 1, 1), ('sume', 'job_b', 'job_b', 2, 2, 1)`)
	missed, err := s.Missed(ctx, time.Time{})
	if err != nil || len(missed) != 1 || missed[0].Key != "job_b" {
		t.Errorf("missed = %+v, %v; want job_b alone", missed, err)
	}
	if r, err := s.Reconciliation(ctx, time.Now()); err != nil || r.Missed != 1 {
		t.Errorf("reconciliation = %+v, %v; want 1 missed", r, err)
	}
}

// TestPollersNeverShareAnExpectation has pollers on two replicas claim due
// expectations at once, over and over: each is claimed exactly once. One
// whose job a replica stored meanwhile is settled done, not claimed.
func TestPollersNeverShareAnExpectation(t *testing.T) {
	t.Parallel()
	dsn := testURL(t)
	stores := []*postgres.Store{mustOpen(t, dsn, postgres.Options{}), mustOpen(t, dsn, postgres.Options{})}
	ctx := context.Background()
	const n = 300
	jobs := make([]string, n)
	for i := range jobs {
		jobs[i] = fmt.Sprintf("job_%03d", i)
	}
	if _, err := stores[0].Expect(ctx, jobs, "", time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[1].Put(ctx, job("job_000")); err != nil {
		t.Fatal(err)
	}
	// As a race between its Expect and its delivery on two replicas leaves it.
	exec(t, dsn, `UPDATE `+searchPath(dsn)+`.expectations SET state = 'waiting', settled_at = NULL WHERE job_id = 'job_000'`)
	var mu sync.Mutex
	claimed := map[string]int{}
	var firstErr error
	var wg sync.WaitGroup
	for i, s := range stores {
		for w := range 4 {
			wg.Go(func() {
				owner := fmt.Sprintf("p%d.%d", i, w)
				for {
					polls, err := s.ClaimPolls(ctx, owner, time.Now(), time.Now().Add(time.Hour), 7)
					mu.Lock()
					if err != nil && firstErr == nil {
						firstErr = err
					}
					for _, p := range polls {
						claimed[p.JobID]++
					}
					mu.Unlock()
					if err != nil || len(polls) == 0 {
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	for _, id := range jobs[1:] {
		if claimed[id] != 1 {
			t.Errorf("%s claimed %d times, want once", id, claimed[id])
		}
	}
	if claimed["job_000"] != 0 {
		t.Errorf("job_000, stored, was claimed %d times", claimed["job_000"])
	}
	if r, err := stores[0].Reconciliation(ctx, time.Now()); err != nil || r.Done != 1 || r.Overdue != n-1 {
		t.Errorf("reconciliation = %+v, %v; want job_000 done, the rest overdue", r, err)
	}
}
