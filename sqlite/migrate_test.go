package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// oldDB makes a database the way the first version did, with one new and
// one parked row, and returns its path.
func oldDB(t *testing.T) string {
	t.Helper()
	return oldDBOf(t, "schema-v1.sql")
}

// oldDBOf makes a database from the fixture schema file, with one new and
// one parked row, and returns its path.
func oldDBOf(t *testing.T, fixture string) string {
	t.Helper()
	return dbOf(t, fixture, `INSERT INTO events (id, job_id, status, reason, event, body, size, sha256,
		delivery_ts, received_at, last_seen_at, updated_at) VALUES
		('job_1', 'job_1', 'new', NULL, 'job.completed', X'7B7D', 2, 'x', 1, 1000, 1000, 1000),
		('job_2', 'job_2', 'parked', 'unknown_event', 'job.odd', X'7B7D', 2, 'y', 1, 2000, 2000, 2000)`)
}

// dbOf makes a database from the fixture schema file, runs stmts in it,
// and returns its path.
func dbOf(t *testing.T, fixture string, stmts ...string) string {
	t.Helper()
	schema, err := os.ReadFile(filepath.Join("testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, stmt := range append([]string{string(schema)}, stmts...) {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%.60s: %v", stmt, err)
		}
	}
	return path
}

// columns describes every column of events: name, type, not null, default.
func columns(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name, type, "notnull", coalesce(dflt_value, 'NULL') FROM pragma_table_info('events') ORDER BY cid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name, typ, dflt string
		var notNull bool
		if err := rows.Scan(&name, &typ, &notNull, &dflt); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Join([]string{name, typ, map[bool]string{true: "NOT NULL"}[notNull], dflt}, " "))
	}
	return out
}

