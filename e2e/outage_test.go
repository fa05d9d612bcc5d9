package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"inbox/dispatch"
	"inbox/inbox"
	"inbox/postgres"
	"inbox/sqlite"
	"inbox/testport"
)

// The short retry schedule of these tests: three attempts within 150 ms.
const outageSchedule = "50ms,100ms"

// outageApp is an application on a fixed address that can stop listening
// (connection refused) and start again, answer 500 to everything, 500 to
// one row only (poison), or 503 with Retry-After to a row's first request.
// It records the times of each row's requests, by the row's key.
type outageApp struct {
	t    *testing.T
	addr string
	url  string

	mu       sync.Mutex
	srv      *http.Server
	requests map[string][]time.Time

	failAll    atomic.Bool
	away       atomic.Bool // every request answered 503 Retry-After: 4
	poison     string      // the key answered 500 always
	retryAfter string      // the key whose first request is answered 503 Retry-After: 4
}

func newOutageApp(t *testing.T) *outageApp {
	addr := testport.Addr(t)
	a := &outageApp{t: t, addr: addr, url: "http://" + addr + "/jobs", requests: map[string][]time.Time{}}
	t.Cleanup(a.stop)
	return a
}

func (a *outageApp) serveHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(dispatch.HeaderKey)
	a.mu.Lock()
	a.requests[key] = append(a.requests[key], time.Now())
	n := len(a.requests[key])
	a.mu.Unlock()
	switch {
	case a.failAll.Load() || key == a.poison:
		w.WriteHeader(http.StatusInternalServerError)
	case a.away.Load() || (key == a.retryAfter && n == 1):
		w.Header().Set("Retry-After", "4")
		w.WriteHeader(http.StatusServiceUnavailable)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// start listens on the app's address (again).
func (a *outageApp) start() {
	a.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port was ours: it may take a moment to be free
		if ln, err = net.Listen("tcp", a.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		a.t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(a.serveHTTP)}
	a.mu.Lock()
	a.srv = srv
	a.mu.Unlock()
	go srv.Serve(ln)
}

// stop closes the listener and every connection: connection refused.
func (a *outageApp) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.srv != nil {
		a.srv.Close()
		a.srv = nil
	}
}

// total returns how many requests the app got.
func (a *outageApp) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, ts := range a.requests {
		n += len(ts)
	}
	return n
}

func (a *outageApp) times(key string) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.requests[key]...)
}

// outageStore is a fresh database of n new rows on one of the stores: its
// --db, and the key of row i.
type outageStore struct {
	db  string
	key func(i int) string
}

// eachStore runs fn as a subtest on a fresh database of n rows on SQLite,
// and on PostgreSQL (skipped without the test database), the two at once.
func eachStore(t *testing.T, n int, fn func(t *testing.T, st outageStore)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, outageStore{fillDB(t, n), func(i int) string { return fmt.Sprintf("job_%04d", i) }})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dsn := pgSchema(t)
		fillPG(t, dsn, n)
		fn(t, outageStore{dsn, func(i int) string { return fmt.Sprintf("pg_%04d", i) }})
	})
}

