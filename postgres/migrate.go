package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationFiles are the schema's versions, NNNN_name.sql, applied in order.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations, by version.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s is not named NNNN_name.sql", e.Name())
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: want version %d", m.name, i+1)
		}
	}
	return out, nil
}

// SchemaVersion is the schema version this build of inbox writes and reads.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// versionTable records which migrations have been applied.
const versionTable = `CREATE TABLE IF NOT EXISTS inbox_migrations (
	version    integer     NOT NULL PRIMARY KEY,
	name       text        NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now())`

// migrate applies the migrations the database lacks, all in one
// transaction under an advisory lock keyed by the schema, so replicas that
// start together take turns: the first applies them, the others then find
// nothing to do. It fails, changing nothing, when a migration fails or the
// database's schema is newer than this build knows.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// A schema already current needs nothing, and no CREATE: a role with
	// only SELECT, INSERT, UPDATE and DELETE on the tables opens it.
	have, err := schemaVersion(ctx, pool)
	switch {
	case err != nil:
		return fmt.Errorf("migrate: read the schema's version: %w", err)
	case have > len(ms):
		return fmt.Errorf("migrate: the database's schema is version %d, newer than this inbox knows (%d): run a newer inbox", have, len(ms))
	case have == len(ms):
		return nil
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var schema *string
		if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if schema == nil {
			return errors.New("migrate: no schema of the search_path exists")
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('inbox migrate ' || $1, 0))`, *schema); err != nil {
			return fmt.Errorf("migrate: take the migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, versionTable); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		var have int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM inbox_migrations`).Scan(&have); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if have > len(ms) {
			return fmt.Errorf("migrate: the database's schema is version %d, newer than this inbox knows (%d): run a newer inbox", have, len(ms))
		}
		for _, m := range ms[have:] {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migrate: apply %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO inbox_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return fmt.Errorf("migrate: record %s: %w", m.name, err)
			}
		}
		return nil
	})
	if err != nil {
		return &upgradeError{from: have, to: len(ms), err: err}
	}
	return nil
}

// upgradeError is migrate's failure to upgrade the schema from version
// from to to: a refusal there is of CREATE, which writing the tables
// does not need.
type upgradeError struct {
	from, to int
	err      error
}

func (e *upgradeError) Error() string { return e.err.Error() }
func (e *upgradeError) Unwrap() error { return e.err }

// checkVersion fails unless the database's schema is the one this build
// reads; a read-only store cannot upgrade it.
func checkVersion(ctx context.Context, pool *pgxpool.Pool) error {
	want := SchemaVersion()
	have, err := schemaVersion(ctx, pool)
	if err != nil {
		return err
	}
	switch {
	case have < want:
		return fmt.Errorf("the database's inbox schema is version %d and this inbox needs %d, and a read-only open cannot upgrade it: run inbox migrate once (serve, dispatch and the commands that write upgrade it too)", have, want)
	case have > want:
		return fmt.Errorf("the database's schema is version %d, newer than this inbox knows (%d): run a newer inbox", have, want)
	}
	return nil
}

// schemaVersion reads the version of the schema the session writes to
// (the first of its search_path that exists), 0 when it has no migrations
// table. It needs no privilege but SELECT on that table.
func schemaVersion(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var table *string
	if err := pool.QueryRow(ctx, `SELECT to_regclass(quote_ident(current_schema()) || '.inbox_migrations')::text`).Scan(&table); err != nil {
		return 0, err
	}
	if table == nil {
		return 0, nil // no schema of the search_path exists either: migrate says so
	}
	var have int
	if err := pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+*table).Scan(&have); err != nil {
		return 0, err
	}
	return have, nil
}
