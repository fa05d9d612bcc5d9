package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"inbox/scheme"
)

// TestReplay and TestReplayPostgres: two sources fan out to three
// destinations with filters through serve; once every row is handed on,
// inbox replay of the done rows of a time window and an event, for one
// destination, reaches that destination alone, spaced by --rate, at
// attempt 1 again, while show keeps the earlier series; no selection is
// refused, --dry-run changes nothing; the rows a destination parked are
// found by list and parked --destination and replayed to it alone.
func TestReplay(t *testing.T) {
	t.Parallel()
	testReplay(t, filepath.Join(t.TempDir(), "inbox.db"))
}

func TestReplayPostgres(t *testing.T) {
	t.Parallel()
	testReplay(t, pgSchema(t))
}

func testReplay(t *testing.T, db string) {
	jobs, failures, all := newDestApp(t, 204), newDestApp(t, 422), newDestApp(t, 204)
	cfg := fanOutConfig(t, `
[[destination]]
name = "jobs"
url = "`+jobs.URL+`"
sources = ["sume"]

[[destination]]
name = "failures"
url = "`+failures.URL+`"
events = ["job.failed"]

[[destination]]
name = "all"
url = "`+all.URL+`"
`)
	s := startServer(t, db, "--config", cfg)
	client := &http.Client{Timeout: 5 * time.Second}
	sume := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			event, status := "job.completed", "COMPLETED"
			if strings.HasPrefix(id, "job_f") {
				event, status = "job.failed", "ERROR"
			}
			if code := send(t, client, s.url, `{"event":"`+event+`","job_id":"`+id+`","status":"`+status+`"}`, e2eSecret); code != 204 {
				t.Fatalf("send %s: %d", id, code)
			}
		}
	}
	push := func(delivery string) {
		t.Helper()
		h := http.Header{}
		h.Set(scheme.HeaderGitHubSignature, scheme.SignGitHub(ghSecret, []byte(`{"ref":"main"}`)))
		h.Set(scheme.HeaderGitHubDelivery, delivery)
		h.Set(scheme.HeaderGitHubEvent, "push")
		if code, _ := postWith(t, client, strings.TrimSuffix(s.url, "/webhooks/sume")+"/webhooks/gh", `{"ref":"main"}`, h); code != 200 {
			t.Fatalf("send push %s: %d", delivery, code)
		}
	}
	// A millisecond boundary between the windows.
	boundary := func() string {
		time.Sleep(20 * time.Millisecond)
		at := time.Now().UTC().Format(time.RFC3339Nano)
		time.Sleep(20 * time.Millisecond)
		return at
	}
	sume("job_a0", "job_a1", "job_fa0")
	push("d0")
	since := boundary()
	window := []string{"job_b0", "job_b1", "job_b2", "job_b3", "job_b4"}
	sume(window...)
	sume("job_fb0")
	push("d1")
	until := boundary()
	sume("job_c0")

	waitLong(t, 30*time.Second, "every row handed on", func() bool {
		st := destinationStats(t, db)
		return st["jobs"].ByStatus["done"] == 10 && st["all"].ByStatus["done"] == 12 && st["failures"].ByStatus["parked"] == 2
	})
	before := map[*destApp]int{jobs: jobs.requests(), failures: failures.requests(), all: all.requests()}
	if before[jobs] != 10 || before[failures] != 2 || before[all] != 12 {
		t.Fatalf("requests before the replay = %d, %d, %d, want 10, 2, 12", before[jobs], before[failures], before[all])
	}

	// list and parked --destination: the rows routed there.
	listIDs := func(args ...string) []string {
		t.Helper()
		out, errOut, code := runCLI(t, nil, append(append(args[:1:1], "--db", db, "--json"), args[1:]...)...)
		if code != 0 {
			t.Fatalf("%v: %d %s", args, code, errOut)
		}
		return jsonIDs(t, out)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"list", "--destination", "failures"}, []string{"job_fa0", "job_fb0"}},
		{[]string{"list", "--destination", "jobs", "--since", since, "--until", until}, sorted(window, []string{"job_fb0"})},
		{[]string{"list", "--destination", "all", "--source", "gh"}, []string{"gh/d0", "gh/d1"}},
		{[]string{"parked", "--destination", "failures"}, []string{"job_fa0", "job_fb0"}},
		// jobs took job_fb0: parked at failures alone, it is not parked there.
		{[]string{"parked", "--destination", "jobs", "--since", since}, nil},
	} {
		if got := listIDs(tc.args...); !slices.Equal(got, tc.want) {
			t.Errorf("%v = %v, want %v", tc.args, got, tc.want)
		}
	}
	if _, errOut, code := runCLI(t, nil, "list", "--db", db, "--destination", "nowhere"); code == 0 || !strings.Contains(errOut, `unknown destination "nowhere"`) {
		t.Errorf("list --destination nowhere: %d %s, want refused", code, errOut)
	}
	if _, errOut, code := runCLI(t, nil, "list", "--db", db, "--destination", "Bad/Name"); code == 0 || !strings.Contains(errOut, "--destination") {
		t.Errorf("list --destination Bad/Name: %d %s", code, errOut)
	}

	// No selection is refused, naming what selects.
	if out, errOut, code := runCLI(t, nil, "replay", "--db", db); code == 0 || !strings.Contains(errOut, "no selection") {
		t.Errorf("replay with no selection: %d %q %s", code, out, errOut)
	}
	replayArgs := []string{"--db", db, "--since", since, "--until", until, "--event", "job.completed", "--destination", "all"}
	out, errOut, code := runCLI(t, nil, append([]string{"replay", "--dry-run"}, replayArgs...)...)
	if code != 0 || !strings.Contains(out, "dry run: nothing changed") || !strings.Contains(out, "rows handed on again: 5 (5 pairs made new") || !strings.Contains(out, "job_b0") || strings.Contains(out, "job_fb0") {
		t.Fatalf("replay --dry-run: %d\n%s%s", code, out, errOut)
	}
	time.Sleep(time.Second) // what a dry run left due would be sent by now
	if n := all.requests(); n != before[all] {
		t.Errorf("all got %d requests after a dry run, want still %d", n, before[all])
	}
	if st := destinationStats(t, db); st["all"].ByStatus["done"] != 12 {
		t.Errorf("all's pairs after a dry run = %v, want 12 done", st["all"].ByStatus)
	}

	const rate = 4 // a second: the five rows span a second
	spread := time.Duration(len(window)-1) * time.Second / rate
	out, errOut, code = runCLI(t, nil, append([]string{"replay", "--rate", "4/s"}, replayArgs...)...)
	if code != 0 || !strings.Contains(out, "rows handed on again: 5 (5 pairs made new") || !strings.Contains(out, "due: from ") {
		t.Fatalf("replay: %d\n%s%s", code, out, errOut)
	}
	waitLong(t, 30*time.Second, "all to take the window's job.completed rows again", func() bool {
		return all.requests() == before[all]+5 && destinationStats(t, db)["all"].ByStatus["done"] == 12
	})
	var first, last time.Time
	for _, id := range window {
		a := all.attempts(id)
		if !slices.Equal(a, []string{"1", "1"}) {
			t.Errorf("all got %s with attempts %v, want twice at attempt 1", id, a)
			continue
		}
		at := all.received(id)[1]
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	// Paced, not all at once: row i is due i/4s after the first, so the
	// last comes about a second after it (the dispatcher polls every
	// 250ms); unpaced, all five would come within a few milliseconds.
	if span := last.Sub(first); span < spread*6/10 || span > 10*time.Second {
		t.Errorf("the replayed rows came over %s, want about %s", span, spread)
	}
	time.Sleep(500 * time.Millisecond) // anything more would have come by now
	if jobs.requests() != before[jobs] || failures.requests() != before[failures] {
		t.Errorf("jobs and failures got %d and %d requests after a replay for all alone, want %d and %d", jobs.requests(), failures.requests(), before[jobs], before[failures])
	}
	for _, id := range []string{"job_a0", "job_c0", "job_fb0", "gh/d1"} {
		if n := len(all.attempts(id)); n != 1 {
			t.Errorf("all got %s %d times, want once: outside the selection", id, n)
		}
	}

	// show keeps the earlier series.
	out, errOut, code = runCLI(t, nil, "show", "--db", db, "job_b0")
	if code != 0 || !strings.Contains(out, "series 1: 1 attempt, done ") || !strings.Contains(out, "replayed at ") || strings.Count(out, "series 1:") != 1 {
		t.Errorf("show job_b0: %d\n%s%s", code, out, errOut)
	}
	out, _, _ = runCLI(t, nil, "show", "--db", db, "--json", "job_b0")
	var shown struct {
		Status       string `json:"status"`
		Destinations []struct {
			Destination string `json:"destination"`
			Status      string `json:"status"`
			Attempts    int    `json:"attempts"`
			Earlier     []struct {
				Series   int    `json:"series"`
				Status   string `json:"status"`
				Attempts int    `json:"attempts"`
			} `json:"earlier"`
		} `json:"destinations"`
	}
	must(t, json.Unmarshal([]byte(out), &shown))
	for _, d := range shown.Destinations {
		want := 0
		if d.Destination == "all" {
			want = 1
		}
		if d.Status != "done" || d.Attempts != 1 || len(d.Earlier) != want {
			t.Errorf("show --json job_b0's %s = %+v, want done, attempt 1, %d earlier series", d.Destination, d, want)
		}
		if want == 1 && (d.Earlier[0].Series != 1 || d.Earlier[0].Status != "done" || d.Earlier[0].Attempts != 1) {
			t.Errorf("all's earlier series = %+v", d.Earlier[0])
		}
	}

	// What failures parked, replayed to failures alone once it takes them.
	failures.code.Store(204)
	out, errOut, code = runCLI(t, nil, "replay", "--db", db, "--json", "--status", "parked", "--destination", "failures")
	var rep struct {
		Rows, Pairs int
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Rows != 2 || rep.Pairs != 2 {
		t.Fatalf("replay --status parked --destination failures: %d %s %s", code, out, errOut)
	}
	waitLong(t, 30*time.Second, "failures to take its rows", func() bool {
		st := destinationStats(t, db)
		return st["failures"].ByStatus["done"] == 2 && st[""].ByStatus["done"] == 12
	})
	if jobs.requests() != before[jobs] || all.requests() != before[all]+5 {
		t.Errorf("jobs and all got %d and %d requests, want still %d and %d", jobs.requests(), all.requests(), before[jobs], before[all]+5)
	}
	s.signal(syscall.SIGTERM)
	<-s.done
}
