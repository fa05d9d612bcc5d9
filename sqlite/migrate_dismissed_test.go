package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// rebuiltTables are the tables whose checks the status dismissed changed.
var rebuiltTables = []string{"events", "deliveries", "delivery_history"}

// v3DB makes a database the way the inbox before the status dismissed
// did (testdata/schema-v3.sql), with rows in each of rebuiltTables, and
// returns its path.
func v3DB(t *testing.T) string {
	t.Helper()
	return dbOf(t, "schema-v3.sql",
		`INSERT INTO events (id, job_id, status, reason, event, job_status, body, size, sha256, delivery_ts, received_at,
			deliveries, last_seen_at, updated_at, attempts, next_attempt_at, last_error, done_at, source, response) VALUES
		('job_1', 'job_1', 'new', NULL, 'job.completed', 'COMPLETED', X'7B7D', 2, 'a', 1, 1000, 1, 1000, 1000, 0, 5, NULL, NULL, 'sume', NULL),
		('job_2', 'job_2', 'parked', 'unknown_event', 'job.odd', NULL, X'7B00FF7D', 4, 'b', 2, 2000, 3, 2500, 2000, 0, 0, NULL, NULL, 'sume', NULL),
		('vibe/r_3', 'vibe/r_3', 'parked', 'handler_failed', 'run.done', NULL, X'7B7D', 2, 'c', 3, 3000, 1, 3000, 3600, 3, 0, 'HTTP 500', NULL, 'vibe', X'6F6B'),
		('job_4', 'job_4', 'done', NULL, 'job.completed', 'COMPLETED', X'7B7D', 2, 'd', 4, 4000, 2, 4100, 4200, 1, 0, NULL, 4200, 'sume', NULL)`,
		// A row deleted before the upgrade: rowids are kept as they were.
		`DELETE FROM events WHERE id = 'job_1'`,
		`INSERT INTO events (id, status, body, size, sha256, delivery_ts, received_at, last_seen_at, updated_at)
			VALUES ('job_5', 'new', X'7B7D', 2, 'e', 5, 5000, 5000, 5000)`,
		`INSERT INTO deliveries (event_id, destination, status, reason, attempts, next_attempt_at, last_error, received_at, updated_at, done_at) VALUES
		('vibe/r_3', 'app', 'parked', 'handler_failed', 3, 0, 'HTTP 500', 3000, 3600, NULL),
		('vibe/r_3', 'crm', 'done', NULL, 1, 0, NULL, 3000, 3100, 3100),
		('job_4', 'app', 'done', NULL, 1, 0, NULL, 4000, 4200, 4200)`,
		`INSERT INTO delivery_history (event_id, destination, series, status, reason, attempts, last_error, updated_at, done_at, replayed_at)
			VALUES ('vibe/r_3', 'app', 1, 'parked', 'handler_rejected', 1, 'HTTP 422', 3300, NULL, 3400)`)
}

// dump returns every row of tables, rowid first, by the columns the table
// had in the database at from, so a column added since is left out.
func dump(t *testing.T, path, from string, tables ...string) string {
	t.Helper()
	old, err := sql.Open("sqlite", from+"?_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b strings.Builder
	for _, table := range tables {
		var cols []string
		rows, err := old.Query(`SELECT name FROM pragma_table_info(?) ORDER BY cid`, table)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				t.Fatal(err)
			}
			cols = append(cols, c)
		}
		rows.Close()
		rows, err = db.Query(`SELECT rowid, ` + strings.Join(cols, ", ") + ` FROM ` + table + ` ORDER BY rowid`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals := make([]any, len(cols)+1)
			ptrs := make([]any, len(vals))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			b.WriteString(table)
			for _, v := range vals {
				// A blob in hex, as SQL writes one: quoting megabytes of
				// bytes as text took seconds.
				if blob, ok := v.([]byte); ok {
					fmt.Fprintf(&b, " x'%x'", blob)
				} else {
					fmt.Fprintf(&b, " %q", fmt.Sprint(v))
				}
			}
			b.WriteByte('\n')
		}
		rows.Close()
	}
	return b.String()
}

