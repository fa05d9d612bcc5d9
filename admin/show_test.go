package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

func TestShow(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	binary := "\x1b[2J\x00\xff\xfe binary"
	text := "plain \x1b[31mred\r\u202eevil\tend"
	fill(t, path, time.Now(), completed("job_1"), binary, text)

	t.Run("JSON body is indented", func(t *testing.T) {
		out, err := run(t, "show", "--db", path, "job_1")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"id            job_1\n", "status        new\n", "event         job.completed\n",
			"delivery_ts   1800000000 (2027-01-15T08:00:00Z)\n", "\n{\n  \"event\": \"job.completed\",\n  \"job_id\": \"job_1\",\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("output has no %q:\n%s", want, out)
			}
		}
	})
	t.Run("every field of inbox.EventFields, in order", func(t *testing.T) {
		out, err := run(t, "show", "--db", path, "job_1")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(out, "\n")
		for i, f := range inbox.EventFields() {
			if i >= len(lines) || !strings.HasPrefix(lines[i], f.Name+" ") {
				t.Errorf("line %d of show is not %s:\n%s", i+1, f.Name, out)
				break
			}
		}
	})
	t.Run("binary body is hex-dumped", func(t *testing.T) {
		out, err := run(t, "show", "--db", path, inbox.BodyKey(sha(binary)))
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(out, "\x1b\x00") || strings.Contains(out, "\xff") {
			t.Errorf("raw control bytes reached the terminal: %q", out)
		}
		if !strings.Contains(out, "hex dump") || !strings.Contains(out, "1b 5b 32 4a 00 ff fe") {
			t.Errorf("no hex dump:\n%s", out)
		}
	})
	t.Run("control characters in text are escaped", func(t *testing.T) {
		out, err := run(t, "show", "--db", path, inbox.BodyKey(sha(text)))
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(out, "\x1b\r\u202e") {
			t.Errorf("raw control characters reached the terminal: %q", out)
		}
		if !strings.Contains(out, `plain \x1b[31mred\x0d\u202eevil`+"\tend\n") {
			t.Errorf("body not escaped as expected:\n%s", out)
		}
	})
	t.Run("--json", func(t *testing.T) {
		var row struct {
			inbox.Event
			Body       *string `json:"body"`
			BodyBase64 string  `json:"body_base64"`
		}
		out, err := run(t, "show", "--db", path, "--json", "job_1")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out), &row); err != nil {
			t.Fatal(err)
		}
		if row.ID != "job_1" || row.Status != inbox.StatusNew || row.Body == nil || *row.Body != completed("job_1") || row.BodyBase64 != "" {
			t.Errorf("show --json = %s", out)
		}
		out, err = run(t, "show", "--db", path, "--json", inbox.BodyKey(sha(binary)))
		if err != nil {
			t.Fatal(err)
		}
		row.Body, row.BodyBase64 = nil, ""
		if err := json.Unmarshal([]byte(out), &row); err != nil {
			t.Fatal(err)
		}
		if row.Body != nil || row.BodyBase64 != base64.StdEncoding.EncodeToString([]byte(binary)) {
			t.Errorf("show --json of a binary body = %s", out)
		}
	})
	t.Run("errors", func(t *testing.T) {
		if _, err := run(t, "show", "--db", path, "job_404"); err == nil || !strings.Contains(err.Error(), `no row with id "job_404"`) {
			t.Errorf("missing row: err = %v", err)
		}
		if _, err := run(t, "show", "--db", path); err == nil {
			t.Error("no id: no error")
		}
	})
}

// TestSourceAddressing names other sources' rows: list filters by
// --source, show takes the row id or --source and the key, and redeliver,
// which asks Sume's API, refuses them.
func TestSourceAddressing(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	fill(t, path, time.Now(), completed("job_1"), exploded("job_2"))
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	for _, d := range []inbox.Delivery{
		keyed("vibe", "run_1", "scheduled_job.run", []byte(`{"runId":"run_1"}`), deliveryTS, inbox.Rules{}),
		keyed("gh", "d1", "ping", []byte(`{}`), deliveryTS, inbox.Rules{Events: []string{"push"}}),
	} {
		if _, err := s.Put(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "list", "--db", path, "--source", "vibe")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "vibe/run_1 ") || strings.Contains(out, "job_1") || strings.Contains(out, "gh/d1") {
		t.Errorf("list --source vibe:\n%s", out)
	}
	if f := strings.Fields(strings.Split(out, "\n")[1]); len(f) < 2 || f[1] != "vibe" {
		t.Errorf("list: no SOURCE column:\n%s", out)
	}
	out, err = run(t, "list", "--db", path, "--source", "sume")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "job_1 ") || strings.Contains(out, "vibe/") {
		t.Errorf("list --source sume:\n%s", out)
	}
	if _, err := run(t, "list", "--db", path, "--source", "a/b"); err == nil {
		t.Error("list --source a/b: accepted")
	}
	for _, args := range [][]string{{"vibe/run_1"}, {"--source", "vibe", "run_1"}} {
		out, err := run(t, append([]string{"show", "--db", path}, args...)...)
		if err != nil {
			t.Fatalf("show %v: %v", args, err)
		}
		if !strings.Contains(out, "id            vibe/run_1\n") || !strings.Contains(out, "source        vibe\n") {
			t.Errorf("show %v:\n%s", args, out)
		}
	}
	_, err = run(t, "redeliver", "--db", path, "--api-key", "k", "--dry-run", "job_1", "gh/d1")
	if err == nil || !strings.Contains(err.Error(), "gh/d1") || !strings.Contains(err.Error(), "Sume job ids only") {
		t.Errorf("redeliver gh/d1: %v, want refused", err)
	}
	out, err = run(t, "redeliver", "--db", path, "--api-key", "k", "--dry-run", "--reason", "unknown_event")
	if err != nil {
		t.Fatal(err)
	}
	if out != "would redeliver job_2\n" {
		t.Errorf("redeliver --reason unknown_event: %q, want the Sume job only", out)
	}
}
