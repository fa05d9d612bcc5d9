package e2e

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const standInKey = "sk_reconcile_test_key_0123456789"

// sumeStandIn is the provider's API, the one party we do not run: it checks
// each request's path and bearer key, counts calls, answers GET
// /v1/jobs/{id} from statuses (404 for a job it does not know), and on POST
// /v1/jobs/{id}/webhook/redeliver sends the job's terminal event, signed,
// to the webhook URL, as Sume does.
type sumeStandIn struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	webhook  string
	statuses map[string]string
	gets     map[string]int
	posts    map[string]int
	landed   map[string]int // the redelivery's answer from serve
	sent     sync.WaitGroup
}

func newSumeStandIn(t *testing.T, statuses map[string]string) *sumeStandIn {
	s := &sumeStandIn{t: t, statuses: statuses, gets: map[string]int{}, posts: map[string]int{}, landed: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() { s.sent.Wait(); s.srv.Close() })
	return s
}

func (s *sumeStandIn) serve(w http.ResponseWriter, r *http.Request) {
	if got := r.Header.Get("Authorization"); got != "Bearer "+standInKey {
		s.t.Errorf("%s %s: Authorization %q, want the bearer key", r.Method, r.URL.Path, got)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/jobs/")
	if !ok {
		s.t.Errorf("unexpected path %s %s", r.Method, r.URL.Path)
		w.WriteHeader(http.StatusTeapot)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch job, redeliver := strings.CutSuffix(rest, "/webhook/redeliver"); {
	case r.Method == http.MethodGet && !redeliver:
		s.gets[job]++
		status, known := s.statuses[job]
		if !known {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		fmt.Fprintf(w, `{"id":%q,"status":%q}`, job, status)
	case r.Method == http.MethodPost && redeliver:
		s.posts[job]++
		w.WriteHeader(http.StatusAccepted)
		body := fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED"}`, job)
		webhook := s.webhook
		s.sent.Add(1)
		go func() {
			defer s.sent.Done()
			code := send(s.t, http.DefaultClient, webhook, body, e2eSecret)
			s.mu.Lock()
			s.landed[job] = code
			s.mu.Unlock()
		}()
	default:
		s.t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (s *sumeStandIn) counts() (gets, posts, landed map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copyCounts(s.gets), copyCounts(s.posts), copyCounts(s.landed)
}

func copyCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// missedKeys runs inbox missed --json and returns the keys with their
// refusal counts.
func missedKeys(t *testing.T, db string) map[string]int {
	t.Helper()
	out, errOut, code := runCLI(t, nil, "missed", "--db", db, "--json")
	if code != 0 {
		t.Fatalf("missed: exit %d: %s", code, errOut)
	}
	got := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r struct {
			Source, Key, Event string
			JobID              string `json:"job_id"`
			Refusals           int
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("missed --json: %v: %q", err, line)
		}
		if r.Source != "sume" || r.JobID != r.Key || r.Event != "job.completed" {
			t.Errorf("missed row %+v, want source sume, job_id = key, event job.completed", r)
		}
		got[r.Key] = r.Refusals
	}
	return got
}

// eventually polls f every 100ms until it is true or timeout passes.
func eventually(timeout time.Duration, f func() bool) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if f() {
			return true
		}
	}
	return f()
}

// TestMissedAfterOutage holds the store's write lock past the busy timeout
// while signed deliveries arrive (all 503), then releases it: inbox missed
// lists exactly those jobs, redeliver --missed asks the provider once per
// job, and once the redeliveries land inbox missed is empty.
func TestMissedAfterOutage(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	api := newSumeStandIn(t, nil)
	srv := startServer(t, db, "--busy-timeout", "100ms")
	api.webhook = srv.url
	// A job delivered before the outage is not missed, even if refused during it.
	body := func(job string) string {
		return fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED"}`, job)
	}
	if got := send(t, http.DefaultClient, srv.url, body("job_before"), e2eSecret); got != http.StatusNoContent {
		t.Fatalf("before the outage: %d, want 204", got)
	}

	holder, err := sql.Open("sqlite", db+"?_txlock=immediate&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	tx, err := holder.Begin()
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]int{"job_a": 2, "job_b": 1, "job_c": 3}
	for _, job := range []string{"job_a", "job_b", "job_c", "job_a", "job_c", "job_c", "job_before"} {
		if got := send(t, http.DefaultClient, srv.url, body(job), e2eSecret); got != http.StatusServiceUnavailable {
			t.Fatalf("%s during the outage: %d, want 503", job, got)
		}
	}
	// A forgery during the outage is never remembered: it was not verified.
	if got := send(t, http.DefaultClient, srv.url, body("job_forged"), "not-the-secret"); got != http.StatusUnauthorized {
		t.Fatalf("forgery: %d, want 401", got)
	}
	if got := missedKeys(t, db); len(got) != 0 {
		t.Fatalf("missed while the store is locked = %v, want none yet (held in memory)", got)
	}
	tx.Rollback()

	var got map[string]int
	if !eventually(10*time.Second, func() bool { got = missedKeys(t, db); return len(got) == len(refused) }) {
		t.Fatalf("missed after the outage = %v, want %v\n%s", got, refused, srv.logs)
	}
	for job, n := range refused {
		if got[job] != n {
			t.Errorf("missed %s refused %d times, want %d", job, got[job], n)
		}
	}
	table, _, _ := runCLI(t, nil, "missed", "--db", db)
	if !strings.Contains(table, "FIRST REFUSED") || !strings.Contains(table, "job_c") {
		t.Errorf("missed table:\n%s", table)
	}
	// The operator's cron line sees them once older than --missed-after.
	if out, _, code := runCLI(t, nil, "alert", "--db", db, "--missed-after", "0s"); code != 1 || !strings.Contains(out, "missed job_a") {
		t.Errorf("alert --missed-after 0s: exit %d, want 1 naming job_a:\n%s", code, out)
	}
	if out, _, code := runCLI(t, nil, "alert", "--db", db); code != 0 {
		t.Errorf("alert (missed for less than the default 1h): exit %d, want 0:\n%s", code, out)
	}

	env := []string{"SUME_API_KEY=" + standInKey, "SUME_API_URL=" + api.srv.URL}
	out, errOut, code := runCLI(t, env, "redeliver", "--db", db, "--missed", "--dry-run")
	if gets, posts, _ := api.counts(); code != 0 || len(posts)+len(gets) != 0 || strings.Count(out, "would redeliver") != 3 {
		t.Fatalf("redeliver --missed --dry-run: exit %d, %d calls:\n%s%s", code, len(posts), out, errOut)
	}
	out, errOut, code = runCLI(t, env, "redeliver", "--db", db, "--missed")
	if code != 0 {
		t.Fatalf("redeliver --missed: exit %d:\n%s%s", code, out, errOut)
	}
	_, posts, _ := api.counts()
	t.Logf("redeliveries asked: %v", posts)
	if len(posts) != len(refused) {
		t.Errorf("redeliveries asked for %v, want one per missed job %v", posts, refused)
	}
	for job := range refused {
		if posts[job] != 1 {
			t.Errorf("%s redelivery asked %d times, want once", job, posts[job])
		}
	}
	if !eventually(10*time.Second, func() bool { return len(missedKeys(t, db)) == 0 }) {
		t.Fatalf("missed after the redeliveries = %v, want none\n%s", missedKeys(t, db), srv.logs)
	}
	_, _, landed := api.counts()
	for job := range refused {
		if landed[job] != http.StatusNoContent {
			t.Errorf("redelivery of %s answered %d, want 204", job, landed[job])
		}
	}
	if strings.Contains(srv.logs.String(), e2eSecret) {
		t.Error("the log holds the signing secret")
	}
}

// expectedState runs inbox expected --json and returns each job's state
// (overdue for waiting past due), reason, polls and redeliveries.
func expectedState(t *testing.T, db string) map[string]struct {
	State, Reason       string
	Polls, Redeliveries int
	Overdue             bool
} {
	t.Helper()
	out, errOut, code := runCLI(t, nil, "expected", "--db", db, "--json")
	if code != 0 {
		t.Fatalf("expected: exit %d: %s", code, errOut)
	}
	got := map[string]struct {
		State, Reason       string
		Polls, Redeliveries int
		Overdue             bool
	}{}
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var e struct {
			JobID               string `json:"job_id"`
			State, Reason       string
			Polls, Redeliveries int
			Overdue             bool
		}
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("expected --json: %v: %q", err, out)
		}
		got[e.JobID] = struct {
			State, Reason       string
			Polls, Redeliveries int
			Overdue             bool
		}{e.State, e.Reason, e.Polls, e.Redeliveries, e.Overdue}
	}
	return got
}

