package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

// TestOperatorOutput drives the operator's read commands on the real
// binary over rows serve stored: tables never pass a body's control or
// bidi characters to the terminal nor grow with a 10 KB event name, list
// says on stderr where --limit stopped it, sources without --config shows
// which of serve's Sume secrets verified, purge refuses a retention under
// 7 days, and parked rows per hour are charted and alerted on.
func TestOperatorOutput(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db)
	long := strings.Repeat("x", 10<<10)
	for _, body := range []string{
		`{"event":"job.\u001b[31mexploded\u202e\u0007","job_id":"job_evil"}`,
		fmt.Sprintf(`{"event":%q,"job_id":"job_long"}`, long),
		`{"event":"job.completed","job_id":"job_1","status":"COMPLETED"}`,
		`{"event":"job.completed","job_id":"job_2","status":"COMPLETED"}`,
		`{"event":"job.completed","job_id":"job_3","status":"COMPLETED"}`,
	} {
		if got := send(t, http.DefaultClient, srv.url, body, e2eSecret); got != http.StatusNoContent {
			t.Fatalf("delivery: status %d\n%s", got, srv.logs)
		}
	}

	for _, args := range [][]string{{"list"}, {"parked"}, {"list", "--status", "parked"}, {"list", "--wide"}, {"parked", "--wide"}} {
		out, errOut, code := runCLI(t, nil, append(args, "--db", db)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		wide := slices.Contains(args, "--wide")
		if strings.ContainsAny(out, "\x1b\x07\u202e") || wide && !strings.Contains(out, `job.\x1b[31mexploded\u202e\x07`) || !strings.Contains(out, `job.\x1b[31m`) {
			t.Errorf("%v: the event is not escaped:\n%q", args, out)
		}
		widest := 0
		for line := range strings.SplitSeq(out, "\n") {
			widest = max(widest, utf8.RuneCountInString(line))
		}
		t.Logf("%v: widest line %d characters", args, widest)
		if !wide && widest > 120 || widest > 300 {
			t.Errorf("%v: a line is %d characters wide, want at most 120 (300 with --wide)", args, widest)
		}
	}
	out, _, _ := runCLI(t, nil, "list", "--db", db, "--json")
	if !strings.Contains(out, long) {
		t.Error("list --json cut the long event")
	}

	out, errOut, code := runCLI(t, nil, "list", "--db", db, "--limit", "2", "--json")
	if code != 0 || strings.Count(out, "\n") != 2 || errOut != "2 of 5 rows; --limit 0 for all\n" {
		t.Errorf("list --limit 2: exit %d, %d rows, stderr %q", code, strings.Count(out, "\n"), errOut)
	}
	if out, errOut, _ := runCLI(t, nil, "list", "--db", db, "--limit", "0", "--json"); strings.Count(out, "\n") != 5 || errOut != "" {
		t.Errorf("list --limit 0: %d rows, stderr %q", strings.Count(out, "\n"), errOut)
	}

	// Both rows were parked within the hour.
	out, errOut, code = runCLI(t, nil, "alert", "--db", db, "--parked-every-hour", "1h")
	if code != 1 || out != "rows were parked in every hour of the last 1h: 2 rows, 2 to 2 an hour (inbox parked --per-hour)\n" || errOut != "" {
		t.Errorf("alert --parked-every-hour 1h: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, _, code := runCLI(t, nil, "alert", "--db", db, "--parked-every-hour", "2h"); code != 0 {
		t.Errorf("alert --parked-every-hour 2h: exit %d, want 0: the hour before had none", code)
	}
	out, _, _ = runCLI(t, nil, "parked", "--db", db, "--per-hour", "--json")
	var total, hours int64
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		var h struct{ Count int64 }
		if err := json.Unmarshal([]byte(line), &h); err != nil {
			t.Fatalf("parked --per-hour --json: %v: %q", err, line)
		}
		total, hours = total+h.Count, hours+1
	}
	if total != 2 || hours != 48 {
		t.Errorf("parked --per-hour: %d rows in %d hours, want 2 in 48", total, hours)
	}

	_, errOut, code = runCLI(t, nil, "purge", "--db", db, "--older-than", "1d")
	if code == 0 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "at least 7d") {
		t.Errorf("purge --older-than 1d: exit %d, stderr %q; want refused in one line", code, errOut)
	}

	srv.signal(syscall.SIGTERM) // saves the secret uses
	<-srv.done
	out, errOut, code = runCLI(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=whsec_next," + e2eSecret}, "sources", "--db", db)
	if code != 0 {
		t.Fatalf("sources without --config: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("sources:\n%s\nwant a header and two secrets", out)
	}
	for i, wantVerified := range []bool{false, true} {
		f := strings.Fields(lines[i+1])
		if verified := f[len(f)-1] != "-"; verified != wantVerified || f[0] != "sume" || f[4] != "live" {
			t.Errorf("sources line %q: verified %v, want %v", lines[i+1], verified, wantVerified)
		}
	}
	if strings.Contains(out, e2eSecret) {
		t.Error("sources shows a secret")
	}
}
