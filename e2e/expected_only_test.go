package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// expectedOnlyConfig is a config whose Sume source takes only expected
// jobs.
const expectedOnlyConfig = `[[source]]
name = "sume"
scheme = "sume"
expected_only = true
[[source.secret]]
env = "SUME_COM_WEBHOOK_SIGNING_SECRET"
`

// TestExpectedOnlyParksUnknownJob serves a Sume source with expected_only
// on SQLite: a job inbox expect recorded is stored new (its expectation
// done), one nobody expected is answered 204 and parked unknown_job at
// receipt, inbox parked finds it by that reason, and inbox reprocess
// brings it back once it turns out to be real.
func TestExpectedOnlyParksUnknownJob(t *testing.T) {
	t.Parallel()
	testExpectedOnly(t, filepath.Join(t.TempDir(), "inbox.db"))
}

// TestExpectedOnlyParksUnknownJobPostgres is TestExpectedOnlyParksUnknownJob
// on PostgreSQL.
func TestExpectedOnlyParksUnknownJobPostgres(t *testing.T) {
	t.Parallel()
	testExpectedOnly(t, pgSchema(t))
}

func testExpectedOnly(t *testing.T, db string) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "inbox.toml")
	if err := os.WriteFile(cfg, []byte(expectedOnlyConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, db, "--config", cfg)
	if _, stderr, code := runCLI(t, nil, "expect", "--db", db, "job_expected"); code != 0 {
		t.Fatalf("inbox expect: exit %d: %s", code, stderr)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, id := range []string{"job_expected", "job_unknown"} {
		if code := send(t, client, s.url, jobBody(id), e2eSecret); code != 204 {
			t.Fatalf("%s: %d, want 204", id, code)
		}
	}
	rows := map[string]map[string]any{}
	for _, r := range cliLines(t, "list", "--db", db, "--json") {
		rows[r["id"].(string)] = r
	}
	if r := rows["job_expected"]; r["status"] != "new" {
		t.Errorf("the expected job: %v, want new", r)
	}
	if r := rows["job_unknown"]; r["status"] != "parked" || r["reason"] != "unknown_job" {
		t.Errorf("the job nobody expected: %v, want parked unknown_job", r)
	}
	parked := cliLines(t, "parked", "--db", db, "--reason", "unknown_job", "--json")
	if len(parked) != 1 || parked[0]["id"] != "job_unknown" {
		t.Errorf("inbox parked --reason unknown_job = %v, want job_unknown", parked)
	}
	exp := cliLines(t, "expected", "--db", db, "--json")
	if len(exp) != 1 || exp[0]["state"] != "done" {
		t.Errorf("inbox expected = %v, want job_expected done", exp)
	}

	// The job was real after all: reprocess stores it.
	out, stderr, code := runCLI(t, nil, "reprocess", "--db", db, "--config", cfg, "--reason", "unknown_job")
	if code != 0 {
		t.Fatalf("inbox reprocess: exit %d: %s", code, stderr)
	}
	back := false
	for _, r := range cliLines(t, "list", "--db", db, "--json") {
		back = back || (r["id"] == "job_unknown" && r["status"] == "new")
	}
	if !back {
		t.Errorf("after reprocess, job_unknown is not new:\n%s", out)
	}

	// expected_only on a source inbox expect records nothing for is refused.
	other := filepath.Join(dir, "other.toml")
	text := strings.Replace(expectedOnlyConfig, `name = "sume"`, `name = "sume2"`, 1)
	if err := os.WriteFile(other, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(t, nil, "sources", "--config", other); code == 0 || !strings.Contains(stderr, "expected_only belongs to the source named sume") {
		t.Errorf("expected_only on source sume2: exit %d, %q", code, stderr)
	}
}
