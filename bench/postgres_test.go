package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestMain lets the test binary serve as a reference receiver too, as the
// bench binary does, so run can start commit-each-pg as its own process.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == referenceArg {
		if err := runReference(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench reference:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testPostgres returns INBOX_TEST_DATABASE_URL, or skips the test (fails it
// with INBOX_REQUIRE_POSTGRES=1) when it is not set.
func testPostgres(t *testing.T) string {
	t.Helper()
	base := os.Getenv("INBOX_TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("INBOX_REQUIRE_POSTGRES") == "1" {
			t.Fatal("INBOX_REQUIRE_POSTGRES=1 but INBOX_TEST_DATABASE_URL is not set")
		}
		t.Skip("no PostgreSQL: run with INBOX_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	return base
}

// benchSchemas counts the schemas the bench makes, left on the database.
func benchSchemas(t *testing.T, dsn string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'inbox\_bench\_%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCommitEachPG runs commit-each-pg as the bench does, as its own
// process on a schema of its own, under load with one delivery in two a
// repeat: every answer 204, every job acknowledged new stored once, and
// the schema dropped afterwards. The printed command line hides the URL's
// password.
func TestCommitEachPG(t *testing.T) {
	base := testPostgres(t)
	before := benchSchemas(t, base)
	var out bytes.Buffer
	err := run(t.Context(), []string{"-postgres", base, "-only", commitEachPG, "-conns", "4",
		"-warmup", "200ms", "-duration", "2s", "-repeat", "0.5"}, &out, io.Discard)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	checkStored(t, out.String(), "commit-each-pg")
	if !strings.Contains(out.String(), "pg:      PostgreSQL ") {
		t.Errorf("no line describing the server:\n%s", out.String())
	}
	if after := benchSchemas(t, base); after != before {
		t.Errorf("%d bench schemas left on the database, %d before", after, before)
	}
	if line := commandLine([]string{"-postgres", "postgres://u:s3cret@h/db", "-postgres=postgresql://u:s3cret@h/db"}); strings.Contains(line, "s3cret") {
		t.Errorf("command line shows the password: %s", line)
	}
}

// TestCommitEachPGAnswers: the reference answers as inbox's contract does
// for what it checks: 401 unsigned, 204 once committed (a repeat too,
// stored once), 503 when the database cannot take the commit.
func TestCommitEachPGAnswers(t *testing.T) {
	base := testPostgres(t)
	schema, err := newSchema(t.Context(), base, fmt.Sprintf("t%d", time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(schema.drop)
	pool, err := openReferencePG(t.Context(), schema.url())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	const secret = "whsec_test"
	srv := httptest.NewServer(&referenceHandler{secret: secret, commit: func(ctx context.Context, body []byte) error {
		return commitOnePG(ctx, pool, body)
	}})
	defer srv.Close()
	post := func(body string, signed bool) int { return postRef(t, srv.URL, secret, body, signed) }
	job := `{"event":"job.completed","job_id":"job_1","status":"COMPLETED"}`
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Go(func() { codes[i] = post(job, true) })
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusNoContent {
			t.Errorf("delivery %d: %d, want 204", i, c)
		}
	}
	if c := post(job, false); c != http.StatusUnauthorized {
		t.Errorf("unsigned: %d, want 401", c)
	}
	if n, err := schema.countRows(t.Context(), "deliveries"); err != nil || n != 1 {
		t.Errorf("rows %d, %v; want the job once", n, err)
	}
	if err := pgExec(t.Context(), base, `ALTER TABLE `+schema.name+`.deliveries RENAME TO gone`); err != nil {
		t.Fatal(err)
	}
	if c := post(`{"event":"job.completed","job_id":"job_2"}`, true); c != http.StatusServiceUnavailable {
		t.Errorf("with the table gone: %d, want 503", c)
	}
}

// TestPostgresFlags: the PostgreSQL receivers need -postgres, which takes
// only a postgres:// URL and adds them to the default order.
func TestPostgresFlags(t *testing.T) {
	if _, err := parseFlags([]string{"-only", nameInboxPG}, io.Discard); err == nil || !strings.Contains(err.Error(), "-postgres") {
		t.Errorf("inbox-pg without -postgres: %v", err)
	}
	for _, bad := range []string{"host=127.0.0.1 user=postgres", "mysql://u:pw@h/db", "postgres:///nohost"} {
		if _, err := parseFlags([]string{"-postgres", bad}, io.Discard); err == nil || strings.Contains(err.Error(), "pw") {
			t.Errorf("-postgres %q: %v, want refused without the URL", bad, err)
		}
	}
	cfg, err := parseFlags([]string{"-postgres", "postgres://u@h/db"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.receivers, ","); got != "inbox,store-nothing,group-commit,commit-each,inbox-pg,commit-each-pg,inbox-pg-x2,inbox-pg-w4" {
		t.Errorf("default order with -postgres: %s", got)
	}
	t.Setenv("INBOX_BENCH_POSTGRES", "postgres://u@h/db")
	if cfg, err := parseFlags([]string{"-order", "commit-each-pg"}, io.Discard); err != nil || cfg.postgres == "" {
		t.Errorf("INBOX_BENCH_POSTGRES: %+v %v", cfg.postgres, err)
	}
}

// TestInboxPGNeedsTheOpener: inbox-pg runs only once the inbox binary can
// open a PostgreSQL store from --db; until then it is left out, saying
// why, and the rest of the run goes on.
func TestInboxPGNeedsTheOpener(t *testing.T) {
	ok, err := inboxOnPostgres(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Skip("this inbox opens PostgreSQL from --db: inbox-pg runs")
	}
	cfg, err := parseFlags([]string{"-postgres", "postgres://u@h/db", "-order", "inbox-pg,commit-each-pg,inbox-pg-x2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	specs, err := receiverSpecs(t.Context(), &cfg, t.TempDir(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 1 || specs[0].name != commitEachPG || len(cfg.notes) != 2 || !strings.Contains(cfg.notes[0], "inbox-pg not run") {
		t.Errorf("specs %v, notes %q; want commit-each-pg alone, and why the others are not run", specs, cfg.notes)
	}
}

// TestServerMeter reads the CPU time of the backends of one
// application_name and of the server's own processes, and no other
// client's: a backend that works between two readings is charged with it.
func TestServerMeter(t *testing.T) {
	base := testPostgres(t)
	ctx := t.Context()
	appName := "inbox_bench_meter_" + strconv.Itoa(os.Getpid())
	conn, err := pgx.Connect(ctx, base+"&application_name="+appName)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	other, err := pgx.Connect(ctx, base+"&application_name=someone_else")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	var pid, otherPID int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if err := other.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&otherPID); err != nil {
		t.Fatal(err)
	}
	m := serverMeter{dsn: base, appName: appName, hz: clockTicks()}
	from, err := m.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := from[pid]; !ok {
		t.Fatalf("the run's backend %d not read: %v", pid, from)
	}
	if _, ok := from[otherPID]; ok {
		t.Fatalf("another client's backend %d read", otherPID)
	}
	// About 0.3 s of the backend's CPU.
	if _, err := conn.Exec(ctx, `SELECT count(*) FROM generate_series(1, 3000000)`); err != nil {
		t.Fatal(err)
	}
	to, err := m.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := serverBetween(from, to); got < 100*time.Millisecond {
		t.Errorf("server CPU between the readings: got %v, want the backend's work (>= 100ms)", got)
	}
	if got := serverBetween(map[int]time.Duration{1: time.Second}, map[int]time.Duration{1: 3 * time.Second, 2: time.Second}); got != 3*time.Second {
		t.Errorf("serverBetween: got %v, want 2s of a process in both and 1s of one new", got)
	}
}
