package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestParkReasonPerDestination parks each of 6 rows at two destinations
// for different reasons, x answering 500 with no retry (handler_failed),
// y answering 400 later (handler_rejected, settled last, so the row holds
// it): parked, list, alert, reprocess and replay each find the 6 rows by
// x's reason, as stats counts them parked at x.
func TestParkReasonPerDestination(t *testing.T) {
	t.Parallel()
	testParkReasonPerDestination(t, filepath.Join(t.TempDir(), "inbox.db"))
}

// TestParkReasonPerDestinationPostgres is TestParkReasonPerDestination on
// PostgreSQL.
func TestParkReasonPerDestinationPostgres(t *testing.T) {
	t.Parallel()
	testParkReasonPerDestination(t, pgSchema(t))
}

func testParkReasonPerDestination(t *testing.T, db string) {
	x, y := newDestApp(t, 500), newDestApp(t, 400)
	y.delay.Store(int64(300 * time.Millisecond)) // y settles after x
	cfg := fanOutConfig(t, `
[[destination]]
name = "x"
url = "`+x.URL+`"
retry_schedule = "none"

[[destination]]
name = "y"
url = "`+y.URL+`"
`)
	s := startServer(t, db, "--config", cfg)
	rows, _, _ := sendFanOut(t, s, 6, 0, 0)
	waitLong(t, 30*time.Second, "every pair parked", func() bool {
		st := destinationStats(t, db)
		return st["x"].ByStatus["parked"] == 6 && st["y"].ByStatus["parked"] == 6
	})
	s.signal(syscall.SIGTERM)
	<-s.done

	run := func(wantCode int, args ...string) string {
		t.Helper()
		out, errOut, code := runCLI(t, nil, append(args[:1:1], append([]string{"--db", db}, args[1:]...)...)...)
		if code != wantCode {
			t.Fatalf("%v: exit %d, want %d: %s", args, code, wantCode, errOut)
		}
		return out
	}
	ids := func(args ...string) []string {
		t.Helper()
		return jsonIDs(t, run(0, append(args, "--json")...))
	}
	for _, args := range [][]string{
		{"parked", "--reason", "handler_failed"},
		{"parked", "--destination", "x", "--reason", "handler_failed"},
		{"parked", "--destination", "y", "--reason", "handler_rejected"},
		{"list", "--status", "parked", "--destination", "x"},
	} {
		if got := ids(args...); !slices.Equal(got, rows) {
			t.Errorf("%v found %v, want %v", args, got, rows)
		}
	}
	if got := ids("parked", "--destination", "y", "--reason", "handler_failed"); len(got) != 0 {
		t.Errorf("parked --destination y --reason handler_failed found %v, want none", got)
	}
	groups := run(0, "parked", "--group-by", "reason", "--json")
	for _, want := range []string{`"reason":"handler_failed","count":6`, `"reason":"handler_rejected","count":6`} {
		if !strings.Contains(groups, want) {
			t.Errorf("parked --group-by reason lacks %s:\n%s", want, groups)
		}
	}
	time.Sleep(time.Second) // older than --max-age 1s
	if out := run(1, "alert", "--max-age", "1s", "--reason", "handler_failed"); !strings.Contains(out, "handler_failed") || !strings.Contains(out, " 6 parked longer") {
		t.Errorf("alert --reason handler_failed said:\n%s\nwant 6 handler_failed rows", out)
	}
	if out := run(1, "alert", "--parked-every-hour", "1h", "--reason", "handler_failed"); !strings.Contains(out, "6 rows") {
		t.Errorf("alert --parked-every-hour 1h --reason handler_failed said:\n%s\nwant 6 rows", out)
	}
	if out := run(0, "reprocess", "--config", cfg, "--reason", "handler_failed", "--dry-run"); !strings.Contains(out, "moved to new: 6") {
		t.Errorf("reprocess --reason handler_failed --dry-run said:\n%s\nwant 6 rows moved", out)
	}

	// The runbook: replay x's failures to x alone.
	var rep struct {
		Rows  int `json:"rows"`
		Pairs int `json:"pairs"`
	}
	must(t, json.Unmarshal([]byte(run(0, "replay", "--status", "parked", "--reason", "handler_failed", "--destination", "x", "--json")), &rep))
	if rep.Rows != 6 || rep.Pairs != 6 {
		t.Fatalf("replay --status parked --reason handler_failed --destination x = %+v, want 6 rows, 6 pairs", rep)
	}
	st := destinationStats(t, db)
	if st["x"].ByStatus["new"] != 6 || st["y"].ByStatus["parked"] != 6 {
		t.Errorf("after the replay x = %v, y = %v; want x's 6 pairs new, y's still parked", st["x"].ByStatus, st["y"].ByStatus)
	}
	requests := y.requests()
	x.code.Store(204)
	s = startServer(t, db, "--config", cfg)
	waitLong(t, 30*time.Second, "x to take its 6 rows", func() bool { return destinationStats(t, db)["x"].ByStatus["done"] == 6 })
	if got := y.requests(); got != requests {
		t.Errorf("y got %d requests after the replay to x, want none", got-requests)
	}
	s.signal(syscall.SIGTERM)
	<-s.done
}

// jsonIDs returns the ids of the rows out holds, one JSON object a line
// (list --json, parked --json), sorted.
func jsonIDs(t *testing.T, out string) []string {
	t.Helper()
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r struct {
			ID string `json:"id"`
		}
		must(t, json.Unmarshal([]byte(line), &r))
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	return ids
}
