package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"inbox/inbox"
)

// Settle records the settlements of rows that owner claimed, then claims
// rows as claim asks (none when claim.Max is 0) for owner, as inbox.Settle
// does, all in one transaction of the store's writer, shared with whatever
// else it commits then. A claim sets the row's next_attempt_at to the
// lease's end, so a row whose dispatcher died is claimed again once the
// lease runs out, and counts the attempts of only the rows claim.Start
// asks for (inbox.Claim.Counts), in the statement that leases them: any
// other attempt counts when it starts (Start), so a dispatcher that dies
// between claiming and sending costs those rows no attempt. Rows are
// claimed oldest due first.
// When ctx ends first, Settle returns its error, yet the transaction may
// still commit, claims included: pass a ctx that ends only when giving up
// is right.
func (s *Store) Settle(ctx context.Context, owner string, settled []inbox.Settlement, claim inbox.Claim) (jobs []inbox.Job, stale int, err error) {
	return inbox.Settle(ctx, queueing{s}, owner, settled, claim)
}

// Start counts the attempts of jobs as inbox.Start does, as the dispatcher
// is about to make them, and renews owner's lease on each row to run from
// now to the given until, so an attempt gets the whole lease however long
// its row waited for a worker. It commits in the writer's next transaction,
// shared with whatever else it commits then, with one statement per
// maxDoneBatch jobs. When ctx ends first, Start returns its error, yet the attempts may
// have been counted.
func (s *Store) Start(ctx context.Context, owner string, jobs []inbox.Job, now, until time.Time) ([]inbox.Job, error) {
	return inbox.Start(ctx, queueing{s}, owner, jobs, now, until)
}

// queueing is the store's inbox.QueueStore.
type queueing struct{ s *Store }

func (q queueing) ReadOnly() bool { return q.s.write == nil }

// InQueueTx runs fn in the writer's next transaction. Times are kept as
// given: the store's clock is this process's.
func (q queueing) InQueueTx(ctx context.Context, _ time.Time, fn func(inbox.QueueTx) error) error {
	return q.s.writeOp(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return fn(q.s.queueTx(ctx, tx))
	})
}

// queueTx is the queue's statements in tx, a transaction of the write
// connection, under ctx.
func (s *Store) queueTx(ctx context.Context, tx *sql.Tx) queueTx {
	return queueTx{ctx: ctx, tx: tx, st: &txStmts{ctx: ctx, tx: tx, st: s.stmts}}
}

// queueTx is inbox.QueueTx in tx, under the writer's context, running the
// writer's prepared statements (st): a claim, a count or a settlement of
// any number of rows parses nothing.
type queueTx struct {
	ctx context.Context
	tx  *sql.Tx
	st  *txStmts
}

// Lock returns no row held: the writer's transaction holds the database.
func (t queueTx) Lock([]string) ([]string, error) { return nil, nil }

// maxDoneBatch bounds the rows one statement marks done or starts.
const maxDoneBatch = 1000

// SettleDone marks done the rows of done whose claims hold, in one
// statement per maxDoneBatch rows (the common outcome: one statement per
// transaction, not per row), and returns how many it marked.
func (t queueTx) SettleDone(owner string, done []inbox.Settlement) (int, error) {
	marked := 0
	for from := 0; from < len(done); from += maxDoneBatch {
		n, err := t.settleDone(owner, done[from:min(from+maxDoneBatch, len(done))])
		if err != nil {
			return marked, err
		}
		marked += n
	}
	return marked, nil
}

// settleDoneSQL marks done the pairs ?1 lists whose claims hold: a JSON
// array of [id, destination, attempts the claim holds, attempt, when].
const settleDoneSQL = `UPDATE deliveries SET status = 'done', done_at = s.at,
		updated_at = s.at, lease_owner = NULL, lease_until = NULL, next_attempt_at = 0,
		attempts = s.attempt
		FROM (SELECT value ->> 0 AS id, value ->> 1 AS dest, value ->> 2 AS held, value ->> 3 AS attempt,
			value ->> 4 AS at FROM json_each(?1)) AS s
		WHERE deliveries.event_id = s.id AND deliveries.destination = s.dest
		AND deliveries.attempts = s.held
		AND deliveries.lease_owner = ?2 AND deliveries.status = 'new'`

