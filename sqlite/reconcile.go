package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"iter"
	"time"

	"inbox/inbox"
)

// The reconciliation records: refusals remembered while the store was
// down, expectations and their polls, and settling them as deliveries
// land. The writes run as inbox.Reconciler, embedded in Store, says, each
// in one transaction of the writer (reconciling); the reads are here.
// Two processes on one database never hold the same poll.

// reconciling is the store's inbox.ReconcileStore.
type reconciling struct{ s *Store }

func (r reconciling) ReadOnly() bool { return r.s.write == nil }

// InReconcileTx runs fn in the writer's next transaction. Times are kept
// as given: the store's clock is this process's.
func (r reconciling) InReconcileTx(ctx context.Context, _ time.Time, fn func(inbox.ReconcileTx) error) error {
	now := r.s.now()
	return r.s.writeOp(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return fn(reconcileTx{ctx: ctx, tx: tx, now: now})
	})
}

// reconcileTx is inbox.ReconcileTx in tx, at now, under the writer's
// context: the driver interrupts a statement whose context ends, and
// SQLite then rolls back the whole transaction, the deliveries that share
// it included.
type reconcileTx struct {
	ctx context.Context
	tx  *sql.Tx
	now time.Time
}

func (t reconcileTx) Now() time.Time { return fromMillis(millis(t.now)) }

// RecordRefusal adds r to its key's refusal unless the key's row exists;
// for a refusal of a delivery stored all the same (r.Stored), unless a
// delivery landed on the row after it.
func (t reconcileTx) RecordRefusal(r inbox.Refusal) error {
	// WHERE on the SELECT: SQLite needs it to read the upsert's ON.
	_, err := t.tx.ExecContext(t.ctx, `INSERT INTO refusals
		(source, key, job_id, event, first_refused_at, last_refused_at, refusals)
		SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE NOT EXISTS (SELECT 1 FROM events WHERE id = ?2 AND (NOT ?8 OR last_seen_at > ?6))
		ON CONFLICT(source, key) DO UPDATE SET
			first_refused_at = min(first_refused_at, excluded.first_refused_at),
			last_refused_at = max(last_refused_at, excluded.last_refused_at),
			refusals = refusals + excluded.refusals,
			job_id = coalesce(excluded.job_id, job_id),
			event = coalesce(excluded.event, event)`,
		r.Source, r.Key, nullable(r.JobID), nullable(r.Event), millis(r.First), millis(r.Last), r.Count, r.Stored)
	return err
}

// Expect records the expectation of jobID and reads it back.
func (t reconcileTx) Expect(jobID, statusURL string, due time.Time) (inbox.Expectation, error) {
	_, err := t.tx.ExecContext(t.ctx, `INSERT INTO expectations
		(source, job_id, status_url, expected_at, due_at, state, settled_at, next_poll_at)
		SELECT ?1, ?2, ?3, ?4, ?5, CASE WHEN e.n THEN 'done' ELSE 'waiting' END,
			CASE WHEN e.n THEN ?4 END, ?5
		FROM (SELECT EXISTS (SELECT 1 FROM events WHERE id = ?2) AS n) AS e WHERE true
		ON CONFLICT(source, job_id) DO UPDATE SET
			status_url = coalesce(excluded.status_url, status_url),
			due_at = excluded.due_at, next_poll_at = excluded.due_at,
			state = excluded.state, settled_at = excluded.settled_at, reason = NULL,
			lease_owner = NULL, lease_until = NULL
		WHERE state <> 'done'`, inbox.DefaultSource, jobID, nullable(statusURL), millis(t.now), millis(due))
	if err != nil {
		return inbox.Expectation{}, err
	}
	e, err := inbox.ScanExpectation(t.tx.QueryRowContext(t.ctx, `SELECT `+expectationColumns+
		` FROM expectations WHERE source = ? AND job_id = ?`, inbox.DefaultSource, jobID).Scan)
	if err != nil {
		return inbox.Expectation{}, fmt.Errorf("read expectation of %s: %w", jobID, err)
	}
	return e, nil
}

