package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// eventColumns are the columns scanEvent reads, in its order.
const eventColumns = `id, job_id, status, reason, event, job_status, result_url,
	size, sha256, delivery_ts, received_at, deliveries, last_seen_at, updated_at`

// Get returns the row with the given id, body included, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (Event, error) {
	row := s.read.QueryRowContext(ctx, `SELECT `+eventColumns+`, body FROM events WHERE id = ?`, id)
	e, err := scanEvent(row.Scan, true)
	if errors.Is(err, sql.ErrNoRows) {
		return Event{}, fmt.Errorf("get %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Event{}, fmt.Errorf("get %s: %w", id, err)
	}
	return e, nil
}

// Filter selects rows for List. Zero fields do not filter.
type Filter struct {
	Status Status
	Reason Reason
	Since  time.Time // received at or after
	Before time.Time // received before
	Limit  int
}

// where returns the filter as a WHERE clause ("" when it selects every
// row) and its arguments.
func (f Filter) where() (string, []any) {
	var conds []string
	var args []any
	if f.Status != "" {
		conds = append(conds, "status = ?")
		args = append(args, string(f.Status))
	}
	if f.Reason != "" {
		conds = append(conds, "reason = ?")
		args = append(args, string(f.Reason))
	}
	if !f.Since.IsZero() {
		conds = append(conds, "received_at >= ?")
		args = append(args, millis(f.Since))
	}
	if !f.Before.IsZero() {
		conds = append(conds, "received_at < ?")
		args = append(args, millis(f.Before))
	}
	if len(conds) == 0 {
		return "", nil
	}
	return ` WHERE ` + strings.Join(conds, " AND "), args
}

// List returns rows without their bodies, newest first.
func (s *Store) List(ctx context.Context, f Filter) ([]Event, error) {
	where, args := f.where()
	q := `SELECT ` + eventColumns + ` FROM events` + where + ` ORDER BY received_at DESC, id`
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		e, err := scanEvent(rows.Scan, false)
		if err != nil {
			return nil, fmt.Errorf("list: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	return out, nil
}

// Stats counts rows per status and parked rows per reason.
type Stats struct {
	ByStatus map[Status]int64 `json:"by_status"`
	ByReason map[Reason]int64 `json:"parked_by_reason"`
}

// Stats reads the counts in one query, so they agree with each other.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	st := Stats{ByStatus: map[Status]int64{}, ByReason: map[Reason]int64{}}
	rows, err := s.read.QueryContext(ctx,
		`SELECT status, COALESCE(reason, ''), count(*) FROM events GROUP BY status, reason`)
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var status, reason string
		var n int64
		if err := rows.Scan(&status, &reason, &n); err != nil {
			return Stats{}, fmt.Errorf("stats: %w", err)
		}
		st.ByStatus[Status(status)] += n
		if reason != "" {
			st.ByReason[Reason(reason)] += n
		}
	}
	if err := rows.Err(); err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}

func scanEvent(scan func(...any) error, withBody bool) (Event, error) {
	var e Event
	var jobID, reason, event, jobStatus, resultURL sql.NullString
	var received, lastSeen, updated int64
	dest := []any{&e.ID, &jobID, &e.Status, &reason, &event, &jobStatus, &resultURL,
		&e.Size, &e.SHA256, &e.DeliveryTS, &received, &e.Deliveries, &lastSeen, &updated}
	if withBody {
		dest = append(dest, &e.Body)
	}
	if err := scan(dest...); err != nil {
		return Event{}, err
	}
	e.JobID, e.Reason, e.Event = jobID.String, Reason(reason.String), event.String
	e.JobStatus, e.ResultURL = jobStatus.String, resultURL.String
	e.ReceivedAt, e.LastSeenAt, e.UpdatedAt = fromMillis(received), fromMillis(lastSeen), fromMillis(updated)
	return e, nil
}
