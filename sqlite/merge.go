package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"inbox/inbox"
)

// The landing statements the writer's group commit runs (writer.go);
// postgres/writer.go holds its revive. They belong in writer.go, and go
// there with the writer's next change.

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
