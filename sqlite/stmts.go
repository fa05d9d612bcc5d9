package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
)

// The writer's statements, each prepared once on the write connection:
// parsing a statement costs SQLite more than running it, and a repeat or a
// commit must not pay a parse that a new row does not.
const (
	repeatSQL = `UPDATE events SET deliveries = deliveries + ?,
		last_seen_at = max(last_seen_at, ?) WHERE id = ?`

	// settleTablesSQL tells whether the database has the tables
	// settleArrivals settles: the admin commands open one without the
	// schema.
	settleTablesSQL = `SELECT coalesce((SELECT count(*) = 2 FROM sqlite_master
		WHERE type = 'table' AND name IN ('refusals', 'expectations')), 0)`

	pendingSQL = `SELECT EXISTS (SELECT 1 FROM refusals)
		OR EXISTS (SELECT 1 FROM expectations WHERE state = 'waiting')`

	clearRefusalSQL = `DELETE FROM refusals WHERE source = ? AND key = ?`

	// A poll under way keeps its lease, so it can still record the
	// redelivery it asked for (SettlePolls).
	settleExpectationSQL = `UPDATE expectations SET state = 'done', settled_at = ?
		WHERE source = ? AND job_id = ? AND state = 'waiting'`

	// queueTablesSQL tells whether the database has the tables the queue
	// statements (stmtClaim and after) write.
	queueTablesSQL = `SELECT coalesce((SELECT count(*) = 2 FROM sqlite_master
		WHERE type = 'table' AND name IN ('deliveries', 'paused_destinations')), 0)`

	savepointSQL  = `SAVEPOINT op`
	rollbackToSQL = `ROLLBACK TO op`
	releaseSQL    = `RELEASE op`
)

// The writer's statements, by index in writerStmts.
const (
	stmtInsert = iota
	stmtCurrent
	stmtRepeat
	stmtRevive
	stmtSavepoint
	stmtRollbackTo
	stmtRelease
	stmtPending
	stmtClearRefusal
	stmtSettleExpectation
	stmtClaim
	stmtClaimLease
	stmtStart
	stmtSettleDone
	stmtSettleRetry
	stmtSettlePark
	stmtSettleRelease
	stmtSettleUnsent
	stmtUnrouted
	stmtAddPairs
	stmtMirror
	numStmts
)

// writerSQL is the text of each of the writer's statements.
var writerSQL = [numStmts]string{
	stmtInsert:            insertSQL,
	stmtCurrent:           currentSQL,
	stmtRepeat:            repeatSQL,
	stmtRevive:            reviveSQL,
	stmtSavepoint:         savepointSQL,
	stmtRollbackTo:        rollbackToSQL,
	stmtRelease:           releaseSQL,
	stmtPending:           pendingSQL,
	stmtClearRefusal:      clearRefusalSQL,
	stmtSettleExpectation: settleExpectationSQL,
	stmtClaim:             claimSQL,
	stmtClaimLease:        claimLeaseSQL,
	stmtStart:             startSQL,
	stmtSettleDone:        settleDoneSQL,
	stmtSettleRetry:       settleRetrySQL,
	stmtSettlePark:        settleParkSQL,
	stmtSettleRelease:     settleReleaseSQL,
	stmtSettleUnsent:      settleUnsentSQL,
	stmtUnrouted:          unroutedSQL,
	stmtAddPairs:          addPairsSQL,
	stmtMirror:            mirrorSQL,
}

// writerStmts are the writer's prepared statements. The settle statements
// (stmtPending to stmtSettleExpectation) are nil when the database had no
// refusals or expectations table at open; settleArrivals then looks for
// the tables in each commit, as they may be made by another process
// meanwhile. The queue statements (stmtClaim and after) are nil when it
// had no deliveries table: the queue's writes then run from their text.
type writerStmts [numStmts]*sql.Stmt

// prepareWriter prepares the writer's statements on db, the settle and
// queue ones only when their tables are there.
func prepareWriter(ctx context.Context, db *sql.DB) (*writerStmts, error) {
	var st writerStmts
	var settle, queue bool
	if err := db.QueryRowContext(ctx, settleTablesSQL).Scan(&settle); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if err := db.QueryRowContext(ctx, queueTablesSQL).Scan(&queue); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	for i, q := range writerSQL {
		if (i >= stmtPending && i < stmtClaim && !settle) || (i >= stmtClaim && !queue) {
			continue
		}
		s, err := db.PrepareContext(ctx, q)
		if err != nil {
			st.close()
			return nil, fmt.Errorf("prepare: %w", err)
		}
		st[i] = s
	}
	return &st, nil
}

// close finalizes the statements.
func (st *writerStmts) close() error {
	var first error
	for i, s := range st {
		if s != nil {
			if err := s.Close(); err != nil && first == nil {
				first = err
			}
			st[i] = nil
		}
	}
	return first
}

// txStmts are the writer's statements as one transaction uses them, each
// bound to it on first use (database/sql then reuses the statement
// prepared on the connection rather than preparing it again).
type txStmts struct {
	ctx   context.Context
	tx    *sql.Tx
	st    *writerStmts
	bound [numStmts]*sql.Stmt
}

// get returns statement i bound to the transaction; nil when it was not
// prepared.
func (t *txStmts) get(i int) *sql.Stmt {
	if t.bound[i] == nil && t.st != nil && t.st[i] != nil {
		t.bound[i] = t.tx.StmtContext(t.ctx, t.st[i])
	}
	return t.bound[i]
}

// exec runs statement i, prepared, or from its text when it was not.
func (t *txStmts) exec(i int, args ...any) (sql.Result, error) {
	if s := t.get(i); s != nil {
		return s.ExecContext(t.ctx, args...)
	}
	return t.tx.ExecContext(t.ctx, writerSQL[i], args...)
}

// query runs statement i as exec does, and returns its rows.
func (t *txStmts) query(i int, args ...any) (*sql.Rows, error) {
	if s := t.get(i); s != nil {
		return s.QueryContext(t.ctx, args...)
	}
	return t.tx.QueryContext(t.ctx, writerSQL[i], args...)
}

// parseCounter counts the statements a connection parsed for a single use
// (Exec or Query with the SQL text) rather than ran prepared; tests read
// it to show that the writer's hot path parses nothing.
type parseCounter struct{ n atomic.Int64 }
