package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"inbox/inbox"
	"inbox/sqlfilter"
)

// Get returns the row with the given id, body included, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (inbox.Event, error) {
	row := s.read.QueryRowContext(ctx, `SELECT `+bodyColumns+` FROM events WHERE id = ?`, id)
	e, err := scanEvent(row.Scan, true)
	if errors.Is(err, sql.ErrNoRows) {
		return inbox.Event{}, fmt.Errorf("get %s: %w", id, inbox.ErrNotFound)
	}
	if err != nil {
		return inbox.Event{}, fmt.Errorf("get %s: %w", id, err)
	}
	return e, nil
}

// settled is the condition of the partial indexes on rows that have left
// 'new' (schema.sql); a query repeats it word for word to use them.
const settled = "status <> 'new'"

// dialect is how SQLite writes a filter's SQL (sqlfilter).
var dialect = sqlfilter.Dialect{
	Param: func(int) string { return "?" },
	// instr with both arguments BLOBs compares bytes, so % _ \ and NUL
	// are bytes like any other.
	HasBytes: func(p string) string { return "instr(body, " + p + ") > 0" },
	Settled:  settled,
	RowKey:   "rowid",
	NoLimit:  -1,
	IDs:      func(p string) string { return "id IN (SELECT value FROM json_each(" + p + "))" },
	Bind:     func(ids []string) any { return jsonList(ids) },
}

// List returns rows without their bodies, newest first.
func (s *Store) List(ctx context.Context, f inbox.Filter) ([]inbox.Event, error) {
	return inbox.Collect(ctx, f, s.Each)
}

// Each calls fn with each row List returns, as it is read.
func (s *Store) Each(ctx context.Context, f inbox.Filter, fn func(inbox.Event) error) error {
	q, args := dialect.List(f, eventColumns)
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	return each(rows, func(scan func(...any) error) error {
		e, err := scanEvent(scan, false)
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		return fn(e)
	})
}
