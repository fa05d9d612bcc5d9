package postgres

import (
	"context"
	"fmt"
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
	w, args := where(f)
	n := len(args)
	counts := map[int64]int64{}
	var ago, count int64
	return counts, c.s.read(ctx, func(ctx context.Context, q querier) error {
		rows, err := q.Query(ctx, fmt.Sprintf(`SELECT ($%d::bigint - updated_at - 1) / $%d::bigint AS ago, count(*)
			FROM events%s AND updated_at >= $%d AND updated_at < $%d GROUP BY ago`, n+1, n+2, w, n+3, n+1),
			append(args, end.UnixMilli(), time.Hour.Milliseconds(), start.UnixMilli())...)
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
	w, args := where(f)
	return collect(ctx, c.s, `SELECT reason, count(*), min(received_at), max(received_at)
		FROM events`+w+` GROUP BY reason ORDER BY count(*) DESC, reason`, args,
		func(r pgx.CollectableRow) (rc inbox.ReasonCount, err error) {
			var oldest, newest int64
			err = r.Scan(&rc.Reason, &rc.Count, &oldest, &newest)
			rc.Oldest, rc.Newest = fromMillis(oldest), fromMillis(newest)
			return rc, err
		})
}

func (c counting) CountRows(ctx context.Context, f inbox.Filter) (int64, error) {
	w, args := where(f)
	var n int64
	return n, c.s.read(ctx, func(ctx context.Context, q querier) error {
		return q.QueryRow(ctx, `SELECT count(*) FROM events`+w, args...).Scan(&n)
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
