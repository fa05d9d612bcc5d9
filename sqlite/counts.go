package sqlite

import (
	"context"
	"database/sql"
	"time"

	"inbox/inbox"
)

// counting is the store's inbox.CountStore, each count a statement on the
// read connections, which inbox.Counts, embedded in Store, turns into what
// the operator reads.
type counting struct{ s *Store }

func (c counting) CountGroups(ctx context.Context) ([]inbox.Group, error) {
	rows, err := c.s.read.QueryContext(ctx, `SELECT source, status, COALESCE(reason, ''), count(*), sum(attempts)
		FROM events GROUP BY source, status, reason`)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(scan func(...any) error) (g inbox.Group, err error) {
		return g, scan(&g.Source, &g.Status, &g.Reason, &g.Rows, &g.Attempts)
	})
}

func (c counting) QueueNow(ctx context.Context) (inbox.Queue, error) {
	return c.s.Queue(ctx, c.s.now())
}

// CountStatuses reads the (status, received_at) index alone, never the
// rows, so it is cheap enough to run at every metrics scrape.
func (c counting) CountStatuses(ctx context.Context) (map[inbox.Status]int64, error) {
	rows, err := c.s.read.QueryContext(ctx, `SELECT status, count(*) FROM events GROUP BY status`)
	if err != nil {
		return nil, err
	}
	counts := map[inbox.Status]int64{}
	return counts, each(rows, func(scan func(...any) error) error {
		var st inbox.Status
		var n int64
		err := scan(&st, &n)
		counts[st] = n
		return err
	})
}

func (c counting) CountParkedAgo(ctx context.Context, f inbox.Filter, start, end time.Time) (map[int64]int64, error) {
	q, args := dialect.ParkedAgo(f, start, end)
	rows, err := c.s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	counts := map[int64]int64{}
	return counts, each(rows, func(scan func(...any) error) error {
		var ago, n int64
		err := scan(&ago, &n)
		counts[ago] = n
		return err
	})
}

func (c counting) CountReasons(ctx context.Context, f inbox.Filter) ([]inbox.ReasonCount, error) {
	q, args := dialect.Reasons(f)
	rows, err := c.s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(scan func(...any) error) (rc inbox.ReasonCount, err error) {
		var oldest, newest int64
		err = scan(&rc.Reason, &rc.Count, &oldest, &newest)
		rc.Oldest, rc.Newest = fromMillis(oldest), fromMillis(newest)
		return rc, err
	})
}

func (c counting) CountRows(ctx context.Context, f inbox.Filter) (int64, error) {
	q, args := dialect.Count(f)
	var n int64
	err := c.s.read.QueryRowContext(ctx, q, args...).Scan(&n)
	return n, err
}

// each calls fn with the Scan of each of rows, then closes them; it stops
// at fn's first error.
func each(rows *sql.Rows, fn func(scan func(...any) error) error) error {
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// collect returns what scan makes of each of rows, as pgx's CollectRows
// does, and closes them.
func collect[T any](rows *sql.Rows, scan func(scan func(...any) error) (T, error)) ([]T, error) {
	var out []T
	err := each(rows, func(sc func(...any) error) error {
		v, err := scan(sc)
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
