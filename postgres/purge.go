package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"inbox/inbox"
)

// purgeBatch bounds how many rows one purge statement deletes, so no
// transaction holds many rows that deliveries may be waiting to count a
// repeat on.
const purgeBatch = 1000

// purgeWhere selects the rows of one status (never new, $1) last seen
// before a cutoff ($2); the events_settled_last_seen index serves it.
// Retention counts from the last delivery: a row a redelivery landed on
// yesterday is what makes the next one a counted repeat.
const purgeWhere = `status <> 'new' AND status = $1 AND last_seen_at < $2`

// parkedWhere narrows purgeWhere to parked rows with one of the reasons
// of the array $3.
const parkedWhere = ` AND reason = ANY($3::text[])`

// besideRemains holds for a done row while a parked row of its job is
// there and is not itself being purged ($3 is the array of the reasons
// purged, $4 the cutoff). Such a done row is kept: were it gone,
// reprocessing the parked row would hand the job to the application again
// as new.
const besideRemains = `EXISTS (SELECT 1 FROM events b WHERE b.job_id = events.id AND b.job_id <> b.id
	AND b.status = 'parked' AND NOT (b.reason = ANY($3::text[]) AND b.last_seen_at < $4))`

// unfinishedQuery counts the rows past a cutoff ($1) whose work is
// unfinished, which a purge keeps whatever it is asked: new rows (waiting,
// retrying or in flight), and rows the dispatcher parked unless their
// reason is in the array $2.
const unfinishedQuery = `SELECT (SELECT count(*) FROM events WHERE status = 'new' AND last_seen_at < $1)
	+ (SELECT count(*) FROM events WHERE status <> 'new' AND status = 'parked' AND last_seen_at < $1
		AND reason IN ('handler_failed', 'handler_rejected') AND NOT (reason = ANY($2::text[])))`

