package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"inbox/dispatch"
	"inbox/scheme"
)

// destApp is an application behind one destination: it records the
// Inbox-Attempt of each request per row id as it arrives, and when it
// came, and answers code after delay.
type destApp struct {
	*httptest.Server
	code  atomic.Int32
	delay atomic.Int64 // a time.Duration
	mu    sync.Mutex
	seen  map[string][]string
	times map[string][]time.Time
}

func newDestApp(t *testing.T, code int) *destApp {
	a := &destApp{seen: map[string][]string{}, times: map[string][]time.Time{}}
	a.code.Store(int32(code))
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		id := r.Header.Get(dispatch.HeaderRowID)
		a.seen[id] = append(a.seen[id], r.Header.Get(dispatch.HeaderAttempt))
		a.times[id] = append(a.times[id], time.Now())
		a.mu.Unlock()
		time.Sleep(time.Duration(a.delay.Load()))
		code := int(a.code.Load())
		w.WriteHeader(code)
		if code >= 500 {
			// Each row's own failure, named: not an outage, which
			// answers every row alike (docs/dispatch.md).
			fmt.Fprintf(w, "cannot take row %s", id)
		}
	}))
	t.Cleanup(a.Close)
	return a
}

// rows returns the row ids the app got a request for, sorted.
func (a *destApp) rows() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for id := range a.seen {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// received returns when the app got each request for the row id.
func (a *destApp) received(id string) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.times[id])
}

// requests counts the requests the app got.
func (a *destApp) requests() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, s := range a.seen {
		n += len(s)
	}
	return n
}

func (a *destApp) attempts(id string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen[id])
}

// destStats is what inbox stats --json says of each destination.
type destStats struct {
	Name     string         `json:"name"`
	Paused   bool           `json:"paused"`
	State    string         `json:"state"`
	ByStatus map[string]int `json:"by_status"`
	InFlight int            `json:"in_flight"`
	Retrying int            `json:"retrying"`
}

