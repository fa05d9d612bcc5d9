package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAlertMemorySQLite is testAlertMemory on a SQLite file.
func TestAlertMemorySQLite(t *testing.T) {
	t.Parallel()
	testAlertMemory(t, filepath.Join(t.TempDir(), "inbox.db"))
}

// TestAlertMemoryPostgres is testAlertMemory on PostgreSQL.
func TestAlertMemoryPostgres(t *testing.T) {
	t.Parallel()
	testAlertMemory(t, pgSchema(t))
}

// changes returns what each post of h says of its findings: for each
// post, "change finding" per finding, and checks that every post is the
// documented JSON with a "text" that holds its lines.
func changes(t *testing.T, h *hook) [][]string {
	t.Helper()
	var out [][]string
	for _, p := range h.posts(t) {
		text, _ := p["text"].(string)
		lines, _ := p["lines"].([]any)
		if !strings.HasPrefix(text, "inbox alert on ") || len(lines) == 0 {
			t.Errorf("post %v: want a text and its lines", p)
		}
		for _, l := range lines {
			if !strings.Contains(text, l.(string)) {
				t.Errorf("post's text %q lacks its line %q", text, l)
			}
		}
		var said []string
		cs, _ := p["changes"].([]any)
		for _, c := range cs {
			m, _ := c.(map[string]any)
			said = append(said, m["change"].(string)+" "+m["finding"].(string))
		}
		out = append(out, said)
	}
	return out
}

