package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"inbox/inbox"
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

// where returns the filter as a WHERE clause ("" when it selects every
// row) and its arguments.
func where(f inbox.Filter) (string, []any) {
	var conds []string
	var args []any
	if f.Source != "" {
		conds = append(conds, "source = ?")
		args = append(args, f.Source)
	}
	if f.Status != "" {
		conds = append(conds, "status = ?")
		args = append(args, string(f.Status))
		if f.Status != inbox.StatusNew {
			conds = append(conds, settled) // lets SQLite use the partial indexes
		}
	}
	if f.Reason != "" {
		conds = append(conds, "reason = ?")
		args = append(args, string(f.Reason))
	}
	if f.Event != "" {
		conds = append(conds, "event = ?")
		args = append(args, f.Event)
	}
	if f.JobStatus != "" {
		conds = append(conds, "job_status = ?")
		args = append(args, f.JobStatus)
	}
	if !f.Since.IsZero() {
		conds = append(conds, "received_at >= ?")
		args = append(args, millis(f.Since))
	}
	if !f.Before.IsZero() {
		conds = append(conds, "received_at < ?")
		args = append(args, millis(f.Before))
	}
	if f.Destination != "" {
		// The primary key of deliveries serves it, row by row.
		conds = append(conds, "EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = events.id AND d.destination = ?)")
		args = append(args, f.Destination)
	}
	clause := ""
	if len(conds) > 0 {
		clause = ` WHERE ` + strings.Join(conds, " AND ")
	}
	if f.Contains == "" {
		return clause, args
	}
	// The newest ScanLimit rows the rest selects, by rowid so the sort
	// carries no body, then instr over their bodies: with both arguments
	// BLOBs it compares bytes, so % _ \ and NUL are bytes like any other.
	limit := -1 // none
	if f.ScanLimit > 0 {
		limit = f.ScanLimit
	}
	return ` WHERE rowid IN (SELECT rowid FROM events` + clause + ` ORDER BY received_at DESC, id LIMIT ?)` +
		` AND instr(body, ?) > 0`, append(args, limit, []byte(f.Contains))
}

// List returns rows without their bodies, newest first.
func (s *Store) List(ctx context.Context, f inbox.Filter) ([]inbox.Event, error) {
	return inbox.Collect(ctx, f, s.Each)
}

// Each calls fn with each row List returns, as it is read.
func (s *Store) Each(ctx context.Context, f inbox.Filter, fn func(inbox.Event) error) error {
	where, args := where(f)
	limit := -1 // none
	if f.Limit > 0 {
		limit = f.Limit
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+eventColumns+` FROM events`+where+
		` ORDER BY received_at DESC, id LIMIT ?`, append(args, limit)...)
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
