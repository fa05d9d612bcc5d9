package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
)

// eventColumns are the columns scanEvent reads, in its order.
const eventColumns = `id, coalesce(job_id, ''), status, coalesce(reason, ''), coalesce(event, ''),
	coalesce(job_status, ''), coalesce(result_url, ''), size, sha256, delivery_ts, received_at,
	deliveries, last_seen_at, updated_at, attempts, next_attempt_at, coalesce(lease_owner, ''),
	lease_until, coalesce(last_error, ''), done_at, source, response`

// Get returns the row with the given id, body included, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (inbox.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	row := s.pool.QueryRow(ctx, `SELECT `+eventColumns+`, body FROM events WHERE id = $1`, id)
	e, err := scanEvent(row.Scan, true)
	if errors.Is(err, pgx.ErrNoRows) {
		return inbox.Event{}, fmt.Errorf("get %s: %w", id, inbox.ErrNotFound)
	}
	if err != nil {
		return inbox.Event{}, fmt.Errorf("get %s: %w", id, err)
	}
	return e, nil
}

// where returns f as a WHERE clause ("" when it selects every row) and its
// arguments, numbered from $1.
func where(f inbox.Filter) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		conds = append(conds, fmt.Sprintf(cond, len(args)))
	}
	if f.Source != "" {
		add("source = $%d", f.Source)
	}
	if f.Status != "" {
		add("status = $%d", string(f.Status))
	}
	if f.Reason != "" {
		add("reason = $%d", string(f.Reason))
	}
	if !f.Since.IsZero() {
		add("received_at >= $%d", f.Since.UnixMilli())
	}
	if !f.Before.IsZero() {
		add("received_at < $%d", f.Before.UnixMilli())
	}
	if len(conds) == 0 {
		return "", nil
	}
	return ` WHERE ` + strings.Join(conds, " AND "), args
}

// List returns rows without their bodies, newest first.
func (s *Store) List(ctx context.Context, f inbox.Filter) ([]inbox.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	w, args := where(f)
	q := `SELECT ` + eventColumns + ` FROM events` + w + ` ORDER BY received_at DESC, id`
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.Event, error) { return scanEvent(r.Scan, false) })
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	return out, nil
}