// TestExpectedJobPolled expects jobs with a short window: one by the CLI and
// one over HTTP are never delivered, have ended at the provider, and are
// polled and redelivered once each, their deliveries landing through the
// webhook; one the provider does not know is closed with a reason; one
// still running is polled again and not redelivered; one delivered in time
// is never polled.
func TestExpectedJobPolled(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	api := newSumeStandIn(t, map[string]string{"job_cli": "COMPLETED", "job_http": "ERROR", "job_running": "RUNNING", "job_on_time": "COMPLETED"})
	srv := startServer(t, db, "--admin-addr", "127.0.0.1:0", "--api-key", standInKey, "--api-url", api.srv.URL,
		"--poll-every", "200ms", "--poll-backoff", "300ms")
	api.webhook = srv.url

	if out, errOut, code := runCLI(t, nil, "expect", "--db", db, "--within", "1s", "job_cli", "job_unknown", "job_running", "job_on_time"); code != 0 {
		t.Fatalf("expect: exit %d:\n%s%s", code, out, errOut)
	}
	req := fmt.Sprintf(`{"job_id":"job_http","within":"1s","status_url":%q}`, api.srv.URL+"/v1/jobs/job_http")
	resp, err := http.Post(srv.admin+"/expect", "application/json", strings.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	var answer bytes.Buffer
	answer.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(answer.String(), `"job_http"`) {
		t.Fatalf("POST /expect: %d %s", resp.StatusCode, answer.String())
	}
	// The application's own mistakes are refused over HTTP, with a reason.
	for _, bad := range []string{`{"job_id":""}`, `{"job_id":"j","within":"forever"}`, `not json`,
		`{"job_id":"j","status_url":"https://elsewhere.example/v1/jobs/j"}`} {
		resp, err := http.Post(srv.admin+"/expect", "application/json", strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("POST /expect %s: %d, want 400", bad, resp.StatusCode)
		}
	}
	if got := send(t, http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"job_on_time","status":"COMPLETED"}`, e2eSecret); got != http.StatusNoContent {
		t.Fatalf("job_on_time: %d, want 204", got)
	}

	done := func() bool {
		got := expectedState(t, db)
		gets, _, _ := api.counts()
		return got["job_cli"].State == "done" && got["job_http"].State == "done" &&
			got["job_unknown"].State == "closed" && gets["job_running"] >= 2
	}
	if !eventually(15*time.Second, done) {
		t.Fatalf("expected = %+v\n%s", expectedState(t, db), srv.logs)
	}
	got := expectedState(t, db)
	gets, posts, landed := api.counts()
	t.Logf("status polls %v, redeliveries %v", gets, posts)
	for _, job := range []string{"job_cli", "job_http"} {
		if posts[job] != 1 || gets[job] < 1 || landed[job] != http.StatusNoContent || got[job].Redeliveries != 1 {
			t.Errorf("%s: %d polls, %d redeliveries (answered %d), %+v; want polled, redelivered once, landed 204", job, gets[job], posts[job], landed[job], got[job])
		}
	}
	if r := got["job_unknown"].Reason; !strings.Contains(r, "does not know job job_unknown") || posts["job_unknown"] != 0 {
		t.Errorf("job_unknown: reason %q, %d redeliveries; want closed as unknown, none asked", r, posts["job_unknown"])
	}
	if e := got["job_running"]; e.State != "waiting" || !e.Overdue || posts["job_running"] != 0 {
		t.Errorf("job_running: %+v, %d redeliveries; want overdue, none asked", e, posts["job_running"])
	}
	if e := got["job_on_time"]; e.State != "done" || gets["job_on_time"]+posts["job_on_time"] != 0 {
		t.Errorf("job_on_time: %+v, %d calls; want done, never polled", e, gets["job_on_time"]+posts["job_on_time"])
	}
	out, _, _ := runCLI(t, nil, "expected", "--db", db, "--overdue")
	if !strings.Contains(out, "job_running") || strings.Contains(out, "job_cli") {
		t.Errorf("expected --overdue:\n%s", out)
	}
	if out, _, code := runCLI(t, nil, "alert", "--db", db); code != 1 || !strings.Contains(out, "overdue job_running") {
		t.Errorf("alert: exit %d, want 1 naming job_running:\n%s", code, out)
	}
	metrics := scrape(t, srv.admin)
	for _, want := range []string{`inbox_expectations{state="overdue"} 1`, `inbox_expectations{state="done"} 3`, `inbox_expectations{state="closed"} 1`,
		`inbox_reconcile_requests_total{request="redeliver",result="ok"} 2`, `inbox_reconcile_requests_total{request="status",result="unknown_job"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if logs := srv.logs.String(); strings.Contains(logs, standInKey) || strings.Contains(logs, e2eSecret) {
		t.Error("the log holds the API key or the signing secret")
	}
	if slices.ContainsFunc(strings.Split(srv.logs.String(), "\n"), func(l string) bool { return strings.Contains(l, `"level":"error"`) }) {
		t.Errorf("errors logged:\n%s", srv.logs)
	}
}

func scrape(t *testing.T, admin string) string {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return b.String()
}

// TestReconcileCLIErrors checks that mistakes with the new commands and
// flags give one clear line and a non-zero exit, and write nothing.
func TestReconcileCLIErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	if _, errOut, code := runCLI(t, nil, "expected", "--db", db); code == 0 || !strings.Contains(errOut, "no inbox database") {
		t.Errorf("expected on a missing database: exit %d: %s", code, errOut)
	}
	srv := startServer(t, db)
	srv.signal(15)
	<-srv.done
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"expect", "--db", db}, "at least one job id"},
		{[]string{"expect", "--db", db, "--within", "forever", "job_1"}, "want a duration"},
		{[]string{"expect", "--db", db, "--within", "0s", "job_1"}, "want a duration"},
		{[]string{"expect", "--db", db, "sha256:abc"}, "invalid job id"},
		{[]string{"expect", "--db", db, "--status-url", "https://evil.example/v1/jobs/job_1", "job_1"}, "not on the API's host"},
		{[]string{"expect", "--db", db, "--status-url", "https://api.sume.com/v1/jobs/job_1", "job_1", "job_2"}, "one job"},
		{[]string{"expect", "--db", db, "job_1", "--within", "1h"}, "flags go before them"},
		{[]string{"missed", "--db", filepath.Join(dir, "missing.db")}, "no inbox database"},
		{[]string{"missed", "--db", db, "stray"}, "takes no arguments"},
		{[]string{"redeliver", "--db", db, "--missed", "job_1"}, "exactly one of"},
		{[]string{"redeliver", "--db", db, "--missed", "--reason", "conflict"}, "exactly one of"},
		{[]string{"alert", "--db", db, "--missed-after", "soon"}, "--missed-after"},
		{[]string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--secret", "s", "--api-key", "k", "--api-url", "http://api.example.com"}, "plain http"},
		{[]string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--secret", "s", "--api-key", "replace-with-your-api-key"}, "placeholder"},
		{[]string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--secret", "s", "--api-rate", "0"}, "--api-rate"},
		{[]string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--secret", "s", "--poll-every", "0s"}, "--poll-every"},
		{[]string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--secret", "s", "--api-concurrency", "100"}, "concurrency"},
	} {
		_, errOut, code := runCLI(t, nil, tt.args...)
		if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want one line with %q", tt.args, code, errOut, tt.want)
		}
	}
	if got := expectedState(t, db); len(got) != 0 {
		t.Errorf("expectations after refused commands: %v", got)
	}
}