// testAlertMemory parks unknown_event rows one by one and runs alert
// --max-age 0s with --notify (a stand-in chat webhook) and --on-change as
// cron would: a finding is posted when it opens, again when its count
// doubles, again after --repeat, once as resolved when reprocess clears
// it, and never in between; --on-change prints the same and nothing on a
// run with no change; the exit code stays 1 while the rows are parked.
// Two runs at once post a change once.
func testAlertMemory(t *testing.T, db string) {
	srv := startServer(t, db)
	park := func(id string) {
		t.Helper()
		body := `{"event":"job.exploded","job_id":"` + id + `","status":"COMPLETED"}`
		if code := send(t, http.DefaultClient, srv.url, body, e2eSecret); code != http.StatusNoContent {
			t.Fatalf("delivery %s: %d, want 204", id, code)
		}
	}
	h := newHook(t, http.StatusOK)
	alert := func(extra ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, nil, append([]string{"alert", "--db", db, "--max-age", "0s", "--notify", h.url()}, extra...)...)
	}
	const finding = "unknown_event parked longer than 0s"
	want := func(step string, posts ...string) {
		t.Helper()
		got := changes(t, h)
		var flat []string
		for _, p := range got {
			flat = append(flat, strings.Join(p, "; "))
		}
		if strings.Join(flat, " | ") != strings.Join(posts, " | ") {
			t.Fatalf("%s: posts said\n\t%s\nwant\n\t%s", step, strings.Join(flat, "\n\t"), strings.Join(posts, "\n\t"))
		}
	}

	park("job_1")
	// Two cron runs in a row with the same finding: both print it and exit
	// 1, one posts.
	for run := range 2 {
		out, errOut, code := alert()
		if code != 1 || !strings.HasPrefix(out, "unknown_event  1 parked longer than 0s") || errOut != "" {
			t.Fatalf("run %d: exit %d, stdout %q, stderr %q; want 1 and the finding", run+1, code, out, errOut)
		}
	}
	want("two runs, one finding", "opened "+finding)
	// With --on-change, an unchanged run prints nothing, and still exits 1.
	if out, errOut, code := alert("--on-change"); code != 1 || out != "" || errOut != "" {
		t.Fatalf("--on-change, nothing changed: exit %d, stdout %q, stderr %q; want 1 and silence", code, out, errOut)
	}
	want("unchanged", "opened "+finding)

	// Growth: a second row doubles the count, a third does not, a fourth
	// doubles it again.
	park("job_2")
	out, _, code := alert("--on-change")
	if code != 1 || !strings.HasPrefix(out, "unknown_event  2 parked longer than 0s") || !strings.Contains(out, "(grew from 1;") {
		t.Fatalf("doubled: exit %d, stdout %q; want 1 and the line marked grew", code, out)
	}
	park("job_3")
	if out, _, code := alert("--on-change"); code != 1 || out != "" {
		t.Fatalf("grown by half: exit %d, stdout %q; want 1 and silence", code, out)
	}
	park("job_4")
	alert("--on-change")
	want("growth", "opened "+finding, "grew "+finding, "grew "+finding)

	// --repeat: posted again once it has been open that long since the
	// last post.
	if out, _, _ := alert("--on-change", "--repeat", "1h"); out != "" {
		t.Fatalf("--repeat 1h right after a post: stdout %q, want silence", out)
	}
	time.Sleep(1100 * time.Millisecond)
	out, _, code = alert("--on-change", "--repeat", "1s")
	if code != 1 || !strings.Contains(out, "(still open, since ") {
		t.Fatalf("--repeat 1s: exit %d, stdout %q; want 1 and the line marked still open", code, out)
	}
	want("repeat", "opened "+finding, "grew "+finding, "grew "+finding, "repeated "+finding)

	// Cleared: one resolved post, exit 0, then nothing.
	if _, errOut, code := runCLI(t, nil, "reprocess", "--db", db, "--reason", "unknown_event",
		"--event", "job.completed", "--event", "job.exploded"); code != 0 {
		t.Fatalf("reprocess: exit %d: %s", code, errOut)
	}
	out, errOut, code := alert("--on-change", "--json")
	var r struct {
		Resolved struct {
			Finding string `json:"finding"`
			Count   int64  `json:"count"`
		} `json:"resolved"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Resolved.Finding != finding || r.Resolved.Count != 4 || errOut != "" {
		t.Fatalf("cleared: exit %d, stdout %q, stderr %q; want 0 and the finding resolved at 4", code, out, errOut)
	}
	for run := range 2 {
		if out, errOut, code := alert("--on-change"); code != 0 || out != "" || errOut != "" {
			t.Fatalf("after the resolve, run %d: exit %d, stdout %q, stderr %q; want 0 and silence", run+1, code, out, errOut)
		}
	}
	want("resolved", "opened "+finding, "grew "+finding, "grew "+finding, "repeated "+finding, "resolved "+finding)
	if p := h.posts(t); p[len(p)-1]["exit_code"] != 0.0 || !strings.Contains(p[len(p)-1]["text"].(string), "resolved "+finding) {
		t.Errorf("the resolved post: %v, want exit_code 0 and a line saying resolved", p[len(p)-1])
	}

	// Two runs at once (two cron lines in the same minute) post a change
	// once, and a resolve once.
	park("job_5")
	together := func() {
		t.Helper()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { alert("--on-change") })
		}
		wg.Wait()
	}
	together()
	together()
	if _, errOut, code := runCLI(t, nil, "reprocess", "--db", db, "--reason", "unknown_event",
		"--event", "job.completed", "--event", "job.exploded"); code != 0 {
		t.Fatalf("reprocess: exit %d: %s", code, errOut)
	}
	together()
	together()
	want("two at once", "opened "+finding, "grew "+finding, "grew "+finding, "repeated "+finding, "resolved "+finding,
		"opened "+finding, "resolved "+finding)
}

// TestAlertMemoryUnkept: alert --notify on a database this user cannot
// write still posts every open finding, on every run, and says on stderr
// and in the post that it could not keep what it reported.
func TestAlertMemoryUnkept(t *testing.T) {
	t.Parallel()
	dsn := pgSchema(t)
	srv := startServer(t, dsn)
	if code := send(t, http.DefaultClient, srv.url, "not json", e2eSecret); code != http.StatusNoContent {
		t.Fatalf("poison delivery: %d, want 204", code)
	}
	// A role that may read the inbox and write nothing.
	reader := "alert_ro_" + strings.TrimPrefix(mustQuery(t, dsn).Get("options"), "-csearch_path=e2e_")
	schema := strings.TrimPrefix(mustQuery(t, dsn).Get("options"), "-csearch_path=")
	base := pgDatabase(t)
	pgExec(t, base, `CREATE ROLE `+reader+` LOGIN PASSWORD 'pw'`)
	t.Cleanup(func() {
		pgExec(t, base, `DROP OWNED BY `+reader)
		pgExec(t, base, `DROP ROLE `+reader)
	})
	pgExec(t, base, `GRANT USAGE ON SCHEMA `+schema+` TO `+reader)
	pgExec(t, base, `GRANT SELECT ON ALL TABLES IN SCHEMA `+schema+` TO `+reader)
	ro := withUser(dsn, reader, "pw")
	h := newHook(t, http.StatusOK)
	for run := range 2 {
		out, errOut, code := runCLI(t, nil, "alert", "--db", ro, "--max-age", "0s", "--notify", h.url(), "--on-change")
		if code != 1 || !strings.HasPrefix(out, "unparseable  1 parked longer than 0s") ||
			!strings.HasPrefix(errOut, "inbox: alert could not keep what it reported") || strings.Count(errOut, "\n") != 1 {
			t.Fatalf("run %d on a read-only role: exit %d, stdout %q, stderr %q; want 1, the finding, and a line saying so", run+1, code, out, errOut)
		}
	}
	posts := h.posts(t)
	if len(posts) != 2 {
		t.Fatalf("%d posts from two runs that cannot remember, want 2", len(posts))
	}
	for _, p := range posts {
		if text := p["text"].(string); !strings.Contains(text, "unparseable") || !strings.Contains(text, "could not keep what it reported") {
			t.Errorf("post %q: want the finding and a word on the memory", text)
		}
	}
}