// ClaimPolls leases the due expectations, the first due first.
func (t reconcileTx) ClaimPolls(owner string, now, until time.Time, max int) ([]inbox.Poll, error) {
	rows, err := t.tx.QueryContext(t.ctx, `UPDATE expectations
		SET polls = polls + 1, lease_owner = ?1, lease_until = ?2, next_poll_at = ?2
		WHERE rowid IN (SELECT rowid FROM expectations WHERE state = 'waiting' AND next_poll_at <= ?3
			ORDER BY next_poll_at LIMIT ?4)
		RETURNING source, job_id, coalesce(status_url, ''), polls, redeliveries, due_at`,
		owner, millis(until), millis(now), max)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var polls []inbox.Poll
	for rows.Next() {
		var p inbox.Poll
		var due int64
		if err := rows.Scan(&p.Source, &p.JobID, &p.StatusURL, &p.Attempt, &p.Redeliveries, &due); err != nil {
			return nil, err
		}
		p.DueAt = fromMillis(due)
		polls = append(polls, p)
	}
	return polls, rows.Err()
}

// SettlePoll records r on its waiting expectation while owner holds it.
func (t reconcileTx) SettlePoll(owner string, r inbox.PollResult) (bool, error) {
	set := `lease_owner = NULL, lease_until = NULL, polled_at = ?, job_status = coalesce(?, job_status), last_error = ?`
	args := []any{millis(r.At), nullable(r.JobStatus), nullable(r.KeptError())}
	switch r.Fate {
	case inbox.PollAgain:
		set += `, next_poll_at = ?`
		args = append(args, millis(r.Next))
	case inbox.PollRedelivered:
		set += `, next_poll_at = ?, redeliveries = redeliveries + 1`
		args = append(args, millis(r.Next))
	case inbox.PollClose:
		set += `, state = 'closed', reason = ?, settled_at = ?`
		args = append(args, r.CloseReason(), millis(r.At))
	}
	res, err := t.tx.ExecContext(t.ctx, `UPDATE expectations SET `+set+
		` WHERE source = ? AND job_id = ? AND lease_owner = ? AND polls = ? AND state = 'waiting'`,
		append(args, r.Poll.Source, r.Poll.JobID, owner, r.Poll.Attempt)...)
	if err != nil {
		return false, err
	}
	return changedRows(res)
}

// SettleDelivered counts r on the done expectation owner's claim held.
func (t reconcileTx) SettleDelivered(owner string, r inbox.PollResult) error {
	redelivered := 0
	if r.Fate == inbox.PollRedelivered {
		redelivered = 1
	}
	_, err := t.tx.ExecContext(t.ctx, `UPDATE expectations SET lease_owner = NULL, lease_until = NULL,
		polled_at = ?, job_status = coalesce(?, job_status), redeliveries = redeliveries + ?
		WHERE source = ? AND job_id = ? AND lease_owner = ? AND polls = ? AND state = 'done'`,
		millis(r.At), nullable(r.JobStatus), redelivered, r.Poll.Source, r.Poll.JobID, owner, r.Poll.Attempt)
	return err
}

// expectationColumns are what inbox.ScanExpectation reads.
const expectationColumns = `source, job_id, coalesce(status_url, ''), expected_at, due_at, state,
	coalesce(reason, ''), coalesce(settled_at, 0), next_poll_at, polls, redeliveries,
	coalesce(job_status, ''), coalesce(polled_at, 0), coalesce(last_error, '')`

// Expectations reads the expectations. A database that has no
// expectations table yet (made by an earlier inbox, opened read-only) has
// none.
func (r reconciling) Expectations(ctx context.Context, now time.Time, overdue bool) ([]inbox.Expectation, error) {
	if ok, err := r.s.hasTable(ctx, "expectations"); err != nil || !ok {
		return nil, err
	}
	q := `SELECT ` + expectationColumns + ` FROM expectations`
	var args []any
	if overdue {
		q += ` WHERE state = 'waiting' AND due_at <= ?`
		args = append(args, millis(now))
	}
	rows, err := r.s.read.QueryContext(ctx, q+` ORDER BY due_at, job_id`, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, inbox.ScanExpectation)
}

// NextPoll returns when the first waiting expectation becomes due; ok is
// false when none waits. It reads, so it never waits for the write lock.
func (s *Store) NextPoll(ctx context.Context) (at time.Time, ok bool, err error) {
	if ok, err := s.hasTable(ctx, "expectations"); err != nil || !ok {
		return time.Time{}, false, err
	}
	var ms sql.NullInt64
	if err := s.read.QueryRowContext(ctx, `SELECT min(next_poll_at) FROM expectations WHERE state = 'waiting'`).Scan(&ms); err != nil {
		return time.Time{}, false, fmt.Errorf("next poll: %w", err)
	}
	if !ms.Valid {
		return time.Time{}, false, nil
	}
	return fromMillis(ms.Int64), true, nil
}

