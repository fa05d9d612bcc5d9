package e2e

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDismiss dismisses parked rows through the real binary on SQLite:
// see testDismiss.
func TestDismiss(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	testDismiss(t, db, func(ids ...string) {
		h, err := sql.Open("sqlite", db+"?_pragma=busy_timeout(5000)")
		must(t, err)
		defer h.Close()
		for _, id := range ids {
			_, err := h.Exec(`UPDATE events SET last_seen_at = last_seen_at - 8*86400000, received_at = received_at - 8*86400000 WHERE id = ?`, id)
			must(t, err)
		}
	})
}

// TestDismissPostgres is TestDismiss on PostgreSQL.
func TestDismissPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgSchema(t)
	testDismiss(t, dsn, func(ids ...string) {
		for _, id := range ids {
			pgExec(t, dsn, `UPDATE events SET last_seen_at = last_seen_at - 8*86400000, received_at = received_at - 8*86400000 WHERE id = $1`, id)
		}
	})
}

// testDismiss parks three rows (two on receipt, one a destination
// answered 500) and a fourth on receipt, then: inbox alert --max-age 0s
// exits 1; dismiss without --note, or without a selection, is refused and
// changes nothing; --dry-run says it would take the three and changes
// nothing; dismissing them leaves stats with the fourth alone parked and
// three dismissed, and once the fourth is dismissed too, alert exits 0 and
// parked --group-by reason finds nothing; the note and who ran it are in
// show; ids not parked or unknown are said, with exit 1; a repeat delivery
// of a dismissed row's body is counted on it, which stays dismissed;
// reprocess brings one back; purge deletes a dismissed row past the
// retention and keeps a recent one. old makes rows 8 days older.
func testDismiss(t *testing.T, db string, old func(ids ...string)) {
	app := newDestApp(t, 500)
	cfg := fanOutConfig(t, `
[[destination]]
name = "app"
url = "`+app.URL+`"
events = ["job.failed"]
retry_schedule = "none"
`)
	s := startServer(t, db, "--config", cfg)
	client := &http.Client{Timeout: 5 * time.Second}
	exploded := func(id string) string { return `{"event":"job.exploded","job_id":"` + id + `"}` }
	for _, body := range []string{exploded("job_x1"), exploded("job_x2"), exploded("job_x3"),
		`{"event":"job.failed","job_id":"job_f1","status":"ERROR"}`} {
		if code := send(t, client, s.url, body, e2eSecret); code != http.StatusNoContent {
			t.Fatalf("send %s: %d", body, code)
		}
	}
	waitLong(t, 30*time.Second, "job_f1 parked at app", func() bool { return destinationStats(t, db)["app"].ByStatus["parked"] == 1 })

	run := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		out, errOut, code := runCLI(t, nil, append(args[:1:1], append([]string{"--db", db}, args[1:]...)...)...)
		if code != wantCode {
			t.Fatalf("%v: exit %d, want %d:\n%s%s", args, code, wantCode, out, errOut)
		}
		return out, errOut
	}
	byStatus := func() map[string]int { return destinationStats(t, db)[""].ByStatus }
	three := []string{"job_f1", "job_x1", "job_x2"}

	run(1, "alert", "--max-age", "0s")
	if _, errOut := run(1, "dismiss", "job_x1"); !strings.Contains(errOut, "--note is required") {
		t.Errorf("dismiss without --note said %q", errOut)
	}
	if _, errOut := run(1, "dismiss", "--note", "tests"); !strings.Contains(errOut, "no selection") {
		t.Errorf("dismiss without a selection said %q", errOut)
	}
	// A note both stores keep as given: UTF-8 text, a sentence long.
	if _, errOut := run(1, "dismiss", "--note", "bad \xff\xfe bytes", "job_x1"); !strings.Contains(errOut, "not UTF-8") {
		t.Errorf("dismiss with a note not UTF-8 said %q", errOut)
	}
	if _, errOut := run(1, "dismiss", "--note", strings.Repeat("n", 2049), "job_x1"); !strings.Contains(errOut, "more than 2048") {
		t.Errorf("dismiss with a 2049-byte note said %q", errOut)
	}
	out, _ := run(0, append([]string{"dismiss", "--note", "tests", "--dry-run", "--json"}, three...)...)
	var dry struct {
		Rows, Pairs int
		DryRun      bool `json:"dry_run"`
		First       []struct{ ID string }
	}
	must(t, json.Unmarshal([]byte(out), &dry))
	if dry.Rows != 3 || dry.Pairs != 1 || !dry.DryRun || len(dry.First) != 3 {
		t.Errorf("dismiss --dry-run = %s, want 3 rows, 1 pair", out)
	}
	if st := byStatus(); st["parked"] != 4 || st["dismissed"] != 0 {
		t.Fatalf("after the refusals and the dry run: %v, want 4 parked and none dismissed", st)
	}

	out, _ = run(0, append([]string{"dismiss", "--note", "provider test events"}, three...)...)
	if !strings.Contains(out, "rows dismissed: 3 (destination pairs: 1)") {
		t.Errorf("dismiss said:\n%s", out)
	}
	if st := byStatus(); st["parked"] != 1 || st["dismissed"] != 3 {
		t.Errorf("stats after dismissing three: %v, want 1 parked, 3 dismissed", st)
	}
	if st := destinationStats(t, db)["app"]; st.ByStatus["parked"] != 0 || st.ByStatus["dismissed"] != 1 {
		t.Errorf("app's pairs: %v, want its parked one dismissed", st.ByStatus)
	}
	run(1, "alert", "--max-age", "0s") // job_x3 is still parked
	run(0, "dismiss", "--note", "provider test events", "--reason", "unknown_event")
	if st := byStatus(); st["parked"] != 0 || st["dismissed"] != 4 {
		t.Errorf("stats after dismissing the fourth: %v, want 0 parked, 4 dismissed", st)
	}
	if out, _ := run(0, "alert", "--max-age", "0s"); out != "" {
		t.Errorf("alert after the dismissal printed %q", out)
	}
	if out, _ := run(0, "parked", "--group-by", "reason", "--json"); strings.TrimSpace(out) != "" {
		t.Errorf("parked --group-by reason = %q, want nothing", out)
	}
	if got := jsonIDs(t, func() string { o, _ := run(0, "list", "--status", "dismissed", "--json"); return o }()); !slices.Equal(got, append(slices.Clone(three), "job_x3")) {
		t.Errorf("list --status dismissed = %v", got)
	}

	out, _ = run(0, "show", "--json", "job_f1")
	var row struct {
		Status, Reason string
		By             string `json:"dismissed_by"`
		Note           string `json:"dismiss_note"`
		At             string `json:"dismissed_at"`
	}
	must(t, json.Unmarshal([]byte(out), &row))
	if row.Status != "dismissed" || row.Reason != "handler_failed" || row.Note != "provider test events" || row.By == "" || row.At == "" {
		t.Errorf("show --json job_f1 = %s, want dismissed handler_failed with the note, who and when", out)
	}
	if out, _ := run(0, "show", "job_f1"); !strings.Contains(out, "provider test events") || !strings.Contains(out, " by "+row.By) {
		t.Errorf("show job_f1 lacks the dismissal:\n%s", out)
	}

	// Asked for and not dismissed: said, exit 1.
	out, errOut := run(1, "dismiss", "--note", "again", "job_x1", "job_nope")
	if !strings.Contains(out, "no row job_nope") || !strings.Contains(out, "not dismissed, dismissed: job_x1") || !strings.Contains(errOut, "not everything asked for was dismissed") {
		t.Errorf("dismissing a dismissed row and an unknown id said:\n%s%s", out, errOut)
	}

	// A repeat delivery of a dismissed row's body lands on it.
	if code := send(t, client, s.url, exploded("job_x1"), e2eSecret); code != http.StatusNoContent {
		t.Fatalf("repeat of job_x1: %d", code)
	}
	out, _ = run(0, "show", "--json", "job_x1")
	var x1 struct {
		Status     string
		Deliveries int
	}
	must(t, json.Unmarshal([]byte(out), &x1))
	if x1.Status != "dismissed" || x1.Deliveries != 2 {
		t.Errorf("job_x1 after a repeat = %s, want dismissed with 2 deliveries", out)
	}
	run(0, "alert", "--max-age", "0s")

	// Reprocess brings one back.
	run(0, "reprocess", "--event", "job.exploded", "job_x2")
	out, _ = run(0, "show", "--json", "job_x2")
	if strings.Contains(out, `"status":"dismissed"`) || strings.Contains(out, "dismiss_note") {
		t.Errorf("job_x2 after reprocess = %s, want it back, no dismissal", out)
	}
	s.signal(syscall.SIGTERM)
	<-s.done

	// Purge takes a dismissed row past the retention, and only such.
	old("job_x1")
	run(0, "purge", "--older-than", "7d")
	got := jsonIDs(t, func() string { o, _ := run(0, "list", "--status", "dismissed", "--json"); return o }())
	if want := []string{"job_f1", "job_x3"}; !slices.Equal(got, want) {
		t.Errorf("dismissed rows after the purge: %v, want %v (job_x1 purged)", got, want)
	}
}
