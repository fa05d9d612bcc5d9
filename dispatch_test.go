package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"inbox/dispatch"
	"inbox/inbox"
	"inbox/inbox/inboxtest"
)

// sink is a local application that counts deliveries per job id. Each
// request takes delay; the request numbered hold (from 1) waits until the
// test closes release, after telling held.
type sink struct {
	*httptest.Server
	delay   time.Duration
	hold    int
	held    chan struct{}
	release chan struct{}

	mu    sync.Mutex
	n     int
	count map[string]int
}

func newSink(t *testing.T, delay time.Duration, hold int) *sink {
	s := &sink{delay: delay, hold: hold, held: make(chan struct{}), release: make(chan struct{}), count: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.n++
		n := s.n
		s.count[r.Header.Get(dispatch.HeaderIdempotencyKey)]++
		s.mu.Unlock()
		if n == s.hold {
			close(s.held)
			<-s.release
		}
		time.Sleep(s.delay)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
		s.Close()
	})
	return s
}

func (s *sink) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.count))
	for k, v := range s.count {
		out[k] = v
	}
	return out
}

// fillDB stores n new rows, job_0000 ..., in a fresh database.
func fillDB(t *testing.T, n int) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "inbox.db")
	s := inboxtest.MustOpenPath(t, db, inbox.Options{})
	rules := inbox.Rules{Events: []string{"job.completed"}}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"event":"job.completed","job_id":"job_%04d","status":"COMPLETED"}`, i)
			if _, err := s.Put(context.Background(), inbox.Classify([]byte(body), 1, rules)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return db
}

// dispatcher is a running `inbox dispatch`, in its own process group.
type dispatcher struct {
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{}
}

func startDispatch(t *testing.T, args ...string) *dispatcher {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"dispatch"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &dispatcher{cmd: cmd, logs: &syncBuffer{}, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			d.logs.Write([]byte(sc.Text() + "\n"))
		}
		cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() { d.kill(syscall.SIGKILL) })
	return d
}

// kill signals the dispatcher's group and waits for it to exit.
func (d *dispatcher) kill(sig syscall.Signal) {
	syscall.Kill(-d.cmd.Process.Pid, sig)
	<-d.done
}

// rowStates counts rows by status, and rows still under a lease.
func rowStates(t *testing.T, db string) (map[string]int, int) {
	t.Helper()
	conn, err := sql.Open("sqlite", db+"?_pragma=query_only(ON)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT status, count(*), count(lease_owner) FROM events GROUP BY status`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	states, leased := map[string]int{}, 0
	for rows.Next() {
		var status string
		var n, l int
		if err := rows.Scan(&status, &n, &l); err != nil {
			t.Fatal(err)
		}
		states[status], leased = n, leased+l
	}
	return states, leased
}

// TestDispatchCrash kills `inbox dispatch` with SIGKILL while a delivery is
// under way, restarts it, and checks that every row is delivered at least
// once and ends done, none left claimed.
func TestDispatchCrash(t *testing.T) {
	const n = 300
	db := fillDB(t, n)
	app := newSink(t, 5*time.Millisecond, 100)
	args := []string{"--db", db, "--forward-url", app.URL, "--workers", "4", "--timeout", "1s", "--lease", "2s"}

	d := startDispatch(t, args...)
	select {
	case <-app.held:
	case <-time.After(20 * time.Second):
		t.Fatalf("the application got fewer than 100 deliveries:\n%s", d.logs)
	}
	d.kill(syscall.SIGKILL) // while delivery 100 is under way
	close(app.release)
	states, leased := rowStates(t, db)
	t.Logf("after the kill: %v, %d claimed", states, leased)
	if leased == 0 {
		t.Fatal("no row was claimed when the dispatcher was killed: the test proved nothing")
	}

	d = startDispatch(t, args...)
	deadline := time.Now().Add(30 * time.Second)
	for states["done"] != n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		states, leased = rowStates(t, db)
	}
	d.kill(syscall.SIGTERM)
	states, leased = rowStates(t, db)
	counts := app.counts()
	again := 0
	for i := range n {
		c := counts[fmt.Sprintf("job_%04d", i)]
		if c == 0 {
			t.Errorf("job_%04d never delivered", i)
		}
		again += c - 1
	}
	t.Logf("rows %v, %d claimed; %d rows delivered, %d deliveries repeated", states, leased, len(counts), again)
	if states["done"] != n || leased != 0 {
		t.Errorf("rows %v, %d still claimed; want all %d done, none claimed\n%s", states, leased, n, d.logs)
	}
	if again == 0 {
		t.Error("no delivery was repeated: the one under way at the kill should have been")
	}
}

