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
	size, sha256, delivery_ts, received_at, deliveries, last_seen_at, updated_at,
	attempts, next_attempt_at, lease_owner, lease_until, last_error, done_at, source, response`

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
	Source string
	Status Status
	Reason Reason
	Since  time.Time // received at or after
	Before time.Time // received before
	Limit  int
}

// settled is the condition of the partial indexes on rows that have left
// 'new' (schema.sql); a query repeats it word for word to use them.
const settled = "status <> 'new'"

// where returns the filter as a WHERE clause ("" when it selects every
// row) and its arguments.
func (f Filter) where() (string, []any) {
	var conds []string
	var args []any
	if f.Source != "" {
		conds = append(conds, "source = ?")
		args = append(args, f.Source)
	}
	if f.Status != "" {
		conds = append(conds, "status = ?")
		args = append(args, string(f.Status))
		if f.Status != StatusNew {
			conds = append(conds, settled) // lets SQLite use the partial indexes
		}
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

// Stats counts rows per status and parked rows per reason, the delivery
// attempts recorded on rows, and the queue of new rows.
type Stats struct {
	ByStatus map[Status]int64 `json:"by_status"`
	ByReason map[Reason]int64 `json:"parked_by_reason"`
	// Attempts sums the delivery attempts recorded on rows, by their status
	// now: on done rows, what it took to hand them on; on parked rows, what
	// was tried before giving up.
	Attempts map[Status]int64 `json:"attempts_by_status"`
	// BySource counts rows per source and status.
	BySource map[string]map[Status]int64 `json:"by_source"`
	Queue    Queue                       `json:"queue"`
}

// Stats reads the counts in one query, so they agree with each other, and
// the queue at the store's clock in another.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	st := Stats{ByStatus: map[Status]int64{}, ByReason: map[Reason]int64{}, Attempts: map[Status]int64{},
		BySource: map[string]map[Status]int64{}}
	rows, err := s.read.QueryContext(ctx,
		`SELECT source, status, COALESCE(reason, ''), count(*), sum(attempts) FROM events GROUP BY source, status, reason`)
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var source, status, reason string
		var n, attempts int64
		if err := rows.Scan(&source, &status, &reason, &n, &attempts); err != nil {
			return Stats{}, fmt.Errorf("stats: %w", err)
		}
		if st.BySource[source] == nil {
			st.BySource[source] = map[Status]int64{}
		}
		st.BySource[source][Status(status)] += n
		st.ByStatus[Status(status)] += n
		st.Attempts[Status(status)] += attempts
		if reason != "" {
			st.ByReason[Reason(reason)] += n
		}
	}
	if err := rows.Err(); err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	if st.Queue, err = s.Queue(ctx, s.now()); err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}

func scanEvent(scan func(...any) error, withBody bool) (Event, error) {
	var e Event
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
		return Event{}, err
	}
	e.JobID, e.Reason, e.Event = jobID.String, Reason(reason.String), event.String
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
