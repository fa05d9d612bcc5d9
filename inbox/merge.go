package inbox

import (
	"context"
	"database/sql"
	"fmt"
)

// current is what merging needs to know of the row that holds a key.
type current struct {
	status           Status
	reason           Reason
	sha              string
	event, jobStatus string
	source           string
	response         []byte
}

// readCurrent reads the row holding id; sql.ErrNoRows when there is none.
func readCurrent(ctx context.Context, tx *sql.Tx, id string) (current, error) {
	var cur current
	var reason, event, jobStatus sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT status, reason, sha256, event, job_status, source, response FROM events WHERE id = ?`, id).
		Scan(&cur.status, &reason, &cur.sha, &event, &jobStatus, &cur.source, &cur.response)
	cur.reason, cur.event, cur.jobStatus = Reason(reason.String), event.String, jobStatus.String
	return cur, err
}

// landing is what a delivery does to the row that already holds its key.
type landing int

const (
	// landRevive: the row is parked as received and the delivery storable,
	// so the delivery takes the row over (contract row 17).
	landRevive landing = iota
	// landRepeat: the same bytes, or the same job event: counted on the row
	// (row 15). A row the dispatcher parked holds a storable job event, so
	// it counts repeats like a new or done row: only a person revives it.
	landRepeat
	// landBeside: something else; the delivery is parked beside the row
	// (row 16).
	landBeside
)

func landOn(cur current, d Delivery) landing {
	holdsJob := cur.status != StatusParked || cur.reason.byHandler()
	switch {
	case cur.source != d.source():
		// A Sume job_id that reads "<source>/<key>": never merged into
		// another source's row.
		return landBeside
	case !holdsJob && d.Status == StatusNew:
		return landRevive
	case cur.sha == d.SHA256,
		holdsJob && d.Status == StatusNew &&
			cur.event == d.Event && cur.jobStatus == d.JobStatus:
		return landRepeat
	}
	return landBeside
}

// revive makes the parked row at d.Key new with d's body, and counts n more
// deliveries on it, the last seen at lastSeen. The row is queued afresh: no
// attempts, no lease, no error.
func revive(ctx context.Context, tx *sql.Tx, d Delivery, n, lastSeen, now int64) error {
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
