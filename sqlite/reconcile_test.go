package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	msqlite "modernc.org/sqlite"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// TestRefusalsRolledBackWithDelivery checks that clearing a refusal is part
// of the delivery's transaction: a commit that fails keeps the refusal.
func TestRefusalsRolledBackWithDelivery(t *testing.T) {
	t.Parallel()
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

// held is one hold of a refusal's insert by the SQL function hold_refusal,
// which the trigger of TestGivingUpOnAReconcileWriteFailsNoDelivery calls
// on every step of a long loop: true (hold on) until release is past.
type held struct {
	started   chan struct{} // closed at the first call
	startOnce sync.Once
	release   atomic.Int64 // Unix nanoseconds; 0 until set
}

var holding atomic.Pointer[held]

func init() {
	msqlite.MustRegisterScalarFunction("hold_refusal", 1, func(*msqlite.FunctionContext, []driver.Value) (driver.Value, error) {
		h := holding.Load()
		if h == nil {
			return int64(0), nil
		}
		h.startOnce.Do(func() { close(h.started) })
		r := h.release.Load()
		if r != 0 && time.Now().UnixNano() >= r {
			return int64(0), nil
		}
		return int64(1), nil
	})
}

// TestGivingUpOnAReconcileWriteFailsNoDelivery gives up on a refusal's
// write while its statement runs in the writer's transaction, which it
// shares with deliveries: the deliveries commit all the same. The driver
// interrupts a statement whose context ends, and SQLite then rolls back
// the whole transaction, so the write must run under the writer's context,
// not its caller's. It runs alone, not beside the parallel tests: it
// counts the goroutines of the whole process in a writer's Send.
func TestGivingUpOnAReconcileWriteFailsNoDelivery(t *testing.T) {
	path := t.TempDir() + "/inbox.db"
	var inOp atomic.Bool
	var shared atomic.Int64 // how many writes the refusal's commit carried
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{BusyTimeout: 10 * time.Second, OnCommit: func(c inbox.Commit) {
		if inOp.Swap(false) {
			shared.Store(int64(c.N))
		}
	}})
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The loop the trigger runs in the refusal's insert: up to 10^9 steps,
	// ended by hold_refusal (or by an interrupt).
	if _, err := db.Exec(`CREATE TABLE spin (n INTEGER);
		INSERT INTO spin WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 1000) SELECT n FROM c;
		CREATE TRIGGER hold AFTER INSERT ON refusals BEGIN
			SELECT 1 FROM spin a, spin b, spin c WHERE NOT hold_refusal(a.n + b.n + c.n) LIMIT 1;
		END`); err != nil {
		t.Fatal(err)
	}
	h := &held{started: make(chan struct{})}
	holding.Store(h)
	t.Cleanup(func() { holding.Store(nil) })

	// An op holds the writer while the deliveries and the refusal queue
	// up, so the next commit carries them all.
	unblock, blocked := make(chan struct{}), make(chan struct{})
	go sqlite.WriteOpForTest(s, func(context.Context, *sql.Tx) error {
		close(blocked)
		<-unblock
		return nil
	})
	<-blocked
	ctx, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	var wg sync.WaitGroup
	wg.Go(func() {
		now := time.Now()
		s.RecordRefusals(ctx, []inbox.Refusal{{Key: "job_refused", JobID: "job_refused", First: now, Last: now, Count: 1}})
	})
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() { _, errs[i] = s.Put(context.Background(), job(fmt.Sprintf("job_%d", i))) })
	}
	// Each goroutine blocks handing its write to the writer, and the op's
	// waits for its commit.
	for sending() < len(errs)+2 {
		time.Sleep(time.Millisecond)
	}
	close(unblock)
	<-h.started
	inOp.Store(true)
	giveUp()
	h.release.Store(time.Now().Add(500 * time.Millisecond).UnixNano())
	wg.Wait()
	if n := shared.Load(); n < 2 {
		t.Fatalf("the refusal's commit carried %d writes: no delivery beside it", n)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("put %d beside a reconcile write given up: %v", i, err)
		}
	}
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := st.ByStatus[inbox.StatusNew]; got != int64(len(errs)) {
		t.Errorf("%d rows stored, want %d", got, len(errs))
	}
}

// sending counts the goroutines in a store writer's GroupCommit.Send.
func sending() int {
	buf := make([]byte, 1<<20)
	return bytes.Count(buf[:runtime.Stack(buf, true)], []byte(").Send("))
}
