package admin

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
)

func TestShow(t *testing.T) {
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
