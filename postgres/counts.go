package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
)

// counting is the store's inbox.CountStore, each count a statement in a
// read (Store.read), which inbox.Counts, embedded in Store, turns into
// what the operator reads.
type counting struct{ s *Store }

func (c counting) CountGroups(ctx context.Context) ([]inbox.Group, error) {
	return collect(ctx, c.s, `SELECT source, status, coalesce(reason, ''), count(*), sum(attempts)
		FROM events GROUP BY source, status, reason`, nil, pgx.RowToStructByPos[inbox.Group])
}

// QueueNow reads the queue at the store's clock (the database's, or the
// injected one).
func (c counting) QueueNow(ctx context.Context) (inbox.Queue, error) {
	return c.s.Queue(ctx, c.s.localNow())
}

func (c counting) CountStatuses(ctx context.Context) (map[inbox.Status]int64, error) {
	counts := map[inbox.Status]int64{}
	var st inbox.Status
	var n int64
	return counts, c.s.read(ctx, func(ctx context.Context, q querier) error {
		rows, err := q.Query(ctx, `SELECT status, count(*) FROM events GROUP BY status`)
		if err != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, []any{&st, &n}, func() error {
			counts[st] = n
			return nil
		})
		return err
	})
}

func (c counting) CountParkedAgo(ctx context.Context, f inbox.Filter, start, end time.Time) (map[int64]int64, error) {
	sql, args := dialect.ParkedAgo(f, start, end)
	counts := map[int64]int64{}
	var ago, count int64
	return counts, c.s.read(ctx, func(ctx context.Context, q querier) error {
		rows, err := q.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, []any{&ago, &count}, func() error {
			counts[ago] = count
			return nil
		})
		return err
	})
}

func (c counting) CountReasons(ctx context.Context, f inbox.Filter) ([]inbox.ReasonCount, error) {
	sql, args := dialect.Reasons(f)
	return collect(ctx, c.s, sql, args,
		func(r pgx.CollectableRow) (rc inbox.ReasonCount, err error) {
			var oldest, newest int64
			err = r.Scan(&rc.Reason, &rc.Count, &oldest, &newest)
			rc.Oldest, rc.Newest = fromMillis(oldest), fromMillis(newest)
			return rc, err
		})
}

func (c counting) CountRows(ctx context.Context, f inbox.Filter) (int64, error) {
	sql, args := dialect.Count(f)
	var n int64
	return n, c.s.read(ctx, func(ctx context.Context, q querier) error {
		return q.QueryRow(ctx, sql, args...).Scan(&n)
	})
}

// collect runs sql with args in a read (Store.read) and returns what scan
// makes of each row.
func collect[T any](ctx context.Context, s *Store, sql string, args []any, scan pgx.RowToFunc[T]) ([]T, error) {
	var out []T
	err := s.read(ctx, func(ctx context.Context, q querier) error {
		rows, err := q.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, scan)
		return err
	})
	return out, err
}
