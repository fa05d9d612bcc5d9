package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestOperatorLoopSQLite is testOperatorLoop on a SQLite file.
func TestOperatorLoopSQLite(t *testing.T) {
	t.Parallel()
	testOperatorLoop(t, filepath.Join(t.TempDir(), "inbox.db"))
}

// TestOperatorLoopPostgres is testOperatorLoop on PostgreSQL.
func TestOperatorLoopPostgres(t *testing.T) {
	t.Parallel()
	testOperatorLoop(t, pgSchema(t))
}

// testOperatorLoop walks the runbook for parked rows through the binary:
// three rows parked; cron's alert lines (the age, the count) exit 1 and
// post the finding once over two runs; the operator looks, dismisses
// them with a note; stats then counts 0 parked and 3 dismissed, the
// alerts exit 0, the next cron run posts "resolved" once, and the one
// after posts nothing.
func testOperatorLoop(t *testing.T, db string) {
	srv := startServer(t, db)
	for _, id := range []string{"job_l1", "job_l2", "job_l3"} {
		body := `{"event":"job.exploded","job_id":"` + id + `","status":"COMPLETED"}`
		if code := send(t, http.DefaultClient, srv.url, body, e2eSecret); code != http.StatusNoContent {
			t.Fatalf("delivery %s: %d, want 204", id, code)
		}
	}
	run := func(wantCode int, args ...string) string {
		t.Helper()
		out, errOut, code := runCLI(t, nil, append(args[:1:1], append([]string{"--db", db}, args[1:]...)...)...)
		if code != wantCode {
			t.Fatalf("%v: exit %d, want %d:\n%s%s", args, code, wantCode, out, errOut)
		}
		return out
	}
	h := newHook(t, http.StatusOK)
	// cron is the shipped cron line's form: --on-change, --notify; it
	// exits 1 while the finding is open, whatever it prints.
	cron := func(wantCode int) string {
		return run(wantCode, "alert", "--max-age", "0s", "--on-change", "--notify", h.url())
	}
	const finding = "unknown_event parked longer than 0s"
	posted := func(step string, want ...string) {
		t.Helper()
		var got []string
		for _, p := range changes(t, h) {
			got = append(got, strings.Join(p, "; "))
		}
		if strings.Join(got, " | ") != strings.Join(want, " | ") {
			t.Fatalf("%s: the webhook got\n\t%s\nwant\n\t%s", step, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
	}

	// Alert: the age and the count, and two cron runs that post once.
	run(1, "alert", "--max-age", "0s")
	run(1, "alert", "--max-parked", "0")
	run(0, "alert", "--max-parked", "3")
	if out := cron(1); !strings.Contains(out, "unknown_event  3 parked longer than 0s") {
		t.Fatalf("first cron run printed %q, want the finding", out)
	}
	if out := cron(1); out != "" {
		t.Fatalf("second cron run printed %q, want nothing: nothing changed", out)
	}
	posted("two cron runs", "opened "+finding)

	// Look, then dismiss what needs nothing.
	if out := run(0, "parked", "--group-by", "reason"); !strings.Contains(out, "unknown_event") || !strings.Contains(out, "3") {
		t.Fatalf("parked --group-by reason:\n%s", out)
	}
	run(0, "dismiss", "--reason", "unknown_event", "--note", "the provider's test events")
	st := destinationStats(t, db)[""].ByStatus
	if st["parked"] != 0 || st["dismissed"] != 3 {
		t.Fatalf("stats after the dismissal: %v, want 0 parked and 3 dismissed", st)
	}
	if out := run(0, "show", "job_l2"); !strings.Contains(out, "the provider's test events") {
		t.Errorf("show of a dismissed row lacks its note:\n%s", out)
	}

	// Resolved: once, then nothing.
	run(0, "alert", "--max-age", "0s")
	run(0, "alert", "--max-parked", "0")
	if out := cron(0); !strings.Contains(out, "resolved") {
		t.Fatalf("the cron run after the dismissal printed %q, want the finding resolved", out)
	}
	if out := cron(0); out != "" {
		t.Fatalf("the next cron run printed %q, want nothing", out)
	}
	posted("after the dismissal", "opened "+finding, "resolved "+finding)
}
