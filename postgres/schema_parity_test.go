package postgres_test

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"inbox/postgres"
	"inbox/sqlite/sqlitetest"
)

// TestSchemaMatchesSQLite checks that the PostgreSQL migrations make the
// tables and columns schema.sql makes on SQLite: each column of each
// table by name, its type (TEXT as text, INTEGER as an integer of any
// width, BLOB as bytea) and whether it takes NULL. A column added to one store's schema
// and not the other's, or added with another type or nullability, fails
// here even when no field of a row carries it.
func TestSchemaMatchesSQLite(t *testing.T) {
	t.Parallel()
	dsn := testURL(t)
	mustOpen(t, dsn, postgres.Options{})
	pg := pgColumns(t, dsn)
	lite := sqliteColumns(t, sqlitetest.Schema(t))
	// Tables each store has its own way: PostgreSQL's record of its
	// migrations, and the probe /readyz writes (a row per replica on
	// PostgreSQL, one row and its pad on SQLite).
	for _, own := range []string{"inbox_migrations", "probe", "probe_pad"} {
		delete(pg, own)
		delete(lite, own)
	}
	var tables []string
	for table := range lite {
		tables = append(tables, table)
	}
	for table := range pg {
		if _, ok := lite[table]; !ok {
			tables = append(tables, table)
		}
	}
	slices.Sort(tables)
	for _, table := range tables {
		if got, want := pg[table], lite[table]; !slices.Equal(got, want) {
			t.Errorf("table %s: PostgreSQL's migrations make\n\t%s\nschema.sql makes\n\t%s",
				table, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
	}
}

// pgColumns returns the columns of each table of dsn's schema
// (byTable), each integer type of any width as "int".
func pgColumns(t *testing.T, dsn string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	conn := connect(t, dsn)
	rows, err := conn.Query(ctx, `SELECT table_name, column_name,
			CASE WHEN data_type IN ('smallint', 'integer', 'bigint') THEN 'int' ELSE data_type END,
			is_nullable = 'NO'
		FROM information_schema.columns WHERE table_schema = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	return byTable(t, rows)
}

// sqliteColumns returns the columns of each table schema makes on a
// fresh SQLite database (byTable), each SQLite type as PostgreSQL's that
// the migrations use for it.
func sqliteColumns(t *testing.T, schema string) map[string][]string {
	t.Helper()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT m.name, c.name,
			CASE c.type WHEN 'TEXT' THEN 'text' WHEN 'INTEGER' THEN 'int' WHEN 'BLOB' THEN 'bytea' ELSE 'unmapped ' || c.type END,
			c."notnull" OR c.pk > 0
		FROM sqlite_schema m, pragma_table_info(m.name) c WHERE m.type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	return byTable(t, rows)
}

// byTable reads rows of (table, column, type, not null) into each
// table's columns as "name type [NOT NULL]", sorted.
func byTable(t *testing.T, rows interface {
	Next() bool
	Scan(...any) error
	Err() error
}) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for rows.Next() {
		var table, name, typ string
		var notNull bool
		if err := rows.Scan(&table, &name, &typ, &notNull); err != nil {
			t.Fatal(err)
		}
		col := name + " " + typ
		if notNull {
			col += " NOT NULL"
		}
		out[table] = append(out[table], col)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, cols := range out {
		slices.Sort(cols)
	}
	return out
}

// connect opens a connection of the test's own to dsn, closed when the
// test ends.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
