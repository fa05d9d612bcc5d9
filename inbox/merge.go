package inbox

import (
	"context"
	"database/sql"
	"fmt"
)

// current is what merging needs to know of the row that holds a key.
type current struct {
	status           Status
	sha              string
	event, jobStatus string
}

// readCurrent reads the row holding id; sql.ErrNoRows when there is none.
func readCurrent(ctx context.Context, tx *sql.Tx, id string) (current, error) {
	var cur current
	var event, jobStatus sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT status, sha256, event, job_status FROM events WHERE id = ?`, id).
		Scan(&cur.status, &cur.sha, &event, &jobStatus)
	cur.event, cur.jobStatus = event.String, jobStatus.String
	return cur, err
}

// landing is what a delivery does to the row that already holds its key.
type landing int

const (
	// landRevive: the row is parked and the delivery storable, so the
	// delivery takes the row over (contract row 17).
	landRevive landing = iota
	// landRepeat: the same bytes, or the same job event: counted on the row
	// (row 15).
	landRepeat
	// landBeside: something else; the delivery is parked beside the row
	// (row 16).
	landBeside
)

func landOn(cur current, d Delivery) landing {
	switch {
	case cur.status == StatusParked && d.Status == StatusNew:
		return landRevive
	case cur.sha == d.SHA256,
		cur.status != StatusParked && d.Status == StatusNew &&
			cur.event == d.Event && cur.jobStatus == d.JobStatus:
		return landRepeat
	}
	return landBeside
}

// revive makes the parked row at d.Key new with d's body, and counts n more
// deliveries on it, the last seen at lastSeen.
func revive(ctx context.Context, tx *sql.Tx, d Delivery, n, lastSeen, now int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE events SET status = 'new', reason = NULL,
		event = ?, job_status = ?, result_url = NULL, body = ?, size = ?, sha256 = ?,
		delivery_ts = ?, deliveries = deliveries + ?, last_seen_at = max(last_seen_at, ?), updated_at = ?
		WHERE id = ?`,
		nullable(d.Event), nullable(d.JobStatus), d.Body, len(d.Body), d.SHA256,
		d.DeliveryTS, n, lastSeen, now, d.Key)
	if err != nil {
		return fmt.Errorf("revive %s: %w", d.Key, err)
	}
	return nil
}
