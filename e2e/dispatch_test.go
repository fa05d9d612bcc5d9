package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"inbox/dispatch"
	"inbox/inbox"
	"inbox/scheme"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
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
	s := sqlitetest.MustOpenPath(t, db, sqlite.Options{})
	rules := inbox.Rules{Events: []string{"job.completed"}}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"event":"job.completed","job_id":"job_%04d","status":"COMPLETED"}`, i)
			if _, err := s.Put(context.Background(), inbox.Classify("", inbox.Named{}, []byte(body), 1, rules)); err != nil {
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
	t.Parallel()
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
	t.Parallel()
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
	if code != 0 || !regexp.MustCompile(`(?m)^done +1 +1$`).MatchString(out) {
		t.Errorf("stats: exit %d\n%s", code, out)
	}
}

// TestDispatchCLIErrors checks that a wrong destination setting is one
// clear line and a non-zero exit, before anything is claimed.
func TestDispatchCLIErrors(t *testing.T) {
	t.Parallel()
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

// recorder is an application that records the attempt number each request
// says, per row; while hanging it accepts requests and never answers them.
type recorder struct {
	*httptest.Server
	hanging atomic.Bool
	mu      sync.Mutex
	seen    map[string][]string // row id: Inbox-Attempt of each request, in order
	headers map[string]http.Header
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{seen: map[string][]string{}, headers: map[string]http.Header{}}
	stop := make(chan struct{})
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id := req.Header.Get(dispatch.HeaderRowID)
		if id == "" {
			id = req.Header.Get(dispatch.HeaderIdempotencyKey) // before Inbox-Row-Id existed
		}
		r.mu.Lock()
		r.seen[id] = append(r.seen[id], req.Header.Get(dispatch.HeaderAttempt))
		r.headers[id] = req.Header.Clone()
		r.mu.Unlock()
		if r.hanging.Load() {
			select {
			case <-req.Context().Done():
			case <-stop:
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() {
		close(stop)
		r.Close()
	})
	return r
}

func (r *recorder) attempts() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]string{}
	for k, v := range r.seen {
		out[k] = slices.Clone(v)
	}
	return out
}

// requests counts the requests r got, for every row.
func (r *recorder) requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.seen {
		n += len(v)
	}
	return n
}

// rowAttempt is a row's status and recorded attempts.
type rowAttempt struct {
	Status   string
	Attempts int
}

// rowAttempts reads each row's status and recorded attempts.
func rowAttempts(t *testing.T, db string) map[string]rowAttempt {
	t.Helper()
	out := map[string]rowAttempt{}
	eachRow(t, db, `SELECT id, status, attempts FROM events`, func(rows *sql.Rows) error {
		var id string
		var r rowAttempt
		err := rows.Scan(&id, &r.Status, &r.Attempts)
		out[id] = r
		return err
	})
	return out
}

// eachRow runs query on the SQLite database db, read-only, and calls scan
// for each row it returns.
func eachRow(t *testing.T, db, query string, scan func(*sql.Rows) error) {
	t.Helper()
	conn, err := sql.Open("sqlite", db+"?_pragma=query_only(ON)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			t.Fatal(err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// aheadPerWorker is how many attempts a dispatcher may have counted and
// not yet sent, per worker and destination, while its workers are busy
// (here: the application hangs), so that it holds no more rows than four
// a worker: what docs/dispatch.md gives as the most one crash then costs.
const aheadPerWorker = 4

// TestCrashBeforeSendCostsNoAttempt kills `inbox dispatch` with SIGKILL
// again and again, as systemd's Restart=on-failure would see it die, each
// time while it holds rows it claimed but has not sent yet (one worker:
// one row under way, the rest of the aheadPerWorker waiting for it). A
// row's attempts count only what the destination really got, but for the
// attempts counted ahead of the requests (docs/dispatch.md): each crash
// costs at most aheadPerWorker x --workers rows an attempt never sent, no
// row is parked, each row records at least as many attempts as requests
// reached the application, the requests of a row say increasing attempts,
// and each attempt number a row's requests skip is one counted ahead and
// lost to a crash.
func TestCrashBeforeSendCostsNoAttempt(t *testing.T) {
	t.Parallel()
	const n, crashes, workers = 12, 6, 1
	db := fillDB(t, n)
	app := newRecorder(t)
	app.hanging.Store(true)
	args := []string{"--db", db, "--forward-url", app.URL, "--workers", strconv.Itoa(workers), "--max-slow", "0",
		"--timeout", "2s", "--lease", "4s", "--retry-schedule", "1s,1s,1s"}
	unsent := 0
	for i := range crashes {
		crashHolding(t, db, app, i+1, args...)
		// Every row sent so far was claimed by a dispatcher now dead; the
		// next one claims the rows no lease holds.
		now := unsentAttempts(t, rowAttempts(t, db), app.attempts(), false)
		if cost := now - unsent; cost > aheadPerWorker*workers {
			t.Errorf("crash %d cost %d attempts never sent, want at most %d (%d x --workers)", i+1, cost, aheadPerWorker*workers, aheadPerWorker)
		}
		unsent = now
	}
	t.Logf("after %d crashes: %d rows reached the application, %d attempts counted ahead and never sent", crashes, len(app.attempts()), unsent)

	// The application answers again; the leases run out and every row is
	// delivered and done, with no attempt lost but to the crashes.
	app.hanging.Store(false)
	d := startDispatch(t, "--db", db, "--forward-url", app.URL, "--workers", "4", "--timeout", "2s", "--lease", "4s", "--retry-schedule", "1s,1s,1s")
	deadline := time.Now().Add(40 * time.Second)
	for states, _ := rowStates(t, db); states["done"] != n; states, _ = rowStates(t, db) {
		if time.Now().After(deadline) {
			t.Fatalf("rows %v, want all %d done\n%s", states, n, d.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.kill(syscall.SIGTERM)
	if got := unsentAttempts(t, rowAttempts(t, db), app.attempts(), true); got != unsent {
		t.Errorf("%d attempts never sent once every row is done, want the %d the crashes cost", got, unsent)
	}
}

// crashHolding starts `inbox dispatch` with args and kills it with SIGKILL
// (crash n) once it holds a row under way, its request at app (which
// hangs), and another one waiting.
func crashHolding(t *testing.T, db string, app *recorder, n int, args ...string) {
	t.Helper()
	before := app.requests()
	d := startDispatch(t, args...)
	waitFor := time.Now().Add(20 * time.Second)
	for {
		_, leased := rowStates(t, db)
		if app.requests() > before && leased >= 2 {
			break
		}
		if time.Now().After(waitFor) {
			t.Fatalf("crash %d: the dispatcher never held a row under way and one waiting:\n%s", n, d.logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	d.kill(syscall.SIGKILL)
}

// unsentAttempts checks each row's recorded attempts against the requests
// the application got for it (the Inbox-Attempt of each, in order) and
// returns how many attempts were counted that no request followed. The
// requests of a row must say increasing attempts, none past the attempts
// recorded, and never more requests than attempts; done, a row must have
// been done by a request saying its last attempt.
func unsentAttempts(t *testing.T, rows map[string]rowAttempt, sent map[string][]string, done bool) int {
	t.Helper()
	unsent := 0
	for id, r := range rows {
		prev := 0
		for i, a := range sent[id] {
			n, err := strconv.Atoi(a)
			if err != nil || n <= prev || n > r.Attempts {
				t.Errorf("%s: request %d said attempt %q after %d, with %d attempts recorded", id, i+1, a, prev, r.Attempts)
			}
			prev = n
		}
		switch {
		case len(sent[id]) > r.Attempts:
			t.Errorf("%s: %d attempts recorded, %d requests sent", id, r.Attempts, len(sent[id]))
		case done && (r.Status != "done" || prev != r.Attempts):
			t.Errorf("%s: %s after %d attempts, the last request saying %d; want done by its last attempt", id, r.Status, r.Attempts, prev)
		}
		unsent += r.Attempts - len(sent[id])
	}
	return unsent
}

// TestDestinationKeys serves a Sume, a Vibe and a GitHub source from the
// real binary and forwards what they store: each request carries the
// source, the provider's own key (Vibe's runId, GitHub's delivery id) as
// Idempotency-Key, Inbox-Key and webhook-id, and the row id, unique across
// sources, as Inbox-Row-Id.
func TestDestinationKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	const vibeSecret = "vjs_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
	cfg := filepath.Join(dir, "inbox.toml")
	if err := os.WriteFile(cfg, []byte(`
