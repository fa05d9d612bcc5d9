package e2e

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRowFieldsAgree checks that inbox show and the console's row page
// give a row's fields alike, names, order and text, and that each field
// show prints is one inbox show --json gives.
func TestRowFieldsAgree(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db, "--admin-addr", "127.0.0.1:0")
	client := &http.Client{Timeout: 10 * time.Second}
	for _, b := range []string{`{"event":"job.completed","job_id":"job_f","status":"COMPLETED"}`,
		`{"event":"job.completed","job_id":"job_p","status":"COMPLETED","payload":null,"error":{"code":"payload_too_large","result_url":"https://api.example/r"}}`} {
		if got := send(t, client, srv.url, b, e2eSecret); got != http.StatusNoContent {
			t.Fatalf("delivery: %d", got)
		}
	}
	for _, id := range []string{"job_f", "job_p"} {
		out, errOut, code := runCLI(t, nil, "show", "--db", db, id)
		if code != 0 {
			t.Fatalf("inbox show %s: exit %d: %s", id, code, errOut)
		}
		var shown [][2]string
		for line := range strings.Lines(out) {
			name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
			if !ok {
				break
			}
			shown = append(shown, [2]string{name, strings.TrimSpace(value)})
		}
		resp, err := client.Get(srv.admin + "/row?id=" + url.QueryEscape(id))
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		var paged [][2]string
		for _, m := range regexp.MustCompile(`<tr><th>(.*?)</th><td>(.*?)</td></tr>`).FindAllStringSubmatch(string(page), -1) {
			paged = append(paged, [2]string{html.UnescapeString(m[1]), html.UnescapeString(m[2])})
		}
		if len(shown) < 10 || len(paged) != len(shown) {
			t.Fatalf("%s: inbox show gives %d fields, the row page %d:\n%v\n%v", id, len(shown), len(paged), shown, paged)
		}
		for i := range shown {
			if shown[i] != paged[i] {
				t.Errorf("%s: field %d is %q in inbox show, %q on the row page", id, i, shown[i], paged[i])
			}
		}
		out, _, _ = runCLI(t, nil, "show", "--db", db, "--json", id)
		var row map[string]any
		if err := json.Unmarshal([]byte(out), &row); err != nil {
			t.Fatal(err)
		}
		for _, f := range shown {
			// A field shown on one line may join two keys (lease).
			_, ok := row[f[0]]
			_, at := row[f[0]+"_at"]
			if !ok && !at && f[1] != "-" {
				t.Errorf("%s: inbox show prints %s = %s, which --json does not give", id, f[0], f[1])
			}
		}
	}
}