// rowsOf reads every row of db (SQLite file or postgres:// URL).
func rowsOf(t *testing.T, db string) []inbox.Event {
	t.Helper()
	ctx := context.Background()
	var s inbox.Store
	var err error
	if strings.HasPrefix(db, "postgres://") {
		s, err = postgres.Open(ctx, db, postgres.Options{ReadOnly: true})
	} else {
		s, err = sqlite.Open(ctx, db, sqlite.Options{ReadOnly: true, MustExist: true})
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.List(ctx, inbox.Filter{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// byStatus counts rows by status, and returns the parked ones.
func byStatus(rows []inbox.Event) (map[inbox.Status]int, []inbox.Event) {
	counts := map[inbox.Status]int{}
	var parked []inbox.Event
	for _, r := range rows {
		counts[r.Status]++
		if r.Status == inbox.StatusParked {
			parked = append(parked, r)
		}
	}
	return counts, parked
}

// waitRows polls db until cond holds of its rows, for up to limit.
func waitRows(t *testing.T, db string, limit time.Duration, what string, logs fmt.Stringer, cond func([]inbox.Event) bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for rows := rowsOf(t, db); !cond(rows); rows = rowsOf(t, db) {
		if time.Now().After(deadline) {
			counts, _ := byStatus(rows)
			t.Fatalf("timed out waiting for %s: rows %v\n%s", what, counts, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func allDone(n int) func([]inbox.Event) bool {
	return func(rows []inbox.Event) bool {
		counts, _ := byStatus(rows)
		return counts[inbox.StatusDone] == n
	}
}

// TestOutageParksNothing: an application that refuses connections, or
// answers 500 to everything, for far more than 20x the retry schedule has
// no row parked and every row delivered within seconds of its return;
// meanwhile the destination shows down in inbox stats and inbox alert
// --down-for 5s exits 1 naming it, and 0 once it is back. On SQLite and
// PostgreSQL, through the binary.
func TestOutageParksNothing(t *testing.T) {
	t.Parallel()
	const n = 20
	for _, mode := range []string{"refused", "500"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			eachStore(t, n, func(t *testing.T, st outageStore) { outageParksNothing(t, st, mode, n) })
		})
	}
}

func outageParksNothing(t *testing.T, st outageStore, mode string, n int) {
	app := newOutageApp(t)
	if mode == "500" {
		app.failAll.Store(true)
		app.start()
	}
	args := []string{"dispatch", "--db", st.db, "--forward-url", app.url, "--retry-schedule", outageSchedule,
		"--workers", "4", "--timeout", "2s", "--lease", "5s", "--admin-addr", "127.0.0.1:0"}
	d := startInbox(t, nil, args...)
	began := time.Now()
	// 20x the schedule is 3 s; alert --down-for 5s needs more.
	deadline := began.Add(30 * time.Second)
	for {
		out, _, code := runCLI(t, nil, "alert", "--db", st.db, "--down-for", "5s")
		if code == 1 && strings.Contains(out, "default") {
			break
		}
		if code != 0 || time.Now().After(deadline) {
			t.Fatalf("alert --down-for 5s: exit %d, printed %q, want 1 naming default\n%s", code, out, d.logs)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if time.Since(began) < 5*time.Second {
		t.Errorf("alert --down-for 5s raised %s after the start", time.Since(began))
	}
	out, _, _ := runCLI(t, nil, "stats", "--db", st.db, "--json")
	var stats struct {
		Destinations []inbox.DestinationStats `json:"destinations"`
	}
	if err := json.Unmarshal([]byte(out), &stats); err != nil || len(stats.Destinations) != 1 || stats.Destinations[0].State != "down" {
		t.Errorf("stats --json destinations %+v (%v), want default down", stats.Destinations, err)
	}
	if got := httpGet(t, d.admin+"/readyz"); !strings.Contains(got, "destination default: down for") {
		t.Errorf("/readyz while down:\n%s", got)
	}
	if got := httpGet(t, d.admin+"/metrics"); !strings.Contains(got, `inbox_dispatch_destination_down{destination="default"} 1`) {
		t.Error("/metrics while down: no inbox_dispatch_destination_down 1")
	}
	if out, _, code := runCLI(t, nil, "destinations", "--admin", d.admin); code != 0 || !strings.Contains(out, "down for") {
		t.Errorf("inbox destinations while down: exit %d\n%s", code, out)
	}
	rows := rowsOf(t, st.db)
	counts, parked := byStatus(rows)
	if len(parked) > 0 || counts[inbox.StatusNew] != n {
		t.Fatalf("after %s of outage: rows %v, parked %v: want all %d new", time.Since(began).Round(time.Millisecond), counts, parked, n)
	}
	for _, r := range rows {
		// Refused: no request reached it, so none counts. 500: the rows
		// whose failures told the outage (fewer than 3) count one each.
		if (mode == "refused" && r.Attempts != 0) || r.Attempts > 1 {
			t.Errorf("%s: %d attempts counted during the outage", r.ID, r.Attempts)
		}
	}

	if mode == "refused" {
		// Killed while it is down, and started again: no row spends an
		// attempt it did not make, and the outage is still the same one.
		d.signal(syscall.SIGKILL)
		<-d.done
		d = startInbox(t, nil, args...)
		time.Sleep(2 * time.Second)
		// But the one probe under way, counted as its request left, whose
		// outcome the kill lost: its lease holds it until it runs out.
		probes := 0
		for _, r := range rowsOf(t, st.db) {
			if r.Attempts == 1 && r.LeaseOwner != "" {
				probes++
			}
			if r.Status != inbox.StatusNew || r.Attempts > 1 || (r.Attempts == 1 && r.LeaseOwner == "") {
				t.Errorf("%s after a kill -9 while down: %s with %d attempts, want new with none", r.ID, r.Status, r.Attempts)
			}
		}
		if probes > 1 {
			t.Errorf("%d rows counted under way after a kill -9 while down, want the one probe at most", probes)
		}
		if out, _, code := runCLI(t, nil, "alert", "--db", st.db, "--down-for", "5s"); code != 1 || !strings.Contains(out, "default") {
			t.Errorf("alert --down-for 5s after the restart: exit %d, %q, want 1 naming default", code, out)
		}
	}

	back := time.Now()
	if mode == "refused" {
		app.start()
	} else {
		app.failAll.Store(false)
	}
	waitRows(t, st.db, 20*time.Second, "every row delivered after the application's return", d.logs, allDone(n))
	if took := time.Since(back); took > 15*time.Second {
		t.Errorf("delivered %s after the application's return, want within seconds", took)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		out, _, code := runCLI(t, nil, "alert", "--db", st.db, "--down-for", "5s")
		if code == 0 && out == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alert --down-for 5s once back: exit %d, printed %q, want 0", code, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := httpGet(t, d.admin+"/metrics"); !strings.Contains(got, `inbox_dispatch_destination_down{destination="default"} 0`) {
		t.Error("/metrics once back: inbox_dispatch_destination_down not 0")
	}
	d.signal(syscall.SIGTERM)
	<-d.done
}

// httpGet returns the body GET url answers with, whatever its status.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b)
}

// TestPoisonRowParked: a row the application answers 500 to, while it
// takes the others, is parked handler_failed after its schedule (three
// attempts) while every other row is delivered at its first attempt, the
// application having refused connections for 2 s (13x the schedule) first.
func TestPoisonRowParked(t *testing.T) {
	t.Parallel()
	const n = 20
	eachStore(t, n, func(t *testing.T, st outageStore) {
		{
			app := newOutageApp(t)
			app.poison = st.key(7)
			d := startDispatch(t, "--db", st.db, "--forward-url", app.url, "--retry-schedule", outageSchedule, "--workers", "4")
			time.Sleep(2 * time.Second)
			app.start()
			waitRows(t, st.db, 30*time.Second, "the poison row parked, the others done", d.logs, func(rows []inbox.Event) bool {
				counts, _ := byStatus(rows)
				return counts[inbox.StatusDone] == n-1 && counts[inbox.StatusParked] == 1
			})
			_, parked := byStatus(rowsOf(t, st.db))
			if p := parked[0]; p.JobID != st.key(7) || p.Reason != inbox.ReasonHandlerFailed || p.Attempts != 3 {
				t.Errorf("parked %s %s after %d attempts, want %s handler_failed after 3", p.JobID, p.Reason, p.Attempts, st.key(7))
			}
			for _, r := range rowsOf(t, st.db) {
				if r.Status == inbox.StatusDone && r.Attempts != 1 {
					t.Errorf("%s done after %d attempts, want 1", r.ID, r.Attempts)
				}
			}
			if got := len(app.times(st.key(7))); got != 3 {
				t.Errorf("the poison row got %d requests, want 3", got)
			}
			d.kill(syscall.SIGTERM)
		}
	})
}

// TestRetryAfterHonoured: a 503 with Retry-After: 4 holds that row's next
// request at least 4 s, and costs it no attempt.
func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	eachStore(t, 1, func(t *testing.T, st outageStore) {
		{
			app := newOutageApp(t)
			app.retryAfter = st.key(0)
			app.start()
			d := startDispatch(t, "--db", st.db, "--forward-url", app.url, "--retry-schedule", outageSchedule)
			waitRows(t, st.db, 30*time.Second, "the row delivered", d.logs, allDone(1))
			times := app.times(st.key(0))
			if len(times) != 2 {
				t.Fatalf("%d requests, want 2\n%s", len(times), d.logs)
			}
			if gap := times[1].Sub(times[0]); gap < 4*time.Second {
				t.Errorf("the next request came %s after the 503 with Retry-After: 4", gap)
			}
			if r := rowsOf(t, st.db)[0]; r.Attempts != 1 {
				t.Errorf("done after %d attempts, want 1: the 503 was the destination's", r.Attempts)
			}
			d.kill(syscall.SIGTERM)
		}
	})
}