[[source]]
name = "sume"
scheme = "sume"
[[source.secret]]
env = "SUME_COM_WEBHOOK_SIGNING_SECRET"

[[source]]
name = "vibe"
scheme = "vibe"
[[source.secret]]
value = "`+vibeSecret+`"

[[source]]
name = "gh"
scheme = "github"
events = ["push"]
[[source.secret]]
value = "It's a Secret to Everybody"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	app := newRecorder(t)
	srv := startServer(t, db, "--config", cfg, "--forward-url", app.URL, "--forward-secret", "whsec_c2VjcmV0LWtleQ==")
	base := strings.TrimSuffix(srv.url, "/webhooks/sume")
	post := func(path, body string, h http.Header) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send(t, http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"job_1","status":"COMPLETED"}`, e2eSecret); code != 204 {
		t.Fatalf("sume: %d", code)
	}
	vibeBody := `{"type":"scheduled_job.run","jobId":"job_1","runId":"run_1","scheduledFor":"2026-10-09T09:00:00.000Z","attempt":1,"late":false,"trigger":"schedule"}`
	vh := http.Header{}
	vh.Set(scheme.HeaderVibeCaller, "schedule")
	vh.Set(scheme.HeaderVibeSignature, scheme.SignVibe(vibeSecret, time.Now().Unix(), []byte(vibeBody)))
	if code := post("/webhooks/vibe", vibeBody, vh); code != 202 {
		t.Fatalf("vibe: %d", code)
	}
	gh := http.Header{}
	gh.Set(scheme.HeaderGitHubSignature, scheme.SignGitHub("It's a Secret to Everybody", []byte(`{"ref":"main"}`)))
	gh.Set(scheme.HeaderGitHubDelivery, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	gh.Set(scheme.HeaderGitHubEvent, "push")
	if code := post("/webhooks/gh", `{"ref":"main"}`, gh); code != 200 {
		t.Fatalf("github: %d", code)
	}
	want := map[string][2]string{ // row id: source, key
		"job_1":      {"sume", "job_1"},
		"vibe/run_1": {"vibe", "run_1"},
		"gh/72d3162e-cc78-11e3-81ab-4c9367dc0958": {"gh", "72d3162e-cc78-11e3-81ab-4c9367dc0958"},
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(app.attempts()) < len(want) {
		if time.Now().After(deadline) {
			t.Fatalf("deliveries %v\n%s", app.attempts(), srv.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	app.mu.Lock()
	defer app.mu.Unlock()
	for id, w := range want {
		h := app.headers[id]
		if h == nil {
			t.Errorf("%s never delivered", id)
			continue
		}
		for name, v := range map[string]string{
			dispatch.HeaderSource: w[0], dispatch.HeaderKey: w[1], dispatch.HeaderIdempotencyKey: w[1],
			scheme.HeaderWebhookID: w[1], dispatch.HeaderRowID: id, dispatch.HeaderAttempt: "1",
		} {
			if got := h.Get(name); got != v {
				t.Errorf("%s: %s = %q, want %q", id, name, got, v)
			}
		}
	}
}

// TestHangingRowsBinary runs `inbox dispatch` with its defaults (4
// workers, a 30s timeout) over 106 rows, 6 of which the application
// accepts and never answers: the other 100 are delayed by a small part of
// the timeout, measured against the same 100 rows alone.
func TestHangingRowsBinary(t *testing.T) {
	t.Parallel()
	const good, hanging = 100, 6
	// The hanging rows queue first, one millisecond apart, as they would
	// arrive: hang_0 ..., then job_0000 ...
	fill := func(hanging int) string {
		db := filepath.Join(t.TempDir(), "inbox.db")
		now := time.Now().Add(-time.Hour)
		s := sqlitetest.MustOpenPath(t, db, sqlite.Options{Now: func() time.Time { return now }})
		rules := inbox.Rules{Events: []string{"job.completed"}}
		for i := range hanging + good {
			id := fmt.Sprintf("hang_%d", i)
			if i >= hanging {
				id = fmt.Sprintf("job_%04d", i-hanging)
			}
			body := fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED"}`, id)
			if _, err := s.Put(context.Background(), inbox.Classify("", inbox.Named{}, []byte(body), 1, rules)); err != nil {
				t.Fatal(err)
			}
			now = now.Add(time.Millisecond)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return db
	}
	// drain returns how long the good rows took from the first request.
	drain := func(hanging int) time.Duration {
		db := fill(hanging)
		var taken atomic.Int64
		var first sync.Once
		var began time.Time
		done, stop := make(chan struct{}), make(chan struct{})
		app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			first.Do(func() { began = time.Now() })
			if strings.HasPrefix(r.Header.Get(dispatch.HeaderKey), "hang_") {
				select { // accepted, never answered
				case <-r.Context().Done():
				case <-stop:
				}
				return
			}
			w.WriteHeader(http.StatusNoContent)
			if taken.Add(1) == good {
				close(done)
			}
		}))
		t.Cleanup(func() {
			close(stop)
			app.Close()
		})
		d := startDispatch(t, "--db", db, "--forward-url", app.URL)
		select {
		case <-done:
		case <-time.After(dispatch.DefaultTimeout + 10*time.Second):
			t.Fatalf("%d good rows not taken within the timeout\n%s", good, d.logs)
		}
		took := time.Since(began)
		d.kill(syscall.SIGKILL)
		return took
	}
	alone := drain(0)
	behind := drain(hanging)
	delay := behind - alone
	t.Logf("inbox dispatch: %d rows took %v alone, %v beside %d hanging ones: delayed %v, %.1f%% of the %v timeout",
		good, alone.Round(time.Millisecond), behind.Round(time.Millisecond), hanging, delay.Round(time.Millisecond),
		100*delay.Seconds()/dispatch.DefaultTimeout.Seconds(), dispatch.DefaultTimeout)
	if bound := dispatch.DefaultTimeout / 10; delay > bound {
		t.Errorf("delayed %v, want at most %v (a tenth of the timeout)", delay, bound)
	}
}

