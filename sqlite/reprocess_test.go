package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// putAll stores the bodies concurrently, so group commit keeps it quick.
func putAll(t *testing.T, s *sqlite.Store, bodies []string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(bodies))
	for i, b := range bodies {
		wg.Go(func() {
			_, errs[i] = s.Put(context.Background(), inbox.Classify("", inbox.Named{}, []byte(b), 1_800_000_000, rules))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
}

// TestReprocessBatches reprocesses more rows than one transaction carries.
func TestReprocessBatches(t *testing.T) {
	t.Parallel()
	s := sqlitetest.MustOpen(t, sqlite.Options{})
	const n = 250
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = fmt.Sprintf(`{"event":"job.exploded","job_id":"job_%d"}`, i)
	}
	putAll(t, s, bodies)
	r := rules
	r.Events = append([]string{"job.exploded"}, r.Events...)
	rep, err := s.Reprocess(context.Background(), inbox.Selection{Reason: inbox.ReasonUnknownEvent}, inbox.SourceRules{inbox.DefaultSource: r}, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Moved != n || len(rep.Parked) != 0 {
		t.Errorf("report %+v, want %d moved", rep, n)
	}
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.ByStatus[inbox.StatusNew] != n || st.ByStatus[inbox.StatusParked] != 0 {
		t.Errorf("rows %v, want %d new", st.ByStatus, n)
	}
}

func TestReprocessReadOnly(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/inbox.db"
	sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	ro := sqlitetest.MustOpenPath(t, path, sqlite.Options{ReadOnly: true})
	if _, err := ro.Reprocess(context.Background(), inbox.Selection{All: true}, inbox.SourceRules{inbox.DefaultSource: rules}, true); err == nil {
		t.Error("a read-only store reprocessed")
	}
}

// TestReprocessSkipsRowsChangedMeanwhile changes rows after reprocess read
// them and before it applies what it found: those rows are left as they
// are, and counted as changed.
func TestReprocessSkipsRowsChangedMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := sqlitetest.MustOpen(t, sqlite.Options{})
	putAll(t, s, []string{`{"event":"job.exploded","job_id":"job_1"}`, `{"event":"job.exploded","job_id":"job_2"}`,
		`{"event":"job.exploded","job_id":"job_3"}`})
	r := rules
	r.Events = append([]string{"job.exploded"}, r.Events...)
	rep, err := sqlite.ReprocessForTest(ctx, s, inbox.Selection{All: true}, r, func() {
		// A delivery revives job_1 with another body; job_2 is deleted.
		if _, err := s.Put(ctx, job("job_1")); err != nil {
			t.Fatal(err)
		}
		if err := sqlite.WriteOpForTest(s, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `DELETE FROM events WHERE status = 'parked'`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		putAll(t, s, []string{`{"event":"job.exploded","job_id":"job_3"}`})
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Changed != 2 || rep.Moved != 1 {
		t.Errorf("report %+v, want 2 changed and 1 moved", rep)
	}
	if e, err := s.Get(ctx, "job_1"); err != nil || e.Event != "job.completed" || e.Status != inbox.StatusNew {
		t.Errorf("job_1 = %+v, %v; want the delivery's job.completed, new", e, err)
	}
	if _, err := s.Get(ctx, "job_2"); !errors.Is(err, inbox.ErrNotFound) {
		t.Errorf("job_2: %v, want it gone", err)
	}
}
