package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
	"inbox/postgres"
)

// withApp returns dsn with an application_name of its own, so the test can
// find (and terminate) the store's sessions.
func withApp(t *testing.T, dsn string) (string, string) {
	t.Helper()
	name := "inbox_" + strings.TrimPrefix(searchPath(dsn), "t_")
	return withParam(dsn, "application_name", name), name
}

// TestDurableWhateverTheRoleSays: synchronous_commit set off for the
// store's role while the store runs does not reach its sessions. A trigger
// records the setting of each session that inserts a row; the store's new
// connections, made after the change, still commit with it on.
func TestDurableWhateverTheRoleSays(t *testing.T) {
	t.Parallel()
	dsn := testURL(t)
	ctx := context.Background()
	mustOpen(t, dsn, postgres.Options{}).Close()
	schema := searchPath(dsn)
	exec(t, dsn, `CREATE TABLE `+schema+`.seen (sc text NOT NULL)`)
	exec(t, dsn, `CREATE FUNCTION `+schema+`.record_sc() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO `+schema+`.seen VALUES (current_setting('synchronous_commit')); RETURN NULL; END $$`)
	exec(t, dsn, `CREATE TRIGGER record_sc AFTER INSERT ON `+schema+`.events FOR EACH ROW EXECUTE FUNCTION `+schema+`.record_sc()`)
	roleDSN := newRole(t, dsn, `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}`)
	roleDSN, app := withApp(t, roleDSN)
	role, _ := url.Parse(roleDSN)

	s := mustOpen(t, roleDSN, postgres.Options{BusyTimeout: busy})
	if _, err := s.Put(ctx, job("job_before")); err != nil {
		t.Fatal(err)
	}
	exec(t, dsn, `ALTER ROLE `+role.User.Username()+` SET synchronous_commit = off`)
	// New sessions for the store: the pool's connections are replaced.
	exec(t, dsn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app)
	for i := range 5 {
		if _, err := s.Put(ctx, job(fmt.Sprintf("job_after_%d", i))); err != nil {
			t.Logf("put after the role's change: %v", err) // the first may meet a terminated session
		}
	}
	// A session of the role's own, to show the change took.
	var own string
	conn, err := pgx.Connect(ctx, withParam(roleDSN, "application_name", "other"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&own); err != nil || own != "off" {
		t.Fatalf("the role's own session: synchronous_commit %q, %v; want off (the test's change did not take)", own, err)
	}
	var settings []string
	rows, err := conn.Query(ctx, `SELECT sc FROM `+schema+`.seen`)
	if err != nil {
		t.Fatal(err)
	}
	settings, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("synchronous_commit of the store's inserting sessions: %v", settings)
	if len(settings) < 2 {
		t.Fatalf("%d rows inserted, want the one before and some after", len(settings))
	}
	for _, sc := range settings {
		if sc != "on" {
			t.Errorf("a store session committed with synchronous_commit = %s after the role's change", sc)
		}
	}
}

// TestHeldRowFailsOnlyItsDeliveries holds one row from another session
// while its job is delivered again and many other jobs arrive: the others
// all commit, at once; only the held row's delivery fails, within the
// bound. It runs alone, not beside the parallel tests: it times a burst of
// deliveries against the busy timeout.
func TestHeldRowFailsOnlyItsDeliveries(t *testing.T) {
	dsn := migratedURL(t)
	s := mustOpen(t, dsn, postgres.Options{BusyTimeout: busy})
	ctx := context.Background()
	if _, err := s.Put(ctx, job("job_held")); err != nil {
		t.Fatal(err)
	}
	free := holdingRow(t, dsn, "job_held")

	heldErr := make(chan error, 1)
	var heldTook time.Duration
	go func() {
		var err error
		heldTook, err = timedPut(s, job("job_held"))
		heldErr <- err
	}()
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			if _, err := s.Put(ctx, job(fmt.Sprintf("job_%03d", i))); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	failed := 0
	for err := range errs {
		failed++
		t.Log(err)
	}
	err := <-heldErr
	t.Logf("%d unrelated deliveries beside a held row: %d failed, all answered in %s; the held row's: %v after %s", n, failed, took, err, heldTook)
	if failed > 0 {
		t.Errorf("%d of %d unrelated deliveries failed beside one held row", failed, n)
	}
	if took >= busy {
		t.Errorf("the unrelated deliveries took %s, want well within the busy timeout %s", took, busy)
	}
	if err == nil || heldTook > bound {
		t.Errorf("the held row's delivery: %v after %s, want an error within %s", err, heldTook, bound)
	}
	// The held statement gives up at its lock timeout, within the busy
	// timeout of its start; a row freed before then on a slow machine would
	// let it commit after its caller stopped waiting (a retry finds the
	// row), and count a delivery this test wants uncounted.
	time.Sleep(busy)
	free()
	if e, err := s.Get(ctx, "job_held"); err != nil || e.Deliveries != 1 {
		t.Errorf("job_held = %+v %v, want 1 delivery: the failed one not counted", e, err)
	}
}

// TestHeldRowTakenOnceFree: a delivery whose row is held for less than the
// busy timeout waits for it, alone, and lands once it is free.
func TestHeldRowTakenOnceFree(t *testing.T) {
	t.Parallel()
	dsn := migratedURL(t)
	s := mustOpen(t, dsn, postgres.Options{BusyTimeout: 2 * time.Second})
	ctx := context.Background()
	if _, err := s.Put(ctx, job("job_held")); err != nil {
		t.Fatal(err)
	}
	free := holdingRow(t, dsn, "job_held")
	got := make(chan error, 1)
	go func() {
		res, err := s.Put(ctx, job("job_held"))
		if err == nil && res.Outcome != inbox.OutcomeDuplicate {
			err = fmt.Errorf("outcome %v, want a duplicate", res.Outcome)
		}
		got <- err
	}()
	if _, err := s.Put(ctx, job("job_other")); err != nil {
		t.Errorf("a delivery beside the held row: %v", err)
	}
	select {
	case err := <-got:
		t.Fatalf("the held row's delivery was answered while the row was held: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	free()
	if err := <-got; err != nil {
		t.Errorf("the held row's delivery once the row was free: %v", err)
	}
	if e, err := s.Get(ctx, "job_held"); err != nil || e.Deliveries != 2 {
		t.Errorf("job_held = %+v %v, want 2 deliveries", e, err)
	}
}

// cutAtCommit makes the next COMMIT of a transaction that fires a deferred
// trigger on events (for the operation op: INSERT, or UPDATE OF attempts)
// end the session: the server terminates it before the commit, and the
// client's COMMIT gets no answer but the session's end. Only the first
// such COMMIT is cut (a sequence, which no rollback undoes, counts them).
func cutAtCommit(t *testing.T, dsn, op string) {
	t.Helper()
	schema := searchPath(dsn)
	exec(t, dsn, `CREATE SEQUENCE `+schema+`.cuts`)
	exec(t, dsn, `CREATE FUNCTION `+schema+`.cut() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('`+schema+`.cuts') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid()); END IF;
			RETURN NULL;
		END $$`)
	exec(t, dsn, `CREATE CONSTRAINT TRIGGER cut AFTER `+op+` ON `+schema+`.events
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION `+schema+`.cut()`)
}

// TestPutCommitCut: a group commit whose session ends during COMMIT is
// not guessed at: the store asks the server what became of it, and,
// finding it did not commit, commits the delivery again: the Put succeeds
// and the row holds one delivery.
func TestPutCommitCut(t *testing.T) {
	t.Parallel()
	dsn := migratedURL(t)
	s := mustOpen(t, dsn, postgres.Options{BusyTimeout: 2 * time.Second})
	ctx := context.Background()
	cutAtCommit(t, dsn, "INSERT")
	res, err := s.Put(ctx, job("job_1"))
	if err != nil || res.Outcome != inbox.OutcomeStored {
		t.Fatalf("put whose COMMIT was cut: %+v, %v; want it stored", res, err)
	}
	if e, err := s.Get(ctx, "job_1"); err != nil || e.Deliveries != 1 {
		t.Errorf("job_1 = %+v %v, want 1 delivery", e, err)
	}
}

// TestStartCommitCut: a Start whose session ends during COMMIT is looked
// up rather than failed: the attempt is counted once and the job comes
// back started, so the dispatcher never gives back (and leaves waiting on
// its lease) a row whose attempt it counted.
func TestStartCommitCut(t *testing.T) {
	t.Parallel()
	dsn := migratedURL(t)
	s := mustOpen(t, dsn, postgres.Options{BusyTimeout: 2 * time.Second})
	ctx := context.Background()
	if _, err := s.Put(ctx, job("job_1")); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	jobs, _, err := s.Settle(ctx, "w", nil, inbox.Claim{Now: now, Until: now.Add(time.Minute), Max: 1})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v, %v", jobs, err)
	}
	cutAtCommit(t, dsn, "UPDATE OF attempts")
	started, err := s.Start(ctx, "w", jobs, now, now.Add(time.Minute))
	if err != nil || len(started) != 1 {
		t.Fatalf("start whose COMMIT was cut: %v, %v; want the job started", started, err)
	}
	_, stale, err := s.Settle(ctx, "w", []inbox.Settlement{{Job: started[0], Fate: inbox.FateDone, At: time.Now()}}, inbox.Claim{})
	if err != nil || stale != 0 {
		t.Fatalf("settle the started job: stale %d, %v", stale, err)
	}
	if e, err := s.Get(ctx, "job_1"); err != nil || e.Attempts != 1 || e.Status != inbox.StatusDone {
		t.Errorf("job_1 = %+v %v, want done after 1 attempt", e, err)
	}
}

// TestOpenSaysWhatWasRefused: a read-only role, and a database that takes
// no writes, are refused by a writable Open with a line that says the
// command writes and what to connect as; a connection string that does
// not parse says what does not, without its password.
func TestOpenSaysWhatWasRefused(t *testing.T) {
	t.Parallel()
	dsn := testURL(t)
	ctx := context.Background()
	mustOpen(t, dsn, postgres.Options{}).Close()
	reader := newRole(t, dsn, `GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}`)
	readOnlyRole := newRole(t, dsn, `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}`,
		`ALTER ROLE {role} SET default_transaction_read_only = on`)
	for name, c := range map[string]struct{ dsn, want string }{
		"select only":     {reader, "the role that writes"},
		"read-only role":  {readOnlyRole, "takes none"},
		"read-only param": {withParam(dsn, "default_transaction_read_only", "on"), "takes none"},
	} {
		s, err := postgres.Open(ctx, c.dsn, postgres.Options{})
		if err == nil {
			s.Close()
			t.Errorf("%s: opened a writable store", name)
			continue
		}
		t.Logf("%s: %v", name, err)
		if !strings.Contains(err.Error(), "this command writes") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say the command writes and %q", name, err, c.want)
		}
		ro, err := postgres.Open(ctx, c.dsn, postgres.Options{ReadOnly: true})
		if err != nil {
			t.Errorf("%s: read-only open: %v", name, err)
			continue
		}
		ro.Close()
	}

	u, _ := url.Parse(dsn)
	u.User = url.UserPassword("inbox", "s3cret-pw")
	for _, c := range []struct{ param, value, want string }{
		{"sslmode", "bogus", "sslmode is invalid"},
		{"connect_timeout", "soon", "invalid connect_timeout"},
		{"target_session_attrs", "whichever", "target_session_attrs"},
	} {
		_, err := postgres.Open(ctx, withParam(u.String(), c.param, c.value), postgres.Options{})
		t.Logf("%s=%s: %v", c.param, c.value, err)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("%s=%s: %v, want it to say %q without the password", c.param, c.value, err, c.want)
		}
	}
}

// TestMaxConns: the pool holds at most MaxConns connections, and a
// writable store refuses a pool too small for its writer.
func TestMaxConns(t *testing.T) {
	t.Parallel()
	dsn, app := withApp(t, testURL(t))
	ctx := context.Background()
	if s, err := postgres.Open(ctx, dsn, postgres.Options{MaxConns: 1}); err == nil {
		s.Close()
		t.Error("MaxConns 1: opened a writable store")
	} else if !strings.Contains(err.Error(), "at least 2") {
		t.Errorf("MaxConns 1: %v, want refused", err)
	}
	s := mustOpen(t, dsn, postgres.Options{MaxConns: 3})
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			now := time.Now()
			s.Put(ctx, job(fmt.Sprintf("job_%d", i)))
			s.Settle(ctx, fmt.Sprint("w", i), nil, inbox.Claim{Now: now, Until: now.Add(time.Minute), Max: 1})
			s.Stats(ctx)
		})
	}
	wg.Wait()
	var n int
	conn, err := pgx.Connect(ctx, databaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	t.Logf("sessions after a burst with MaxConns 3: %d", n)
	if n < 2 || n > 3 {
		t.Errorf("%d sessions, want 2 or 3", n)
	}
}
