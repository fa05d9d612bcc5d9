package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A 204 is sent once COMMIT returns, so every commit the store makes must
// be durable when COMMIT returns, whatever the server, the database or the
// role were set to after Open. Three places see to it: forceDurable puts
// synchronous_commit in each connection's startup parameters (which
// outrank the role's, the database's and the server's settings),
// checkDurable refuses a connection that would still not commit durably
// (pgxpool's AfterConnect, so a new connection is checked as the first
// was), and tryTx reads the settings again in each transaction, just before
// COMMIT, since fsync and full_page_writes can change on a reload under a
// connection already made (the writer's transactions: commitGuard, in the
// round trip of COMMIT).

// forceDurable sets synchronous_commit to on in params unless the
// connection string chose a value itself (as a parameter or in options),
// which checkDurable then judges: a stronger one (remote_write,
// remote_apply) is kept, a weaker one refused.
func forceDurable(params map[string]string) {
	if params["synchronous_commit"] != "" || strings.Contains(params["options"], "synchronous_commit") {
		return
	}
	params["synchronous_commit"] = "on"
}

// rowQuerier is what checkDurable reads the settings through: a
// connection, the pool or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// durableSettings reads the settings a commit's durability rests on, as the
// session sees them.
const durableSettings = `current_setting('synchronous_commit'), current_setting('fsync'), current_setting('full_page_writes')`

// checkDurable refuses a session whose COMMIT returns before the commit is
// durable where it must be (see notDurable). The settings may come from
// the URL, the role, the database or the server; it reads what the session
// got. unsafeNoFsync accepts fsync and full_page_writes off.
func checkDurable(ctx context.Context, q rowQuerier, unsafeNoFsync bool) error {
	var sc, fsync, fpw string
	if err := q.QueryRow(ctx, `SELECT `+durableSettings).Scan(&sc, &fsync, &fpw); err != nil {
		return fmt.Errorf("read synchronous_commit, fsync and full_page_writes: %w", err)
	}
	return notDurable(sc, fsync, fpw, unsafeNoFsync)
}

// notDurable says why a session with these settings would answer
// deliveries that a crash or a failover then loses, or returns nil:
// synchronous_commit off returns before the WAL reaches the primary's disk,
// local before it reaches a synchronous standby's; fsync off never waits
// for the disk at all, and full_page_writes off lets a crash during a write
// tear pages, committed rows with them. unsafeNoFsync lets the last two
// pass.
func notDurable(sc, fsync, fpw string, unsafeNoFsync bool) error {
	switch strings.ToLower(sc) {
	case "off":
		return errors.New("synchronous_commit is off for this session (set in the URL, the role, the database or the server): COMMIT would return before the WAL is on disk, and a 204 must mean committed: set it to on")
	case "local":
		return errors.New("synchronous_commit is local for this session (set in the URL, the role, the database or the server): COMMIT would not wait for the synchronous standby, and a 204 must mean committed where a failover goes: set it to on")
	}
	if unsafeNoFsync {
		return nil
	}
	if strings.ToLower(fsync) == "off" {
		return errors.New("fsync is off on the PostgreSQL server: a crash of the server or its machine can lose committed rows, and a 204 must mean committed: set fsync = on in the server's configuration")
	}
	if strings.ToLower(fpw) == "off" {
		return errors.New("full_page_writes is off on the PostgreSQL server: a crash during a write can tear pages and lose committed rows, and a 204 must mean committed: set full_page_writes = on in the server's configuration")
	}
	return nil
}

// beforeCommit is the last statement of each transaction: it checks that
// the commit will be durable (the server may have been reloaded with fsync
// off since the connection was made) and returns the transaction's id, nil
// when it wrote nothing, so that a COMMIT whose outcome is lost can be
// looked up (commitOutcome).
func (s *Store) beforeCommit(ctx context.Context, tx pgx.Tx) (*int64, error) {
	var xid *int64
	var sc, fsync, fpw string
	if err := tx.QueryRow(ctx, `SELECT txid_current_if_assigned(), `+durableSettings).Scan(&xid, &sc, &fsync, &fpw); err != nil {
		return nil, fmt.Errorf("read the transaction's id: %w", err)
	}
	if err := notDurable(sc, fsync, fpw, s.unsafeNoFsync); err != nil {
		return nil, fmt.Errorf("refuse to commit: %w", err)
	}
	return xid, nil
}

// commitGuard is the writer's check of notDurable's rules, sent with COMMIT
// in the same round trip (tryWriteTx) rather than a round trip before it:
// it runs in the transaction, just before COMMIT, on the session's settings
// then, and fails, so that the server skips the COMMIT and the transaction
// is rolled back, when the commit would not be durable. $1 is
// unsafeNoFsync. Plain SQL has no statement that raises an error of its
// own, so it casts a text that is never a number, guardPrefix and the
// three settings, to one: the error carries the settings (which the
// rollback may undo, when the transaction itself changed them) to
// refusedCommit.
const commitGuard = `SELECT CASE WHEN lower(current_setting('synchronous_commit')) IN ('off', 'local')
	OR (NOT $1::boolean AND (lower(current_setting('fsync')) = 'off' OR lower(current_setting('full_page_writes')) = 'off'))
	THEN ('` + guardPrefix + `' || current_setting('synchronous_commit') || ' ' || current_setting('fsync')
		|| ' ' || current_setting('full_page_writes'))::int END`

// guardPrefix starts the text commitGuard fails on.
const guardPrefix = "inbox durability: "

// refusedCommit is the error of a writer's transaction that commitGuard
// failed with err: notDurable's, for the settings err carries.
func (s *Store) refusedCommit(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if _, settings, ok := strings.Cut(pgErr.Message, guardPrefix); ok {
			if f := strings.Fields(strings.TrimSuffix(settings, `"`)); len(f) == 3 {
				if derr := notDurable(f[0], f[1], f[2], s.unsafeNoFsync); derr != nil {
					return fmt.Errorf("refuse to commit: %w", derr)
				}
			}
		}
	}
	return fmt.Errorf("refuse to commit: the session's synchronous_commit, fsync or full_page_writes does not make the commit durable: %w", err)
}

// outcomeKnown reports whether err, from COMMIT, says the transaction did
// not commit: the server answered with an error (or with ROLLBACK) and
// the session lives on. Anything else (the connection broke, the deadline
// passed, the server ended the session) leaves the outcome unknown.
func outcomeKnown(err error) bool {
	if errors.Is(err, pgx.ErrTxCommitRollback) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Severity == "ERROR"
}

// commitOutcome finds out, on another connection, whether the transaction
// xid committed, when its COMMIT's answer was lost. The server may be
// restarting, or still committing (the transaction shows in progress): it
// asks again until it knows or the busy timeout passes, and fails then.
func (s *Store) commitOutcome(ctx context.Context, xid int64) (committed bool, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.busy)
	defer cancel()
	wait := 10 * time.Millisecond
	for {
		var status *string
		err = s.pool.QueryRow(ctx, `SELECT txid_status($1)`, xid).Scan(&status)
		switch {
		case err == nil && status == nil:
			return false, errors.New("the server no longer knows the transaction")
		case err == nil && *status == "committed":
			return true, nil
		case err == nil && *status == "aborted":
			return false, nil
		case err == nil:
			err = errors.New("the transaction is still in progress")
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("look up the commit's outcome: %w", err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}
