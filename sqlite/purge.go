package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"inbox/inbox"
)

// purgeBatch bounds how many rows one purge transaction deletes, so the
// write lock is never held long enough to make the receiver answer 503.
const purgeBatch = 1000

// purgeWhere selects the rows of one status (never new) last seen before a
// cutoff; the events_settled_last_seen index serves it. Retention counts from the last
// delivery, not from the first: a row a redelivery landed on yesterday is
// what makes the next one a counted repeat.
const purgeWhere = settled + ` AND status = ? AND last_seen_at < ?`

// parkedWhere narrows purgeWhere to parked rows with one of the reasons of
// a JSON array.
const parkedWhere = ` AND reason IN (SELECT value FROM json_each(?))`

// besideRemains holds for a done row while a parked row of its job is
// there and is not itself being purged (the first argument is the JSON
// array of the reasons purged, the second the cutoff). Such a done row is
// kept: were it gone, reprocessing the parked row would hand the job to the
// application again as new.
const besideRemains = `EXISTS (SELECT 1 FROM events b WHERE b.job_id = events.id AND b.job_id <> b.id
	AND b.status = 'parked' AND NOT (b.reason IN (SELECT value FROM json_each(?)) AND b.last_seen_at < ?))`

// unfinishedQuery counts the rows past a cutoff whose work is unfinished,
// which a purge keeps whatever it is asked: new rows (waiting, retrying or
// in flight), and rows the dispatcher parked unless their reason is in
// the JSON array of the last argument. Two counts, so each reads an index.
const unfinishedQuery = `SELECT (SELECT count(*) FROM events WHERE status = 'new' AND last_seen_at < ?)
	+ (SELECT count(*) FROM events WHERE ` + purgeWhere + `
		AND reason IN ('handler_failed', 'handler_rejected') AND reason NOT IN (SELECT value FROM json_each(?)))`

// Purgeable counts, per status, the rows Purge would delete, and the rows
// it would keep. It fails as Purge does on a selection it refuses, and
// when the database cannot be read.
func (s *Store) Purgeable(ctx context.Context, sel inbox.PurgeSelection) (inbox.PurgeReport, error) {
	rep := inbox.NewPurgeReport(sel)
	reasons, err := s.checkPurge(sel)
	if err != nil {
		return rep, err
	}
	for _, st := range sel.Statuses {
		where, args := purgeFilter(st, sel.Before, reasons)
		var n int64
		if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE `+where, args...).Scan(&n); err != nil {
			return rep, fmt.Errorf("count %s rows to purge: %w", st, err)
		}
		rep.Deleted[st] = n
	}
	if len(sel.Reasons) > 0 {
		where, args := purgeFilter(inbox.StatusParked, sel.Before, reasons)
		rows, err := s.read.QueryContext(ctx, `SELECT reason, count(*) FROM events WHERE `+where+` GROUP BY reason`, args...)
		if err != nil {
			return rep, fmt.Errorf("count parked rows to purge: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var r inbox.Reason
			var n int64
			if err := rows.Scan(&r, &n); err != nil {
				return rep, fmt.Errorf("count parked rows to purge: %w", err)
			}
			rep.CountDeleted(inbox.PurgeStep{Status: inbox.StatusParked, Reason: r}, n)
		}
		if err := rows.Err(); err != nil {
			return rep, fmt.Errorf("count parked rows to purge: %w", err)
		}
	}
	return rep, s.kept(ctx, sel, reasons, &rep)
}

// Purge deletes the rows sel selects, in IMMEDIATE transactions of
// purgeBatch rows. A done row stays while a parked row of its job stays
// (parked rows past retention go first, and then the done rows they kept).
// It refuses a Before later than MinRetention ago, StatusNew and
// StatusParked in Statuses (new rows are still owed to the application;
// parked rows are chosen by reason), and unknown statuses or reasons; on an
// error, the report says what earlier transactions deleted.
func (s *Store) Purge(ctx context.Context, sel inbox.PurgeSelection) (inbox.PurgeReport, error) {
	rep := inbox.NewPurgeReport(sel)
	reasons, err := s.checkPurge(sel)
	if err != nil {
		return rep, err
	}
	if s.write == nil {
		return rep, errors.New("purge: store is read-only")
	}
	for _, step := range sel.Steps() {
		where, args := purgeFilter(step.Status, sel.Before, reasons)
		if step.Status == inbox.StatusParked {
			where, args = where+` AND reason = ?`, append(args, string(step.Reason))
		}
		for {
			n, err := s.purgeTx(ctx, where, args)
			rep.CountDeleted(step, n)
			if err != nil {
				return rep, fmt.Errorf("purge %s rows: %w", step, err)
			}
			if n < purgeBatch {
				break
			}
		}
	}
	return rep, s.kept(ctx, sel, reasons, &rep)
}

// purgeFilter is the WHERE clause, and its arguments, of the rows of
// status st that a purge deletes; reasons is the JSON array of the parked
// reasons it deletes.
func purgeFilter(st inbox.Status, before time.Time, reasons string) (string, []any) {
	where, args := purgeWhere, []any{string(st), millis(before)}
	switch st {
	case inbox.StatusParked:
		where, args = where+parkedWhere, append(args, reasons)
	case inbox.StatusDone:
		where, args = where+` AND NOT `+besideRemains, append(args, reasons, millis(before))
	}
	return where, args
}

// kept counts the done rows past retention that a purge keeps beside
// parked rows, and the rows past retention it keeps as unfinished work.
func (s *Store) kept(ctx context.Context, sel inbox.PurgeSelection, reasons string, rep *inbox.PurgeReport) error {
	if slices.Contains(sel.Statuses, inbox.StatusDone) {
		err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE `+purgeWhere+` AND `+besideRemains,
			string(inbox.StatusDone), millis(sel.Before), reasons, millis(sel.Before)).Scan(&rep.KeptDone)
		if err != nil {
			return fmt.Errorf("count kept done rows: %w", err)
		}
	}
	err := s.read.QueryRowContext(ctx, unfinishedQuery, millis(sel.Before),
		string(inbox.StatusParked), millis(sel.Before), reasons).Scan(&rep.KeptUnfinished)
	if err != nil {
		return fmt.Errorf("count kept unfinished rows: %w", err)
	}
	return nil
}

// purgeTx deletes up to purgeBatch rows matching where in one IMMEDIATE
// transaction.
func (s *Store) purgeTx(ctx context.Context, where string, args []any) (int64, error) {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE rowid IN
		(SELECT rowid FROM events WHERE `+where+` LIMIT ?)`, append(args, purgeBatch)...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return n, nil
}

// checkPurge refuses a selection a purge must never run
// (inbox.PurgeSelection.Check, at the store's clock), and returns its
// reasons as the JSON array the queries take.
func (s *Store) checkPurge(sel inbox.PurgeSelection) (string, error) {
	if err := sel.Check(s.now()); err != nil {
		return "", err
	}
	names := make([]string, len(sel.Reasons))
	for i, r := range sel.Reasons {
		names[i] = string(r)
	}
	b, err := json.Marshal(names)
	return string(b), err
}
