package sqlite

import (
	"context"
	"fmt"
	"time"

	"inbox/inbox"
)

// ParkedByReason counts the parked rows that f selects, one ReasonCount per
// reason, most rows first. f.Status and f.Limit are ignored. It fails only
// when the database cannot be read.
func (s *Store) ParkedByReason(ctx context.Context, f inbox.Filter) ([]inbox.ReasonCount, error) {
	f.Status = inbox.StatusParked
	where, args := where(f)
	rows, err := s.read.QueryContext(ctx, `SELECT reason, count(*), min(received_at), max(received_at)
		FROM events`+where+` GROUP BY reason ORDER BY count(*) DESC, reason`, args...)
	if err != nil {
		return nil, fmt.Errorf("count parked rows: %w", err)
	}
	defer rows.Close()
	var out []inbox.ReasonCount
	for rows.Next() {
		var rc inbox.ReasonCount
		var oldest, newest int64
		if err := rows.Scan(&rc.Reason, &rc.Count, &oldest, &newest); err != nil {
			return nil, fmt.Errorf("count parked rows: %w", err)
		}
		rc.Oldest, rc.Newest = fromMillis(oldest), fromMillis(newest)
		out = append(out, rc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count parked rows: %w", err)
	}
	return out, nil
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
	f.Status, f.Since, f.Before, f.Limit = inbox.StatusParked, time.Time{}, time.Time{}, 0
	where, args := where(f)
	endMs, startMs := millis(end), millis(out[0].Start)
	// ago is 0 for [end-1h, end), 1 for the hour before, and so on.
	rows, err := s.read.QueryContext(ctx, `SELECT (? - updated_at - 1) / ? AS ago, count(*)
		FROM events`+where+` AND updated_at >= ? AND updated_at < ? GROUP BY ago`,
		append(append([]any{endMs, time.Hour.Milliseconds()}, args...), startMs, endMs)...)
	if err != nil {
		return nil, fmt.Errorf("count parked rows per hour: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ago, n int64
		if err := rows.Scan(&ago, &n); err != nil {
			return nil, fmt.Errorf("count parked rows per hour: %w", err)
		}
		inbox.CountAgo(out, ago, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count parked rows per hour: %w", err)
	}
	return out, nil
}
