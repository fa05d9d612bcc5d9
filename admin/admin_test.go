package admin

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// testRules classify as serve does by default, with a small body limit so
// too_large rows are cheap to make.
var testRules = inbox.Rules{Events: []string{"job.completed", "job.failed", "job.canceled"}, MaxBody: 1 << 10}

const deliveryTS = 1_800_000_000

func completed(jobID string) string {
	return fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED","payload":{"artifacts":[]}}`, jobID)
}

func exploded(jobID string) string {
	return fmt.Sprintf(`{"event":"job.exploded","job_id":%q}`, jobID)
}

// newDB returns the path of a fresh inbox database with the schema applied.
func newDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "inbox.db")
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// fill stores bodies the way the receiver does once a signature checks out
// (classify, then Put), with the store's clock at receivedAt.
func fill(t *testing.T, path string, receivedAt time.Time, bodies ...string) {
	t.Helper()
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{Now: func() time.Time { return receivedAt }})
	for _, b := range bodies {
		if _, err := s.Put(context.Background(), inbox.Classify("", inbox.Named{}, []byte(b), deliveryTS, testRules)); err != nil {
			t.Fatalf("put %s: %v", b, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// run runs the admin commands as the binary does, its output in a buffer.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runCommands(t, Commands(testOpen, testBackup), args...)
}

func runCommands(t *testing.T, cmds []*cli.Command, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := &cli.App{
		Name:      "inbox",
		Commands:  cmds,
		Writer:    &out,
		ErrWriter: io.Discard,
		// cli's default would os.Exit on an exit error.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	err := app.RunContext(context.Background(), append([]string{"inbox"}, args...))
	return out.String(), err
}

// exitCode is the code the binary would exit with for err.
func exitCode(err error) int {
	var ec cli.ExitCoder
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ec):
		return ec.ExitCode()
	default:
		return 1
	}
}

// snapshot returns every column of every row, to compare a table before
// and after a command.
func snapshot(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT * FROM events ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%q\n", vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// get reads one row through a read-only store.
func get(t *testing.T, path, id string) (inbox.Event, error) {
	t.Helper()
	return openReadOnly(t, path).Get(context.Background(), id)
}

// mustGet is get for a row that must be there.
func mustGet(t *testing.T, path, id string) inbox.Event {
	t.Helper()
	e, err := get(t, path, id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return e
}

func TestFlagsAfterIDsAreRefused(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	fill(t, path, time.Now(), exploded("job_1"))
	before := snapshot(t, path)
	for _, args := range [][]string{
		{"show", "--db", path, "job_1", "--json"},
		{"reprocess", "--db", path, "job_1", "--event", "job.exploded"},
		{"redeliver", "--db", path, "job_1", "--api-key", "k"},
	} {
		if _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), "flags go before") {
			t.Errorf("%v: err = %v, want flags go before the ids", args, err)
		}
	}
	if after := snapshot(t, path); after != before {
		t.Errorf("table changed:\n%s\nwant\n%s", after, before)
	}
}

// ageOf reads in as an ageFlag through a real command line.
func ageOf(t *testing.T, in string) (time.Duration, error) {
	t.Helper()
	var d time.Duration
	_, err := runCommands(t, []*cli.Command{{
		Name:  "age",
		Flags: []cli.Flag{ageFlag("for", "", "", "INBOX_TEST_AGE")},
		Action: func(c *cli.Context) (err error) {
			d, err = age(c, "for")
			return err
		},
	}}, "age", "--for", in)
	return d, err
}

func TestAge(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "90m": 90 * time.Minute, "24h": 24 * time.Hour, "": 0} {
		if got, err := ageOf(t, in); err != nil || got != want {
			t.Errorf("age %q = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"-1h", "1w", "d", "-3d", "1.5d", "30 days"} {
		if got, err := ageOf(t, in); err == nil {
			t.Errorf("age %q = %s, want an error", in, got)
		}
	}
}

// sha is the hex sha256 of body, as row keys use it.
func sha(body string) string {
	return inbox.Classify("", inbox.Named{}, []byte(body), 0, inbox.Rules{}).SHA256
}

// sameJSON fails the test unless got and want encode alike.
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("%s = %s, want %s", what, g, w)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// openTestWriter opens the database file directly, to set up states no
// command makes (a row the application marked done, or deleted).
func openTestWriter(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(1000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openReadOnly opens a read-only store on path.
func openReadOnly(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	return sqlitetest.MustOpenPath(t, path, sqlite.Options{ReadOnly: true})
}

// TestFlagsCarryNothingOver: a value one run takes from the environment is
// gone in the next run, as in a process that runs several commands.
func TestFlagsCarryNothingOver(t *testing.T) {
	path := newDB(t)
	t.Setenv("INBOX_DB", path)
	t.Setenv("INBOX_JSON", "true")
	if out, err := run(t, "stats"); err != nil || !strings.HasPrefix(out, "{") {
		t.Fatalf("stats with INBOX_DB and INBOX_JSON: %v, %q", err, out)
	}
	os.Unsetenv("INBOX_DB")
	os.Unsetenv("INBOX_JSON")
	if _, err := run(t, "stats"); err == nil || !strings.Contains(err.Error(), "inbox.db") {
		t.Errorf("stats without INBOX_DB: err = %v, want the default inbox.db missing", err)
	}
	if out, err := run(t, "stats", "--db", path); err != nil || !strings.HasPrefix(out, "STATUS") {
		t.Errorf("stats without INBOX_JSON: %v, %q; want the table", err, out)
	}
}

// testOpen opens the SQLite databases the tests make, as main's opener
// opens a path.
func testOpen(ctx context.Context, db string, a Access) (inbox.Store, error) {
	s, err := sqlite.Open(ctx, db, sqlite.Options{ReadOnly: !a.Write, MustExist: true, BusyTimeout: a.BusyTimeout})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// testBackup copies the SQLite databases the tests make, as main's
// migrate does.
func testBackup(ctx context.Context, db, path string) (int64, error) {
	return sqlite.BackupFile(ctx, db, path, time.Second)
}
