package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"inbox/postgres"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// largeRows is how many parked rows the large inbox holds: enough that
// listing them all takes far longer than the tiny --timeout given (here
// the 300 ms run out before the first row is written, as at 200,000).
const largeRows = 60_000

// TestListLargeInbox lists a large inbox, on SQLite and PostgreSQL, filled
// through SQL. With a --timeout far too short, list writes the rows it has
// read as it reads them, then stops with one line saying so and how many
// it wrote, and exits 1: stdout holds exactly that many whole JSON lines.
// With the default --timeout every row is listed, and stats and parked
// --group-by count them.
func TestListLargeInbox(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, db string) {
		t.Helper()
		out, errOut, code := runCLI(t, nil, "list", "--db", db, "--status", "parked", "--limit", "0", "--json", "--timeout", "300ms")
		m := regexp.MustCompile(`^inbox: list: stopped after 300ms \(--timeout\): ([0-9,]+) rows written; raise --timeout\n$`).FindStringSubmatch(errOut)
		if code != 1 || m == nil {
			t.Fatalf("list --timeout 300ms: exit %d, stderr %q; want exit 1 and the stop line", code, errOut)
		}
		written, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if out == "" {
			lines = nil
		}
		if len(lines) != written || written >= largeRows {
			t.Fatalf("stdout holds %d lines, the line says %d written, of %d rows", len(lines), written, largeRows)
		}
		for _, l := range lines {
			var row struct{ ID, Status string }
			if err := json.Unmarshal([]byte(l), &row); err != nil || row.Status != "parked" {
				t.Fatalf("a line written is not a whole row: %q", l)
			}
		}
		t.Logf("%d rows written before the timeout", written)

		out, errOut, code = runCLI(t, nil, "list", "--db", db, "--limit", "0", "--json")
		if n := strings.Count(out, "\n"); code != 0 || n != largeRows {
			t.Fatalf("list --limit 0: exit %d, %d rows, %q; want all %d", code, n, errOut, largeRows)
		}
		out, errOut, code = runCLI(t, nil, "parked", "--db", db, "--group-by", "reason", "--json")
		if code != 0 || !strings.Contains(out, `"count":`+strconv.Itoa(largeRows)) {
			t.Fatalf("parked --group-by reason: exit %d, %q %q", code, out, errOut)
		}
		for _, bad := range []string{"0", "-1s", "soon"} {
			_, errOut, code := runCLI(t, nil, "stats", "--db", db, "--timeout", bad)
			if code != 1 || !strings.Contains(errOut, `--timeout "`+bad+`"`) {
				t.Errorf("stats --timeout %s: exit %d, %q; want refused, echoing it", bad, code, errOut)
			}
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(t.TempDir(), "inbox.db")
		sqlitetest.MustOpenPath(t, db, sqlite.Options{}).Close()
		conn, err := sql.Open("sqlite", db)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Exec(`INSERT INTO events (id, job_id, status, reason, event, body, size, sha256,
			delivery_ts, received_at, last_seen_at, updated_at, source)
			WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
			SELECT 'job_' || i, 'job_' || i, 'parked', 'unknown_event', 'job.other', x'7b7d', 2, lower(hex(randomblob(32))),
				?2 / 1000, ?2 - i, ?2 - i, ?2 - i, 'sume' FROM n`, largeRows, time.Now().UnixMilli()); err != nil {
			t.Fatal(err)
		}
		check(t, db)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		db := pgSchema(t)
		s, err := postgres.Open(context.Background(), db, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		pgExec(t, db, `INSERT INTO events (id, job_id, status, reason, event, body, size, sha256,
			delivery_ts, received_at, last_seen_at, updated_at, source)
			SELECT 'job_' || i, 'job_' || i, 'parked', 'unknown_event', 'job.other', '\x7b7d'::bytea, 2, md5(i::text) || md5(i::text),
				$2::bigint / 1000, $2::bigint - i, $2::bigint - i, $2::bigint - i, 'sume' FROM generate_series(1, $1::int) AS i`,
			largeRows, time.Now().UnixMilli())
		pgExec(t, db, `ANALYZE events`)
		check(t, db)
	})
}
