package e2e

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// oldRows are rows as a version before destinations left them: job_new
// failed once and waits for its retry, job_done was handed on, job_failed
// was parked by the dispatcher, job_odd was parked on receipt.
const oldRows = `INSERT INTO events (id, job_id, status, reason, event, body, size, sha256, delivery_ts,
		received_at, last_seen_at, updated_at, attempts, next_attempt_at, last_error, done_at) VALUES
	('job_new', 'job_new', 'new', NULL, 'job.completed', X'7B7D', 2, 'a', 1, 1000, 1000, 1000, 1, 2000, 'HTTP 503', NULL),
	('job_done', 'job_done', 'done', NULL, 'job.completed', X'7B7D', 2, 'b', 1, 1000, 1000, 1000, 1, 0, NULL, 1500),
	('job_failed', 'job_failed', 'parked', 'handler_failed', 'job.completed', X'7B7D', 2, 'c', 1, 1000, 1000, 1000, 5, 0, 'HTTP 500', NULL),
	('job_odd', 'job_odd', 'parked', 'unknown_event', 'job.odd', X'7B7D', 2, 'd', 1, 1000, 1000, 1000, 0, 0, NULL, NULL)`

// checkMigrated runs inbox dispatch with the single-destination flags on
// the older database db: each row keeps its queue state as destination
// default's (job_new goes on at attempt 2, the others are not sent), and
// inbox show says so per destination.
func checkMigrated(t *testing.T, db string) {
	t.Helper()
	app := newDestApp(t, 204)
	d := startDispatch(t, "--db", db, "--forward-url", app.URL)
	waitLong(t, 20*time.Second, "job_new handed on", func() bool {
		// Until dispatch has migrated the database, stats refuses it.
		if _, _, code := runCLI(t, nil, "stats", "--db", db); code != 0 {
			return false
		}
		return destinationStats(t, db)["default"].ByStatus["done"] == 2
	})
	d.kill(syscall.SIGTERM)
	if got := app.rows(); !slices.Equal(got, []string{"job_new"}) {
		t.Errorf("sent %v, want job_new alone", got)
	}
	if a := app.attempts("job_new"); !slices.Equal(a, []string{"2"}) {
		t.Errorf("job_new sent at attempts %v, want 2: its one failed attempt kept", a)
	}
	want := map[string]string{"job_new": "default done 2", "job_done": "default done 1", "job_failed": "default parked 5", "job_odd": ""}
	for id, w := range want {
		out, errOut, code := runCLI(t, nil, "show", "--json", "--db", db, id)
		if code != 0 {
			t.Fatalf("show %s: %d %s", id, code, errOut)
		}
		var row struct {
			Destinations []struct {
				Destination, Status string
				Attempts            int
			} `json:"destinations"`
		}
		if err := json.Unmarshal([]byte(out), &row); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range row.Destinations {
			got = append(got, p.Destination+" "+p.Status+" "+strconv.Itoa(p.Attempts))
		}
		if strings.Join(got, ";") != w {
			t.Errorf("%s: destinations %v, want %q", id, got, w)
		}
	}
}

// TestMigrateToDestinations opens a SQLite database of the version before
// destinations (sqlite/testdata/schema-v2.sql) with inbox dispatch.
func TestMigrateToDestinations(t *testing.T) {
	t.Parallel()
	checkMigrated(t, oldSQLite(t))
}

// oldSQLite makes a SQLite database of the version before destinations
// (sqlite/testdata/schema-v2.sql) holding oldRows, and returns its path.
func oldSQLite(t *testing.T) string {
	t.Helper()
	schema, err := os.ReadFile(filepath.Join("..", "sqlite", "testdata", "schema-v2.sql"))
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "inbox.db")
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Exec(string(schema)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(oldRows); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestMigrateToDestinationsPostgres opens a PostgreSQL schema at version
// 3, the one before destinations, with inbox dispatch.
func TestMigrateToDestinationsPostgres(t *testing.T) {
	t.Parallel()
	checkMigrated(t, oldPostgres(t))
}

// oldPostgres makes a PostgreSQL schema at version 3, the one before
// destinations, holding oldRows, and returns its URL.
func oldPostgres(t *testing.T) string {
	t.Helper()
	dsn := pgSchema(t)
	pgExec(t, dsn, `CREATE TABLE inbox_migrations (version integer NOT NULL PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`)
	for v, name := range []string{"0001_events.sql", "0002_probe.sql", "0003_reconcile.sql"} {
		b, err := os.ReadFile(filepath.Join("..", "postgres", "migrations", name))
		if err != nil {
			t.Fatal(err)
		}
		pgExec(t, dsn, string(b))
		pgExec(t, dsn, `INSERT INTO inbox_migrations (version, name) VALUES ($1, $2)`, v+1, name)
	}
	pgExec(t, dsn, strings.ReplaceAll(oldRows, `X'7B7D'`, `'\x7b7d'::bytea`))
	return dsn
}
