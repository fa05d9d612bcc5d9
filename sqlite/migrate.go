package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"modernc.org/sqlite"
)

// ErrUpgrade is why a read-only open of a database an earlier inbox made
// fails: it cannot add what this inbox reads. A writing open (serve,
// dispatch, inbox migrate, any admin command that writes) upgrades it.
var ErrUpgrade = errors.New("made by an earlier inbox, and a read-only open cannot upgrade it")

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
	// Without their checks, which name the status dismissed: the table is
	// rebuilt with them once the schema is applied (rebuilt).
	{"dismissed_at", "INTEGER"},
	{"dismissed_by", "TEXT"},
	{"dismiss_note", "TEXT"},
}

// rebuilt are the tables whose CHECKs the status dismissed changed: a
// table made before it (whose definition names no 'dismissed') is made
// again from schema's definition, as SQLite's ALTER TABLE cannot change a
// CHECK.
var rebuilt = []string{"events", "deliveries", "delivery_history"}

// migrate adds the missing columns to an existing events table, makes
// again the tables whose checks changed (rebuild), and applies schema
// (when set), in one IMMEDIATE transaction: another process opening
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
	if err := rebuild(ctx, tx, schema); err != nil {
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
	// An open without the schema adds the columns alone: the next open
	// with it makes the table and moves the rows' state.
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

// current returns ErrUpgrade, naming what is missing, when the database
// lacks a column of addedColumns or, with schema set, a table or column a
// database made from schema has; nil for one with no events table yet.
func current(ctx context.Context, db *sql.DB, schema string) error {
	missing, err := missingColumns(ctx, db)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w (events lacks %s)", ErrUpgrade, strings.Fields(missing[0])[0])
	}
	if schema == "" {
		return nil
	}
	have, err := shape(ctx, db)
	if err != nil || len(have) == 0 {
		return err
	}
	want, err := schemaShape(ctx, schema)
	if err != nil {
		return err
	}
	for _, tc := range want {
		switch {
		case !have[[2]string{tc[0], ""}]:
			return fmt.Errorf("%w (no table %s)", ErrUpgrade, tc[0])
		case !have[tc]:
			return fmt.Errorf("%w (%s lacks %s)", ErrUpgrade, tc[0], tc[1])
		}
	}
	return nil
}

// shape returns the tables of db, each as {table, ""}, and their columns,
// each as {table, column}.
func shape(ctx context.Context, q queryer) (map[[2]string]bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT m.name, p.name FROM sqlite_schema m, pragma_table_info(m.name) p
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`)
	if err != nil {
		return nil, fmt.Errorf("read the tables: %w", err)
	}
	defer rows.Close()
	have := map[[2]string]bool{}
	for rows.Next() {
		var table, column string
		if err := rows.Scan(&table, &column); err != nil {
			return nil, fmt.Errorf("read the tables: %w", err)
		}
		have[[2]string{table, ""}], have[[2]string{table, column}] = true, true
	}
	return have, rows.Err()
}

// schemaShape returns the tables and columns, as {table, column}, of a
// database made from schema, in memory.
func schemaShape(ctx context.Context, schema string) ([][2]string, error) {
	c, err := sqlite.NewConnector(":memory:")
	if err != nil {
		return nil, fmt.Errorf("read the schema: %w", err)
	}
	db := sql.OpenDB(c)
	defer db.Close()
	db.SetMaxOpenConns(1) // each connection has a memory database of its own
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return nil, fmt.Errorf("read the schema: %w", err)
	}
	have, err := shape(ctx, db)
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for tc := range have {
		if tc[1] != "" {
			out = append(out, tc)
		}
	}
	slices.SortFunc(out, func(a, b [2]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
	return out, nil
}

// queryer runs reads: a transaction or a pool (missingColumns, queryOn).
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

// rebuild makes again each table of rebuilt that exists with a definition
// older than schema's, following SQLite's procedure for the changes ALTER
// TABLE cannot make (https://sqlite.org/lang_altertable.html#otheralter):
// in the migration's transaction, create the table anew under another
// name from schema's definition, copy every row (rowid included) of the
// columns both have, drop the old one and give the new one its name. The
// indexes and triggers go with the dropped table, and every trigger is
// dropped first (a trigger on events deletes from deliveries, which the
// rename would find missing): schema, applied next, makes them again. It
// does nothing when schema holds no definition of the table (an open
// without the schema), so the next open with it rebuilds; and nothing on
// a table whose definition names 'dismissed' already, so it runs once.
func rebuild(ctx context.Context, tx *sql.Tx, schema string) error {
	var todo []string
	for _, table := range rebuilt {
		def := tableDef(schema, table)
		if def == "" {
			continue
		}
		var old string
		err := tx.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?`, table).Scan(&old)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read the definition of %s: %w", table, err)
		}
		if !strings.Contains(old, "'dismissed'") {
			todo = append(todo, table)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	triggers, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'trigger'`)
	if err != nil {
		return fmt.Errorf("read the triggers: %w", err)
	}
	var names []string
	for triggers.Next() {
		var name string
		if err := triggers.Scan(&name); err != nil {
			triggers.Close()
			return fmt.Errorf("read the triggers: %w", err)
		}
		names = append(names, name)
	}
	if err := errors.Join(triggers.Err(), triggers.Close()); err != nil {
		return fmt.Errorf("read the triggers: %w", err)
	}
	for _, name := range names {
		if _, err := tx.ExecContext(ctx, `DROP TRIGGER `+quote(name)); err != nil {
			return fmt.Errorf("drop trigger %s: %w", name, err)
		}
	}
	for _, table := range todo {
		if err := rebuildTable(ctx, tx, table, tableDef(schema, table)); err != nil {
			return fmt.Errorf("rebuild %s with the status dismissed: %w", table, err)
		}
	}
	return nil
}

// rebuildTable makes table again from def, its CREATE TABLE statement,
// keeping its rows.
func rebuildTable(ctx context.Context, tx *sql.Tx, table, def string) error {
	tmp := table + "_rebuilt"
	create := "CREATE TABLE " + tmp + " (" + strings.SplitN(def, "(", 2)[1]
	if _, err := tx.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	have, err := shape(ctx, tx)
	if err != nil {
		return err
	}
	var cols []string
	for tc := range have {
		if tc[0] == table && tc[1] != "" && have[[2]string{tmp, tc[1]}] {
			cols = append(cols, quote(tc[1]))
		}
	}
	slices.Sort(cols)
	list := strings.Join(cols, ", ")
	stmts := []string{
		`INSERT INTO ` + tmp + ` (rowid, ` + list + `) SELECT rowid, ` + list + ` FROM ` + table,
		`DROP TABLE ` + table,
		`ALTER TABLE ` + tmp + ` RENAME TO ` + table,
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", strings.Fields(stmt)[0], err)
		}
	}
	return nil
}

// tableDef returns schema's CREATE TABLE statement of table, from its
// first word to the STRICT that ends it; "" when schema has none.
func tableDef(schema, table string) string {
	head := "CREATE TABLE IF NOT EXISTS " + table + " ("
	i := strings.Index(schema, head)
	if i < 0 {
		return ""
	}
	j := strings.Index(schema[i:], ") STRICT;")
	if j < 0 {
		return ""
	}
	return schema[i : i+j+len(") STRICT")]
}

// quote quotes an identifier.
func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
