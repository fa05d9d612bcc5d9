package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// TestWriteOpIsolated fails a write that shares the writer with
// deliveries: its change is undone, the deliveries commit.
func TestWriteOpIsolated(t *testing.T) {
	t.Parallel()
	s := sqlitetest.MustOpen(t, sqlite.Options{})
	boom := errors.New("boom")
	var wg sync.WaitGroup
	errs := make([]error, 50)
	for i := range errs {
		wg.Go(func() { _, errs[i] = s.Put(context.Background(), job(fmt.Sprintf("job_%d", i))) })
	}
	for range 10 {
		err := sqlite.WriteOpForTest(s, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `DELETE FROM events`); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Errorf("op error = %v, want boom", err)
		}
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("put %d beside a failing op: %v", i, err)
		}
	}
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.ByStatus[inbox.StatusNew] != 50 {
		t.Errorf("%d rows, want 50: a failed op's delete survived", st.ByStatus[inbox.StatusNew])
	}
}

// TestHungCommitAnswersInTime runs a write that takes far longer than the
// busy timeout (as a commit stuck on a failing disk would): whoever waits
// on that transaction gets an error within the busy timeout and half a
// second, not when the write ends. It runs alone, not beside the parallel
// tests: it times the answer.
func TestHungCommitAnswersInTime(t *testing.T) {
	const busy = 200 * time.Millisecond
	s := sqlitetest.MustOpen(t, sqlite.Options{BusyTimeout: busy})
	release := make(chan struct{})
	defer close(release)
	start := time.Now()
	err := sqlite.WriteOpForTest(s, func(ctx context.Context, tx *sql.Tx) error {
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
		return nil
	})
	took := time.Since(start)
	t.Logf("hung write answered after %v: %v", took.Round(time.Millisecond), err)
	if err == nil || took > busy+500*time.Millisecond {
		t.Errorf("after %v: %v; want an error within %v", took, err, busy+500*time.Millisecond)
	}
}

// TestPutOutlivesItsContext puts deliveries whose context is done already:
// each is committed and answered all the same, since the sender's retry
// would only count a repeat. Their waits for the writer and for the commit
// are shared timers, not each request's own context.
func TestPutOutlivesItsContext(t *testing.T) {
	t.Parallel()
	s := sqlitetest.MustOpen(t, sqlite.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 20 {
		res, err := s.Put(ctx, job(fmt.Sprintf("job_%d", i)))
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		if res.Outcome != inbox.OutcomeStored {
			t.Fatalf("put %d: outcome %v, want stored", i, res.Outcome)
		}
	}
}
