package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"inbox/dispatch"
	"inbox/inbox"
	"inbox/postgres"
)

// fillPG stores n new rows, pg_0000 ..., in the schema dsn reaches.
func fillPG(t *testing.T, dsn string, n int) {
	t.Helper()
	s, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rules := inbox.Rules{Events: []string{"job.completed"}}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"event":"job.completed","job_id":"pg_%04d","status":"COMPLETED"}`, i)
			if _, err := s.Put(context.Background(), inbox.Classify("", inbox.Named{}, []byte(body), 1, rules)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// attempt is one request the destination took.
type attempt struct {
	seq        int
	row, from  string // from: the dispatcher, by the path it posts to
	attempt    string
	start, end time.Time
	status     int
}

// application is a destination shared by two dispatchers, each posting to
// its own path (/a, /b). It records every attempt and the rows being
// delivered at each moment, and counts a row delivered by two at once.
// Once blockA is set, requests from a are held until they are given up.
type application struct {
	*httptest.Server
	blockA  atomic.Bool
	blocked chan struct{} // a request from a is held
	release chan struct{} // closed: held requests end

	mu         sync.Mutex
	seq        int
	inFlight   map[string]*attempt
	attempts   []*attempt
	concurrent []string
}

func newApplication(t *testing.T) *application {
	a := &application{inFlight: map[string]*attempt{}, blocked: make(chan struct{}, 1024), release: make(chan struct{})}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := &attempt{row: r.Header.Get(dispatch.HeaderRowID), from: strings.TrimPrefix(r.URL.Path, "/"),
			attempt: r.Header.Get(dispatch.HeaderAttempt), start: time.Now()}
		a.mu.Lock()
		a.seq++
		at.seq = a.seq
		if other, ok := a.inFlight[at.row]; ok {
			a.concurrent = append(a.concurrent, fmt.Sprintf("%s: attempt %s from %s while attempt %s from %s runs", at.row, at.attempt, at.from, other.attempt, other.from))
		}
		a.inFlight[at.row] = at
		a.attempts = append(a.attempts, at)
		a.mu.Unlock()
		// Read whole, the request's context ends when its connection does.
		io.Copy(io.Discard, r.Body)
		if at.from == "a" && a.blockA.Load() {
			a.blocked <- struct{}{}
			select {
			case <-r.Context().Done(): // the dispatcher gave up, or died
			case <-a.release:
			}
		} else {
			time.Sleep(5 * time.Millisecond)
			at.status = http.StatusNoContent
			w.WriteHeader(at.status)
		}
		a.mu.Lock()
		at.end = time.Now()
		if a.inFlight[at.row] == at {
			delete(a.inFlight, at.row)
		}
		a.mu.Unlock()
	}))
	t.Cleanup(func() {
		a.unblock()
		a.Close()
	})
	return a
}

// unblock ends the held requests; it may be called more than once.
func (a *application) unblock() {
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-a.release:
	default:
		close(a.release)
	}
}

// delivering returns the attempts under way now, by row.
func (a *application) delivering() map[string]attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]attempt, len(a.inFlight))
	for row, at := range a.inFlight {
		out[row] = *at
	}
	return out
}

// ownerOf reads from a dispatcher's log the owner it claims rows under.
func ownerOf(t *testing.T, d *server) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(d.logs.String(), "\n") {
			var m struct{ Message, Owner string }
			if json.Unmarshal([]byte(line), &m) == nil && m.Message == "dispatching" && m.Owner != "" {
				return m.Owner
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no owner in the dispatcher's log:\n%s", d.logs)
	return ""
}

// TestDispatchersShareAQueue runs two `inbox dispatch` on one PostgreSQL
// queue delivering to one application. No row is ever delivered by both
// at once (the application sees no row twice in flight), and every row
// being delivered is leased in the database to the dispatcher delivering
// it (lease_owner snapshots taken while the attempt runs). Then one
// dispatcher is killed with SIGKILL while it holds leases: the other
// delivers those rows once the leases have run out, never before, and
// every row ends done.
func TestDispatchersShareAQueue(t *testing.T) {
	t.Parallel()
	const n = 300
	const lease = 4 * time.Second
	dsn := pgSchema(t)
	fillPG(t, dsn, n)
	app := newApplication(t)
	args := func(path string) []string {
		return []string{"dispatch", "--db", dsn, "--forward-url", app.URL + "/" + path, "--workers", "4",
			"--timeout", "2s", "--lease", lease.String(), "--retry-schedule", "100ms,100ms,100ms,100ms,100ms", "--admin-addr", "127.0.0.1:0"}
	}
	da := startInbox(t, nil, args("a")...)
	db := startInbox(t, nil, args("b")...)
	owners := map[string]string{ownerOf(t, da): "a", ownerOf(t, db): "b"}

	// Snapshots: a row whose attempt runs both before and after the query
	// was being delivered all through it, so it must be leased, to the
	// dispatcher delivering it.
	conn, snapConn := pgConnect(t, dsn), pgConnect(t, dsn)
	ctx, stop := context.WithCancel(context.Background())
	var snapshots, checked int
	var wrongLease []string
	snapped := make(chan struct{})
	go func() {
		defer close(snapped)
		for ctx.Err() == nil {
			before := app.delivering()
			rows, err := snapConn.Query(ctx, `SELECT id, lease_owner FROM events WHERE lease_owner IS NOT NULL`)
			if err != nil {
				return
			}
			leased := map[string]string{}
			for rows.Next() {
				var id, owner string
				if rows.Scan(&id, &owner) == nil {
					leased[id] = owner
				}
			}
			rows.Close()
			after := app.delivering()
			snapshots++
			for row, at := range before {
				if again, ok := after[row]; !ok || again.seq != at.seq {
					continue
				}
				checked++
				if who, ok := owners[leased[row]]; !ok || who != at.from {
					wrongLease = append(wrongLease, fmt.Sprintf("%s delivered by %s, leased to %q", row, at.from, leased[row]))
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	// Once a has delivered some rows, hold what it sends next: it then
	// holds leases on those rows (and on the rest of its claim).
	for deadline := time.Now().Add(30 * time.Second); ; {
		app.mu.Lock()
		fromA := 0
		for _, at := range app.attempts {
			if at.from == "a" {
				fromA++
			}
		}
		app.mu.Unlock()
		if fromA >= 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dispatcher a delivered %d rows in 30s\n%s", fromA, da.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	app.blockA.Store(true)
	select {
	case <-app.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("dispatcher a sent nothing more")
	}
	time.Sleep(50 * time.Millisecond) // let a's other workers be held too
	killed := time.Now()
	da.signal(syscall.SIGKILL)
	<-da.done
	// The leases a held when it died: read once it is dead, so a row it
	// settled between a read and the kill is not counted as held.
	type held struct{ until time.Time }
	heldByA := map[string]held{}
	rows, err := conn.Query(context.Background(), `SELECT id, lease_until FROM events WHERE lease_owner = $1`, ownerOf(t, da))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var until int64
		if err := rows.Scan(&id, &until); err != nil {
			t.Fatal(err)
		}
		heldByA[id] = held{time.UnixMilli(until)}
	}
	rows.Close()
	app.unblock()
	if len(heldByA) == 0 {
		t.Fatal("dispatcher a held no lease when it was killed")
	}

	// Every row done, by b alone after the kill.
	var states map[string]int
	for deadline := time.Now().Add(60 * time.Second); ; {
		states = map[string]int{}
		rows, err := conn.Query(context.Background(), `SELECT status, count(*) FROM events GROUP BY status`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			var c int
			rows.Scan(&s, &c)
			states[s] = c
		}
		rows.Close()
		if states["done"] == n || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-snapped
	db.signal(syscall.SIGTERM)
	<-db.done

	app.mu.Lock()
	defer app.mu.Unlock()
	delivered := map[string]bool{}
	firstAfterKill := map[string]*attempt{}
	for _, at := range app.attempts {
		if at.status == http.StatusNoContent {
			delivered[at.row] = true
		}
		if _, ok := heldByA[at.row]; ok && at.start.After(killed) && firstAfterKill[at.row] == nil {
			firstAfterKill[at.row] = at
		}
	}
	var waited time.Duration
	for row, h := range heldByA {
		at := firstAfterKill[row]
		switch {
		case at == nil:
			t.Errorf("%s, leased to the killed dispatcher, was never delivered again", row)
		case at.from != "b":
			t.Errorf("%s delivered after the kill by %s", row, at.from)
		case at.start.Before(h.until.Add(-100 * time.Millisecond)):
			t.Errorf("%s delivered by b at %s, before a's lease ran out at %s", row, at.start.Format(time.StampMilli), h.until.Format(time.StampMilli))
		default:
			waited = max(waited, at.start.Sub(killed))
		}
	}
	t.Logf("rows: %v; attempts: %d; rows leased to a when killed: %d, delivered again by b within %s of the kill (--lease %s)",
		states, len(app.attempts), len(heldByA), waited.Round(time.Millisecond), lease)
	t.Logf("lease snapshots: %d, attempts checked against them: %d", snapshots, checked)
	if states["done"] != n {
		t.Errorf("rows by status %v, want all %d done\n%s", states, n, db.logs)
	}
	if len(delivered) != n {
		t.Errorf("%d rows delivered with a 2xx, want %d", len(delivered), n)
	}
	if len(app.concurrent) > 0 {
		t.Errorf("%d rows delivered by two at once: %v", len(app.concurrent), app.concurrent[:min(len(app.concurrent), 10)])
	}
	if len(wrongLease) > 0 {
		t.Errorf("%d attempts under way on rows not leased to their dispatcher: %v", len(wrongLease), wrongLease[:min(len(wrongLease), 10)])
	}
	if checked < 20 {
		t.Errorf("only %d attempts checked against the leases: the snapshots proved little", checked)
	}
}