// Stats counts rows per status and parked rows per reason, the delivery
// attempts recorded on rows, and the queue of new rows, at the store's
// clock.
func (s *Store) Stats(ctx context.Context) (inbox.Stats, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	st := inbox.NewStats()
	rows, err := s.pool.Query(ctx, `SELECT source, status, coalesce(reason, ''), count(*), sum(attempts)
		FROM events GROUP BY source, status, reason`)
	if err != nil {
		return inbox.Stats{}, fmt.Errorf("stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var source, status, reason string
		var n, attempts int64
		if err := rows.Scan(&source, &status, &reason, &n, &attempts); err != nil {
			return inbox.Stats{}, fmt.Errorf("stats: %w", err)
		}
		st.Count(source, inbox.Status(status), inbox.Reason(reason), n, attempts)
	}
	if err := rows.Err(); err != nil {
		return inbox.Stats{}, fmt.Errorf("stats: %w", err)
	}
	if st.Queue, err = s.Queue(ctx, s.localNow()); err != nil {
		return inbox.Stats{}, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}

// CountByStatus counts the rows of each status, every status included
// (zero when it has none). It fails only when the database cannot be read.
func (s *Store) CountByStatus(ctx context.Context) (map[inbox.Status]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	counts := make(map[inbox.Status]int64, len(inbox.Statuses()))
	for _, st := range inbox.Statuses() {
		counts[st] = 0
	}
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM events GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count rows: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count rows: %w", err)
		}
		counts[inbox.Status(st)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count rows: %w", err)
	}
	return counts, nil
}

// ParkedByReason counts the parked rows that f selects, one ReasonCount per
// reason, most rows first. f.Status and f.Limit are ignored. It fails only
// when the database cannot be read.
func (s *Store) ParkedByReason(ctx context.Context, f inbox.Filter) ([]inbox.ReasonCount, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	f.Status = inbox.StatusParked
	w, args := where(f)
	rows, err := s.pool.Query(ctx, `SELECT reason, count(*), min(received_at), max(received_at)
		FROM events`+w+` GROUP BY reason ORDER BY count(*) DESC, reason`, args...)
	if err != nil {
		return nil, fmt.Errorf("count parked rows: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.ReasonCount, error) {
		var rc inbox.ReasonCount
		var oldest, newest int64
		err := r.Scan(&rc.Reason, &rc.Count, &oldest, &newest)
		rc.Oldest, rc.Newest = fromMillis(oldest), fromMillis(newest)
		return rc, err
	})
	if err != nil {
		return nil, fmt.Errorf("count parked rows: %w", err)
	}
	return out, nil
}

func scanEvent(scan func(...any) error, withBody bool) (inbox.Event, error) {
	var e inbox.Event
	var received, lastSeen, updated, nextAttempt int64
	var leaseUntil, doneAt *int64
	dest := []any{&e.ID, &e.JobID, &e.Status, &e.Reason, &e.Event, &e.JobStatus, &e.ResultURL,
		&e.Size, &e.SHA256, &e.DeliveryTS, &received, &e.Deliveries, &lastSeen, &updated,
		&e.Attempts, &nextAttempt, &e.LeaseOwner, &leaseUntil, &e.LastError, &doneAt, &e.Source, &e.Response}
	if withBody {
		dest = append(dest, &e.Body)
	}
	if err := scan(dest...); err != nil {
		return inbox.Event{}, err
	}
	e.ReceivedAt, e.LastSeenAt, e.UpdatedAt = fromMillis(received), fromMillis(lastSeen), fromMillis(updated)
	if nextAttempt != 0 {
		e.NextAttemptAt = fromMillis(nextAttempt)
	}
	if leaseUntil != nil {
		e.LeaseUntil = fromMillis(*leaseUntil)
	}
	if doneAt != nil {
		e.DoneAt = fromMillis(*doneAt)
	}
	return e, nil
}

// Count counts the rows f selects, f.Limit aside: what List would return
// without a limit. It fails only when the database cannot be read.
func (s *Store) Count(ctx context.Context, f inbox.Filter) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	w, args := where(f)
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM events`+w, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count rows: %w", err)
	}
	return n, nil
}

// ParkedPerHour counts the rows f selects that are parked and were parked
// (their updated_at: on receipt, or when the dispatcher gave up on them)
// in each of the hours hour-long windows that end at end, oldest first;
// an hour with none counts 0. f.Status, f.Since, f.Before and f.Limit are
// ignored. A row parked again (reprocess) counts at its latest parking. It
// fails only when the database cannot be read.
func (s *Store) ParkedPerHour(ctx context.Context, f inbox.Filter, end time.Time, hours int) ([]inbox.HourCount, error) {
	out := inbox.Hours(end, hours)
	if out == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	f.Status, f.Since, f.Before, f.Limit = inbox.StatusParked, time.Time{}, time.Time{}, 0
	w, args := where(f)
	hour := time.Hour.Milliseconds()
	endMs, startMs := end.UnixMilli(), out[0].Start.UnixMilli()
	n := len(args)
	// ago is 0 for [end-1h, end), 1 for the hour before, and so on.
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT ($%d::bigint - updated_at - 1) / $%d::bigint AS ago, count(*)
		FROM events%s AND updated_at >= $%d AND updated_at < $%d GROUP BY ago`, n+1, n+2, w, n+3, n+1),
		append(args, endMs, hour, startMs)...)
	if err != nil {
		return nil, fmt.Errorf("count parked rows per hour: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ago, count int64
		if err := rows.Scan(&ago, &count); err != nil {
			return nil, fmt.Errorf("count parked rows per hour: %w", err)
		}
		inbox.CountAgo(out, ago, count)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count parked rows per hour: %w", err)
	}
	return out, nil
}