// Reconciliation reads the counts at now, in two queries.
func (s *Store) Reconciliation(ctx context.Context, now time.Time) (inbox.Reconciliation, error) {
	var r inbox.Reconciliation
	if ok, err := s.hasTable(ctx, "expectations"); err != nil || !ok {
		return r, err
	}
	var oldest sql.NullInt64
	if err := s.read.QueryRowContext(ctx, `SELECT count(*), min(first_refused_at) FROM refusals`).Scan(&r.Missed, &oldest); err != nil {
		return r, fmt.Errorf("count missed: %w", err)
	}
	if oldest.Valid {
		r.OldestMissed = fromMillis(oldest.Int64)
	}
	err := s.read.QueryRowContext(ctx, `SELECT
		coalesce(sum(state = 'waiting' AND due_at > ?1), 0), coalesce(sum(state = 'waiting' AND due_at <= ?1), 0),
		coalesce(sum(state = 'done'), 0), coalesce(sum(state = 'closed'), 0) FROM expectations`, millis(now)).
		Scan(&r.Waiting, &r.Overdue, &r.Done, &r.Closed)
	if err != nil {
		return r, fmt.Errorf("count expectations: %w", err)
	}
	return r, nil
}

// Missed returns the refused keys not delivered since, first refused
// first; with before set, only those first refused before it. A database
// that has no refusals table yet (made by an earlier inbox, opened
// read-only) has none.
func (s *Store) Missed(ctx context.Context, before time.Time) ([]inbox.Refusal, error) {
	if ok, err := s.hasTable(ctx, "refusals"); err != nil || !ok {
		return nil, err
	}
	limit := int64(1<<63 - 1)
	if !before.IsZero() {
		limit = millis(before)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT source, key, coalesce(job_id, ''), coalesce(event, ''),
		first_refused_at, last_refused_at, refusals FROM refusals WHERE first_refused_at < ?
		ORDER BY first_refused_at, source, key`, limit)
	if err != nil {
		return nil, fmt.Errorf("read missed: %w", err)
	}
	out, err := collect(rows, func(scan func(...any) error) (r inbox.Refusal, err error) {
		var first, last int64
		err = scan(&r.Source, &r.Key, &r.JobID, &r.Event, &first, &last, &r.Count)
		r.First, r.Last = fromMillis(first), fromMillis(last)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("read missed: %w", err)
	}
	return out, nil
}

// hasTable reports whether the database has the named table.
func (s *Store) hasTable(ctx context.Context, name string) (bool, error) {
	var n int
	err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, name).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look for table %s: %w", name, err)
	}
	return n == 1, nil
}

// settleArrivals runs in the writer's transaction, after the batch's
// deliveries landed: each one clears its key's refusal and settles its job's
// waiting expectation as done, so a key is never both stored and missing.
// While there is nothing to settle it costs one prepared query per batch,
// and landed is not gone through.
// A database that had no refusals or expectations table at open (the admin
// commands open it without the schema) is looked at for them in each
// commit, and settled with statements parsed for it, once they appear.
func settleArrivals(ctx context.Context, st *txStmts, landed iter.Seq[inbox.Delivery], now int64) error {
	pending := st.get(stmtPending)
	var clear, settle execer
	if pending != nil {
		clear, settle = st.get(stmtClearRefusal), st.get(stmtSettleExpectation)
	} else {
		var tables bool
		if err := st.tx.QueryRowContext(ctx, settleTablesSQL).Scan(&tables); err != nil {
			return fmt.Errorf("settle arrivals: %w", err)
		}
		if !tables {
			return nil
		}
		clear, settle = textExec{st.tx, clearRefusalSQL}, textExec{st.tx, settleExpectationSQL}
	}
	var waiting bool
	var err error
	if pending != nil {
		err = pending.QueryRowContext(ctx).Scan(&waiting)
	} else {
		err = st.tx.QueryRowContext(ctx, pendingSQL).Scan(&waiting)
	}
	if err != nil {
		return fmt.Errorf("settle arrivals: %w", err)
	}
	if !waiting {
		return nil
	}
	for d := range landed {
		if _, err := clear.ExecContext(ctx, inbox.SourceOf(d), d.Key); err != nil {
			return fmt.Errorf("clear refusal of %s: %w", d.Key, err)
		}
		if d.JobID == "" {
			continue
		}
		if _, err := settle.ExecContext(ctx, now, inbox.SourceOf(d), d.JobID); err != nil {
			return fmt.Errorf("settle expectation of %s: %w", d.JobID, err)
		}
	}
	return nil
}
