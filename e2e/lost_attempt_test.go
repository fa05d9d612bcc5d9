package e2e

import (
	"context"
	"fmt"
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

// failingApp answers every request 500, each row's own failure (its
// answer names the row: not an outage, which answers every row alike), and
// records, for each path and row, the Inbox-Attempt of each request it
// got.
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
		fmt.Fprintf(w, "cannot take row %s", r.Header.Get(dispatch.HeaderRowID))
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

// checkParkedByRequests checks that every pair of ids at dests (pairs:
// id + " " + destination) is parked, and parked by a request: the
// application got the attempt the pair's count ends on.
func checkParkedByRequests(t *testing.T, pairs map[string]pairState, app *failingApp, ids []string, dests ...string) {
	t.Helper()
	bad := 0
	for _, id := range ids {
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

// rowIDs returns prefix_0000 ... for n rows.
func rowIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s_%04d", prefix, i)
	}
	return ids
}

// pgPairStates reads every pair of the schema dsn reaches.
func pgPairStates(t *testing.T, dsn string) map[string]pairState {
	t.Helper()
	conn := pgConnect(t, dsn)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT event_id, destination, status, attempts, lease_owner IS NOT NULL FROM deliveries`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]pairState{}
	for rows.Next() {
		var id, dest string
		var p pairState
		if err := rows.Scan(&id, &dest, &p.Status, &p.Attempts, &p.Leased); err != nil {
			t.Fatal(err)
		}
		out[id+" "+dest] = p
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCrashParksOnlyAfterAFailedRequest kills `inbox dispatch` with SIGKILL
// 0.2 s after each start, 20 times, while two destinations fail every
// request (500) on short retry schedules: a pair whose last attempt's
// outcome was lost to a kill (its request sent or not) is sent once more
// rather than parked unsent, so every pair ends parked by a request that
// reached the application and failed.
func TestCrashParksOnlyAfterAFailedRequest(t *testing.T) {
	t.Parallel()
	const n = 600
	db := fillDB(t, n)
	crashParksOnlyAfterAFailedRequest(t, db, rowIDs("job", n), func() map[string]pairState { return pairStates(t, db) })
}

// TestCrashParksOnlyAfterAFailedRequestPG is
// TestCrashParksOnlyAfterAFailedRequest on PostgreSQL.
func TestCrashParksOnlyAfterAFailedRequestPG(t *testing.T) {
	t.Parallel()
	const n = 600
	dsn := pgSchema(t)
	fillPG(t, dsn, n)
	crashParksOnlyAfterAFailedRequest(t, dsn, rowIDs("pg", n), func() map[string]pairState { return pgPairStates(t, dsn) })
}

func crashParksOnlyAfterAFailedRequest(t *testing.T, db string, ids []string, pairs func() map[string]pairState) {
	// The rows' work outlasts the last crash (some pairs are still to park
	// after it), so every kill lands on pairs under way.
	const crashes = 20
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
	// A bound on waiting, not a speed goal: a loaded machine may take long.
	deadline := time.Now().Add(180 * time.Second)
	for {
		parked := 0
		for _, p := range pairs() {
			if p.Status == "parked" {
				parked++
			}
		}
		if parked == 2*len(ids) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pairs parked, want all %d\n%s", parked, 2*len(ids), d.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.kill(syscall.SIGTERM)
	checkParkedByRequests(t, pairs(), app, ids, "x", "y")
}

// TestScheduleCutShortParksOnlyAfterAFailedRequest: a dispatcher killed
// while it holds rows counted ahead (never sent) and one under way is
// started again with `--retry-schedule none`, so that every row it claims
// is past its last attempt: each is sent once more and parked by that
// request's failure, never parked unsent.
func TestScheduleCutShortParksOnlyAfterAFailedRequest(t *testing.T) {
	t.Parallel()
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
	waitLong(t, 30*time.Second, "every row parked", func() bool { states, _ := rowStates(t, db); return states["parked"] == n })
	d.kill(syscall.SIGTERM)
	checkParkedByRequests(t, pairStates(t, db), app, rowIDs("job", n), "default")
}
