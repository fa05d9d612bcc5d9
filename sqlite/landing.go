package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"inbox/inbox"
	"inbox/sqlrow"
)

// How a delivery lands on the rows under the landing rules (inbox.Land),
// one statement at a time on the writer's transaction (writer.go).

// expectedSQL tells whether a job is expected, in any state: a source
// with expected_only stores only such jobs. Rare enough to parse each
// time.
const expectedSQL = `SELECT EXISTS (SELECT 1 FROM expectations WHERE source = ? AND job_id = ?)`

// put applies one delivery inside st's transaction, through its prepared
// statements only (but for the expectation a source with expected_only
// asks for): a repeat parses no more SQL than a new row. The primary
// key decides whether the row is new: insert, and only when the key is
// taken look at what holds it. args are insertArgs(d, now).
func put(ctx context.Context, st *txStmts, d inbox.Delivery, args []any, now int64) (inbox.Result, error) {
	if d.NeedsExpectation() {
		var expected bool
		if err := st.tx.QueryRowContext(ctx, expectedSQL, inbox.SourceOf(d), d.JobID).Scan(&expected); err != nil {
			return inbox.Result{}, fmt.Errorf("look for the expectation of %s: %w", d.JobID, err)
		}
		if !expected {
			d = inbox.Unexpected(d)
			args = insertArgs(d, now)
		}
	}
	ins := st.get(stmtInsert)
	inserted, err := insert(ctx, ins, d.Key, args)
	if err != nil {
		return inbox.Result{}, err
	}
	if inserted {
		return inbox.Fresh(d), nil
	}

	cur, err := scanCurrent(st.get(stmtCurrent).QueryRowContext(ctx, d.Key))
	if err != nil {
		return inbox.Result{}, fmt.Errorf("read %s: %w", d.Key, err)
	}
	switch inbox.Land(cur, d) {
	case inbox.LandRevive:
		if err := revive(ctx, st.get(stmtRevive), d, 1, now, now); err != nil {
			return inbox.Result{}, err
		}
		if cur.Response == nil {
			cur.Response = d.Response
		}
		return inbox.Result{Outcome: inbox.OutcomeRevived, ID: d.Key, Response: cur.Response}, nil
	case inbox.LandRepeat:
		res, err := repeat(ctx, st.get(stmtRepeat), d.Key, 1, now)
		res.Response = cur.Response
		return res, err
	}

	// The job's row holds something else: park this delivery beside it,
	// keyed by its bytes, so it is never silently dropped.
	beside := inbox.Beside(d)
	if inserted, err = insert(ctx, ins, beside.Key, insertArgs(beside, now)); err != nil {
		return inbox.Result{}, err
	}
	if !inserted {
		// The same bytes again: their row's saved answer is the delivery's.
		res, err := repeat(ctx, st.get(stmtRepeat), beside.Key, 1, now)
		res.Response = beside.Response
		return res, err
	}
	return inbox.Fresh(beside), nil
}

// insert runs ins, insertSQL, with args, the row's at key, and tells
// whether the row is new.
func insert(ctx context.Context, ins *sql.Stmt, key string, args []any) (bool, error) {
	res, err := ins.ExecContext(ctx, args...)
	if err != nil {
		return false, fmt.Errorf("insert %s: %w", key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("insert %s: %w", key, err)
	}
	return n == 1, nil
}

// execer runs a statement: a *sql.Stmt prepared for it, or a *sql.Tx
// given the statement's text (reprocess, which is rare).
type execer interface {
	ExecContext(ctx context.Context, args ...any) (sql.Result, error)
}

// textExec runs q on tx from its text, as an execer.
type textExec struct {
	tx *sql.Tx
	q  string
}

func (t textExec) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.q, args...)
}

// repeat counts n deliveries, the last seen at lastSeen, on the row that
// already holds them; upd is repeatSQL, prepared or not.
func repeat(ctx context.Context, upd execer, id string, n, lastSeen int64) (inbox.Result, error) {
	_, err := upd.ExecContext(ctx, n, lastSeen, id)
	if err != nil {
		return inbox.Result{}, fmt.Errorf("count repeat of %s: %w", id, err)
	}
	return inbox.Result{Outcome: inbox.OutcomeDuplicate, ID: id}, nil
}

// nullable maps "" to SQL NULL.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// currentSQL reads what the landing rules (inbox.Land) need of the row
// holding id, and its saved response.
var currentSQL = `SELECT ` + sqlrow.Current.List(true) + ` FROM events WHERE id = ?`

// scanCurrent scans row, currentSQL's result.
func scanCurrent(row *sql.Row) (inbox.Event, error) { return sqlrow.Current.Row(row.Scan, true) }

// revive makes the parked row at d.Key new with d's body, and counts n more
// deliveries on it, the last seen at lastSeen; upd is reviveSQL. The row is
// queued afresh: no attempts, no lease, no error.
func revive(ctx context.Context, upd execer, d inbox.Delivery, n, lastSeen, now int64) error {
	_, err := upd.ExecContext(ctx, reviveArgs(d, n, lastSeen, now)...)
	if err != nil {
		return fmt.Errorf("revive %s: %w", d.Key, err)
	}
	return nil
}
