package inbox

import (
	"context"
	"fmt"
	"time"
)

// ReasonCount is how many parked rows share a reason, and when the oldest
// and the newest of them were received.
type ReasonCount struct {
	Reason Reason    `json:"reason"`
	Count  int64     `json:"count"`
	Oldest time.Time `json:"oldest"`
	Newest time.Time `json:"newest"`
}

// ParkedByReason counts the parked rows that f selects, one ReasonCount per
// reason, most rows first. f.Status and f.Limit are ignored. It fails only
// when the database cannot be read.
func (s *Store) ParkedByReason(ctx context.Context, f Filter) ([]ReasonCount, error) {
	f.Status = StatusParked
	where, args := f.where()
	rows, err := s.read.QueryContext(ctx, `SELECT reason, count(*), min(received_at), max(received_at)
		FROM events`+where+` GROUP BY reason ORDER BY count(*) DESC, reason`, args...)
	if err != nil {
		return nil, fmt.Errorf("count parked rows: %w", err)
	}
	defer rows.Close()
	var out []ReasonCount
	for rows.Next() {
		var rc ReasonCount
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
