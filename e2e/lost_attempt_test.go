package e2e

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"inbox/dispatch"
)

// failingApp answers every request 500 and records, for each path and
// row, the Inbox-Attempt of each request it got.
type failingApp struct {
	*httptest.Server
	mu   sync.Mutex
	seen map[string]map[int]bool // path + " " + row id: the attempts it got
}

func newFailingApp(t *testing.T) *failingApp {
	a := &failingApp{seen: map[string]map[int]bool{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.Header.Get(dispatch.HeaderAttempt))
		key := r.URL.Path + " " + r.Header.Get(dispatch.HeaderRowID)
		a.mu.Lock()
		if a.seen[key] == nil {
			a.seen[key] = map[int]bool{}
		}
		a.seen[key][n] = true
		a.mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(a.Close)
	return a
}

// got reports whether the application got attempt n of row id at path.
func (a *failingApp) got(path, id string, n int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen[path+" "+id][n]
}

// checkParkedByRequests checks that every pair of db is parked, and parked
// by a request: the application got the attempt the pair's count ends on.
func checkParkedByRequests(t *testing.T, db string, app *failingApp, n int, dests ...string) {
	t.Helper()
	pairs := pairStates(t, db)
	bad := 0
	for i := range n {
		id := "job_" + strconv.Itoa(10000 + i)[1:]
		for _, dest := range dests {
			p, ok := pairs[id+" "+dest]
			switch {
			case !ok:
				t.Errorf("%s: no pair for %s", id, dest)
			case p.Status != "parked":
				t.Errorf("%s at %s: %s, want parked", id, dest, p.Status)
			case !app.got("/"+dest, id, p.Attempts):
				if bad++; bad <= 10 {
					t.Errorf("%s at %s parked after %d attempts, but attempt %d never reached the application", id, dest, p.Attempts, p.Attempts)
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d pairs parked with their last attempt never sent", bad)
	}
}

// TestCrashParksOnlyAfterAFailedRequest kills `inbox dispatch` with SIGKILL
// 0.2 s after each start, 40 times, while two destinations fail every
// request (500) on short retry schedules: a pair whose last attempt's
// outcome was lost to a kill (its request sent or not) is sent once more
// rather than parked unsent, so every pair ends parked by a request that
// reached the application and failed.
func TestCrashParksOnlyAfterAFailedRequest(t *testing.T) {
	const n, crashes = 1200, 40
	db := fillDB(t, n)
	app := newFailingApp(t)
	cfg := filepath.Join(t.TempDir(), "inbox.toml")
	if err := os.WriteFile(cfg, []byte(`
[[destination]]
name = "x"
url = "`+app.URL+`/x"
retry_schedule = "50ms,50ms"

[[destination]]
name = "y"
url = "`+app.URL+`/y"
retry_schedule = "30ms,30ms,30ms"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--db", db, "--config", cfg, "--lease", "2s", "--timeout", "1s"}
	for range crashes {
		d := startDispatch(t, args...)
		time.Sleep(200 * time.Millisecond)
		d.kill(syscall.SIGKILL)
	}
	d := startDispatch(t, args...)
	deadline := time.Now().Add(60 * time.Second)
	for states, _ := rowStates(t, db); states["parked"] != n; states, _ = rowStates(t, db) {
		if time.Now().After(deadline) {
			t.Fatalf("rows %v, want all %d parked\n%s", states, n, d.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.kill(syscall.SIGTERM)
	checkParkedByRequests(t, db, app, n, "x", "y")
}

// TestScheduleCutShortParksOnlyAfterAFailedRequest: a dispatcher killed
// while it holds rows counted ahead (never sent) and one under way is
// started again with `--retry-schedule none`, so that every row it claims
// is past its last attempt: each is sent once more and parked by that
// request's failure, never parked unsent.
func TestScheduleCutShortParksOnlyAfterAFailedRequest(t *testing.T) {
	const n = 8
	db := fillDB(t, n)
	hang := newRecorder(t)
	hang.hanging.Store(true)
	crashHolding(t, db, hang, 1, "--db", db, "--forward-url", hang.URL, "--workers", "1", "--max-slow", "0",
		"--timeout", "1s", "--lease", "2s", "--retry-schedule", "1s,1s")
	counted := 0
	for _, r := range rowAttempts(t, db) {
		counted += r.Attempts
	}
	if counted < 2 {
		t.Fatalf("the kill left %d attempts counted, want the one under way and some counted ahead", counted)
	}
	app := newFailingApp(t)
	d := startDispatch(t, "--db", db, "--forward-url", app.URL+"/default", "--workers", "2",
		"--timeout", "1s", "--lease", "2s", "--retry-schedule", "none")
	deadline := time.Now().Add(30 * time.Second)
	for states, _ := rowStates(t, db); states["parked"] != n; states, _ = rowStates(t, db) {
		if time.Now().After(deadline) {
			t.Fatalf("rows %v, want all %d parked\n%s", states, n, d.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.kill(syscall.SIGTERM)
	checkParkedByRequests(t, db, app, n, "default")
}
