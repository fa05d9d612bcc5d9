package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"inbox/inbox"
)

// readCurrent reads what the landing rules (inbox.Land) need of the row
// holding id, and its saved response; sql.ErrNoRows when there is none.
func readCurrent(ctx context.Context, tx *sql.Tx, id string) (inbox.Event, error) {
	return scanCurrent(id, tx.QueryRowContext(ctx, currentSQL, id))
}

// scanCurrent scans row, currentSQL's result for id.
func scanCurrent(id string, row *sql.Row) (inbox.Event, error) {
	cur := inbox.Event{ID: id}
	var reason, event, jobStatus sql.NullString
	err := row.Scan(&cur.Status, &reason, &cur.SHA256, &event, &jobStatus, &cur.Source, &cur.Response)
	cur.Reason, cur.Event, cur.JobStatus = inbox.Reason(reason.String), event.String, jobStatus.String
	return cur, err
}

// revive makes the parked row at d.Key new with d's body, and counts n more
// deliveries on it, the last seen at lastSeen; upd is reviveSQL. The row is
// queued afresh: no attempts, no lease, no error.
func revive(ctx context.Context, upd execer, d inbox.Delivery, n, lastSeen, now int64) error {
	_, err := upd.ExecContext(ctx,
		nullable(d.Event), nullable(d.JobStatus), d.Body, len(d.Body), d.SHA256,
		d.DeliveryTS, n, lastSeen, now, d.Response, d.Key)
	if err != nil {
		return fmt.Errorf("revive %s: %w", d.Key, err)
	}
	return nil
}
