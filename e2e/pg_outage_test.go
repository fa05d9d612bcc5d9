package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readyz returns the status of GET /readyz on admin, 0 when it does not
// answer within 5 s.
func readyz(admin string) int {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(admin + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestPostgresUnreachable runs `inbox serve` on PostgreSQL through a TCP
// proxy the test cuts (every connection reset, new ones refused) and then
// stalls (connections held, nothing relayed): meanwhile every delivery is
// answered 503 with Retry-After within --busy-timeout and half a second
// (never 2xx, never 500) and /readyz fails; once the proxy relays again,
// deliveries are answered 204 and /readyz is ready with nothing done to
// serve.
func TestPostgresUnreachable(t *testing.T) {
	t.Parallel()
	const busy = time.Second
	const bound = busy + 500*time.Millisecond // RECEIVER-CONTRACT row 19
	proxy, dsn := startPGProxy(t, pgSchema(t))
	srv := startInbox(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, "serve", "--addr", "127.0.0.1:0",
		"--admin-addr", "127.0.0.1:0", "--db", dsn, "--busy-timeout", busy.String())
	client := &http.Client{Timeout: 10 * time.Second}
	seq := 0
	deliver := func() (int, string, time.Duration) {
		seq++
		body := fmt.Sprintf(`{"event":"job.completed","job_id":"out_%d","status":"COMPLETED"}`, seq)
		start := time.Now()
		status, retryAfter := post(context.Background(), client, srv.url, body)
		return status, retryAfter, time.Since(start)
	}
	if status, _, _ := deliver(); status != http.StatusNoContent {
		t.Fatalf("before the outage: status %d\n%s", status, srv.logs)
	}
	if got := readyz(srv.admin); got != http.StatusOK {
		t.Fatalf("before the outage: /readyz %d", got)
	}

	for _, way := range []struct {
		name  string
		cause func()
	}{{"cut", proxy.cut}, {"stall", proxy.stall}} {
		way.cause()
		// Several senders at once for a while, each waiting for its answer.
		var mu sync.Mutex
		statuses := map[int]int{}
		var slowest time.Duration
		noRetry := 0
		var wg sync.WaitGroup
		stopAt := time.Now().Add(1500 * time.Millisecond)
		for range 4 {
			wg.Go(func() {
				for time.Now().Before(stopAt) {
					mu.Lock()
					seq++
					body := fmt.Sprintf(`{"event":"job.completed","job_id":"out_%s_%d","status":"COMPLETED"}`, way.name, seq)
					mu.Unlock()
					start := time.Now()
					status, retryAfter := post(context.Background(), client, srv.url, body)
					took := time.Since(start)
					mu.Lock()
					statuses[status]++
					slowest = max(slowest, took)
					if status == http.StatusServiceUnavailable && retryAfter == "" {
						noRetry++
					}
					mu.Unlock()
				}
			})
		}
		ready := readyz(srv.admin)
		wg.Wait()
		t.Logf("%s: statuses %v, slowest answer %s (bound %s), /readyz %d", way.name, statuses, slowest.Round(time.Millisecond), bound, ready)
		if statuses[http.StatusServiceUnavailable] == 0 || len(statuses) != 1 {
			t.Errorf("%s: answered %v, want only 503", way.name, statuses)
		}
		if noRetry > 0 {
			t.Errorf("%s: %d 503s without Retry-After", way.name, noRetry)
		}
		if slowest > bound {
			t.Errorf("%s: slowest answer %s, want within %s", way.name, slowest, bound)
		}
		if ready == http.StatusOK {
			t.Errorf("%s: /readyz answered 200 while the database was unreachable", way.name)
		}

		restored := time.Now()
		proxy.restore()
		var status int
		for status != http.StatusNoContent {
			if time.Since(restored) > 15*time.Second {
				t.Fatalf("%s: deliveries still get %d 15s after the database came back\n%s", way.name, status, srv.logs)
			}
			time.Sleep(50 * time.Millisecond)
			status, _, _ = deliver()
		}
		delivering := time.Since(restored)
		for readyz(srv.admin) != http.StatusOK {
			if time.Since(restored) > 15*time.Second {
				t.Fatalf("%s: /readyz still fails 15s after the database came back", way.name)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("%s: 204 again %s after the database came back, /readyz ready after %s", way.name,
			delivering.Round(time.Millisecond), time.Since(restored).Round(time.Millisecond))
	}
	select {
	case <-srv.done:
		t.Fatalf("serve exited: %v\n%s", srv.err, srv.logs)
	default:
	}
}

// healthz returns the status of GET /healthz on admin, 0 when it does not
// answer within a second.
func healthz(admin string) int {
	client := &http.Client{Timeout: time.Second}
	resp, err := client.Get(admin + "/healthz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// logCount counts the JSON log lines whose message is msg.
func logCount(logs, msg string) int {
	n := 0
	for line := range strings.Lines(logs) {
		var m struct{ Message string }
		if json.Unmarshal([]byte(line), &m) == nil && m.Message == msg {
			n++
		}
	}
	return n
}

// The lines serve logs when its database cannot be reached at start, and
// once it is.
const (
	msgDBDown = "database cannot be reached: every write fails (deliveries get 503, their keys kept for inbox missed; no row is handed on) and /readyz fails until it answers; then the store opens by itself"
	msgDBBack = "database reached: the store is open"
)

// restoreReady restores the proxy and waits until srv's /readyz answers
// 200, failing the test after 15 s; it returns that deadline.
func restoreReady(t *testing.T, proxy *pgProxy, srv *server) time.Time {
	t.Helper()
	proxy.restore()
	deadline := time.Now().Add(15 * time.Second)
	for readyz(srv.admin) != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still fails 15s after the database came back\n%s", srv.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return deadline
}

// TestPostgresDownAtStart starts serve while its database is down (the
// proxy refuses every connection): it serves at once, every delivery is
// answered 503 with Retry-After at once and its key kept, a forgery still
// 401, /readyz fails and /healthz answers. Once the database is back serve
// opens the store by itself (migrating the empty schema), deliveries get
// 204, /readyz is ready, and inbox missed lists the keys refused meanwhile.
// The outage is logged once, and its end once. It runs before the parallel
// tests: "at once" is within half a second, which their load could take.
func TestPostgresDownAtStart(t *testing.T) {
	const busy = time.Second
	proxy, dsn := startPGProxy(t, pgSchema(t))
	proxy.cut()
	srv := startInbox(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, "serve", "--addr", "127.0.0.1:0",
		"--admin-addr", "127.0.0.1:0", "--db", dsn, "--busy-timeout", busy.String())
	client := &http.Client{Timeout: 10 * time.Second}
	refused := map[string]bool{}
	for i := range 5 {
		key := fmt.Sprintf("down_%d", i)
		start := time.Now()
		status, retryAfter := post(context.Background(), client, srv.url, `{"event":"job.completed","job_id":"`+key+`","status":"COMPLETED"}`)
		took := time.Since(start)
		if status != http.StatusServiceUnavailable || retryAfter == "" {
			t.Fatalf("delivery %s while the database is down: status %d, Retry-After %q; want 503 with Retry-After\n%s", key, status, retryAfter, srv.logs)
		}
		if took > busy/2 {
			t.Errorf("delivery %s: answered after %s, want at once (the database is known down)", key, took.Round(time.Millisecond))
		}
		refused[key] = true
	}
	if got := send(t, client, srv.url, `{"event":"job.completed","job_id":"forged"}`, "forged"); got != http.StatusUnauthorized {
		t.Errorf("forgery while the database is down: status %d, want 401", got)
	}
	if got := readyz(srv.admin); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz while the database is down: %d, want 503", got)
	}
	if got := healthz(srv.admin); got != http.StatusOK {
		t.Errorf("/healthz while the database is down: %d, want 200", got)
	}

	deadline := restoreReady(t, proxy, srv)
	if status, _ := post(context.Background(), client, srv.url, `{"event":"job.completed","job_id":"after","status":"COMPLETED"}`); status != http.StatusNoContent {
		t.Errorf("delivery once the database is back: status %d, want 204\n%s", status, srv.logs)
	}
	// The refusals are written within a flush (a second) of the open.
	var missed map[string]int
	for {
		if missed = missedKeys(t, dsn); len(missed) >= len(refused) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for key := range refused {
		if missed[key] == 0 {
			t.Errorf("inbox missed does not list %s, refused while the database was down (lists %v)", key, missed)
		}
	}
	if missed["forged"] > 0 || missed["after"] > 0 {
		t.Errorf("inbox missed lists a forgery or a stored key: %v", missed)
	}
	logs := srv.logs.String()
	if down, back := logCount(logs, msgDBDown), logCount(logs, msgDBBack); down != 1 || back != 1 {
		t.Errorf("logged the outage %d times and its end %d times, want once each\n%s", down, back, logs)
	}
	select {
	case <-srv.done:
		t.Fatalf("serve exited: %v\n%s", srv.err, srv.logs)
	default:
	}
}

// lostKeys returns the keys of the refusals serve logged as not recorded.
func lostKeys(logs string) map[string]bool {
	keys := map[string]bool{}
	for line := range strings.Lines(logs) {
		var m struct{ Message, Key, Source string }
		if json.Unmarshal([]byte(line), &m) == nil && strings.HasPrefix(m.Message, "refused delivery not recorded") && m.Source == "sume" {
			keys[m.Key] = true
		}
	}
	return keys
}

// refuseSome posts n deliveries at once that must each be answered 503 with
// Retry-After within bound, and returns their keys.
func refuseSome(t *testing.T, srv *server, prefix string, n int, bound time.Duration) []string {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	keys, failures := make([]string, n), make([]string, n)
	var wg sync.WaitGroup
	for i := range n { // at once: each is answered within the bound
		keys[i] = fmt.Sprintf("%s_%d", prefix, i)
		wg.Go(func() {
			start := time.Now()
			status, retryAfter := post(context.Background(), client, srv.url, `{"event":"job.completed","job_id":"`+keys[i]+`","status":"COMPLETED"}`)
			if took := time.Since(start); status != http.StatusServiceUnavailable || retryAfter == "" || took > bound {
				failures[i] = fmt.Sprintf("delivery %s: status %d, Retry-After %q after %s; want 503 with Retry-After within %s", keys[i], status, retryAfter, took.Round(time.Millisecond), bound)
			}
		})
	}
	wg.Wait()
	if f := strings.Join(slices.DeleteFunc(failures, func(f string) bool { return f == "" }), "\n"); f != "" {
		t.Fatalf("%s\n%s", f, srv.logs)
	}
	return keys
}

// stopWithin sends SIGTERM to srv and waits for it to exit within bound,
// returning how long it took.
func stopWithin(t *testing.T, srv *server, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	srv.signal(syscall.SIGTERM)
	select {
	case <-srv.done:
	case <-time.After(bound + 10*time.Second):
		t.Fatalf("serve still runs %s after SIGTERM\n%s", bound+10*time.Second, srv.logs)
	}
	took := time.Since(start)
	if took > bound {
		t.Errorf("serve took %s to stop after SIGTERM, want within %s", took.Round(time.Millisecond), bound)
	}
	return took
}

// TestPostgresHungAtStart starts serve while its database hangs (the proxy
// takes connections and never answers): its ports answer within a second
// (no backlog waiting for the database), a delivery is answered 503 with
// Retry-After within --busy-timeout + 0.5 s, and /readyz fails. SIGTERM
// then stops it at once, and each refused key is logged, not lost without
// a trace. It runs before the parallel tests: a second from start to
// /healthz has no room for their load.
func TestPostgresHungAtStart(t *testing.T) {
	const busy = time.Second
	proxy, dsn := startPGProxy(t, pgSchema(t))
	proxy.stall()
	binary(t) // built before the clock starts
	start := time.Now()
	srv := startInbox(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, "serve", "--addr", "127.0.0.1:0",
		"--admin-addr", "127.0.0.1:0", "--db", dsn, "--busy-timeout", busy.String())
	if got := healthz(srv.admin); got != http.StatusOK {
		t.Errorf("/healthz while the database hangs: %d, want 200", got)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("serve answered /healthz %s after it was started, want within a second\n%s", took.Round(time.Millisecond), srv.logs)
	}
	keys := refuseSome(t, srv, "hung", 3, busy+500*time.Millisecond)
	if got := readyz(srv.admin); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz while the database hangs: %d, want 503", got)
	}
	stopWithin(t, srv, 2*time.Second)
	lost := lostKeys(srv.logs.String())
	for _, key := range keys {
		if !lost[key] {
			t.Errorf("refused key %s is neither recorded nor logged as not recorded\n%s", key, srv.logs)
		}
	}
	if down := logCount(srv.logs.String(), msgDBDown); down != 1 {
		t.Errorf("logged the outage %d times, want once", down)
	}
}

// TestPostgresHangsAtShutdown stops serve with SIGTERM while its database
// hangs and serve holds refused keys in memory: it stops within the bound
// (the drain, then the last writes and the close, a few seconds), and each
// refused key it could not record is logged (source and key, never the
// body), so the operator can ask for it again.
func TestPostgresHangsAtShutdown(t *testing.T) {
	t.Parallel()
	const busy = time.Second
	proxy, dsn := startPGProxy(t, pgSchema(t))
	srv := startInbox(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, "serve", "--addr", "127.0.0.1:0",
		"--admin-addr", "127.0.0.1:0", "--db", dsn, "--busy-timeout", busy.String())
	client := &http.Client{Timeout: 10 * time.Second}
	if status, _ := post(context.Background(), client, srv.url, `{"event":"job.completed","job_id":"before","status":"COMPLETED"}`); status != http.StatusNoContent {
		t.Fatalf("before the stall: status %d\n%s", status, srv.logs)
	}
	proxy.stall()
	keys := refuseSome(t, srv, "stalled", 4, busy+500*time.Millisecond)
	took := stopWithin(t, srv, shutdownBound(busy))
	t.Logf("stopped %s after SIGTERM (bound %s)\n%s", took.Round(time.Millisecond), shutdownBound(busy), srv.logs)
	logs := srv.logs.String()
	lost := lostKeys(logs)
	for _, key := range keys {
		if !lost[key] {
			t.Errorf("refused key %s is neither recorded nor logged as not recorded\n%s", key, logs)
		}
	}
	if strings.Contains(logs, `\"status\":\"COMPLETED\"`) || strings.Contains(logs, e2eSecret) {
		t.Errorf("the log holds a body or the secret:\n%s", logs)
	}
}

// shutdownBound is how long serve may take to stop after SIGTERM while its
// database hangs, with nothing in flight: the last writes (5 s at most)
// and the close (the busy timeout at most), and a second for the rest.
func shutdownBound(busy time.Duration) time.Duration {
	return 5*time.Second + busy + time.Second
}

// TestPostgresConfigErrorAtStart: what waiting cannot mend still stops
// serve and dispatch at once, with one clear line: a URL that does not
// parse, a role or a database the server refuses, synchronous_commit off.
// Only a database that cannot be reached is waited for. The line names
// none of the database's address: not its user, host, port or name.
func TestPostgresConfigErrorAtStart(t *testing.T) {
	t.Parallel()
	dsn := pgSchema(t)
	with := func(edit func(u *url.URL)) string {
		u, _ := url.Parse(dsn)
		edit(u)
		return u.String()
	}
	base, _ := url.Parse(dsn)
	address := []string{base.Hostname(), cmpOr(base.Port(), "5432"), base.User.Username(), strings.TrimPrefix(base.Path, "/")}
	for _, tt := range []struct {
		name, db, want string
		leaks          []string
	}{
		{"unparsable", "postgres://postgres@127.0.0.1:notaport/test", "does not parse", nil},
		{"no such database", with(func(u *url.URL) { u.Path = "/no_such_database_e2e" }), `database "[dbname]" does not exist`,
			append([]string{"no_such_database_e2e"}, address[:3]...)},
		{"no such role", with(func(u *url.URL) { u.User = url.UserPassword("no_such_role_e2e", "pw_e2e") }), `role "[user]" does not exist`,
			append([]string{"no_such_role_e2e", "pw_e2e"}, address[0], address[1], address[3])},
		{"synchronous_commit off", with(func(u *url.URL) {
			q := u.Query()
			q.Set("synchronous_commit", "off")
			u.RawQuery = q.Encode()
		}), "synchronous_commit is off", nil},
	} {
		for _, cmd := range [][]string{
			{"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"},
			{"dispatch", "--admin-addr", "127.0.0.1:0", "--forward-url", "http://127.0.0.1:1/jobs"},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			c := exec.CommandContext(ctx, binary(t), append(cmd, "--db", tt.db)...)
			c.Env = append(os.Environ(), "SUME_COM_WEBHOOK_SIGNING_SECRET="+e2eSecret)
			var stderr strings.Builder
			c.Stderr = &stderr
			start := time.Now()
			err := c.Run()
			took, timedOut := time.Since(start), ctx.Err() != nil
			cancel()
			last, lines := "", 0
			for line := range strings.Lines(stderr.String()) {
				if strings.HasPrefix(line, "inbox: ") {
					last, lines = line, lines+1
				}
			}
			if err == nil || timedOut || took > 5*time.Second {
				t.Errorf("%s %s: exit %v after %s; want a failure at once\n%s", cmd[0], tt.name, err, took.Round(time.Millisecond), stderr.String())
			}
			t.Logf("%s %s: exit %v after %s", cmd[0], tt.name, err, took.Round(time.Millisecond))
			if !strings.Contains(last, tt.want) || lines != 1 {
				t.Errorf("%s %s: want one line \"inbox: ...%s...\", got\n%s", cmd[0], tt.name, tt.want, stderr.String())
			}
			for _, leak := range tt.leaks {
				if regexp.MustCompile(`(^|\W)` + regexp.QuoteMeta(leak) + `(\W|$)`).MatchString(stderr.String()) {
					t.Errorf("%s %s: stderr names the database's %q:\n%s", cmd[0], tt.name, leak, stderr.String())
				}
			}
		}
	}
}

// TestPostgresDownAdminCommands: the operator's commands are one-shot:
// while the database is down or hangs they fail at once (within the busy
// timeout) with one line, rather than wait for it as serve does.
func TestPostgresDownAdminCommands(t *testing.T) {
	t.Parallel()
	proxy, dsn := startPGProxy(t, pgSchema(t))
	for _, way := range []struct {
		name  string
		cause func()
	}{{"cut", proxy.cut}, {"stall", proxy.stall}} {
		way.cause()
		// The commands run at once: each only waits for the database.
		var runs []func() (string, string, int, time.Duration)
		commands := [][]string{{"list"}, {"parked"}, {"stats"}, {"missed"}, {"reprocess", "--all", "--dry-run"}}
		for _, args := range commands {
			runs = append(runs, startCLI(t, []string{"INBOX_BUSY_TIMEOUT=1s"}, append(args, "--db", dsn)...))
		}
		for i, args := range commands {
			out, errOut, code, took := runs[i]()
			if code == 0 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.HasPrefix(errOut, "inbox: ") {
				t.Errorf("%s: %v: exit %d, stdout %q, stderr %q; want a failure on one line", way.name, args, code, out, errOut)
			}
			if took > 5*time.Second { // the busy timeout (3 s for the read-only commands) and the start
				t.Errorf("%s: %v took %s, want a failure at once", way.name, args, took.Round(time.Millisecond))
			}
		}
	}
}

// startCLI starts the binary with env added and args, and returns a
// function that waits for it to exit and returns its stdout, stderr and
// exit code, and how long it ran.
func startCLI(t *testing.T, env []string, args ...string) func() (string, string, int, time.Duration) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type exit struct {
		err  error
		took time.Duration
	}
	done := make(chan exit, 1)
	go func() {
		err := cmd.Wait()
		done <- exit{err, time.Since(start)}
	}()
	return func() (string, string, int, time.Duration) {
		t.Helper()
		e := <-done
		code := 0
		if ee, ok := e.err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if e.err != nil {
			t.Fatal(e.err)
		}
		return stdout.String(), stderr.String(), code, e.took
	}
}

// TestPostgresDownAtStartDispatch starts inbox dispatch while its database
// is down: it waits (does not exit), /readyz fails meanwhile, and once the
// database is back it is ready by itself and hands on the rows serve (here
// another process) stores.
func TestPostgresDownAtStartDispatch(t *testing.T) {
	t.Parallel()
	schema := pgSchema(t)
	proxy, dsn := startPGProxy(t, schema)
	proxy.cut()
	app := newSink(t, 0, 0)
	d := startInbox(t, nil, "dispatch", "--admin-addr", "127.0.0.1:0", "--db", dsn, "--busy-timeout", "1s", "--forward-url", app.URL)
	for range 3 {
		if got := readyz(d.admin); got != http.StatusServiceUnavailable {
			t.Errorf("dispatch /readyz while the database is down: %d, want 503", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
	select {
	case <-d.done:
		t.Fatalf("dispatch exited while the database was down: %v\n%s", d.err, d.logs)
	default:
	}
	deadline := restoreReady(t, proxy, d)
	fillPG(t, schema, 3)
	for len(app.counts()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("dispatch handed on %v, want 3 rows\n%s", app.counts(), d.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if down := logCount(d.logs.String(), msgDBDown); down != 1 {
		t.Errorf("dispatch logged the outage %d times, want once", down)
	}
}