// Purgeable counts, per status and per parked reason, the rows Purge would
// delete, and the rows it would keep. It fails as Purge does on a
// selection it refuses, and when the database cannot be read.
func (s *Store) Purgeable(ctx context.Context, sel inbox.PurgeSelection) (inbox.PurgeReport, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	rep := inbox.NewPurgeReport(sel)
	reasons, err := s.checkPurge(ctx, sel)
	if err != nil {
		return rep, err
	}
	for _, st := range sel.Statuses {
		w, args := purgeFilter(st, sel.Before, reasons)
		var n int64
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE `+w, args...).Scan(&n); err != nil {
			return rep, fmt.Errorf("count %s rows to purge: %w", st, err)
		}
		rep.Deleted[st] = n
	}
	if len(sel.Reasons) > 0 {
		w, args := purgeFilter(inbox.StatusParked, sel.Before, reasons)
		rows, err := s.pool.Query(ctx, `SELECT reason, count(*) FROM events WHERE `+w+` GROUP BY reason`, args...)
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

// Purge deletes the rows sel selects, purgeBatch rows a statement. A done
// row stays while a parked row of its job stays (parked rows past
// retention go first, and then the done rows they kept). It refuses a
// Before later than inbox.MinRetention before the store's clock,
// StatusNew and StatusParked in Statuses (new rows are still owed to the
// application; parked rows are chosen by reason), and unknown statuses or
// reasons. A row a delivery, a dispatcher or a reprocess holds or changes
// meanwhile is passed over, never deleted from under it. On an error, the
// report says what earlier statements deleted.
func (s *Store) Purge(ctx context.Context, sel inbox.PurgeSelection) (inbox.PurgeReport, error) {
	rep := inbox.NewPurgeReport(sel)
	cctx, cancel := context.WithTimeout(ctx, s.busy)
	reasons, err := s.checkPurge(cctx, sel)
	cancel()
	if err != nil {
		return rep, err
	}
	if s.readOnly {
		return rep, errors.New("purge: store is read-only")
	}
	for _, step := range sel.Steps() {
		w, args := purgeFilter(step.Status, sel.Before, reasons)
		if step.Status == inbox.StatusParked {
			w, args = w+fmt.Sprintf(` AND reason = $%d`, len(args)+1), append(args, string(step.Reason))
		}
		n, err := s.purgeRows(ctx, w, args)
		rep.CountDeleted(step, n)
		if err != nil {
			return rep, fmt.Errorf("purge %s rows: %w", step, err)
		}
	}
	kctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	return rep, s.kept(kctx, sel, reasons, &rep)
}

// purgeRows deletes the rows matching w, purgeBatch a statement, each
// statement bounded by the busy timeout, and returns how many it deleted.
// The batch skips rows another transaction holds (a delivery counting a
// repeat, a reprocess), so a purge never waits in a lock queue with
// deliveries behind it; and the DELETE checks w again on each row as it
// locks it, so a row that changed since the batch was chosen (a repeat
// moved its last delivery on, a delivery revived it) stays. It runs until
// a statement deletes nothing, since a batch whose rows changed may delete
// fewer than purgeBatch with more to go.
func (s *Store) purgeRows(ctx context.Context, w string, args []any) (int64, error) {
	var total int64
	for {
		dctx, cancel := context.WithTimeout(ctx, s.busy)
		tag, err := s.pool.Exec(dctx, fmt.Sprintf(`DELETE FROM events WHERE id IN
			(SELECT id FROM events WHERE %s LIMIT %d FOR UPDATE SKIP LOCKED) AND %s`, w, purgeBatch, w), args...)
		cancel()
		n := tag.RowsAffected()
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

// purgeFilter is the WHERE clause, and its arguments, of the rows of
// status st that a purge deletes; reasons are the parked reasons it
// deletes.
func purgeFilter(st inbox.Status, before time.Time, reasons []string) (string, []any) {
	w, args := purgeWhere, []any{string(st), before.UnixMilli()}
	switch st {
	case inbox.StatusParked:
		w, args = w+parkedWhere, append(args, reasons)
	case inbox.StatusDone:
		w, args = w+` AND NOT `+besideRemains, append(args, reasons, before.UnixMilli())
	}
	return w, args
}

// kept counts the done rows past retention that a purge keeps beside
// parked rows, and the rows past retention it keeps as unfinished work.
func (s *Store) kept(ctx context.Context, sel inbox.PurgeSelection, reasons []string, rep *inbox.PurgeReport) error {
	if slices.Contains(sel.Statuses, inbox.StatusDone) {
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE `+purgeWhere+` AND `+besideRemains,
			string(inbox.StatusDone), sel.Before.UnixMilli(), reasons, sel.Before.UnixMilli()).Scan(&rep.KeptDone)
		if err != nil {
			return fmt.Errorf("count kept done rows: %w", err)
		}
	}
	err := s.pool.QueryRow(ctx, unfinishedQuery, sel.Before.UnixMilli(), reasons).Scan(&rep.KeptUnfinished)
	if err != nil {
		return fmt.Errorf("count kept unfinished rows: %w", err)
	}
	return nil
}

// checkPurge refuses a selection a purge must never run
// (inbox.PurgeSelection.Check), and returns its reasons as the array the
// queries take. The retention is measured on the store's clock (the
// database's): the clock of the machine the command runs on cannot shorten
// it.
func (s *Store) checkPurge(ctx context.Context, sel inbox.PurgeSelection) ([]string, error) {
	now, err := s.clockNow(ctx)
	if err != nil {
		return nil, fmt.Errorf("purge: %w", err)
	}
	if err := sel.Check(now); err != nil {
		return nil, err
	}
	reasons := make([]string, len(sel.Reasons))
	for i, r := range sel.Reasons {
		reasons[i] = string(r)
	}
	return reasons, nil
}

// clockNow reads the store's clock: the injected one, or the database's.
func (s *Store) clockNow(ctx context.Context) (time.Time, error) {
	if s.now != nil {
		return s.now(), nil
	}
	var ms int64
	if err := s.pool.QueryRow(ctx, `SELECT `+dbNow).Scan(&ms); err != nil {
		return time.Time{}, fmt.Errorf("read the clock: %w", err)
	}
	return fromMillis(ms), nil
}
