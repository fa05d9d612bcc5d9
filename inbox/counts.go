package inbox

import (
	"context"
	"fmt"
)

// CountByStatus counts the rows of each status, every status included (zero
// when it has none). It reads the (status, received_at) index alone, never
// the rows, so it is cheap enough to run at every metrics scrape. It fails
// only when the database cannot be read.
func (s *Store) CountByStatus(ctx context.Context) (map[Status]int64, error) {
	counts := make(map[Status]int64, len(Statuses()))
	for _, st := range Statuses() {
		counts[st] = 0
	}
	rows, err := s.read.QueryContext(ctx, `SELECT status, count(*) FROM events GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count rows: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st Status
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
