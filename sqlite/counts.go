package sqlite

import (
	"context"
	"fmt"

	"inbox/inbox"
)

// CountByStatus counts the rows of each status, every status included (zero
// when it has none). It reads the (status, received_at) index alone, never
// the rows, so it is cheap enough to run at every metrics scrape. It fails
// only when the database cannot be read.
func (s *Store) CountByStatus(ctx context.Context) (map[inbox.Status]int64, error) {
	counts := make(map[inbox.Status]int64, len(inbox.Statuses()))
	for _, st := range inbox.Statuses() {
		counts[st] = 0
	}
	rows, err := s.read.QueryContext(ctx, `SELECT status, count(*) FROM events GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count rows: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st inbox.Status
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count rows: %w", err)
		}
		counts[st] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count rows: %w", err)
	}
	return counts, nil
}

// Count counts the rows f selects, f.Limit aside: what List would return
// without a limit. It fails only when the database cannot be read.
func (s *Store) Count(ctx context.Context, f inbox.Filter) (int64, error) {
	where, args := where(f)
	var n int64
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM events`+where, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count rows: %w", err)
	}
	return n, nil
}