// objects returns the tables, indexes and triggers of the database at
// path, as "type name on table", sorted, and the definitions of tables.
func objects(t *testing.T, path string, tables ...string) (names []string, defs map[string]string) {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	defs = map[string]string{}
	for rows.Next() {
		var typ, name, table, def string
		if err := rows.Scan(&typ, &name, &table, &def); err != nil {
			t.Fatal(err)
		}
		names = append(names, typ+" "+name+" on "+table)
		if typ == "table" && slices.Contains(tables, name) {
			defs[name] = def
		}
	}
	slices.Sort(names)
	return names, defs
}

// TestMigrateDismissed opens a database made before the status dismissed,
// with rows in each table whose checks it changed: a read-only open is
// refused; a writing open rebuilds the tables with schema.sql's checks,
// keeping every row (rowid and every column) and the indexes and
// triggers a new database has; a second open changes nothing; and then a
// parked row and its parked pair can be dismissed.
func TestMigrateDismissed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := v3DB(t)
	old := filepath.Join(t.TempDir(), "old.db")
	if b, err := os.ReadFile(path); err != nil || os.WriteFile(old, b, 0o600) != nil {
		t.Fatalf("copy: %v", err)
	}
	before := dump(t, path, old, rebuiltTables...)
	if strings.Count(before, "\n") != 8 {
		t.Fatalf("fixture rows:\n%s", before)
	}

	if _, err := sqlite.Open(ctx, path, sqlite.Options{ReadOnly: true, Schema: sqlitetest.Schema(t)}); !errors.Is(err, sqlite.ErrUpgrade) {
		t.Fatalf("read-only open before the upgrade: %v, want ErrUpgrade", err)
	}
	if err := sqlitetest.MustOpenPath(t, path, sqlite.Options{MustExist: true}).Close(); err != nil {
		t.Fatal(err)
	}
	if after := dump(t, path, old, rebuiltTables...); after != before {
		t.Errorf("rows after the upgrade:\n%s\nwant those before:\n%s", after, before)
	}
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	if err := sqlitetest.MustOpenPath(t, fresh, sqlite.Options{}).Close(); err != nil {
		t.Fatal(err)
	}
	got, defs := objects(t, path, rebuiltTables...)
	want, _ := objects(t, fresh)
	if !slices.Equal(got, want) {
		t.Errorf("tables, indexes and triggers after the upgrade:\n%s\nwant a new database's:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, table := range rebuiltTables {
		if !strings.Contains(defs[table], "status = 'dismissed'") {
			t.Errorf("%s after the upgrade: %s, want the checks that take dismissed", table, defs[table])
		}
	}
	sameColumnsAsSchema(t, path)

	// Opened again: nothing to do.
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{MustExist: true})
	if again, defs2 := objects(t, path, rebuiltTables...); !slices.Equal(again, got) || fmt.Sprint(defs2) != fmt.Sprint(defs) {
		t.Errorf("a second open changed the schema")
	}
	if after := dump(t, path, old, rebuiltTables...); after != before {
		t.Errorf("rows after a second open:\n%s\nwant\n%s", after, before)
	}

	rep, err := s.Dismiss(ctx, inbox.DismissSelection{IDs: []string{"vibe/r_3", "job_2"}},
		inbox.DismissOptions{Dismissal: inbox.Dismissal{By: "ops", Note: "old rows"}})
	if err != nil || rep.Rows != 2 || rep.Pairs != 1 {
		t.Fatalf("dismiss after the upgrade: %+v, %v; want 2 rows, 1 pair", rep, err)
	}
	if e, err := s.Get(ctx, "vibe/r_3"); err != nil || e.Status != inbox.StatusDismissed || e.Reason != inbox.ReasonHandlerFailed ||
		string(e.Response) != "ok" || e.LastError != "HTTP 500" {
		t.Errorf("vibe/r_3 = %+v, %v; want dismissed handler_failed, its answer and error kept", e, err)
	}
	// The trigger that takes a row's pairs and history with it is back.
	if err := sqlite.WriteOpForTest(s, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM events WHERE id = 'vibe/r_3'`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left := dump(t, path, old, "deliveries", "delivery_history"); strings.Contains(left, "vibe/r_3") {
		t.Errorf("the pairs and history of a deleted row stayed:\n%s", left)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var check string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check = %q, %v", check, err)
	}
}
