package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"inbox/inbox"
)

// purging is the store's inbox.PurgeStore, which inbox.Purger, embedded
// in Store, purges through: counts on the read connections, each batch in
// one IMMEDIATE transaction of the write connection.
type purging struct{ s *Store }

func (p purging) ReadOnly() bool { return p.s.write == nil }

// Clock reads the store's clock, which never fails.
func (p purging) Clock(context.Context) (time.Time, error) { return p.s.now(), nil }

// purgeWhere selects the rows of one status (never new) last seen before a
// cutoff; the events_settled_last_seen index serves it.
const purgeWhere = settled + ` AND status = ? AND last_seen_at < ?`

// parkedWhere narrows purgeWhere to parked rows with one of the reasons of
// a JSON array.
const parkedWhere = ` AND reason IN (SELECT value FROM json_each(?))`

// besideRemains holds for a done row while a parked or dismissed row of
// its job is there and is not itself being purged (the arguments: the
// JSON array of the reasons purged, the cutoff, whether dismissed rows
// are purged, the cutoff again).
const besideRemains = `EXISTS (SELECT 1 FROM events b WHERE b.job_id = events.id AND b.job_id <> b.id
	AND (b.status = 'parked' AND NOT (b.reason IN (SELECT value FROM json_each(?)) AND b.last_seen_at < ?)
		OR b.status = 'dismissed' AND NOT (? AND b.last_seen_at < ?)))`

// unfinishedQuery counts the rows past a cutoff whose work is unfinished
// (inbox.PurgeStore.KeptUnfinished); the last argument is the JSON array
// of the reasons purged. Two counts, so each reads an index.
const unfinishedQuery = `SELECT (SELECT count(*) FROM events WHERE status = 'new' AND last_seen_at < ?)
	+ (SELECT count(*) FROM events WHERE ` + purgeWhere + `
		AND reason IN ('handler_failed', 'handler_rejected', 'too_large_for_destination') AND reason NOT IN (SELECT value FROM json_each(?)))`

// reasons returns sel's reasons as the JSON array the queries take.
func reasons(sel inbox.PurgeSelection) string {
	if len(sel.Reasons) == 0 {
		return "[]" // not null, which NOT IN would never pass
	}
	b, _ := json.Marshal(sel.Reasons) // strings: cannot fail
	return string(b)
}

// besideArgs are besideRemains' arguments for a purge of sel.
func besideArgs(sel inbox.PurgeSelection) []any {
	return []any{reasons(sel), millis(sel.Before), slices.Contains(sel.Statuses, inbox.StatusDismissed), millis(sel.Before)}
}

// purgeFilter is the WHERE clause, and its arguments, of the rows of
// status st that a purge of sel deletes.
func purgeFilter(sel inbox.PurgeSelection, st inbox.Status) (string, []any) {
	where, args := purgeWhere, []any{string(st), millis(sel.Before)}
	switch st {
	case inbox.StatusParked:
		where, args = where+parkedWhere, append(args, reasons(sel))
	case inbox.StatusDone:
		where, args = where+` AND NOT `+besideRemains, append(args, besideArgs(sel)...)
	}
	return where, args
}

func (p purging) CountPurgeable(ctx context.Context, sel inbox.PurgeSelection, st inbox.Status) (int64, error) {
	where, args := purgeFilter(sel, st)
	var n int64
	err := p.s.read.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE `+where, args...).Scan(&n)
	return n, err
}

func (p purging) CountParkedPurgeable(ctx context.Context, sel inbox.PurgeSelection) (map[inbox.Reason]int64, error) {
	where, args := purgeFilter(sel, inbox.StatusParked)
	rows, err := p.s.read.QueryContext(ctx, `SELECT reason, count(*) FROM events WHERE `+where+` GROUP BY reason`, args...)
	if err != nil {
		return nil, err
	}
	out := map[inbox.Reason]int64{}
	return out, each(rows, func(scan func(...any) error) error {
		var r inbox.Reason
		var n int64
		err := scan(&r, &n)
		out[r] = n
		return err
	})
}

// PurgeBatch deletes up to max rows of step in one IMMEDIATE transaction;
// more are left while a batch is full.
func (p purging) PurgeBatch(ctx context.Context, sel inbox.PurgeSelection, step inbox.PurgeStep, max int) (int64, bool, error) {
	where, args := purgeFilter(sel, step.Status)
	if step.Status == inbox.StatusParked {
		where, args = where+` AND reason = ?`, append(args, string(step.Reason))
	}
	tx, err := p.s.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE rowid IN
		(SELECT rowid FROM events WHERE `+where+` LIMIT ?)`, append(args, max)...)
	if err != nil {
		return 0, false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, false, err
	}
	if err := tx.Commit(); err != nil {
		return 0, false, fmt.Errorf("commit: %w", err)
	}
	return n, n == int64(max), nil
}

func (p purging) KeptDone(ctx context.Context, sel inbox.PurgeSelection) (int64, error) {
	var n int64
	err := p.s.read.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE `+purgeWhere+` AND `+besideRemains,
		append([]any{string(inbox.StatusDone), millis(sel.Before)}, besideArgs(sel)...)...).Scan(&n)
	return n, err
}

func (p purging) KeptUnfinished(ctx context.Context, sel inbox.PurgeSelection) (int64, error) {
	var n int64
	err := p.s.read.QueryRowContext(ctx, unfinishedQuery, millis(sel.Before),
		string(inbox.StatusParked), millis(sel.Before), reasons(sel)).Scan(&n)
	return n, err
}
