package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAlertFailingForSQLite is testAlertFailingFor on a SQLite file.
func TestAlertFailingForSQLite(t *testing.T) {
	t.Parallel()
	testAlertFailingFor(t, filepath.Join(t.TempDir(), "inbox.db"))
}

// TestAlertFailingForPostgres is testAlertFailingFor on PostgreSQL.
func TestAlertFailingForPostgres(t *testing.T) {
	t.Parallel()
	testAlertFailingFor(t, pgSchema(t))
}

// testAlertFailingFor serves two Sume sources: on sume, a delivery
// verifies and then every delivery is signed with a secret serve does not
// have (the sender rotated, serve did not); on busy, forgeries come among
// verified deliveries. alert --failing-for names sume alone, with exit 1
// and the count since the first failure, and notifies a stand-in webhook;
// once sume verifies a delivery again, it is quiet.
func testAlertFailingFor(t *testing.T, db string) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, sumeSourceTOML+`
[[source]]
name = "busy"
scheme = "sume"
[[source.secret]]
value = "busy-secret-value"
`)
	client := &http.Client{Timeout: 10 * time.Second}
	srv := startServer(t, db, "--config", cfg)
	busy := strings.TrimSuffix(srv.url, "/sume") + "/busy"
	deliver := func(url, id, secret string, want int) {
		t.Helper()
		if code := send(t, client, url, `{"event":"job.completed","job_id":"`+id+`","status":"COMPLETED"}`, secret); code != want {
			t.Fatalf("delivery %s to %s: %d, want %d", id, url, code, want)
		}
	}
	deliver(srv.url, "job_before", e2eSecret, http.StatusNoContent)
	deliver(busy, "job_b1", "busy-secret-value", http.StatusNoContent)
	time.Sleep(5 * time.Millisecond) // the failures begin after the last verified delivery, to the millisecond
	began := time.Now()
	for _, id := range []string{"job_1", "job_2", "job_3", "job_4", "job_5"} {
		deliver(srv.url, id, "whsec_the-rotated-secret", http.StatusUnauthorized)
	}
	deliver(busy, "job_f1", "a-forgery", http.StatusUnauthorized)
	deliver(busy, "job_b2", "busy-secret-value", http.StatusNoContent)
	deliver(busy, "job_f2", "a-forgery", http.StatusUnauthorized)
	deliver(busy, "job_b3", "busy-secret-value", http.StatusNoContent)
	// serve saves the failures every minute and once more as it stops.
	srv.signal(syscall.SIGTERM)
	<-srv.done
	if srv.err != nil {
		t.Fatalf("serve: %v\n%s", srv.err, srv.logs)
	}
	if strings.Contains(srv.logs.String(), "whsec_the-rotated-secret") || strings.Contains(srv.logs.String(), "busy-secret-value") {
		t.Error("serve logged a secret")
	}

	h := newHook(t, http.StatusOK)
	out, errOut, code := runCLI(t, nil, "alert", "--db", db, "--failing-for", "1h", "--notify", h.url())
	want := "failing sume  a broken secret rotation? 5 requests failed verification since "
	if code != 1 || !strings.HasPrefix(out, want) || !strings.Contains(out, "none verified") || strings.Count(out, "\n") != 1 || errOut != "" {
		t.Fatalf("--failing-for 1h: exit %d, stdout %q, stderr %q; want 1 and one line %q...", code, out, errOut, want)
	}
	posts := h.posts(t)
	if len(posts) != 1 || posts[0]["check"] != "failing_verification" || posts[0]["exit_code"] != 1.0 || !strings.Contains(posts[0]["text"].(string), want) {
		t.Fatalf("notified %v, want one failing_verification notice with exit_code 1 naming sume", posts)
	}
	if strings.Contains(h.raw(), "busy") || strings.Contains(h.raw(), "secret-value") {
		t.Errorf("the notice names the busy source or a secret: %s", h.raw())
	}
	out, _, code = runCLI(t, nil, "alert", "--db", db, "--failing-for", "1h", "--json")
	var b struct {
		Source       string    `json:"source"`
		Count        int64     `json:"count"`
		First        time.Time `json:"first_at"`
		Last         time.Time `json:"last_at"`
		LastVerified time.Time `json:"last_verified_at"`
	}
	if err := json.Unmarshal([]byte(out), &b); code != 1 || err != nil || b.Source != "sume" || b.Count != 5 {
		t.Fatalf("--json: exit %d, stdout %q (%v); want 1 and sume's 5", code, out, err)
	}
	if b.First.Before(began.Truncate(time.Millisecond)) || b.Last.Before(b.First) || !b.LastVerified.Before(b.First) {
		t.Errorf("--json: first %v, last %v, last verified %v; want the failures after %v, the verified delivery before", b.First, b.Last, b.LastVerified, began)
	}
	// A busy source with a few forgeries among verified deliveries is not
	// a broken rotation; nor is a source nobody watches, or fewer
	// failures than --min-count.
	for _, args := range [][]string{
		{"--source", "busy"},
		{"--config", writeConfig(t, t.TempDir(), `
[[source]]
name = "busy"
scheme = "sume"
[[source.secret]]
value = "busy-secret-value"
`)},
		{"--min-count", "6"},
	} {
		if out, errOut, code := runCLI(t, nil, append([]string{"alert", "--db", db, "--failing-for", "1h"}, args...)...); code != 0 || out != "" {
			t.Errorf("--failing-for 1h %v: exit %d, stdout %q, stderr %q; want 0 and silence", args, code, out, errOut)
		}
	}
	if out, _, code := runCLI(t, nil, "alert", "--db", db, "--failing-for", "1h", "--source", "sume", "--min-count", "5"); code != 1 || !strings.HasPrefix(out, want) {
		t.Errorf("--source sume --min-count 5: exit %d, stdout %q; want 1", code, out)
	}
	for _, args := range [][]string{
		{"--failing-for", "0s"},
		{"--failing-for", "1h", "--quiet-for", "1h"},
		{"--failing-for", "1h", "--max-age", "1h"},
		{"--failing-for", "soon"},
	} {
		if _, errOut, code := runCLI(t, nil, append([]string{"alert", "--db", db}, args...)...); code != 2 || !strings.Contains(errOut, "--failing-for") {
			t.Errorf("alert %v: exit %d, stderr %q; want 2 naming --failing-for", args, code, errOut)
		}
	}

	// The rotation mended: a delivery verifies again, a forgery comes,
	// and another delivery verifies. The run of five is over, and the one
	// forgery since is among verified deliveries.
	srv = startServer(t, db, "--config", cfg)
	deliver(srv.url, "job_after", e2eSecret, http.StatusNoContent)
	deliver(srv.url, "job_f3", "a-forgery", http.StatusUnauthorized)
	time.Sleep(5 * time.Millisecond)
	deliver(srv.url, "job_after2", e2eSecret, http.StatusNoContent)
	srv.signal(syscall.SIGTERM)
	<-srv.done
	if out, _, code := runCLI(t, nil, "alert", "--db", db, "--failing-for", "1h"); code != 0 || out != "" {
		t.Errorf("after verified deliveries: exit %d, stdout %q; want 0 and silence", code, out)
	}
}
