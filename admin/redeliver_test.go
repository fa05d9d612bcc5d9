package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
)

const testAPIKey = "sk_live_do_not_print_0123456789"

// fakeAPI stands in for the provider's API: it answers each job from a
// script of statuses (the last one repeats) and records every request.
type fakeAPI struct {
	t       *testing.T
	mu      sync.Mutex
	script  map[string][]answer // by escaped path
	calls   map[string]int
	headers http.Header
	srv     *httptest.Server
}

type answer struct {
	status     int
	retryAfter string
	body       string
}

func newFakeAPI(t *testing.T, script map[string][]answer) *fakeAPI {
	f := &fakeAPI{t: t, script: script, calls: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.Method != http.MethodPost {
			t.Errorf("%s %s, want POST", r.Method, r.RequestURI)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+testAPIKey {
			t.Errorf("Authorization = %q, want the bearer key", got)
		}
		answers, ok := f.script[r.RequestURI]
		if !ok {
			t.Errorf("unexpected path %s", r.RequestURI)
			w.WriteHeader(http.StatusTeapot)
			return
		}
		n := f.calls[r.RequestURI]
		f.calls[r.RequestURI]++
		a := answers[min(n, len(answers)-1)]
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		w.WriteHeader(a.status)
		w.Write([]byte(strings.ReplaceAll(a.body, "$AUTH", r.Header.Get("Authorization"))))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// redeliver runs the command against the fake API, recording the waits
// instead of sleeping.
func (f *fakeAPI) redeliver(t *testing.T, args ...string) (string, error, []time.Duration) {
	t.Helper()
	var waits []time.Duration
	sleep := func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	}
	out, err := runCommands(t, []*cli.Command{redeliverCommand(testOpen, sleep)},
		append([]string{"redeliver", "--api-url", f.srv.URL, "--api-key", testAPIKey}, args...)...)
	return out, err, waits
}

func path(jobEscaped string) string { return "/v1/jobs/" + jobEscaped + "/webhook/redeliver" }

func TestRedeliver(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		job      string
		answers  []answer
		retries  string
		wantLine string
		calls    int
		waits    []time.Duration
	}{
		{"accepted, id path-escaped", "job/1 x", []answer{{status: 204}}, "3", "redelivered job/1 x", 1, nil},
		{"401", "job_1", []answer{{status: 401}}, "3", "failed job_1: the API key was refused: it lacks jobs:write, or is not a valid key (401 Unauthorized)", 1, nil},
		{"403", "job_1", []answer{{status: 403}}, "3", "failed job_1: the API key was refused: it lacks jobs:write, or is not a valid key (403 Forbidden)", 1, nil},
		{"404", "job_1", []answer{{status: 404}}, "3", "failed job_1: unknown job: the provider has no job with this id (404 Not Found)", 1, nil},
		{"429 with Retry-After seconds, then accepted", "job_1", []answer{{status: 429, retryAfter: "7"}, {status: 202}}, "3",
			"redelivered job_1", 2, []time.Duration{7 * time.Second}},
		{"429 forever: bounded", "job_1", []answer{{status: 429, retryAfter: "3600"}}, "3",
			"failed job_1: redeliver: 429 Too Many Requests after 4 attempts", 4, []time.Duration{30 * time.Second, 30 * time.Second, 30 * time.Second}},
		{"429 forever, --retries 1", "job_1", []answer{{status: 429, retryAfter: "1"}}, "1",
			"failed job_1: redeliver: 429 Too Many Requests after 2 attempts", 2, []time.Duration{time.Second}},
		{"503 then accepted: backoff without Retry-After", "job_1", []answer{{status: 503}, {status: 500}, {status: 204}}, "3",
			"redelivered job_1", 3, []time.Duration{time.Second, 2 * time.Second}},
		{"500 forever", "job_1", []answer{{status: 500}}, "2", "failed job_1: redeliver: 500 Internal Server Error after 3 attempts", 3,
			[]time.Duration{time.Second, 2 * time.Second}},
		{"400 echoing the request: the key is redacted", "job_1", []answer{{status: 400, body: `{"error":"bad","auth":"$AUTH"}`}}, "3",
			`failed job_1: redeliver: unexpected answer 400 Bad Request: "{\"error\":\"bad\",\"auth\":\"Bearer [redacted]\"}"`, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := path(strings.ReplaceAll(strings.ReplaceAll(tt.job, "/", "%2F"), " ", "%20"))
			api := newFakeAPI(t, map[string][]answer{p: tt.answers})
			out, err, waits := api.redeliver(t, "--retries", tt.retries, tt.job)
			if got := strings.TrimSuffix(out, "\n"); got != tt.wantLine {
				t.Errorf("output %q, want %q", got, tt.wantLine)
			}
			failed := strings.HasPrefix(tt.wantLine, "failed")
			if (err != nil) != failed {
				t.Errorf("err = %v, want an error: %v", err, failed)
			}
			if api.calls[p] != tt.calls {
				t.Errorf("%d requests, want %d", api.calls[p], tt.calls)
			}
			if mustJSON(t, waits) != mustJSON(t, tt.waits) {
				t.Errorf("waits %v, want %v", waits, tt.waits)
			}
			if strings.Contains(out, testAPIKey) || (err != nil && strings.Contains(err.Error(), testAPIKey)) {
				t.Errorf("the API key was printed: %q, %v", out, err)
			}
		})
	}
}