// sameColumnsAsSchema checks that the events table at path has the
// columns a database made from schema.sql has.
func sameColumnsAsSchema(t *testing.T, path string) {
	t.Helper()
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	if err := sqlitetest.MustOpenPath(t, fresh, sqlite.Options{}).Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := columns(t, path), columns(t, fresh); !reflect.DeepEqual(got, want) {
		t.Errorf("migrated columns:\n%s\nwant those of schema.sql:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestMigrate opens a database of the first version: it is read-only
// refused with a clear error, then upgraded by a writing open to the same
// columns schema.sql makes, its rows kept and queued.
func TestMigrate(t *testing.T) {
	t.Parallel()
	path := oldDB(t)
	ctx := context.Background()
	if _, err := sqlite.Open(ctx, path, sqlite.Options{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "earlier inbox") {
		t.Fatalf("read-only open of an old database: %v, want the upgrade error", err)
	}

	// An open without the schema upgrades the columns too.
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{MustExist: true, Schema: "-- no schema"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sameColumnsAsSchema(t, path)

	// Opening again finds nothing to do; the schema adds the queue index.
	s = sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	e, err := s.Get(ctx, "job_1")
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != inbox.StatusNew || e.Attempts != 0 || e.LeaseOwner != "" || !e.DoneAt.IsZero() {
		t.Errorf("migrated row = %+v, want new, no attempts, no lease", e)
	}
	jobs, _, err := s.Settle(ctx, "test", nil, inbox.Claim{Now: time.UnixMilli(5000), Until: time.UnixMilli(9000), Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].ID != "job_1" || jobs[0].Attempt != 1 {
		t.Errorf("claimed %+v from the migrated database, want job_1 at attempt 1", jobs)
	}
	// The added CHECK holds on the migrated table too.
	err = sqlite.WriteOpForTest(s, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE events SET lease_until = NULL WHERE id = 'job_1'`)
		return err
	})
	if err == nil {
		t.Error("a lease with an owner and no end was accepted")
	}
}

// TestMigrateSources opens a database of the version before sources: its
// rows become the default source's, with their ids unchanged, and it gains
// the columns and the table schema.sql has.
func TestMigrateSources(t *testing.T) {
	t.Parallel()
	path := oldDBOf(t, "schema-v2.sql")
	ctx := context.Background()
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	e, err := s.Get(ctx, "job_2")
	if err != nil {
		t.Fatal(err)
	}
	if e.Source != inbox.DefaultSource || e.Response != nil || e.Reason != inbox.ReasonUnknownEvent {
		t.Errorf("migrated row: source %q response %q reason %s, want sume, none, unknown_event", e.Source, e.Response, e.Reason)
	}
	if err := s.RecordSecretUses(ctx, []inbox.SecretUse{{Source: "sume", Fingerprint: "abcd", LastVerified: time.UnixMilli(7000)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordUnverified(ctx, []inbox.Unverified{{Source: "sume", Count: 2, First: time.UnixMilli(8000), Last: time.UnixMilli(9000)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sameColumnsAsSchema(t, path)
}

// TestUnverifiedBeforeTheTable opens read-only a database an earlier
// inbox made, without the unverified table (as inbox alert does before
// serve has run the new version): it has no failed verifications, and
// reading them is no error.
func TestUnverifiedBeforeTheTable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "inbox.db")
	if err := sqlitetest.MustOpenPath(t, path, sqlite.Options{}).Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DROP TABLE unverified`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	ro := sqlitetest.MustOpenPath(t, path, sqlite.Options{ReadOnly: true})
	if runs, err := ro.Unverified(context.Background()); err != nil || len(runs) != 0 {
		t.Errorf("without the table: %v, %v; want none and no error", runs, err)
	}
}

// TestQueryPlans checks that the store's queries read through the indexes
// meant for them, the partial ones included: SQLite uses a partial index
// only when the query repeats its condition, which is easy to lose.
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "inbox.db")
	if err := sqlitetest.MustOpenPath(t, path, sqlite.Options{}).Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	parked, parkedArgs := sqlite.WhereForTest(inbox.Filter{Status: inbox.StatusParked, Reason: inbox.ReasonConflict})
	jobRows, jobArgs := sqlite.WhereForTest(inbox.Filter{Job: "job_1"})
	tests := []struct {
		name  string
		query string
		args  []any
		index string
	}{
		{"claim", `SELECT rowid FROM events WHERE status = 'new' AND next_attempt_at <= 5
			ORDER BY next_attempt_at, received_at LIMIT 10`, nil, "events_queue"},
		{"list parked", `SELECT id FROM events` + parked + ` ORDER BY received_at DESC, id`, parkedArgs, "events_settled_received"},
		{"purge", `SELECT rowid FROM events WHERE ` + sqlite.PurgeWhereForTest, []any{"done", 5}, "events_settled_last_seen"},
		{"beside rows", `SELECT 1 FROM events WHERE ` + sqlite.BesideRemainsForTest, []any{`["conflict"]`, 5, true, 5}, "events_beside_job"},
		{"a job's rows", `SELECT id FROM events` + jobRows, jobArgs, "events_beside_job"},
	}
	for _, tt := range tests {
		rows, err := db.Query(`EXPLAIN QUERY PLAN `+tt.query, tt.args...)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		// A sort of ties on the last ORDER BY term (the id) is fine.
		if got := strings.Join(plan, "; "); !strings.Contains(got, "INDEX "+tt.index) || strings.Contains(got, "TEMP B-TREE FOR ORDER BY") {
			t.Errorf("%s plan: %s; want the %s index, no sort", tt.name, got, tt.index)
		}
	}
}

// TestMigrateRekeysBareJobIDs opens a database in which a source of Sume's
// scheme under another name stored bare job ids (as serve did before
// Classify keyed every source's jobs within the source): the open gives
// them the job's row id, so reprocess takes the rows as one job rather
// than failing, and a later repeat of the same event folds into the row.
func TestMigrateRekeysBareJobIDs(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "inbox.db")
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	body1 := `{"event":"job.exploded","job_id":"j1","status":"COMPLETED","n":1}`
	body2 := `{"event":"job.exploded","job_id":"j1","status":"COMPLETED","n":2}`
	sum := func(b string) string { return inbox.Classify("", inbox.Named{}, []byte(b), 1, inbox.Rules{}).SHA256 }
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`INSERT INTO events (id, job_id, status, reason, event, job_status, body, size, sha256,
		delivery_ts, received_at, last_seen_at, updated_at, source) VALUES
		('acme/j1', 'j1', 'parked', 'unknown_event', 'job.exploded', 'COMPLETED', ?, ?, ?, 1, 1000, 1000, 1000, 'acme'),
		(?, 'j1', 'parked', 'unknown_event', 'job.exploded', 'COMPLETED', ?, ?, ?, 1, 2000, 2000, 2000, 'acme'),
		('gh/d1', 'gh/d1', 'new', NULL, 'push', NULL, X'7B7D', 2, 'z', 1, 3000, 3000, 3000, 'gh'),
		('j1', 'j1', 'parked', 'unknown_event', 'job.exploded', 'COMPLETED', X'7B7D', 2, 'w', 1, 3000, 3000, 3000, 'sume')`,
		[]byte(body1), len(body1), sum(body1), "acme/sha256:"+sum(body2), []byte(body2), len(body2), sum(body2))
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	s = sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	ctx := context.Background()
	for id, want := range map[string]string{"acme/j1": "acme/j1", "acme/sha256:" + sum(body2): "acme/j1", "gh/d1": "gh/d1", "j1": "j1"} {
		if e, err := s.Get(ctx, id); err != nil || e.JobID != want {
			t.Errorf("%s: job_id %q (%v), want %q", id, e.JobID, err, want)
		}
	}
	rules := inbox.SourceRules{"acme": {Events: []string{"job.exploded"}}}
	rep, err := s.Reprocess(ctx, inbox.Selection{All: true}, rules, false)
	if err != nil {
		t.Fatalf("reprocess: %v", err)
	}
	if rep.Moved != 1 || rep.Folded != 1 {
		t.Errorf("report %+v, want the job row made new and the other folded into it", rep)
	}
	if e, err := s.Get(ctx, "acme/j1"); err != nil || e.Status != inbox.StatusNew || e.Deliveries != 2 {
		t.Errorf("acme/j1 = %+v, %v; want new with 2 deliveries", e, err)
	}
}

// TestMigrateDestinations opens a database of the version before
// destinations: each row the dispatcher had (new, done, parked by it)
// keeps its queue state as destination default's, a row parked on receipt
// gets no destination, and a claim for default goes on where it stood.
func TestMigrateDestinations(t *testing.T) {
	t.Parallel()
	path := oldDBOf(t, "schema-v2.sql")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`UPDATE events SET attempts = 2, next_attempt_at = 7000, last_error = 'HTTP 500' WHERE id = 'job_1';
		INSERT INTO events (id, job_id, status, reason, event, body, size, sha256, delivery_ts, received_at,
			last_seen_at, updated_at, attempts, last_error, done_at) VALUES
		('job_3', 'job_3', 'done', NULL, 'job.completed', X'7B7D', 2, 'z', 1, 3000, 3000, 3000, 1, NULL, 3000),
		('job_4', 'job_4', 'parked', 'handler_failed', 'job.completed', X'7B7D', 2, 'w', 1, 4000, 4000, 4000, 9, 'HTTP 503', NULL)`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	want := map[string]string{"job_1": "default new 2 HTTP 500", "job_2": "", "job_3": "default done 1 ", "job_4": "default parked 9 HTTP 503"}
	for id, w := range want {
		ds, err := s.Deliveries(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if len(ds) == 1 {
			got = fmt.Sprintf("%s %s %d %s", ds[0].Destination, ds[0].Status, ds[0].Attempts, ds[0].LastError)
		} else if len(ds) > 1 {
			got = fmt.Sprint(ds)
		}
		if got != w {
			t.Errorf("%s: migrated pair %q, want %q", id, got, w)
		}
	}
	if jobs, _, err := s.Settle(ctx, "test", nil, inbox.Claim{Now: time.UnixMilli(6000), Until: time.UnixMilli(9000), Max: 10}); err != nil || len(jobs) != 0 {
		t.Errorf("claimed %v, %v before job_1's retry is due", jobs, err)
	}
	jobs, _, err := s.Settle(ctx, "test", nil, inbox.Claim{Now: time.UnixMilli(7000), Until: time.UnixMilli(9000), Max: 10})
	if err != nil || len(jobs) != 1 || jobs[0].ID != "job_1" || jobs[0].Attempt != 3 || jobs[0].Dest() != inbox.DefaultDestination {
		t.Errorf("claimed %+v, %v, want job_1 at attempt 3 for default", jobs, err)
	}
}

// TestReadOnlyNeedsEveryTable opens read-only, with the schema, a database
// whose events table has every column but which lacks tables of the schema
// (an earlier version's upgraded without them): it is refused, naming a
// missing table and inbox migrate; once a writing open with the schema has
// upgraded it, it opens read-only and reads.
func TestReadOnlyNeedsEveryTable(t *testing.T) {
	t.Parallel()
	path := oldDBOf(t, "schema-v2.sql")
	ctx := context.Background()
	// The columns alone, as a writing open without the schema adds them.
	if err := sqlitetest.MustOpenPath(t, path, sqlite.Options{MustExist: true, Schema: "-- columns only"}).Close(); err != nil {
		t.Fatal(err)
	}
	schema := sqlitetest.Schema(t)
	_, err := sqlite.Open(ctx, path, sqlite.Options{ReadOnly: true, Schema: schema})
	if !errors.Is(err, sqlite.ErrUpgrade) || !strings.Contains(err.Error(), "no table") || !strings.Contains(err.Error(), "inbox migrate --db "+path) {
		t.Fatalf("read-only open of a database without the schema's tables: %v, want ErrUpgrade naming a table and inbox migrate", err)
	}
	if err := sqlitetest.MustOpenPath(t, path, sqlite.Options{MustExist: true, Schema: schema}).Close(); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(ctx, path, sqlite.Options{ReadOnly: true, Schema: schema})
	if err != nil {
		t.Fatalf("read-only open after the upgrade: %v", err)
	}
	defer s.Close()
	if _, err := s.Stats(ctx); err != nil {
		t.Errorf("stats after the upgrade: %v", err)
	}
}

// TestPairStatusCheckBuildsNoTable opens a new database: adding pairs and
// marking them done build no temporary table for the CHECK on a pair's
// status, which the same table with an IN list makes them build (for
// every pair), and the CHECK still takes the four statuses and refuses
// any other.
func TestPairStatusCheckBuildsNoTable(t *testing.T) {
	t.Parallel()
	schema := sqlitetest.Schema(t)
	const check = "CHECK (status = 'new' OR status = 'done' OR status = 'parked' OR status = 'dismissed')"
	if !strings.Contains(schema, check) {
		t.Fatalf("schema.sql has no %s on the pairs", check)
	}
	open := func(schema string) *sqlite.Store {
		return sqlitetest.MustOpenPath(t, filepath.Join(t.TempDir(), "inbox.db"), sqlite.Options{Schema: schema})
	}
	s := open(schema)
	add, done, err := sqlite.QueueOpsForTest(s)
	if err != nil {
		t.Fatal(err)
	}
	inAdd, inDone, err := sqlite.QueueOpsForTest(open(strings.Replace(schema, check, "CHECK (status IN ('new', 'done', 'parked', 'dismissed'))", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if add["OpenEphemeral"] >= inAdd["OpenEphemeral"] || done["OpenEphemeral"] >= inDone["OpenEphemeral"] {
		t.Errorf("temporary tables: adding pairs %d (%d with an IN list), marking them done %d (%d)",
			add["OpenEphemeral"], inAdd["OpenEphemeral"], done["OpenEphemeral"], inDone["OpenEphemeral"])
	}
	if _, err := s.Put(t.Context(), job("job_check")); err != nil {
		t.Fatal(err)
	}
	for _, status := range []string{"new", "done", "parked", "dismissed", "ignored", "bogus", ""} {
		err := sqlite.WriteOpForTest(s, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO deliveries (event_id, destination, status, reason, received_at, updated_at)
				VALUES ('job_check', ?, ?, CASE WHEN ? IN ('parked', 'dismissed') THEN 'handler_failed' END, 1, 1)`, "d_"+status, status, status)
			return err
		})
		if ok := status == "new" || status == "done" || status == "parked" || status == "dismissed"; ok != (err == nil) {
			t.Errorf("pair status %q: %v", status, err)
		}
	}
}

// TestStatusCheckBuildsNoTable opens a new database: the insert of a
// delivery builds no temporary table for the CHECK on status (an IN list
// would, for every row), and the CHECK still takes the statuses and
// refuses any other. A database of an earlier version, whose CHECK was an
// IN list, has its table rebuilt with the comparisons as it is upgraded.
func TestStatusCheckBuildsNoTable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, fixture string }{{"new", ""}, {"first version", "schema-v1.sql"}, {"before sources", "schema-v2.sql"}} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "inbox.db")
			if tt.fixture != "" {
				path = oldDBOf(t, tt.fixture)
			}
			s := sqlitetest.MustOpenPath(t, path, sqlite.Options{})
			ops, err := sqlite.InsertOpsForTest(s)
			if err != nil {
				t.Fatal(err)
			}
			if ops["Insert"] != 1 || ops["OpenEphemeral"] != 0 {
				t.Errorf("the insert compiles to %d Insert and %d OpenEphemeral, want 1 and 0", ops["Insert"], ops["OpenEphemeral"])
			}
			if _, err := s.Put(t.Context(), job("job_check")); err != nil {
				t.Fatal(err)
			}
			for _, status := range []string{"done", "ignored", "new", "bogus", "New", ""} {
				err := sqlite.WriteOpForTest(s, func(ctx context.Context, tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, `UPDATE events SET status = ? WHERE id = 'job_check'`, status)
					return err
				})
				if ok := status == "done" || status == "ignored" || status == "new"; ok != (err == nil) {
					t.Errorf("status %q: %v", status, err)
				}
			}
			if e, err := s.Get(t.Context(), "job_check"); err != nil || e.Status != inbox.StatusNew {
				t.Errorf("read back: %+v, %v", e, err)
			}
		})
	}
}
