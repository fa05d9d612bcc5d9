package sqlite

import (
	"context"
	"database/sql"

	"inbox/inbox"
	"inbox/sqlfilter"
	"inbox/sqlrow"
)

// counts are the store's inbox.CountStore: the counts written once in
// sqlfilter, each a statement on the read connections, which
// inbox.Counts, embedded in Store, turns into what the operator reads.
func (s *Store) counts() sqlfilter.Counts {
	return sqlfilter.Counts{Dialect: dialect, Query: s.query,
		Queue: func(ctx context.Context) (inbox.Queue, error) { return s.Queue(ctx, s.now()) }}
}

// query runs a read on the read connections (sqlrow.Query).
func (s *Store) query(ctx context.Context, q string, args []any, fn func(scan func(...any) error) error) error {
	return queryOn(s.read)(ctx, q, args, fn)
}

// queryOn is sqlrow.Query on q.
func queryOn(q queryer) sqlrow.Query {
	return func(ctx context.Context, query string, args []any, fn func(scan func(...any) error) error) error {
		rows, err := q.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		return each(rows, fn)
	}
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
	return sqlrow.Gather(func(fn func(scan func(...any) error) error) error { return each(rows, fn) }, scan)
}