func TestRedeliverByReason(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	fill(t, db, time.Now(), exploded("job_a"), exploded("job_b"), `{"event":"job.exploded"}`, completed("job_ok"), exploded("job_ok"))
	api := newFakeAPI(t, map[string][]answer{
		path("job_a"):  {{status: 204}},
		path("job_b"):  {{status: 404}},
		path("job_ok"): {{status: 204}},
	})
	out, err, _ := api.redeliver(t, "--db", db, "--reason", "unknown_event", "--json")
	lines := jsonLines[redeliverResult](t, out)
	if len(lines) != 3 || err == nil || !strings.Contains(err.Error(), "1 of 3 jobs failed") {
		t.Fatalf("output %q, err %v; want three results, one failed", out, err)
	}
	got := map[string]bool{}
	for _, l := range lines {
		got[l.JobID] = l.OK
	}
	if !got["job_a"] || got["job_b"] || !got["job_ok"] {
		t.Errorf("results %+v", lines)
	}

	out, err, _ = api.redeliver(t, "--db", db, "--reason", "unparseable")
	if err != nil || out != "no parked unparseable row names a job\n" {
		t.Errorf("no jobs: %v %q", err, out)
	}
	out, err, _ = api.redeliver(t, "--db", db, "--reason", "unknown_event", "--dry-run")
	if err != nil || strings.Count(out, "would redeliver") != 3 {
		t.Errorf("dry run: %v %q", err, out)
	}
	if n := api.calls[path("job_a")]; n != 1 {
		t.Errorf("job_a called %d times, want once (dry runs call nothing)", n)
	}
}

func TestRedeliverRefuses(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"redeliver"},
		{"redeliver", "--api-key", "", "job_1"},
		{"redeliver", "--api-key", "k", "--retries", "-1", "job_1"},
		{"redeliver", "--api-key", "k", "--api-url", "ftp://x", "job_1"},
	} {
		out, err := runCommands(t, []*cli.Command{redeliverCommand(testOpen, nil)}, args...)
		if err == nil {
			t.Errorf("%v: no error; output %q", args, out)
		}
	}
}

// TestReasonVariablesAreEachCommands: a --reason variable left set for one
// command never widens another's selection; redeliver takes ids or
// --reason, never both.
func TestReasonVariablesAreEachCommands(t *testing.T) {
	db := newDB(t)
	fill(t, db, time.Now(), exploded("job_a"), exploded("job_b"), `{"event":"job.completed"}`)
	api := newFakeAPI(t, map[string][]answer{path("job_x"): {{status: 204}}})
	for _, env := range []string{"INBOX_REASON", "INBOX_PARKED_REASON", "INBOX_REPROCESS_REASON", "INBOX_ALERT_REASON"} {
		t.Setenv(env, "unknown_event")
	}
	out, err, _ := api.redeliver(t, "--db", db, "job_x")
	if err != nil || out != "redelivered job_x\n" || len(api.calls) != 1 {
		t.Errorf("redeliver job_x: %v, %q, calls %v; want job_x alone", err, out, api.calls)
	}
	out, err = run(t, "parked", "--db", db, "--json")
	if rows := jsonLines[inbox.Event](t, out); err != nil || len(rows) != 2 {
		t.Errorf("parked with INBOX_PARKED_REASON=unknown_event: %v, %d rows, want the 2 unknown_event rows", err, len(rows))
	}

	if _, err, _ := api.redeliver(t, "--db", db, "--reason", "unknown_event", "job_x"); err == nil || !strings.Contains(err.Error(), "exactly one") {
		t.Errorf("--reason and ids: err = %v, want exactly one of", err)
	}
	t.Setenv("INBOX_REDELIVER_REASON", "unknown_event")
	if _, err, _ := api.redeliver(t, "--db", db, "job_x"); err == nil || !strings.Contains(err.Error(), "exactly one") {
		t.Errorf("INBOX_REDELIVER_REASON and ids: err = %v, want exactly one of", err)
	}
	if n := api.calls[path("job_x")]; n != 1 {
		t.Errorf("job_x called %d times, want once", n)
	}
}

// TestRedeliverChecksTheURLOnce: a base URL that would send the key in
// clear is refused once, before any job.
func TestRedeliverChecksTheURLOnce(t *testing.T) {
	t.Parallel()
	for _, dryRun := range []string{"--dry-run=false", "--dry-run"} {
		out, err := runCommands(t, []*cli.Command{redeliverCommand(testOpen, nil)}, "redeliver", dryRun, "--api-key", testAPIKey,
			"--api-url", "http://api.example.com", "job_1", "job_2")
		if err == nil || !strings.Contains(err.Error(), "plain http") || out != "" {
			t.Errorf("%s: err = %v, output %q; want one error and no line per job", dryRun, err, out)
		}
	}
}