// settleDone marks done the pairs of batch whose claims hold, in one
// statement, and returns how many it marked.
func (t queueTx) settleDone(owner string, batch []inbox.Settlement) (int, error) {
	list := make([][]any, len(batch))
	for i, st := range batch {
		list[i] = []any{st.Job.ID, st.Job.Dest(), st.Job.HeldAttempts(), st.Job.Attempt, millis(st.At)}
	}
	arg, err := json.Marshal(list)
	if err != nil {
		return 0, fmt.Errorf("mark %d rows done: %w", len(batch), err)
	}
	res, err := t.st.exec(stmtSettleDone, string(arg), owner)
	if err != nil {
		return 0, fmt.Errorf("mark %d rows done: %w", len(batch), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("mark %d rows done: %w", len(batch), err)
	}
	return int(n), nil
}

// claimGuard matches a pair only while the claim it names holds: the same
// owner, and the attempt count the claim left (or Start made) unchanged.
const claimGuard = ` WHERE event_id = ? AND destination = ? AND status = 'new' AND lease_owner = ? AND attempts = ?`

// The statements that record a settlement of each fate but FateDone, its
// claim guarded.
const (
	settleRetrySQL = `UPDATE deliveries SET lease_owner = NULL, lease_until = NULL, next_attempt_at = ?, last_error = ?,
			attempts = ?, updated_at = ?` + claimGuard
	settleParkSQL = `UPDATE deliveries SET status = 'parked', reason = ?, last_error = ?, updated_at = ?,
			lease_owner = NULL, lease_until = NULL, next_attempt_at = 0, attempts = ?` + claimGuard
	settleReleaseSQL = `UPDATE deliveries SET lease_owner = NULL, lease_until = NULL, next_attempt_at = ?` + claimGuard
	settleUnsentSQL  = `UPDATE deliveries SET lease_owner = NULL, lease_until = NULL, next_attempt_at = ?, attempts = ?,
			last_error = coalesce(?, last_error)` + claimGuard
)

// Settle records st, a settlement inbox.CheckSettle took, unless its claim
// is gone (false).
func (t queueTx) Settle(owner string, st inbox.Settlement) (bool, error) {
	guard := []any{st.Job.ID, st.Job.Dest(), owner, st.Job.HeldAttempts()}
	var stmt int
	var args []any
	switch st.Fate {
	case inbox.FateRetry:
		stmt, args = stmtSettleRetry, []any{millis(st.RetryAt), st.Error, st.Job.Attempt, millis(st.At)}
	case inbox.FatePark:
		stmt, args = stmtSettlePark, []any{string(st.Reason), st.Error, millis(st.At), st.Job.Attempt}
	case inbox.FateRelease:
		stmt, args = stmtSettleRelease, []any{millis(st.At)}
	case inbox.FateUnsent:
		stmt, args = stmtSettleUnsent, []any{millis(st.Due()), st.Job.Attempt - 1, unsentError(st)}
	default:
		return false, fmt.Errorf("settle %s: unknown fate %d", st.Job.ID, st.Fate)
	}
	res, err := t.st.exec(stmt, append(args, guard...)...)
	if err != nil {
		return false, fmt.Errorf("settle %s: %w", st.Job.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("settle %s: %w", st.Job.ID, err)
	}
	return n == 1, nil
}

// claimSQL reads up to ?3 due new pairs of the destination ?1 at ?2, none
// while it is paused, oldest due first, with their rows. The
// deliveries_queue index serves it, so it reads only the pairs it takes.
const claimSQL = `SELECT d.rowid, d.event_id, d.attempts, e.source, coalesce(e.event, ''), e.body
		FROM deliveries d JOIN events e ON e.id = d.event_id
		WHERE d.destination = ?1 AND d.status = 'new' AND d.next_attempt_at <= ?2
		AND NOT EXISTS (SELECT 1 FROM paused_destinations WHERE name = ?1)
		ORDER BY d.next_attempt_at, d.received_at LIMIT ?3`

// claimLeaseSQL leases the pairs ?3 lists (a JSON array of [rowid,
// attempts to count]) to ?1 until ?2, counting their attempts.
const claimLeaseSQL = `UPDATE deliveries SET lease_owner = ?1, lease_until = ?2, next_attempt_at = ?2,
			attempts = attempts + v.n
		FROM (SELECT value ->> 0 AS rid, value ->> 1 AS n FROM json_each(?3)) AS v
		WHERE deliveries.rowid = v.rid`

// Claim leases up to c.Max due new pairs of c's destination to owner,
// none while it is paused, and counts the attempts of those c.Counts
// takes, in two statements: one reads the pairs and their rows, one
// leases them. The writer's transaction holds the database between the
// two.
func (t queueTx) Claim(owner string, c inbox.Claim) (jobs []inbox.Job, counted []string, err error) {
	rows, err := t.st.query(stmtClaim, c.Dest(), millis(c.Now), c.Max)
	if err != nil {
		return nil, nil, fmt.Errorf("claim: %w", err)
	}
	defer rows.Close()
	var lease [][2]int64
	for rows.Next() {
		j := inbox.Job{Destination: c.Dest()}
		var rid int64
		if err := rows.Scan(&rid, &j.ID, &j.Attempt, &j.Source, &j.Event, &j.Body); err != nil {
			return nil, nil, fmt.Errorf("claim: %w", err)
		}
		j.Attempt++
		j.Key = inbox.KeyOf(j.Source, j.ID)
		n := int64(0)
		if c.Counts(j.Attempt, len(counted)) {
			n = 1
			counted = append(counted, j.ID)
		}
		lease = append(lease, [2]int64{rid, n})
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("claim: %w", err)
	}
	rows.Close()
	if len(jobs) == 0 {
		return nil, nil, nil
	}
	arg, err := json.Marshal(lease)
	if err != nil {
		return nil, nil, fmt.Errorf("claim: %w", err)
	}
	if _, err := t.st.exec(stmtClaimLease, owner, millis(c.Until), string(arg)); err != nil {
		return nil, nil, fmt.Errorf("claim %d rows: %w", len(jobs), err)
	}
	return jobs, counted, nil
}

// Start counts the attempts of jobs whose claims hold, one statement per
// maxDoneBatch jobs, and returns their ids.
func (t queueTx) Start(owner string, jobs []inbox.Job, now, until time.Time) ([]string, error) {
	var counted []string
	for from := 0; from < len(jobs); from += maxDoneBatch {
		ids, err := t.startBatch(owner, jobs[from:min(from+maxDoneBatch, len(jobs))], now, until)
		if err != nil {
			return nil, err
		}
		counted = append(counted, ids...)
	}
	return counted, nil
}

// startSQL counts the attempts of the pairs ?1 lists whose claims hold (a
// JSON array of [id, destination, attempts the claim holds, attempt]), and
// renews their leases to run out at ?2.
const startSQL = `UPDATE deliveries SET attempts = s.attempt, lease_until = ?2, next_attempt_at = ?2
		FROM (SELECT value ->> 0 AS id, value ->> 1 AS dest, value ->> 2 AS held, value ->> 3 AS attempt
			FROM json_each(?1)) AS s
		WHERE deliveries.event_id = s.id AND deliveries.destination = s.dest
		AND deliveries.attempts = s.held
		AND deliveries.lease_owner = ?3 AND deliveries.status = 'new' AND deliveries.lease_until > ?4
		RETURNING deliveries.event_id`

// startBatch counts the attempts of batch whose claims hold, in one
// statement, and returns their ids.
func (t queueTx) startBatch(owner string, batch []inbox.Job, now, until time.Time) ([]string, error) {
	list := make([][]any, len(batch))
	for i, j := range batch {
		list[i] = []any{j.ID, j.Dest(), j.HeldAttempts(), j.Attempt}
	}
	arg, err := json.Marshal(list)
	if err != nil {
		return nil, fmt.Errorf("count %d attempts: %w", len(batch), err)
	}
	rows, err := t.st.query(stmtStart, string(arg), millis(until), owner, millis(now))
	if err != nil {
		return nil, fmt.Errorf("count %d attempts: %w", len(batch), err)
	}
	defer rows.Close()
	var counted []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("count %d attempts: %w", len(batch), err)
		}
		counted = append(counted, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count %d attempts: %w", len(batch), err)
	}
	return counted, nil
}

// NextDue returns when the first new row becomes claimable (a time at or
// before now for a row that is due); ok is false when there is no new row.
// It reads, so it never waits for the write lock.
func (s *Store) NextDue(ctx context.Context) (due time.Time, ok bool, err error) {
	var ms sql.NullInt64
	err = s.read.QueryRowContext(ctx, `SELECT min(next_attempt_at) FROM events WHERE status = 'new'`).Scan(&ms)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next due row: %w", err)
	}
	if !ms.Valid {
		return time.Time{}, false, nil
	}
	return fromMillis(ms.Int64), true, nil
}

// Queue reads the queue's state at now, in one query.
func (s *Store) Queue(ctx context.Context, now time.Time) (inbox.Queue, error) {
	var q inbox.Queue
	var oldest sql.NullInt64
	err := s.read.QueryRowContext(ctx, `SELECT count(*), min(received_at),
		coalesce(sum(lease_owner IS NOT NULL AND lease_until > ?1), 0),
		coalesce(sum(attempts > 0 AND next_attempt_at > ?1 AND lease_owner IS NULL), 0)
		FROM events WHERE status = 'new'`, millis(now)).Scan(&q.Depth, &oldest, &q.InFlight, &q.Retrying)
	if err != nil {
		return inbox.Queue{}, fmt.Errorf("read the queue: %w", err)
	}
	if oldest.Valid {
		q.Oldest = fromMillis(oldest.Int64)
	}
	return q, nil
}

// unsentError is the last_error a FateUnsent settlement records: its
// Error, or NULL to keep the pair's.
func unsentError(st inbox.Settlement) any {
	if st.Error == "" {
		return nil
	}
	return st.Error
}
