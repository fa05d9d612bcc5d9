package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFindSQLite and TestFindPostgres: list and parked narrow to exactly
// the rows each of --since, --until, --event, --job-status, --source and
// --contains selects, on the real binary; --contains matches % _ \ and
// bytes that are not UTF-8 as themselves and says on stderr when
// --scan-limit left older rows unsearched; the tables show JOB STATUS.
func TestFindSQLite(t *testing.T) {
	t.Parallel()
	testFind(t, filepath.Join(t.TempDir(), "inbox.db"))
}

func TestFindPostgres(t *testing.T) {
	t.Parallel()
	testFind(t, pgSchema(t))
}

func testFind(t *testing.T, db string) {
	srv, shop := ghSourceBeside(t, db, sumeSourceTOML)
	// Each row is received in a later millisecond than the one before, so
	// --since and --until can fall between them.
	tick := func() {
		for ms := time.Now().UnixMilli(); time.Now().UnixMilli() == ms; {
		}
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, body := range []string{
		`{"event":"job.completed","job_id":"job_ok","status":"COMPLETED","payload":{"note":"50% off_now \\ done"}}`,
		`{"event":"job.failed","job_id":"job_err","status":"ERROR","payload":{"note":"50X offXnow"}}`,
		"shop",
		`{"event":"job.exploded","job_id":"job_px","status":"ERROR"}`,
		`{"event":"job.exploded","job_id":"job_py","status":"COMPLETED","note":"needle"}`,
		job("job_new"),
	} {
		if body == "shop" {
			if got := shop("\xff\xfe\x00needle\x00", "d-1", "push"); got != http.StatusOK {
				t.Fatalf("shop delivery: %d", got)
			}
		} else if got := send(t, client, srv.url, body, e2eSecret); got != http.StatusNoContent {
			t.Fatalf("delivery %s: %d", body, got)
		}
		tick()
	}

	type row struct {
		ID         string    `json:"id"`
		ReceivedAt time.Time `json:"received_at"`
	}
	rows := func(args ...string) ([]row, string) {
		t.Helper()
		out, errOut, code := runCLI(t, nil, append(append(args[:1:1], "--db", db, "--json"), args[1:]...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		var got []row
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if line != "" {
				var r row
				must(t, json.Unmarshal([]byte(line), &r))
				got = append(got, r)
			}
		}
		return got, errOut
	}
	ids := func(args ...string) ([]string, string) {
		t.Helper()
		got, errOut := rows(args...)
		var out []string
		for _, r := range got {
			out = append(out, r.ID)
		}
		return out, errOut
	}
	received := map[string]string{}
	every, _ := rows("list")
	for _, r := range every {
		received[r.ID] = r.ReceivedAt.Format(time.RFC3339Nano)
	}
	all := []string{"job_new", "job_py", "job_px", "shop/d-1", "job_err", "job_ok"}
	if got, _ := ids("list"); !slices.Equal(got, all) {
		t.Fatalf("list: %v, want %v", got, all)
	}
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"list", "--event", "job.failed"}, []string{"job_err"}},
		{[]string{"list", "--event", "push"}, []string{"shop/d-1"}},
		{[]string{"list", "--job-status", "ERROR"}, []string{"job_px", "job_err"}},
		{[]string{"list", "--job-status", "COMPLETED", "--status", "new"}, []string{"job_new", "job_ok"}},
		{[]string{"list", "--job-status", "error"}, nil},
		{[]string{"list", "--source", "shop"}, []string{"shop/d-1"}},
		{[]string{"list", "--since", received["shop/d-1"]}, []string{"job_new", "job_py", "job_px", "shop/d-1"}},
		{[]string{"list", "--until", received["shop/d-1"]}, []string{"job_err", "job_ok"}},
		{[]string{"list", "--since", received["job_err"], "--until", received["job_py"]}, []string{"job_px", "shop/d-1", "job_err"}},
		{[]string{"list", "--since", "1h"}, all},
		{[]string{"list", "--until", "1h"}, nil},
		{[]string{"list", "--contains", "needle"}, []string{"job_py", "shop/d-1"}},
		{[]string{"list", "--contains", "needle", "--source", "shop"}, []string{"shop/d-1"}},
		{[]string{"list", "--contains", "NEEDLE"}, nil},
		{[]string{"list", "--contains", "\xff\xfe"}, []string{"shop/d-1"}},
		{[]string{"list", "--contains", "50%"}, []string{"job_ok"}},
		{[]string{"list", "--contains", "%"}, []string{"job_ok"}},
		{[]string{"list", "--contains", "off_now"}, []string{"job_ok"}},
		{[]string{"list", "--contains", `\`}, []string{"job_ok"}},
		{[]string{"list", "--contains", `"job_id":"job_e`}, []string{"job_err"}},
		{[]string{"parked", "--job-status", "ERROR"}, []string{"job_px"}},
		{[]string{"parked", "--event", "job.exploded", "--until", received["job_py"]}, []string{"job_px"}},
		{[]string{"parked", "--since", received["job_py"]}, []string{"job_py"}},
		{[]string{"parked", "--contains", "needle"}, []string{"job_py"}},
	} {
		got, errOut := ids(tt.args...)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%q: %v, want %v", tt.args, got, tt.want)
		}
		if strings.Contains(errOut, "scanned") {
			t.Errorf("%q: a note of a cut scan with none cut: %s", tt.args, errOut)
		}
	}

	// The bound: the newest row holds no needle, so a scan of one finds
	// nothing and says so; parked's newest holds it, found and cut.
	const note = "scanned the newest 1 rows; older ones not searched: raise --scan-limit\n"
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"list", "--contains", "needle", "--scan-limit", "1"}, nil},
		{[]string{"parked", "--contains", "needle", "--scan-limit", "1"}, []string{"job_py"}},
	} {
		if got, errOut := ids(tt.args...); !slices.Equal(got, tt.want) || errOut != note {
			t.Errorf("%q: %v, stderr %q; want %v and %q", tt.args, got, errOut, tt.want, note)
		}
	}
	if got, errOut := ids("list", "--contains", "needle", "--scan-limit", "6"); len(got) != 2 || errOut != "" {
		t.Errorf("a scan of every row: %v, stderr %q", got, errOut)
	}

	// The tables: a JOB STATUS column, from the body's status.
	for _, tt := range []struct {
		args []string
		want map[string]string
	}{
		{[]string{"list"}, map[string]string{"job_ok": "COMPLETED", "job_err": "ERROR", "shop/d-1": "-", "job_px": "ERROR"}},
		{[]string{"parked"}, map[string]string{"job_px": "ERROR", "job_py": "COMPLETED"}},
	} {
		out, errOut, code := runCLI(t, nil, append(tt.args, "--db", db)...)
		if code != 0 {
			t.Fatalf("%v: %s", tt.args, errOut)
		}
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		col := strings.Index(lines[0], "JOB STATUS")
		if col < 0 {
			t.Fatalf("%v: no JOB STATUS column:\n%s", tt.args, out)
		}
		seen := 0
		for _, line := range lines[1:] {
			id := strings.Fields(line)[0]
			if want, ok := tt.want[id]; ok {
				seen++
				if got := strings.Fields(line[col:])[0]; got != want {
					t.Errorf("%v: %s has JOB STATUS %q, want %q:\n%s", tt.args, id, got, want, out)
				}
			}
		}
		if seen != len(tt.want) {
			t.Errorf("%v: %d of the rows %v:\n%s", tt.args, seen, tt.want, out)
		}
	}

	// Refusals, each before the store is read.
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "--since", "yesterday"}, `--since "yesterday": want a time such as`},
		{[]string{"list", "--contains", ""}, "--contains: want the text"},
		{[]string{"list", "--scan-limit", "-1"}, "--scan-limit -1"},
		{[]string{"list", "--since", "1h", "--until", "2h"}, "is not before --until"},
		{[]string{"parked", "--per-hour", "--contains", "x"}, "--per-hour and --contains"},
	} {
		_, errOut, code := runCLI(t, nil, append(tt.args, "--db", db)...)
		if code == 0 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want %q", tt.args, code, errOut, tt.want)
		}
	}
}
