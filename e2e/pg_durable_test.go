package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"inbox/testport"
)

// pgRole creates a login role for the test with USAGE and CREATE on dsn's
// schema (so serve migrates it as that role), dropped, with what it owns,
// when the test ends. It returns the role's name and dsn as the role.
func pgRole(t *testing.T, dsn string) (string, string) {
	t.Helper()
	base := pgDatabase(t)
	b := make([]byte, 4)
	rand.Read(b)
	role := "e2e_r_" + hex.EncodeToString(b)
	schema := pgSearchPath(dsn)
	pgExec(t, base, `CREATE ROLE `+role+` LOGIN`)
	t.Cleanup(func() {
		pgExec(t, base, `DROP OWNED BY `+role)
		pgExec(t, base, `DROP ROLE `+role)
	})
	pgExec(t, base, `GRANT USAGE, CREATE ON SCHEMA `+schema+` TO `+role)
	return role, withUser(dsn, role, "")
}

// pgSearchPath is the schema a pgSchema URL reaches.
func pgSearchPath(dsn string) string {
	u, _ := url.Parse(dsn)
	return strings.TrimPrefix(u.Query().Get("options"), "-csearch_path=")
}

// withQuery returns dsn with the query parameter name set to value.
func withQuery(dsn, name, value string) string {
	u, _ := url.Parse(dsn)
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// pgQueryInt runs one query returning one integer.
func pgQueryInt(t *testing.T, dsn, sql string, args ...any) int {
	t.Helper()
	var n int
	conn := pgConnect(t, dsn)
	defer conn.Close(context.Background())
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// refusedAtStart runs the binary as runCLI does, but gives up (failing the
// test) if it has not exited within 20 s: a command that should refuse to
// start but starts must not hang the test.
func refusedAtStart(t *testing.T, env []string, args ...string) (stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out strings.Builder
	cmd.Stderr = &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Errorf("%s did not exit within 20s: it started", args[0])
		return out.String(), 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), 0
}

// jobBody is a storable delivery of job id.
func jobBody(id string) string {
	return fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED"}`, id)
}

// TestPGDurableAfterRoleChange runs serve as a role of the test's own and
// sets synchronous_commit off for that role while serve runs, then ends
// serve's sessions so it makes new ones: every row serve inserts, before
// and after, is still committed with synchronous_commit on (a trigger
// records each inserting session's setting).
func TestPGDurableAfterRoleChange(t *testing.T) {
	t.Parallel()
	dsn := pgSchema(t)
	role, roleDSN := pgRole(t, dsn)
	app := "inbox_" + pgSearchPath(dsn)
	roleDSN = withQuery(roleDSN, "application_name", app)
	srv := startServer(t, roleDSN)
	client := &http.Client{Timeout: 10 * time.Second}
	if status := send(t, client, srv.url, jobBody("job_before"), e2eSecret); status != http.StatusNoContent {
		t.Fatalf("before: %d\n%s", status, srv.logs)
	}
	schema := pgSearchPath(dsn)
	pgExec(t, dsn, `CREATE TABLE `+schema+`.seen (sc text NOT NULL)`)
	pgExec(t, dsn, `GRANT INSERT ON `+schema+`.seen TO `+role)
	pgExec(t, dsn, `CREATE FUNCTION `+schema+`.record_sc() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO `+schema+`.seen VALUES (current_setting('synchronous_commit')); RETURN NULL; END $$`)
	pgExec(t, dsn, `CREATE TRIGGER record_sc AFTER INSERT ON `+schema+`.events FOR EACH ROW EXECUTE FUNCTION `+schema+`.record_sc()`)
	if status := send(t, client, srv.url, jobBody("job_seen"), e2eSecret); status != http.StatusNoContent {
		t.Fatalf("with the trigger: %d\n%s", status, srv.logs)
	}

	pgExec(t, dsn, `ALTER ROLE `+role+` SET synchronous_commit = off`)
	pgExec(t, dsn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app)
	statuses := map[int]int{}
	for i := range 20 {
		statuses[send(t, client, srv.url, jobBody(fmt.Sprintf("job_after_%02d", i)), e2eSecret)]++
	}
	var own string
	if err := pgConnect(t, withUser(dsn, role, "")).QueryRow(context.Background(), `SHOW synchronous_commit`).Scan(&own); err != nil || own != "off" {
		t.Fatalf("the role's own session: synchronous_commit %q, %v; want off", own, err)
	}
	rows, err := pgConnect(t, dsn).Query(context.Background(), `SELECT sc, count(*) FROM `+schema+`.seen GROUP BY sc`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for rows.Next() {
		var sc string
		var n int
		rows.Scan(&sc, &n)
		seen[sc] = n
	}
	t.Logf("after the role's change: answers %v; synchronous_commit of serve's inserting sessions %v", statuses, seen)
	if statuses[http.StatusNoContent] == 0 {
		t.Errorf("no delivery answered 204 after the change: %v\n%s", statuses, srv.logs)
	}
	if len(seen) != 1 || seen["on"] != statuses[http.StatusNoContent]+1 {
		t.Errorf("serve's sessions inserted with synchronous_commit %v, want on for each of the %d rows", seen, statuses[http.StatusNoContent]+1)
	}
}

// pgCluster starts a PostgreSQL cluster of the test's own (initdb into a
// temporary directory, as the postgres OS user, on a free port) with the
// server settings given (-c name=value), stopped and removed when the test
// ends, and returns the URL of its postgres database. Without the
// PostgreSQL binaries it skips, unless INBOX_REQUIRE_POSTGRES=1.
func pgCluster(t *testing.T, settings ...string) string {
	t.Helper()
	bin := os.Getenv("INBOX_TEST_PG_BIN")
	if bin == "" {
		bin = "/usr/lib/postgresql/15/bin"
	}
	fail := t.Skipf
	if os.Getenv("INBOX_REQUIRE_POSTGRES") == "1" {
		fail = t.Fatalf
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		fail("no PostgreSQL binaries at %s (INBOX_TEST_PG_BIN): %v", bin, err)
	}
	runuser, err := exec.LookPath("runuser")
	if err != nil || os.Geteuid() != 0 {
		fail("a private cluster needs root and runuser to run initdb as postgres")
	}
	dir, err := os.MkdirTemp("", "inbox-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if out, err := exec.Command("chown", "postgres:postgres", dir).CombinedOutput(); err != nil {
		fail("chown %s to postgres: %v %s", dir, err, out)
	}
	as := func(args ...string) error {
		out, err := exec.Command(runuser, append([]string{"-u", "postgres", "--"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	if err := as(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"); err != nil {
		fail("%v", err)
	}
	port := strconv.Itoa(testport.Later(t))
	opts := "-p " + port + " -k " + dir + " -c listen_addresses=127.0.0.1"
	for _, s := range settings {
		opts += " -c " + s
	}
	if err := as(filepath.Join(bin, "pg_ctl"), "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start"); err != nil {
		fail("%v", err)
	}
	t.Cleanup(func() { as(filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop") })
	return "postgres://postgres@127.0.0.1:" + port + "/postgres?sslmode=disable"
}

// TestPGRefusesNoFsync: serve refuses a server with fsync or
// full_page_writes off at start, naming the setting, and starts on it only
// with --db-unsafe-no-fsync; a server reloaded with fsync off under a
// running serve gets its deliveries 503, never 204.
func TestPGRefusesNoFsync(t *testing.T) {
	t.Parallel()
	dsn := pgCluster(t, "fsync=off")
	env := []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}
	stderr, code := refusedAtStart(t, env, "serve", "--addr", "127.0.0.1:0", "--db", dsn)
	t.Logf("serve on fsync=off: exit %d: %s", code, strings.TrimSpace(stderr))
	if code == 0 || !strings.Contains(stderr, "fsync is off") {
		t.Errorf("serve on a server with fsync off: exit %d, %q; want refused, naming fsync", code, stderr)
	}
	srv := startServer(t, dsn, "--db-unsafe-no-fsync")
	client := &http.Client{Timeout: 10 * time.Second}
	if status := send(t, client, srv.url, jobBody("job_unsafe"), e2eSecret); status != http.StatusNoContent {
		t.Errorf("with --db-unsafe-no-fsync: %d\n%s", status, srv.logs)
	}
	srv.signal(syscall.SIGTERM)
	<-srv.done

	// A cluster of its own for the rest: the command line's fsync=off
	// outranks ALTER SYSTEM.
	dsn = pgCluster(t)
	pgExec(t, dsn, `ALTER SYSTEM SET full_page_writes = off`)
	pgExec(t, dsn, `SELECT pg_reload_conf()`)
	waitSetting(t, dsn, "full_page_writes", "off")
	stderr, code = refusedAtStart(t, env, "serve", "--addr", "127.0.0.1:0", "--db", dsn)
	t.Logf("serve on full_page_writes=off: exit %d: %s", code, strings.TrimSpace(stderr))
	if code == 0 || !strings.Contains(stderr, "full_page_writes is off") {
		t.Errorf("serve on a server with full_page_writes off: exit %d, %q; want refused, naming full_page_writes", code, stderr)
	}

	pgExec(t, dsn, `ALTER SYSTEM SET full_page_writes = on`)
	pgExec(t, dsn, `SELECT pg_reload_conf()`)
	waitSetting(t, dsn, "full_page_writes", "on")
	srv = startServer(t, dsn, "--busy-timeout", "1s")
	if status := send(t, client, srv.url, jobBody("job_safe"), e2eSecret); status != http.StatusNoContent {
		t.Fatalf("on a durable server: %d\n%s", status, srv.logs)
	}
	pgExec(t, dsn, `ALTER SYSTEM SET fsync = off`)
	pgExec(t, dsn, `SELECT pg_reload_conf()`)
	waitSetting(t, dsn, "fsync", "off")
	statuses := map[int]int{}
	for i := range 10 {
		statuses[send(t, client, srv.url, jobBody(fmt.Sprintf("job_reloaded_%d", i)), e2eSecret)]++
	}
	t.Logf("after a reload with fsync off: %v", statuses)
	if statuses[http.StatusNoContent] > 0 || statuses[http.StatusServiceUnavailable] == 0 {
		t.Errorf("after a reload with fsync off: answers %v, want only 503", statuses)
	}
	if !strings.Contains(srv.logs.String(), "fsync is off") {
		t.Errorf("the log does not say fsync is off:\n%s", srv.logs)
	}
}

// waitSetting waits until a new session of dsn sees name = want.
func waitSetting(t *testing.T, dsn, name, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got string
		conn := pgConnect(t, dsn)
		err := conn.QueryRow(context.Background(), `SELECT current_setting($1)`, name).Scan(&got)
		conn.Close(context.Background())
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still %q (%v), want %s", name, got, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPGMaxConnsFlag: --db-max-conns bounds serve's sessions, is refused
// below what the writer needs, and is refused on SQLite, on serve and on
// dispatch alike.
func TestPGMaxConnsFlag(t *testing.T) {
	t.Parallel()
	dsn := pgSchema(t)
	env := []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}
	for name, args := range map[string][]string{
		"serve too small":    {"serve", "--addr", "127.0.0.1:0", "--db", dsn, "--db-max-conns", "1"},
		"dispatch too small": {"dispatch", "--db", dsn, "--exec", "true", "--db-max-conns", "1"},
		"serve on SQLite":    {"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "inbox.db"), "--db-max-conns", "4"},
		"dispatch on SQLite": {"dispatch", "--db", filepath.Join(t.TempDir(), "inbox.db"), "--exec", "true", "--db-max-conns", "4"},
	} {
		stderr, code := refusedAtStart(t, env, args...)
		t.Logf("%s: exit %d: %s", name, code, strings.TrimSpace(stderr))
		if code == 0 || !strings.Contains(stderr, "--db-max-conns") {
			t.Errorf("%s: exit %d, %q; want refused, naming --db-max-conns", name, code, stderr)
		}
	}
	app := "inbox_" + pgSearchPath(dsn)
	srv := startInbox(t, append(env, "INBOX_DB_MAX_CONNS=2"), "serve", "--addr", "127.0.0.1:0",
		"--db", withQuery(dsn, "application_name", app), "--forward-url", "http://127.0.0.1:1/unreachable")
	client := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	var ok atomic.Int64
	for i := range 60 {
		wg.Go(func() {
			if send(t, client, srv.url, jobBody(fmt.Sprintf("job_%02d", i)), e2eSecret) == http.StatusNoContent {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	n := pgQueryInt(t, pgDatabase(t), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app)
	t.Logf("INBOX_DB_MAX_CONNS=2: %d of 60 answered 204; serve holds %d sessions", ok.Load(), n)
	if ok.Load() != 60 || n > 2 || n == 0 {
		t.Errorf("INBOX_DB_MAX_CONNS=2: %d of 60 answered 204, %d sessions; want all, at most 2 sessions", ok.Load(), n)
	}
}

// TestPGWritersFlag: --db-writers is refused below 1, at or above
// --db-max-conns and on SQLite; with 3 writers, every delivery of a burst,
// each job sent twice at once, is answered 204 and stored once, counted
// twice, within the pool.
func TestPGWritersFlag(t *testing.T) {
	t.Parallel()
	dsn := pgSchema(t)
	env := []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}
	for name, args := range map[string][]string{
		"none":             {"serve", "--addr", "127.0.0.1:0", "--db", dsn, "--db-writers", "0"},
		"as many as conns": {"serve", "--addr", "127.0.0.1:0", "--db", dsn, "--db-max-conns", "4", "--db-writers", "4"},
		"on SQLite":        {"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "inbox.db"), "--db-writers", "2"},
	} {
		stderr, code := refusedAtStart(t, env, args...)
		t.Logf("%s: exit %d: %s", name, code, strings.TrimSpace(stderr))
		if code == 0 || !strings.Contains(stderr, "--db-writers") {
			t.Errorf("%s: exit %d, %q; want refused, naming --db-writers", name, code, stderr)
		}
	}
	app := "inbox_" + pgSearchPath(dsn)
	srv := startInbox(t, append(env, "INBOX_DB_WRITERS=3"), "serve", "--addr", "127.0.0.1:0", "--db-max-conns", "6",
		"--db", withQuery(dsn, "application_name", app), "--forward-url", "http://127.0.0.1:1/unreachable")
	client := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	var ok atomic.Int64
	const jobs = 40
	for i := range 2 * jobs {
		wg.Go(func() {
			if send(t, client, srv.url, jobBody(fmt.Sprintf("job_%02d", i%jobs)), e2eSecret) == http.StatusNoContent {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 2*jobs {
		t.Fatalf("%d of %d answered 204, want all", ok.Load(), 2*jobs)
	}
	db := pgDatabase(t)
	schema := pgSearchPath(dsn)
	if n := pgQueryInt(t, db, `SELECT count(*) FROM `+schema+`.events WHERE deliveries = 2`); n != jobs {
		t.Errorf("%d rows counted twice, want %d (one a job)", n, jobs)
	}
	if n := pgQueryInt(t, db, `SELECT count(*) FROM `+schema+`.events`); n != jobs {
		t.Errorf("%d rows, want %d", n, jobs)
	}
	if n := pgQueryInt(t, db, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app); n == 0 || n > 6 {
		t.Errorf("serve holds %d sessions, want at most --db-max-conns (6)", n)
	}
}

// TestPGHeldRowFailsOnlyItsDeliveries holds one job's row from another
// session (SELECT ... FOR UPDATE) while that job is delivered again and
// many others arrive: every other delivery is answered 204 (none is left
// for `inbox missed`); only the held job's gets 503.
func TestPGHeldRowFailsOnlyItsDeliveries(t *testing.T) {
	t.Parallel()
	dsn := pgSchema(t)
	srv := startServer(t, dsn, "--busy-timeout", "2s")
	client := &http.Client{Timeout: 10 * time.Second}
	if status := send(t, client, srv.url, jobBody("job_held"), e2eSecret); status != http.StatusNoContent {
		t.Fatalf("first delivery: %d\n%s", status, srv.logs)
	}
	conn := pgConnect(t, dsn)
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM events WHERE id = 'job_held' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var heldStatus int
	var wg sync.WaitGroup
	wg.Go(func() { heldStatus = send(t, client, srv.url, jobBody("job_held"), e2eSecret) })
	var mu sync.Mutex
	statuses := map[int]int{}
	for i := range 150 {
		wg.Go(func() {
			status := send(t, client, srv.url, jobBody(fmt.Sprintf("job_%03d", i)), e2eSecret)
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	tx.Rollback(ctx)
	t.Logf("one row held: the held job %d; 150 others %v", heldStatus, statuses)
	if statuses[http.StatusNoContent] != 150 {
		t.Errorf("unrelated deliveries beside one held row: %v, want 150 answered 204", statuses)
	}
	if heldStatus != http.StatusServiceUnavailable {
		t.Errorf("the held job's delivery: %d, want 503", heldStatus)
	}
}

// TestPGCommitAnswerLost cuts serve's connection just after it sent the
// COMMIT of a group commit, which the server carries out: serve learns
// nothing from the connection, asks the server whether the commit
// happened, and answers 204; the row holds the one delivery.
func TestPGCommitAnswerLost(t *testing.T) {
	t.Parallel()
	base := pgSchema(t)
	proxy, dsn := startPGProxy(t, base)
	srv := startServer(t, dsn, "--busy-timeout", "2s")
	client := &http.Client{Timeout: 10 * time.Second}
	if status := send(t, client, srv.url, jobBody("job_before"), e2eSecret); status != http.StatusNoContent {
		t.Fatalf("before: %d\n%s", status, srv.logs)
	}
	cut := proxy.cutCommitOf("INSERT INTO events")
	status := send(t, client, srv.url, jobBody("job_cut"), e2eSecret)
	if !cut() {
		t.Fatal("the proxy saw no COMMIT to cut")
	}
	n := pgQueryInt(t, base, `SELECT coalesce(sum(deliveries), 0) FROM events WHERE id = 'job_cut'`)
	t.Logf("COMMIT's answer lost: status %d, the row holds %d deliveries", status, n)
	if n != 1 {
		t.Fatalf("the cut commit left %d deliveries, want 1 (the proxy passed it on)", n)
	}
	if status != http.StatusNoContent {
		t.Errorf("a delivery whose commit happened but whose answer was lost: %d, want 204\n%s", status, srv.logs)
	}
}

// TestPGStartAnswerLost cuts dispatch's connection just after it sent the
// COMMIT that counts an attempt (the claim that counts it ahead, in its
// own statement), which the server carries out:
// dispatch asks the server, finds the attempt counted, and makes it at
// once; the row is done after one attempt, not left on its lease with an
// attempt that never ran.
func TestPGStartAnswerLost(t *testing.T) {
	t.Parallel()
	base := pgSchema(t)
	fillPG(t, base, 1)
	var got atomic.Int64
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(app.Close)
	proxy, dsn := startPGProxy(t, base)
	cut := proxy.cutCommitOf("attempts = d.attempts + CASE WHEN r.counts")
	startInbox(t, nil, "dispatch", "--db", dsn, "--forward-url", app.URL, "--lease", "1m", "--busy-timeout", "2s")
	deadline := time.Now().Add(15 * time.Second)
	for pgQueryInt(t, base, `SELECT count(*) FROM events WHERE status = 'done'`) != 1 {
		if time.Now().After(deadline) {
			attempts := pgQueryInt(t, base, `SELECT attempts FROM events`)
			t.Fatalf("the row is not done 15s on (cut %v, %d requests, attempts %d): left on its lease", cut(), got.Load(), attempts)
		}
		time.Sleep(50 * time.Millisecond)
	}
	attempts := pgQueryInt(t, base, `SELECT attempts FROM events`)
	t.Logf("Start's answer lost: cut %v, %d requests, row done after %d attempts", cut(), got.Load(), attempts)
	if !cut() || got.Load() != 1 || attempts != 1 {
		t.Errorf("cut %v, %d requests, %d attempts; want the cut, one request, one attempt", cut(), got.Load(), attempts)
	}
}

// TestPGOpenSaysWhy: serve as a role that may only read, or on a database
// that takes no writes, exits with a line saying the command writes and
// what to connect as; a connection string that does not parse is named
// for what does not, without its password.
func TestPGOpenSaysWhy(t *testing.T) {
	t.Parallel()
	dsn := pgSchema(t)
	fillPG(t, dsn, 1)
	role, roleDSN := pgRole(t, dsn)
	pgExec(t, dsn, `GRANT SELECT ON ALL TABLES IN SCHEMA `+pgSearchPath(dsn)+` TO `+role)
	env := []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}
	for name, c := range map[string]struct{ db, want string }{
		"select only":      {roleDSN, "the role that writes"},
		"read-only":        {withQuery(dsn, "default_transaction_read_only", "on"), "takes none"},
		"sslmode=bogus":    {withQuery(withUser(dsn, "inbox", "s3cret-pw"), "sslmode", "bogus"), "sslmode is invalid"},
		"dispatch as read": {roleDSN, "the role that writes"},
	} {
		args := []string{"serve", "--addr", "127.0.0.1:0", "--db", c.db}
		if strings.HasPrefix(name, "dispatch") {
			args = []string{"dispatch", "--db", c.db, "--exec", "true"}
		}
		stderr, code := refusedAtStart(t, env, args...)
		t.Logf("%s: exit %d: %s", name, code, strings.TrimSpace(stderr))
		if code == 0 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "s3cret-pw") {
			t.Errorf("%s: exit %d, %q; want refused, saying %q, without the password", name, code, stderr, c.want)
		}
	}
}
