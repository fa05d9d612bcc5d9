package sqlite_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// TestRefusalsClearedByDelivery records refusals, adds to them, and checks
// that a delivery of a key clears its refusal in the commit that stores it,
// while a key already stored is never recorded at all.
func TestRefusalsClearedByDelivery(t *testing.T) {
	ctx := context.Background()
	s := sqlitetest.MustOpen(t, sqlite.Options{})
	if _, err := s.Put(ctx, job("job_stored")); err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	refs := []inbox.Refusal{
		{Key: "job_a", JobID: "job_a", Event: "job.completed", First: t0, Last: t0.Add(time.Second), Count: 2},
		{Key: "job_b", JobID: "job_b", Event: "job.failed", First: t0.Add(time.Minute), Last: t0.Add(time.Minute), Count: 1},
		{Key: "job_stored", JobID: "job_stored", First: t0, Last: t0, Count: 1},
	}
	if err := s.RecordRefusals(ctx, refs); err != nil {
		t.Fatal(err)
	}
	// The same key again, refused earlier and later: the times widen, the counts add.
	if err := s.RecordRefusals(ctx, []inbox.Refusal{{Key: "job_a", JobID: "job_a", First: t0.Add(-time.Second), Last: t0.Add(time.Hour), Count: 3}}); err != nil {
		t.Fatal(err)
	}
	missed, err := s.Missed(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(missed) != 2 || missed[0].Key != "job_a" || missed[1].Key != "job_b" {
		t.Fatalf("missed = %+v, want job_a and job_b", missed)
	}
	a := missed[0]
	if a.Source != "sume" || a.Count != 5 || !a.First.Equal(t0.Add(-time.Second)) || !a.Last.Equal(t0.Add(time.Hour)) || a.Event != "job.completed" {
		t.Errorf("job_a = %+v, want 5 refusals from t0-1s to t0+1h", a)
	}
	if older, err := s.Missed(ctx, t0.Add(time.Second)); err != nil || len(older) != 1 || older[0].Key != "job_a" {
		t.Errorf("missed before t0+1s = %+v, %v; want job_a alone", older, err)
	}
	if _, err := s.Put(ctx, job("job_a")); err != nil {
		t.Fatal(err)
	}
	missed, err = s.Missed(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(missed) != 1 || missed[0].Key != "job_b" {
		t.Fatalf("after job_a's delivery, missed = %+v, want job_b alone", missed)
	}
}

// TestRefusalsRolledBackWithDelivery checks that clearing a refusal is part
// of the delivery's transaction: a commit that fails keeps the refusal.
func TestRefusalsRolledBackWithDelivery(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/inbox.db"
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{BusyTimeout: 50 * time.Millisecond})
	now := time.Now()
	if err := s.RecordRefusals(ctx, []inbox.Refusal{{Key: "job_a", JobID: "job_a", First: now, Last: now, Count: 1}}); err != nil {
		t.Fatal(err)
	}
	// A trigger that fails every insert into events stands in for a store
	// that cannot commit the delivery.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TRIGGER fail BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'disk on fire'); END`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, job("job_a")); err == nil {
		t.Fatal("put succeeded through the failing trigger")
	}
	if missed, err := s.Missed(ctx, time.Time{}); err != nil || len(missed) != 1 {
		t.Fatalf("after a failed delivery, missed = %+v, %v; want job_a kept", missed, err)
	}
}
