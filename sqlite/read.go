package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"inbox/inbox"
	"inbox/sqlfilter"
)

// eventColumns are the columns scanEvent reads, in its order.
const eventColumns = `id, job_id, status, reason, event, job_status, result_url,
	size, sha256, delivery_ts, received_at, deliveries, last_seen_at, updated_at,
	attempts, next_attempt_at, lease_owner, lease_until, last_error, done_at, source, response`

// Get returns the row with the given id, body included, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (inbox.Event, error) {
	row := s.read.QueryRowContext(ctx, `SELECT `+eventColumns+`, body FROM events WHERE id = ?`, id)
	e, err := scanEvent(row.Scan, true)
	if errors.Is(err, sql.ErrNoRows) {
		return inbox.Event{}, fmt.Errorf("get %s: %w", id, inbox.ErrNotFound)
	}
	if err != nil {
		return inbox.Event{}, fmt.Errorf("get %s: %w", id, err)
	}
	return e, nil
}

// settled is the condition of the partial indexes on rows that have left
// 'new' (schema.sql); a query repeats it word for word to use them.
const settled = "status <> 'new'"

// dialect is how SQLite writes a filter's SQL (sqlfilter).
var dialect = sqlfilter.Dialect{
	Param: func(int) string { return "?" },
	// instr with both arguments BLOBs compares bytes, so % _ \ and NUL
	// are bytes like any other.
	HasBytes: func(p string) string { return "instr(body, " + p + ") > 0" },
	Settled:  settled,
	RowKey:   "rowid",
	NoLimit:  -1,
}

// where returns the filter as a WHERE clause ("" when it selects every
// row) and its arguments.
func where(f inbox.Filter) (string, []any) {
	q := dialect.Query()
	return q.Where(f), q.Args()
}

// List returns rows without their bodies, newest first.
func (s *Store) List(ctx context.Context, f inbox.Filter) ([]inbox.Event, error) {
	return inbox.Collect(ctx, f, s.Each)
}

// Each calls fn with each row List returns, as it is read.
func (s *Store) Each(ctx context.Context, f inbox.Filter, fn func(inbox.Event) error) error {
	q, args := dialect.List(f, eventColumns)
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	return each(rows, func(scan func(...any) error) error {
		e, err := scanEvent(scan, false)
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		return fn(e)
	})
}

func scanEvent(scan func(...any) error, withBody bool) (inbox.Event, error) {
	var e inbox.Event
	var jobID, reason, event, jobStatus, resultURL, leaseOwner, lastError sql.NullString
	var received, lastSeen, updated, nextAttempt int64
	var leaseUntil, doneAt sql.NullInt64
	dest := []any{&e.ID, &jobID, &e.Status, &reason, &event, &jobStatus, &resultURL,
		&e.Size, &e.SHA256, &e.DeliveryTS, &received, &e.Deliveries, &lastSeen, &updated,
		&e.Attempts, &nextAttempt, &leaseOwner, &leaseUntil, &lastError, &doneAt, &e.Source, &e.Response}
	if withBody {
		dest = append(dest, &e.Body)
	}
	if err := scan(dest...); err != nil {
		return inbox.Event{}, err
	}
	e.JobID, e.Reason, e.Event = jobID.String, inbox.Reason(reason.String), event.String
	e.JobStatus, e.ResultURL = jobStatus.String, resultURL.String
	e.ReceivedAt, e.LastSeenAt, e.UpdatedAt = fromMillis(received), fromMillis(lastSeen), fromMillis(updated)
	e.LeaseOwner, e.LastError = leaseOwner.String, lastError.String
	if nextAttempt != 0 {
		e.NextAttemptAt = fromMillis(nextAttempt)
	}
	if leaseUntil.Valid {
		e.LeaseUntil = fromMillis(leaseUntil.Int64)
	}
	if doneAt.Valid {
		e.DoneAt = fromMillis(doneAt.Int64)
	}
	return e, nil
}