func destinationStats(t *testing.T, db string) map[string]destStats {
	t.Helper()
	out, errOut, code := runCLI(t, nil, "stats", "--json", "--db", db)
	if code != 0 {
		t.Fatalf("stats: %d %s", code, errOut)
	}
	var st struct {
		ByStatus     map[string]int `json:"by_status"`
		Destinations []destStats    `json:"destinations"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("stats --json: %v\n%s", err, out)
	}
	m := map[string]destStats{}
	for _, d := range st.Destinations {
		m[d.Name] = d
	}
	m[""] = destStats{ByStatus: st.ByStatus} // the rows themselves
	return m
}

const ghSecret = "It's a Secret to Everybody"

// fanOutConfig writes a config of two sources, sume and gh (GitHub), and
// the [[destination]] tables dests, and returns its path.
func fanOutConfig(t *testing.T, dests string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "inbox.toml")
	if err := os.WriteFile(cfg, []byte(fanOutText(dests)), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// fanOutText is the text of fanOutConfig's file.
func fanOutText(dests string) string {
	return `
[[source]]
name = "sume"
scheme = "sume"
[[source.secret]]
env = "SUME_COM_WEBHOOK_SIGNING_SECRET"

[[source]]
name = "gh"
scheme = "github"
events = ["push"]
[[source.secret]]
value = "` + ghSecret + `"
` + dests
}

// sendFanOut stores sume job.completed rows job_c0.., sume job.failed
// rows job_f0.. and GitHub push rows gh/d0.. through s, and returns the
// ids of each kind.
func sendFanOut(t *testing.T, s *server, completed, failed, pushes int) (done, fail, gh []string) {
	t.Helper()
	return sendBatch(t, s, "", completed, failed, pushes)
}

// sendBatch is sendFanOut with batch in each id: job_<batch>c0..,
// job_<batch>f0.., gh/<batch>d0...
func sendBatch(t *testing.T, s *server, batch string, completed, failed, pushes int) (done, fail, gh []string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	for i := range completed {
		id := fmt.Sprintf("job_%sc%d", batch, i)
		if code := send(t, client, s.url, `{"event":"job.completed","job_id":"`+id+`","status":"COMPLETED"}`, e2eSecret); code != 204 {
			t.Fatalf("send %s: %d", id, code)
		}
		done = append(done, id)
	}
	for i := range failed {
		id := fmt.Sprintf("job_%sf%d", batch, i)
		if code := send(t, client, s.url, `{"event":"job.failed","job_id":"`+id+`","status":"ERROR"}`, e2eSecret); code != 204 {
			t.Fatalf("send %s: %d", id, code)
		}
		fail = append(fail, id)
	}
	base := strings.TrimSuffix(s.url, "/webhooks/sume")
	for i := range pushes {
		h := http.Header{}
		h.Set(scheme.HeaderGitHubSignature, scheme.SignGitHub(ghSecret, []byte(`{"ref":"main"}`)))
		h.Set(scheme.HeaderGitHubDelivery, fmt.Sprintf("%sd%d", batch, i))
		h.Set(scheme.HeaderGitHubEvent, "push")
		if code, _ := postWith(t, client, base+"/webhooks/gh", `{"ref":"main"}`, h); code != 200 {
			t.Fatalf("send push %d: %d", i, code)
		}
		gh = append(gh, fmt.Sprintf("gh/%sd%d", batch, i))
	}
	return done, fail, gh
}

func sorted(lists ...[]string) []string {
	out := slices.Concat(lists...)
	slices.Sort(out)
	return out
}

// TestFanOut serves two sources to three destinations with filters on
// SQLite: each gets exactly the rows its filters name, once, while a
// third that answers 500 has all of its rows retrying without holding
// the others back; once it answers again, every row is done.
func TestFanOut(t *testing.T) {
	t.Parallel()
	testFanOut(t, filepath.Join(t.TempDir(), "inbox.db"))
}

// TestFanOutPostgres is TestFanOut on PostgreSQL.
func TestFanOutPostgres(t *testing.T) {
	t.Parallel()
	testFanOut(t, pgSchema(t))
}

func testFanOut(t *testing.T, db string) {
	jobs, failures, all := newDestApp(t, 204), newDestApp(t, 204), newDestApp(t, 500)
	cfg := fanOutConfig(t, `
[[destination]]
name = "jobs"
url = "`+jobs.URL+`"
sources = ["sume"]

[[destination]]
name = "failures"
url = "`+failures.URL+`"
events = ["job.failed"]
workers = 2

[[destination]]
name = "all"
url = "`+all.URL+`"
retry_schedule = "200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms"
rate = "100/s"
`)
	s := startServer(t, db, "--config", cfg)
	completed, failed, pushes := sendFanOut(t, s, 6, 3, 3)

	waitLong(t, 20*time.Second, "jobs and failures to take their rows", func() bool {
		return len(jobs.rows()) == 9 && len(failures.rows()) == 3
	})
	waitLong(t, 20*time.Second, "the pairs of jobs and failures done", func() bool {
		st := destinationStats(t, db)
		return st["jobs"].ByStatus["done"] == 9 && st["failures"].ByStatus["done"] == 3
	})
	if got, want := jobs.rows(), sorted(completed, failed); !slices.Equal(got, want) {
		t.Errorf("jobs got %v, want the sume rows %v", got, want)
	}
	if got := failures.rows(); !slices.Equal(got, failed) {
		t.Errorf("failures got %v, want the job.failed rows %v", got, failed)
	}
	for _, id := range sorted(completed, failed) {
		if a := jobs.attempts(id); len(a) != 1 {
			t.Errorf("jobs got %s %d times, want once", id, len(a))
		}
	}
	// The destination that answers 500 has every row, and retries them
	// all: none is done, none parked, the rows still new for it alone.
	waitLong(t, 20*time.Second, "all to have tried every row twice", func() bool {
		for _, id := range sorted(completed, failed, pushes) {
			if len(all.attempts(id)) < 2 {
				return false
			}
		}
		return true
	})
	st := destinationStats(t, db)
	if d := st["all"]; d.ByStatus["new"] != 12 || d.ByStatus["done"] != 0 || d.ByStatus["parked"] != 0 {
		t.Errorf("all = %+v, want its 12 rows new", d)
	}
	if st[""].ByStatus["new"] != 12 {
		t.Errorf("rows = %v, want 12 new while all has yet to take them", st[""].ByStatus)
	}
	out, errOut, code := runCLI(t, nil, "show", "--db", db, failed[0])
	if code != 0 {
		t.Fatalf("show: %d %s", code, errOut)
	}
	for _, want := range []string{"DESTINATION", "jobs", "failures", "all", "HTTP 500"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	all.code.Store(204)
	waitLong(t, 20*time.Second, "every row done", func() bool {
		return destinationStats(t, db)[""].ByStatus["done"] == 12
	})
	if got, want := all.rows(), sorted(completed, failed, pushes); !slices.Equal(got, want) {
		t.Errorf("all got %v, want every row %v", got, want)
	}
	if got := len(jobs.rows()) + len(failures.rows()); got != 12 {
		t.Errorf("jobs and failures got %d rows after all came back, want still 12", got)
	}
	s.signal(syscall.SIGTERM)
	<-s.done
}

// TestPauseResume pauses one of two destinations of a running serve with
// inbox pause: within a few seconds its dispatcher attempts nothing (its
// rows wait, no attempt counted) while the other goes on; inbox resume
// hands them on, each at attempt 1.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	testPauseResume(t, filepath.Join(t.TempDir(), "inbox.db"))
}

// TestPauseResumePostgres is TestPauseResume on PostgreSQL.
func TestPauseResumePostgres(t *testing.T) {
	t.Parallel()
	testPauseResume(t, pgSchema(t))
}

// pause pauses the destination name with inbox pause, and waits until
// the serve s says so on /readyz.
func pause(t *testing.T, s *server, db, name string) {
	t.Helper()
	if out, errOut, code := runCLI(t, nil, "pause", "--db", db, name); code != 0 || !strings.Contains(out, "paused "+name) {
		t.Fatalf("pause %s: %d %q %s", name, code, out, errOut)
	}
	waitLong(t, 10*time.Second, "/readyz to say "+name+" is paused", func() bool {
		_, body := get(t, s.admin+"/readyz")
		return strings.Contains(body, "destination "+name+": paused by an operator")
	})
}

func testPauseResume(t *testing.T, db string) {
	billing, audit := newDestApp(t, 204), newDestApp(t, 204)
	cfg := fanOutConfig(t, `
[[destination]]
name = "billing"
url = "`+billing.URL+`"

[[destination]]
name = "audit"
url = "`+audit.URL+`"
`)
	s := startServer(t, db, "--config", cfg, "--admin-addr", "127.0.0.1:0")
	pause(t, s, db, "billing")
	completed, failed, pushes := sendFanOut(t, s, 4, 2, 2)
	waitLong(t, 20*time.Second, "audit to take every row", func() bool {
		return destinationStats(t, db)["audit"].ByStatus["done"] == 8
	})
	st := destinationStats(t, db)
	if b := st["billing"]; !b.Paused || b.ByStatus["new"] != 8 {
		t.Errorf("billing = %+v, want paused with its 8 rows new", b)
	}
	if got := billing.rows(); len(got) != 0 {
		t.Errorf("paused billing got %v", got)
	}
	out, _, _ := runCLI(t, nil, "stats", "--db", db)
	if !strings.Contains(out, "paused") {
		t.Errorf("stats does not show billing paused:\n%s", out)
	}
	if out, errOut, code := runCLI(t, nil, "resume", "--db", db, "billing"); code != 0 {
		t.Fatalf("resume: %d %q %s", code, out, errOut)
	}
	waitLong(t, 20*time.Second, "billing to take every row", func() bool {
		return destinationStats(t, db)["billing"].ByStatus["done"] == 8
	})
	for _, id := range sorted(completed, failed, pushes) {
		if a := billing.attempts(id); !slices.Equal(a, []string{"1"}) {
			t.Errorf("billing got %s with attempts %v, want one request at attempt 1", id, a)
		}
	}
	s.signal(syscall.SIGTERM)
	<-s.done
}

// TestDestinationFlagsAndTablesRefused: the single-destination flags and
// [[destination]] tables together are refused, saying so.
func TestDestinationFlagsAndTablesRefused(t *testing.T) {
	t.Parallel()
	cfg := fanOutConfig(t, `
[[destination]]
name = "a"
exec = "true"
`)
	db := filepath.Join(t.TempDir(), "inbox.db")
	for _, cmd := range []string{"serve", "dispatch"} {
		_, errOut, code := runCLI(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, cmd, "--db", db, "--config", cfg, "--exec", "true")
		if code == 0 || !strings.Contains(errOut, "use the tables or the flags, not both") {
			t.Errorf("%s with both: %d %s", cmd, code, errOut)
		}
	}
}

// TestExecWithholdsDestinationSecrets runs inbox dispatch with an exec
// destination beside url destinations that sign with secrets, one from
// secret_env, one from the file: neither secret, nor the variable it is
// read from, reaches the command, and neither is logged.
func TestExecWithholdsDestinationSecrets(t *testing.T) {
	const envSecret, fileSecret = "whsec_ZW52LWhlbGQtc2lnbmluZy1rZXk=", "whsec_ZmlsZS1oZWxkLXNpZ25pbmcta2V5"
	t.Setenv("HOOK_SECRET", envSecret)
	t.Setenv("APP_HOOK_COPY", envSecret)
	t.Setenv("APP_MODE", "production")
	hook, mail := newDestApp(t, 204), newDestApp(t, 204)
	dump := filepath.Join(t.TempDir(), "env")
	cfg := fanOutConfig(t, `
[[destination]]
name = "hook"
url = "`+hook.URL+`"
secret_env = "HOOK_SECRET"

[[destination]]
name = "mail"
url = "`+mail.URL+`"
secret = "`+fileSecret+`"

[[destination]]
name = "run"
exec = "env > `+dump+`"
`)
	db := fillDB(t, 1)
	d := startDispatch(t, "--db", db, "--config", cfg)
	waitLong(t, 20*time.Second, "every destination to take the row", func() bool {
		st := destinationStats(t, db)
		return st["hook"].ByStatus["done"] == 1 && st["mail"].ByStatus["done"] == 1 && st["run"].ByStatus["done"] == 1
	})
	d.kill(syscall.SIGTERM)
	env, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{envSecret, fileSecret, "HOOK_SECRET=", "APP_HOOK_COPY="} {
		if strings.Contains(string(env), bad) {
			t.Errorf("the exec command's environment holds %q", bad)
		}
		if strings.Contains(d.logs.String(), bad) {
			t.Errorf("the log holds %q", bad)
		}
	}
	if !strings.Contains(string(env), "APP_MODE=production") {
		t.Errorf("the application's own variable was withheld too:\n%s", env)
	}
}
