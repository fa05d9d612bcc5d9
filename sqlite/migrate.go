package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// addedColumns are the columns of events that the first version did not
// have, with the definitions schema.sql gives them. Open adds the missing
// ones to a database made by an earlier version; TestMigrate checks that
// the result matches a database made from schema.sql.
var addedColumns = []struct{ name, def string }{
	{"attempts", "INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0)"},
	{"next_attempt_at", "INTEGER NOT NULL DEFAULT 0"},
	{"lease_owner", "TEXT"},
	{"lease_until", "INTEGER CHECK ((lease_owner IS NULL) = (lease_until IS NULL))"},
	{"last_error", "TEXT"},
	{"done_at", "INTEGER"},
	{"source", "TEXT NOT NULL DEFAULT 'sume' CHECK (source <> '')"},
	{"response", "BLOB"},
}

// migrate adds the missing columns to an existing events table and applies
// schema (when set), in one IMMEDIATE transaction: another process opening
// the same file at the same time waits for it, then finds nothing to do.
// It fails, changing nothing, when the database cannot be written.
func migrate(ctx context.Context, db *sql.DB, schema string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: begin: %w", err)
	}
	defer tx.Rollback()
	missing, err := missingColumns(ctx, tx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, c := range missing {
		if _, err := tx.ExecContext(ctx, `ALTER TABLE events ADD COLUMN `+c); err != nil {
			return fmt.Errorf("migrate: add column %s: %w", strings.Fields(c)[0], err)
		}
	}
	routed, err := hasTable(ctx, tx, "deliveries")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if schema != "" {
		if _, err := tx.ExecContext(ctx, schema); err != nil {
			return fmt.Errorf("apply schema: %w", err)
		}
	}
	if err := rekeyJobs(ctx, tx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	made, err := hasTable(ctx, tx, "deliveries")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// The admin commands open without the schema: the next open with it
	// makes the table and moves the rows' state.
	if !routed && made {
		if _, err := tx.ExecContext(ctx, toDefault); err != nil {
			return fmt.Errorf("migrate: keep the rows' queue state as destination default's: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}

// toDefault gives each row of a database made before destinations its
// queue state as the pair of destination default (the single-destination
// flags' destination): new and done rows, and rows the dispatcher parked.
// Rows parked on receipt and ignored ones were never for a destination.
// Every new row is marked routed (next_attempt_at above 0).
const toDefault = `INSERT INTO deliveries (event_id, destination, status, reason, attempts, next_attempt_at,
		lease_owner, lease_until, last_error, received_at, updated_at, done_at)
	SELECT id, 'default', status, reason, attempts, CASE WHEN status = 'new' THEN max(next_attempt_at, 1) ELSE 0 END,
		lease_owner, lease_until, last_error, received_at, updated_at, done_at
	FROM events WHERE status IN ('new', 'done') OR (status = 'parked' AND reason IN ('handler_failed', 'handler_rejected'));
	UPDATE events SET next_attempt_at = 1 WHERE status = 'new' AND next_attempt_at = 0;`

// hasTable reports whether the database has the table name.
func hasTable(ctx context.Context, tx *sql.Tx, name string) (bool, error) {
	var n int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, name).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look for table %s: %w", name, err)
	}
	return n > 0, nil
}

// rekeyJobs gives the rows of a source other than sume whose job_id is a
// bare job id the job's row id within the source ("<source>/<job_id>"), as
// Classify names every such row's job: a source of Sume's scheme under
// another name stored bare job ids before, so reprocess found its rows
// naming another job than they were recorded with, and a purge did not see
// the rows kept beside a job. Only rows beside a job can hold such a job_id
// (the job's own row then had id <> job_id too), and the events_beside_job
// index holds exactly those, so this reads nothing else.
func rekeyJobs(ctx context.Context, tx *sql.Tx) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'events'`).Scan(&n); err != nil || n == 0 {
		return err
	}
	_, err := tx.ExecContext(ctx, `UPDATE events SET job_id = source || '/' || job_id
		WHERE job_id <> id AND source <> 'sume' AND substr(job_id, 1, length(source) + 1) <> source || '/'`)
	if err != nil {
		return fmt.Errorf("key the jobs of sources other than sume within their source: %w", err)
	}
	return nil
}

// queryer is what missingColumns needs: a transaction or a pool.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// missingColumns returns the definitions of the addedColumns that an
// existing events table lacks; none when there is no events table yet.
func missingColumns(ctx context.Context, q queryer) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT name FROM pragma_table_info('events')`)
	if err != nil {
		return nil, fmt.Errorf("read the columns of events: %w", err)
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("read the columns of events: %w", err)
		}
		have[name] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the columns of events: %w", err)
	}
	if len(have) == 0 {
		return nil, nil
	}
	var missing []string
	for _, c := range addedColumns {
		if !have[c.name] {
			missing = append(missing, c.name+" "+c.def)
		}
	}
	return missing, nil
}