// TestServeDispatches runs serve with a destination: a signed delivery is
// stored, forwarded with its headers, and its row becomes done.
func TestServeDispatches(t *testing.T) {
	db := filepath.Join(t.TempDir(), "inbox.db")
	app := newSink(t, 0, 0)
	srv := startServer(t, db, "--forward-url", app.URL, "--forward-secret", "whsec_c2VjcmV0LWtleQ==")
	body := `{"event":"job.completed","job_id":"job_1","status":"COMPLETED"}`
	if got := send(t, http.DefaultClient, srv.url, body, e2eSecret); got != http.StatusNoContent {
		t.Fatalf("delivery: status %d\n%s", got, srv.logs)
	}
	var row struct {
		Status   string
		Attempts int
		DoneAt   time.Time `json:"done_at"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for row.Status != "done" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		out, _, _ := runCLI(t, nil, "show", "--db", db, "--json", "job_1")
		json.Unmarshal([]byte(out), &row)
	}
	if row.Status != "done" || row.Attempts != 1 || row.DoneAt.IsZero() || app.counts()["job_1"] != 1 {
		t.Errorf("row %+v, deliveries %v; want done after one attempt\n%s", row, app.counts(), srv.logs)
	}
	out, _, code := runCLI(t, nil, "stats", "--db", db)
	if code != 0 || !strings.Contains(out, "done     1     1") {
		t.Errorf("stats: exit %d\n%s", code, out)
	}
}

// TestDispatchCLIErrors checks that a wrong destination setting is one
// clear line and a non-zero exit, before anything is claimed.
func TestDispatchCLIErrors(t *testing.T) {
	db := fillDB(t, 1)
	missing := filepath.Join(t.TempDir(), "missing.db")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"dispatch", "--db", db}, "no destination"},
		{[]string{"dispatch", "--db", db, "--forward-url", "http://127.0.0.1:1/", "--exec", "cat"}, "one destination only"},
		{[]string{"dispatch", "--db", db, "--exec", "cat", "--forward-secret", "s"}, "--forward-secret needs --forward-url"},
		{[]string{"dispatch", "--db", db, "--nats-url", "nats://127.0.0.1:1"}, "go together"},
		// A server that cannot be reached does not stop it (TestDispatchNATSOutage); a URL no server could take does.
		{[]string{"dispatch", "--db", db, "--nats-url", "http://user:hunter2@127.0.0.1:4222", "--nats-subject", "a.b"}, "nats URL"},
		{[]string{"dispatch", "--db", db, "--nats-url", "nats://127.0.0.1:4222", "--nats-subject", "a.>"}, "literal subject"},
		{[]string{"dispatch", "--db", db, "--exec", "cat", "--retry-schedule", "soon"}, "--retry-schedule"},
		{[]string{"dispatch", "--db", db, "--exec", "cat", "--timeout", "1m", "--lease", "1m"}, "twice the timeout"},
		{[]string{"dispatch", "--db", db, "--forward-url", "localhost:3000"}, "http:// or https://"},
		{[]string{"dispatch", "--db", missing, "--exec", "cat"}, "no inbox database"},
		// serve binds before it builds the dispatcher: never the default port.
		{[]string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--secret", "s", "--exec", "cat", "--nats-url", "nats://x"}, "one destination only"},
	} {
		out, errOut, code := runCLI(t, nil, tt.args...)
		if strings.Contains(errOut, "hunter2") {
			t.Errorf("%v: the error shows the password: %q", tt.args, errOut)
		}
		if code == 0 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want one line with %q", tt.args, code, out, errOut, tt.want)
		}
	}
	if states, leased := rowStates(t, db); states["new"] != 1 || leased != 0 {
		t.Errorf("rows %v, %d claimed; want the row untouched", states, leased)
	}
}
