package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
)

// purging is the store's inbox.PurgeStore, which inbox.Purger, embedded
// in Store, purges through: each statement bounded by the busy timeout, a
// statement a batch. A row a delivery, a dispatcher or a reprocess holds
// or changes meanwhile is passed over, never deleted from under it
// (PurgeBatch).
type purging struct{ s *Store }

func (p purging) ReadOnly() bool { return p.s.readOnly }

// Clock reads the store's clock: the injected one, or the database's.
func (p purging) Clock(ctx context.Context) (time.Time, error) {
	if p.s.now != nil {
		return p.s.now(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.s.busy)
	defer cancel()
	var ms int64
	if err := p.s.pool.QueryRow(ctx, `SELECT `+dbNow).Scan(&ms); err != nil {
		return time.Time{}, fmt.Errorf("read the clock: %w", err)
	}
	return fromMillis(ms), nil
}

// purgeWhere selects the rows of one status (never new, $1) last seen
// before a cutoff ($2); the events_settled_last_seen index serves it.
const purgeWhere = `status <> 'new' AND status = $1 AND last_seen_at < $2`

// parkedWhere narrows purgeWhere to parked rows with one of the reasons
// of the array $3.
const parkedWhere = ` AND reason = ANY($3::text[])`

// besideRemains holds for a done row while a parked or dismissed row of
// its job is there and is not itself being purged ($3 is the array of the
// reasons purged, $4 the cutoff, $5 whether dismissed rows are purged).
const besideRemains = `EXISTS (SELECT 1 FROM events b WHERE b.job_id = events.id AND b.job_id <> b.id
	AND (b.status = 'parked' AND NOT (b.reason = ANY($3::text[]) AND b.last_seen_at < $4)
		OR b.status = 'dismissed' AND NOT ($5::boolean AND b.last_seen_at < $4)))`

// unfinishedQuery counts the rows past a cutoff ($1) whose work is
// unfinished (inbox.PurgeStore.KeptUnfinished); $2 is the array of the
// reasons purged.
const unfinishedQuery = `SELECT (SELECT count(*) FROM events WHERE status = 'new' AND last_seen_at < $1)
	+ (SELECT count(*) FROM events WHERE status <> 'new' AND status = 'parked' AND last_seen_at < $1
		AND reason IN ('handler_failed', 'handler_rejected', 'too_large_for_destination') AND NOT (reason = ANY($2::text[])))`

// reasons returns sel's reasons as the array the queries take.
func reasons(sel inbox.PurgeSelection) []string {
	out := make([]string, len(sel.Reasons))
	for i, r := range sel.Reasons {
		out[i] = string(r)
	}
	return out
}

// purgesDismissed reports whether a purge of sel deletes dismissed rows.
func purgesDismissed(sel inbox.PurgeSelection) bool {
	return slices.Contains(sel.Statuses, inbox.StatusDismissed)
}

// purgeFilter is the WHERE clause, and its arguments, of the rows of
// status st that a purge of sel deletes.
func purgeFilter(sel inbox.PurgeSelection, st inbox.Status) (string, []any) {
	w, args := purgeWhere, []any{string(st), sel.Before.UnixMilli()}
	switch st {
	case inbox.StatusParked:
		w, args = w+parkedWhere, append(args, reasons(sel))
	case inbox.StatusDone:
		w, args = w+` AND NOT `+besideRemains, append(args, reasons(sel), sel.Before.UnixMilli(), purgesDismissed(sel))
	}
	return w, args
}

func (p purging) CountPurgeable(ctx context.Context, sel inbox.PurgeSelection, st inbox.Status) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, p.s.busy)
	defer cancel()
	w, args := purgeFilter(sel, st)
	var n int64
	err := p.s.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE `+w, args...).Scan(&n)
	return n, err
}

func (p purging) CountParkedPurgeable(ctx context.Context, sel inbox.PurgeSelection) (map[inbox.Reason]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, p.s.busy)
	defer cancel()
	w, args := purgeFilter(sel, inbox.StatusParked)
	rows, err := p.s.pool.Query(ctx, `SELECT reason, count(*) FROM events WHERE `+w+` GROUP BY reason`, args...)
	if err != nil {
		return nil, err
	}
	out := map[inbox.Reason]int64{}
	var r inbox.Reason
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&r, &n}, func() error {
		out[r] = n
		return nil
	})
	return out, err
}

// PurgeBatch deletes up to max rows of step in one statement, bounded by
// the busy timeout. The batch skips rows another transaction holds (a
// delivery counting a repeat, a reprocess), so a purge never waits in a
// lock queue with deliveries behind it; and the DELETE checks the filter
// again on each row as it locks it, so a row that changed since the batch
// was chosen (a repeat moved its last delivery on, a delivery revived it)
// stays. More may be left until a statement deletes nothing, since a batch
// whose rows changed may delete fewer than max with more to go.
func (p purging) PurgeBatch(ctx context.Context, sel inbox.PurgeSelection, step inbox.PurgeStep, max int) (int64, bool, error) {
	w, args := purgeFilter(sel, step.Status)
	if step.Status == inbox.StatusParked {
		w, args = w+fmt.Sprintf(` AND reason = $%d`, len(args)+1), append(args, string(step.Reason))
	}
	ctx, cancel := context.WithTimeout(ctx, p.s.busy)
	defer cancel()
	tag, err := p.s.pool.Exec(ctx, fmt.Sprintf(`DELETE FROM events WHERE id IN
		(SELECT id FROM events WHERE %s LIMIT %d FOR UPDATE SKIP LOCKED) AND %s`, w, max, w), args...)
	n := tag.RowsAffected()
	return n, err == nil && n > 0, err
}

func (p purging) KeptDone(ctx context.Context, sel inbox.PurgeSelection) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, p.s.busy)
	defer cancel()
	var n int64
	err := p.s.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE `+purgeWhere+` AND `+besideRemains,
		string(inbox.StatusDone), sel.Before.UnixMilli(), reasons(sel), sel.Before.UnixMilli(), purgesDismissed(sel)).Scan(&n)
	return n, err
}

func (p purging) KeptUnfinished(ctx context.Context, sel inbox.PurgeSelection) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, p.s.busy)
	defer cancel()
	var n int64
	err := p.s.pool.QueryRow(ctx, unfinishedQuery, sel.Before.UnixMilli(), reasons(sel)).Scan(&n)
	return n, err
}
