package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/postgres"
)

// TestPurgePassesOverHeldRows holds one row past retention from another
// session, as a replica counting a repeat on it would: the purge deletes
// the others at once, neither waiting for the row nor failing, and takes
// it on a later run once it is free. It runs alone, not beside the parallel
// tests: it times the purge against the busy timeout.
func TestPurgePassesOverHeldRows(t *testing.T) {
	dsn := migratedURL(t)
	var mu sync.Mutex
	now := time.Now().Add(-30 * 24 * time.Hour)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := mustOpen(t, dsn, postgres.Options{BusyTimeout: busy, Now: clock})
	ctx := context.Background()
	for _, body := range []string{`not json`, `[1]`, `"x"`} {
		if _, err := s.Put(ctx, inbox.Classify("", inbox.Named{}, []byte(body), 1_800_000_000, rules)); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	now = time.Now()
	mu.Unlock()
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	heldID := inbox.BodyKey(inbox.Classify("", inbox.Named{}, []byte(`[1]`), 0, rules).SHA256)
	go func() { done <- holdRow(ctx, dsn, heldID, held, release) }()
	select {
	case <-held:
	case err := <-done:
		t.Fatal(err)
	}
	var once sync.Once
	free := func() { once.Do(func() { close(release); <-done }) }
	t.Cleanup(free) // before the schema is dropped, which waits for the lock
	sel := inbox.PurgeSelection{Before: time.Now().Add(-10 * 24 * time.Hour), Reasons: []inbox.Reason{inbox.ReasonUnparseable}}
	start := time.Now()
	rep, err := s.Purge(ctx, sel)
	took := time.Since(start)
	t.Logf("purge beside a held row took %s (busy timeout %s)", took, busy)
	if err != nil || rep.DeletedParked[inbox.ReasonUnparseable] != 2 {
		t.Fatalf("purge beside a held row: %+v %v, want the two free rows deleted", rep, err)
	}
	if took >= busy {
		t.Errorf("purge beside a held row took %s, want less than the busy timeout %s: it waited for the row", took, busy)
	}
	free()
	if rep, err = s.Purge(ctx, sel); err != nil || rep.DeletedParked[inbox.ReasonUnparseable] != 1 {
		t.Errorf("purge once the row is free: %+v %v, want it deleted", rep, err)
	}
}
