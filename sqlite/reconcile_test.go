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
