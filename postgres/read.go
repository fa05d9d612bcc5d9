package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
	"inbox/sqlfilter"
)

// Get returns the row with the given id, body included, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (inbox.Event, error) {
	var e inbox.Event
	err := s.read(ctx, func(ctx context.Context, q querier) error {
		var err error
		e, err = scanEvent(q.QueryRow(ctx, `SELECT `+bodyColumns+` FROM events WHERE id = $1`, id).Scan, true)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return inbox.Event{}, fmt.Errorf("get %s: %w", id, inbox.ErrNotFound)
	}
	if err != nil {
		return inbox.Event{}, fmt.Errorf("get %s: %w", id, err)
	}
	return e, nil
}

// dialect is how PostgreSQL writes a filter's SQL (sqlfilter).
var dialect = sqlfilter.Dialect{
	Param: func(n int) string { return "$" + strconv.Itoa(n) },
	// position over bytea compares bytes, so % _ \ and NUL are bytes
	// like any other.
	HasBytes: func(p string) string { return "position(" + p + "::bytea IN body) > 0" },
	RowKey:   "id",
	NoLimit:  nil, // LIMIT NULL: none
	IDs:      func(p string) string { return "id = ANY(" + p + "::text[])" },
	Bind:     func(ids []string) any { return ids },
}

// List returns rows without their bodies, newest first.
func (s *Store) List(ctx context.Context, f inbox.Filter) ([]inbox.Event, error) {
	return inbox.Collect(ctx, f, s.Each)
}

// Each calls fn with each row List returns, as it arrives: pgx reads the
// rows off the connection as they are asked for.
func (s *Store) Each(ctx context.Context, f inbox.Filter, fn func(inbox.Event) error) error {
	sql, args := dialect.List(f, eventColumns)
	return s.read(ctx, func(ctx context.Context, q querier) error {
		rows, err := q.Query(ctx, sql, args...)
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanEvent(rows.Scan, false)
			if err != nil {
				return fmt.Errorf("list: %w", err)
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("list: %w", err)
		}
		return nil
	})
}

// querier is what a read runs its statements on: the pool, or the
// transaction read opens for a long one.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// read runs fn, a read, bounded by ctx's deadline when it has one (an
// operator's --timeout), else by the busy timeout. The session's
// statement_timeout and lock_timeout are a little under the busy timeout,
// for serve's own reads; a longer deadline runs fn in a read-only
// transaction whose statement_timeout and lock_timeout are the deadline
// and a second more, so the client's deadline ends the statement first
// and the caller can tell it from a failure, while the server still ends
// it should the client vanish.
func (s *Store) read(ctx context.Context, fn func(ctx context.Context, q querier) error) error {
	deadline, ok := ctx.Deadline()
	if !ok || time.Until(deadline) <= s.busy*9/10 {
		ctx, cancel := context.WithTimeout(ctx, s.busy)
		defer cancel()
		return fn(ctx, s.pool)
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	ms := (time.Until(deadline) + time.Second).Milliseconds()
	if _, err := tx.Exec(ctx, `SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $1, true)`,
		strconv.FormatInt(ms, 10)); err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
