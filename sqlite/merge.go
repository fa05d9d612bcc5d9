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
	cur := inbox.Event{ID: id}
	var reason, event, jobStatus sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT status, reason, sha256, event, job_status, source, response FROM events WHERE id = ?`, id).
		Scan(&cur.Status, &reason, &cur.SHA256, &event, &jobStatus, &cur.Source, &cur.Response)
	cur.Reason, cur.Event, cur.JobStatus = inbox.Reason(reason.String), event.String, jobStatus.String
	return cur, err
}

// revive makes the parked row at d.Key new with d's body, and counts n more
// deliveries on it, the last seen at lastSeen. The row is queued afresh: no
// attempts, no lease, no error.
func revive(ctx context.Context, tx *sql.Tx, d inbox.Delivery, n, lastSeen, now int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE events SET status = 'new', reason = NULL,
		event = ?, job_status = ?, result_url = NULL, body = ?, size = ?, sha256 = ?,
		delivery_ts = ?, deliveries = deliveries + ?, last_seen_at = max(last_seen_at, ?), updated_at = ?,
		attempts = 0, next_attempt_at = 0, lease_owner = NULL, lease_until = NULL,
		last_error = NULL, done_at = NULL, response = COALESCE(response, ?)
		WHERE id = ?`,
		nullable(d.Event), nullable(d.JobStatus), d.Body, len(d.Body), d.SHA256,
		d.DeliveryTS, n, lastSeen, now, d.Response, d.Key)
	if err != nil {
		return fmt.Errorf("revive %s: %w", d.Key, err)
	}
	return nil
}