// fillMixed stores n new rows, job_0000 ..., in a fresh database: the even
// ones job.completed, the odd ones job.failed.
func fillMixed(t *testing.T, n int) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "inbox.db")
	s := sqlitetest.MustOpenPath(t, db, sqlite.Options{})
	rules := inbox.Rules{Events: []string{"job.completed", "job.failed"}}
	for i := range n {
		event := "job.completed"
		if i%2 == 1 {
			event = "job.failed"
		}
		body := fmt.Sprintf(`{"event":%q,"job_id":"job_%04d","status":"COMPLETED"}`, event, i)
		if _, err := s.Put(context.Background(), inbox.Classify("", inbox.Named{}, []byte(body), 1, rules)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return db
}

// pairState is one (row, destination) pair's status, attempts and lease.
type pairState struct {
	Status   string
	Attempts int
	Leased   bool
}

// pairStates reads every (row, destination) pair, keyed "row destination".
func pairStates(t *testing.T, db string) map[string]pairState {
	t.Helper()
	out := map[string]pairState{}
	eachRow(t, db, `SELECT event_id, destination, status, attempts, lease_owner IS NOT NULL FROM deliveries`, func(rows *sql.Rows) error {
		var id, dest string
		var p pairState
		err := rows.Scan(&id, &dest, &p.Status, &p.Attempts, &p.Leased)
		out[id+" "+dest] = p
		return err
	})
	return out
}

// TestCrashMidFanOutCostsNoAttempt is TestCrashBeforeSendCostsNoAttempt
// with three destinations, two of them filtered by event: `inbox
// dispatch` is killed with SIGKILL again and again while each destination
// holds rows it claimed but has not sent. No (row, destination) pair is
// lost, none is made for a destination whose filter does not take the
// row, none is delivered there, each pair records at least as many
// attempts as requests reached that destination, and each crash costs each
// destination at most aheadPerWorker x --workers attempts never sent; once the
// applications answer, every pair is done by a request saying its last
// attempt, with no attempt lost but to the crashes.
func TestCrashMidFanOutCostsNoAttempt(t *testing.T) {
	t.Parallel()
	const n, crashes = 12, 4
	db := fillMixed(t, n)
	apps := map[string]*recorder{"all": newRecorder(t), "failed": newRecorder(t), "completed": newRecorder(t)}
	cfg := filepath.Join(t.TempDir(), "inbox.toml")
	err := os.WriteFile(cfg, []byte(`
[[destination]]
name = "all"
url = "`+apps["all"].URL+`"

[[destination]]
name = "failed"
url = "`+apps["failed"].URL+`"
events = ["job.failed"]

[[destination]]
name = "completed"
url = "`+apps["completed"].URL+`"
events = ["job.completed"]
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	takes := func(dest string, i int) bool {
		return dest == "all" || (dest == "failed") == (i%2 == 1)
	}
	for _, a := range apps {
		a.hanging.Store(true)
	}
	// An attempt outlives the wait for every destination to hold its
	// rows; a row lost to a crash can still be tried again.
	const workers = 1
	args := []string{"--db", db, "--config", cfg, "--workers", strconv.Itoa(workers), "--max-slow", "0",
		"--timeout", "5s", "--lease", "10s", "--retry-schedule", "1s,1s,1s"}
	sentTo := func() map[string]int {
		out := map[string]int{}
		for name, a := range apps {
			out[name] = a.requests()
		}
		return out
	}
	// check returns, by destination, how many attempts were counted that
	// no request followed (unsentAttempts), once it has checked the pairs.
	check := func(wantDone bool) map[string]int {
		t.Helper()
		pairs := pairStates(t, db)
		out := map[string]int{}
		for name, a := range apps {
			rows := map[string]rowAttempt{}
			for i := range n {
				id := fmt.Sprintf("job_%04d", i)
				p, ok := pairs[id+" "+name]
				sent := a.attempts()[id]
				switch {
				case !takes(name, i) && (ok || len(sent) > 0):
					t.Errorf("%s: a pair for %s, whose filter does not take it (%+v, %d requests)", id, name, p, len(sent))
				case !takes(name, i):
				case !ok:
					t.Errorf("%s: the pair for %s is lost", id, name)
				default:
					rows[id] = rowAttempt{Status: p.Status, Attempts: p.Attempts}
				}
			}
			out[name] = unsentAttempts(t, rows, a.attempts(), wantDone)
		}
		return out
	}
	unsent := map[string]int{}
	for i := range crashes {
		before := sentTo()
		d := startDispatch(t, args...)
		waitFor := time.Now().Add(20 * time.Second)
		for {
			now, leased := sentTo(), 0
			for _, p := range pairStates(t, db) {
				if p.Leased {
					leased++
				}
			}
			if now["all"] > before["all"] && now["failed"] > before["failed"] && now["completed"] > before["completed"] && leased >= 6 {
				break
			}
			if time.Now().After(waitFor) {
				t.Fatalf("crash %d: the destinations never each held a row under way and one waiting:\n%s", i+1, d.logs)
			}
			time.Sleep(5 * time.Millisecond)
		}
		d.kill(syscall.SIGKILL)
		for name, now := range check(false) {
			if cost := now - unsent[name]; cost > aheadPerWorker*workers {
				t.Errorf("crash %d cost %s %d attempts never sent, want at most %d (%d x --workers)", i+1, name, cost, aheadPerWorker*workers, aheadPerWorker)
			}
			unsent[name] = now
		}
	}
	t.Logf("after %d crashes: attempts counted ahead and never sent, by destination: %v", crashes, unsent)

	for _, a := range apps {
		a.hanging.Store(false)
	}
	d := startDispatch(t, "--db", db, "--config", cfg, "--workers", "4", "--timeout", "5s", "--lease", "10s", "--retry-schedule", "1s,1s,1s")
	deadline := time.Now().Add(40 * time.Second)
	for states, _ := rowStates(t, db); states["done"] != n; states, _ = rowStates(t, db) {
		if time.Now().After(deadline) {
			t.Fatalf("rows %v, want all %d done\n%s", states, n, d.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.kill(syscall.SIGTERM)
	for name, got := range check(true) {
		if got != unsent[name] {
			t.Errorf("%s: %d attempts never sent once every pair is done, want the %d the crashes cost", name, got, unsent[name])
		}
	}
}

// TestCrashNeverParksAnUnsentLastAttempt: with no retries every attempt is
// a row's last, and a row whose last attempt was counted but never sent
// would be parked handler_failed when claimed again, unsent. `inbox
// dispatch` is killed with SIGKILL again and again while it holds a row
// under way and one waiting: no attempt goes uncounted or counted unsent,
// and every row parked was parked after a request reached the application.
func TestCrashNeverParksAnUnsentLastAttempt(t *testing.T) {
	t.Parallel()
	const n, crashes = 8, 3
	db := fillDB(t, n)
	app := newRecorder(t)
	app.hanging.Store(true)
	args := []string{"--db", db, "--forward-url", app.URL, "--workers", "1", "--max-slow", "0",
		"--timeout", "2s", "--lease", "4s", "--retry-schedule", "none"}
	for i := range crashes {
		crashHolding(t, db, app, i+1, args...)
		if unsent := unsentAttempts(t, rowAttempts(t, db), app.attempts(), false); unsent != 0 {
			t.Fatalf("crash %d: %d last attempts counted and never sent", i+1, unsent)
		}
	}
	app.hanging.Store(false)
	d := startDispatch(t, args...)
	deadline := time.Now().Add(40 * time.Second)
	for states, _ := rowStates(t, db); states["done"]+states["parked"] != n; states, _ = rowStates(t, db) {
		if time.Now().After(deadline) {
			t.Fatalf("rows %v, want all %d done or parked\n%s", states, n, d.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.kill(syscall.SIGTERM)
	sent := app.attempts()
	for id, r := range rowAttempts(t, db) {
		if r.Status == "parked" && len(sent[id]) == 0 {
			t.Errorf("%s parked after %d attempts with no request sent", id, r.Attempts)
		}
	}
}
