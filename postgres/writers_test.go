package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/postgres"
)

// TestSlowCommitHoldsUpNoOtherBatch: while one batch's transaction is slow
// (a trigger sleeps on its row), another delivery commits at once, in a
// batch of its own on another writer, rather than after it.
func TestSlowCommitHoldsUpNoOtherBatch(t *testing.T) {
	t.Parallel()
	dsn := testURL(t)
	appDSN, app := withApp(t, dsn)
	s := mustOpen(t, appDSN, postgres.Options{Writers: 2, BusyTimeout: 5 * time.Second})
	schema := searchPath(dsn)
	exec(t, dsn, `CREATE FUNCTION `+schema+`.slow() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.id LIKE '%job_slow' THEN PERFORM pg_sleep(1.5); END IF; RETURN NEW; END $$`)
	exec(t, dsn, `CREATE TRIGGER slow BEFORE INSERT ON `+schema+`.events FOR EACH ROW EXECUTE FUNCTION `+schema+`.slow()`)
	ctx := context.Background()
	slow := make(chan error, 1)
	go func() {
		_, err := s.Put(ctx, job("job_slow"))
		slow <- err
	}()
	sleeping(t, dsn, app) // the slow batch is under way
	start := time.Now()
	if _, err := s.Put(ctx, job("job_quick")); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a delivery behind a slow commit took %v, want it committed beside it (< 1s)", took)
	}
	if err := <-slow; err != nil {
		t.Fatalf("the slow delivery: %v", err)
	}
	for _, key := range []string{"job_slow", "job_quick"} {
		if e, err := s.Get(ctx, key); err != nil || e.Deliveries != 1 {
			t.Errorf("%s = %+v, %v; want stored once", key, e, err)
		}
	}
}

// TestWritersPutOverlappingKeys has one store's writers take the same keys
// at once from many goroutines, in batches in flight together: one row a
// key (and one beside it for another event of the same job), every
// delivery counted once, and no batch deadlocks or fails.
func TestWritersPutOverlappingKeys(t *testing.T) {
	t.Parallel()
	putOverlapping(t, []*postgres.Store{mustOpen(t, testURL(t), postgres.Options{Writers: 4, MaxConns: 8})}, 24)
}

// TestCommitRefusedWhenNotDurable: a transaction of the writer's whose
// session turns synchronous_commit off (here a trigger on the row it
// inserts; in life a SET through a pooler, say) is refused just before
// COMMIT, in the round trip that carries it: the Put fails saying so, and
// nothing of it is kept.
func TestCommitRefusedWhenNotDurable(t *testing.T) {
	t.Parallel()
	dsn := testURL(t)
	s := mustOpen(t, dsn, postgres.Options{Writers: 1, MaxConns: 2})
	schema := searchPath(dsn)
	exec(t, dsn, `CREATE FUNCTION `+schema+`.undurable() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.id LIKE '%job_undurable' THEN PERFORM set_config('synchronous_commit', 'off', false); END IF; RETURN NEW; END $$`)
	exec(t, dsn, `CREATE TRIGGER undurable BEFORE INSERT ON `+schema+`.events FOR EACH ROW EXECUTE FUNCTION `+schema+`.undurable()`)
	ctx := context.Background()
	_, err := s.Put(ctx, job("job_undurable"))
	if err == nil || !strings.Contains(err.Error(), "refuse to commit: synchronous_commit is off") {
		t.Fatalf("put whose session turned synchronous_commit off: %v, want it refused, naming synchronous_commit", err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows kept (%v), want none", n, err)
	}
	// The session is whole again (the rollback undid the change): the next
	// delivery commits.
	if _, err := s.Put(ctx, job("job_after")); err != nil {
		t.Errorf("the next put: %v", err)
	}
}

// TestWritersWithinThePool: Open refuses as many writers as the pool has
// connections, which would leave none for the rest of the store.
func TestWritersWithinThePool(t *testing.T) {
	t.Parallel()
	_, err := postgres.Open(context.Background(), testURL(t), postgres.Options{MaxConns: 4, Writers: 4})
	if err == nil || !strings.Contains(err.Error(), "4 writers need a pool of more than 4 connections") {
		t.Fatalf("4 writers on 4 connections: %v, want refused", err)
	}
}

// sleeping waits until a session of the application app is in pg_sleep,
// for up to 5 s.
func sleeping(t *testing.T, dsn, app string) {
	t.Helper()
	ctx := context.Background()
	conn := connect(t, dsn)
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event = 'PgSleep'`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("no session of %s in pg_sleep after %s", app, time.Since(start))
		}
	}
}
