package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
	"inbox/sqlfilter"
	"inbox/sqlrow"
)

// counts are the store's inbox.CountStore: the counts written once in
// sqlfilter, each a statement in a read (Store.read), which inbox.Counts,
// embedded in Store, turns into what the operator reads; the queue at
// the store's clock (the database's, or the injected one).
func (s *Store) counts() sqlfilter.Counts {
	queue := func(ctx context.Context) (inbox.Queue, error) { return s.Queue(ctx, s.localNow()) }
	return sqlfilter.Counts{Dialect: dialect, Query: s.query, Queue: queue}
}

// query runs a read (Store.read; sqlrow.Query).
func (s *Store) query(ctx context.Context, sql string, args []any, fn func(scan func(...any) error) error) error {
	return s.read(ctx, func(ctx context.Context, q querier) error { return queryOn(q)(ctx, sql, args, fn) })
}

// queryOn is sqlrow.Query on q.
func queryOn(q querier) sqlrow.Query {
	return func(ctx context.Context, sql string, args []any, fn func(scan func(...any) error) error) error {
		rows, err := q.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := fn(rows.Scan); err != nil {
				return err
			}
		}
		return rows.Err()
	}
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
