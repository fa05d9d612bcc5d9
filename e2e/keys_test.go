package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"inbox/scheme"
)

// TestSourceKeys runs serve with a Sume-scheme source named acme and a
// generic HMAC source keyed by its body's sha256, then reprocess over both:
// acme's rows are keyed within acme and reprocess takes them (it used to
// fail, "names job acme/j1, recorded as j1"), and the hmac source's
// deliveries are stored, each once, rather than parked missing_key.
func TestSourceKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	const hmacSecret = "generic-hmac-secret"
	cfg := writeConfig(t, dir, `
[[source]]
name = "acme"
scheme = "sume"
events = ["job.completed"]
[[source.secret]]
env = "SUME_COM_WEBHOOK_SIGNING_SECRET"

[[source]]
name = "hm"
scheme = "hmac"
[source.hmac]
header = "X-Signature"
prefix = "sha256="
encoding = "hex"
key_from = "sha256"
event_header = "X-Event"
[[source.secret]]
value = "`+hmacSecret+`"
`)
	s := startServer(t, db, "--config", cfg)
	base := strings.TrimSuffix(s.url, "/webhooks/sume")
	client := &http.Client{Timeout: 5 * time.Second}

	// acme: a job event outside its set, then twice the same event in
	// other bytes: one job row and two rows parked beside it.
	for i, body := range []string{
		`{"event":"job.exploded","job_id":"j1","status":"COMPLETED","n":1}`,
		`{"event":"job.exploded","job_id":"j1","status":"COMPLETED","n":2}`,
		`{"event":"job.exploded","job_id":"j1","status":"COMPLETED","n":3}`,
	} {
		if code := send(t, client, base+"/webhooks/acme", body, e2eSecret); code != http.StatusNoContent {
			t.Fatalf("acme delivery %d: %d, want 204\n%s", i, code, s.logs)
		}
	}

	// hm: two bodies, one sent twice.
	hm, err := scheme.NewHMAC(scheme.HMACOptions{Header: "X-Signature", Prefix: "sha256=", Encoding: "hex", KeyFrom: "sha256", EventHeader: "X-Event"})
	if err != nil {
		t.Fatal(err)
	}
	for i, body := range []string{`{"order":1}`, `{"order":2}`, `{"order":1}`} {
		req, err := http.NewRequest(http.MethodPost, base+"/webhooks/hm", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Signature", hm.Sign(hmacSecret, 0, []byte(body)))
		req.Header.Set("X-Event", "order.paid")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("hm delivery %d: %d, want 200\n%s", i, resp.StatusCode, s.logs)
		}
	}

	env := []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}
	rows := func(args ...string) []map[string]any {
		t.Helper()
		out, errOut, code := runCLI(t, env, append([]string{"list", "--db", db, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("list %v: exit %d: %s", args, code, errOut)
		}
		var got []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if line == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("list: %v: %q", err, line)
			}
			got = append(got, m)
		}
		return got
	}
	hmRows := rows("--source", "hm")
	if len(hmRows) != 2 {
		t.Fatalf("hm rows: %v, want one per body", hmRows)
	}
	for _, r := range hmRows {
		id, _ := r["id"].(string)
		if r["status"] != "new" || !strings.HasPrefix(id, "hm/sha256:") {
			t.Errorf("hm row %v: want new, keyed hm/sha256:<the body's sum>", r)
		}
	}
	acme := rows("--source", "acme")
	if len(acme) != 3 {
		t.Fatalf("acme rows: %v, want the job row and two beside it", acme)
	}
	for _, r := range acme {
		if r["job_id"] != "acme/j1" || r["reason"] != "unknown_event" {
			t.Errorf("acme row %v: want job acme/j1, parked unknown_event", r)
		}
	}

	// Now with job.exploded in acme's set: the job row becomes new, the
	// rows beside it fold into it.
	cfgNow := writeConfig(t, t.TempDir(), strings.Replace(string(readFile(t, cfg)), `events = ["job.completed"]`, `events = ["job.completed", "job.exploded"]`, 1))
	out, errOut, code := runCLI(t, env, "reprocess", "--db", db, "--config", cfgNow, "--reason", "unknown_event", "--json")
	if code != 0 {
		t.Fatalf("reprocess: exit %d: %s%s", code, out, errOut)
	}
	var rep struct{ Moved, Folded int }
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Moved != 1 || rep.Folded != 2 {
		t.Errorf("reprocess: %s (%v), want 1 moved, 2 folded", out, err)
	}
	acme = rows("--source", "acme")
	if len(acme) != 1 || acme[0]["id"] != "acme/j1" || acme[0]["status"] != "new" || acme[0]["deliveries"] != float64(3) {
		t.Errorf("acme rows after reprocess: %v, want acme/j1 new with 3 deliveries", acme)
	}
}
