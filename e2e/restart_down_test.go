package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRestartWhileDownProbesFirst: inbox dispatch stopped with SIGTERM
// while its destination answers 503 to everything, and started again,
// sends one probe request into the outage, not a request a worker, and
// counts no row's attempt; once the destination answers, every row is
// delivered. On SQLite and PostgreSQL, through the binary.
func TestRestartWhileDownProbesFirst(t *testing.T) {
	t.Parallel()
	const n = 20
	eachStore(t, n, func(t *testing.T, st outageStore) {
		app := newOutageApp(t)
		app.away.Store(true) // 503 Retry-After: 4: after a probe, none for 4 s
		app.start()
		args := []string{"dispatch", "--db", st.db, "--forward-url", app.url, "--retry-schedule", outageSchedule,
			"--workers", "4", "--timeout", "2s", "--lease", "5s", "--admin-addr", "127.0.0.1:0"}
		d := startInbox(t, nil, args...)
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(httpGet(t, d.admin+"/metrics"), `inbox_dispatch_destination_down{destination="default"} 1`) {
			if time.Now().After(deadline) {
				t.Fatalf("the destination never went down\n%s", d.logs)
			}
			time.Sleep(50 * time.Millisecond)
		}
		d.signal(syscall.SIGTERM)
		<-d.done
		counted := map[string]int64{}
		for _, r := range rowsOf(t, st.db) {
			counted[r.ID] = r.Attempts
		}
		before := app.total()

		d = startInbox(t, nil, args...)
		deadline = time.Now().Add(10 * time.Second)
		for app.total() == before {
			if time.Now().After(deadline) {
				t.Fatalf("no probe within 10 s of the restart\n%s", d.logs)
			}
			time.Sleep(10 * time.Millisecond)
		}
		// The probe's 503 asks for 4 s: nothing more is due before then.
		time.Sleep(2 * time.Second)
		if got := app.total() - before; got != 1 {
			t.Errorf("%d requests into the outage within 2 s of the restart, want the one probe\n%s", got, d.logs)
		}
		for _, r := range rowsOf(t, st.db) {
			if r.Attempts > counted[r.ID] {
				t.Errorf("%s: %d attempts after the restart into the outage, %d before", r.ID, r.Attempts, counted[r.ID])
			}
		}

		back := time.Now()
		app.away.Store(false)
		waitRows(t, st.db, 20*time.Second, "every row delivered once the destination answers", d.logs, allDone(n))
		if took := time.Since(back); took > 15*time.Second {
			t.Errorf("delivered %s after the destination answered, want within seconds", took)
		}
		d.signal(syscall.SIGTERM)
		<-d.done
	})
}
