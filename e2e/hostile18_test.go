package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestReadyzFollowsSettleArrivals takes from serve, on PostgreSQL, what
// every delivery's transaction needs beyond events: the refusals and
// expectations tables, which each batch settles its arrivals in (a DELETE
// from refusals, an UPDATE of expectations). A LOCK TABLE held on either,
// or DELETE revoked on refusals, gets every delivery 503; /readyz must
// fail then too, as it does for the same causes on events, and pass again
// once the cause is gone.
func TestReadyzFollowsSettleArrivals(t *testing.T) {
	t.Parallel()
	base := pgSchema(t)
	schema := pgSearchPath(base)
	role, dsn := pgRole(t, base)
	srv := startInbox(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, "serve", "--addr", "127.0.0.1:0",
		"--admin-addr", "127.0.0.1:0", "--db", dsn, "--busy-timeout", "1s")
	client := &http.Client{Timeout: 10 * time.Second}
	seq := 0
	deliver := func() int {
		seq++
		status, _ := post(context.Background(), client, srv.url, fmt.Sprintf(`{"event":"job.completed","job_id":"settle_%d","status":"COMPLETED"}`, seq))
		return status
	}
	if got := deliver(); got != http.StatusNoContent {
		t.Fatalf("before: delivery %d\n%s", got, srv.logs)
	}
	if got := readyz(srv.admin); got != http.StatusOK {
		t.Fatalf("before: /readyz %d", got)
	}
	lockTable := func(table string) (cause, remedy func()) {
		var unlock func()
		return func() {
				conn := pgConnect(t, base)
				ctx := context.Background()
				if _, err := conn.Exec(ctx, `BEGIN; LOCK TABLE `+schema+`.`+table+` IN SHARE MODE`); err != nil {
					t.Fatal(err)
				}
				unlock = func() {
					if _, err := conn.Exec(ctx, `ROLLBACK`); err != nil {
						t.Fatal(err)
					}
				}
			}, func() {
				unlock()
			}
	}
	type cause struct {
		name          string
		cause, remedy func()
	}
	var causes []cause
	for _, table := range []string{"refusals", "expectations"} {
		c, r := lockTable(table)
		causes = append(causes, cause{"LOCK TABLE " + table, c, r})
	}
	causes = append(causes, cause{
		name:   "REVOKE DELETE ON refusals",
		cause:  func() { pgExec(t, base, `REVOKE DELETE ON `+schema+`.refusals FROM `+role) },
		remedy: func() { pgExec(t, base, `GRANT DELETE ON `+schema+`.refusals TO `+role) },
	})
	for _, c := range causes {
		c.cause()
		refused := 0
		for range 3 {
			if deliver() == http.StatusServiceUnavailable {
				refused++
			}
		}
		if refused != 3 {
			t.Fatalf("%s: %d of 3 deliveries got 503: the test proved nothing\n%s", c.name, refused, srv.logs)
		}
		if got := readyz(srv.admin); got != http.StatusServiceUnavailable {
			t.Errorf("%s: /readyz after 3 refused deliveries: %d, want 503", c.name, got)
		}
		if got := readyz(srv.admin); got != http.StatusServiceUnavailable {
			t.Errorf("%s: /readyz again, idle: %d, want 503", c.name, got)
		}
		c.remedy()
		waitFor(t, c.name+": /readyz to pass again with no delivery", func() bool { return readyz(srv.admin) == http.StatusOK })
		if got := deliver(); got != http.StatusNoContent {
			t.Errorf("%s: a delivery once /readyz passed again: %d, want 204", c.name, got)
		}
	}
}

// TestKeyValueConnStringPasswordKept gives serve's --db a PostgreSQL
// connection string in libpq's keyword=value form, password included.
// Whatever serve makes of it, the password must show in no log line and
// name no file it creates.
func TestKeyValueConnStringPasswordKept(t *testing.T) {
	t.Parallel()
	const password = "kv-conn-password-3f9a1c"
	dir := t.TempDir()
	conn := "host=127.0.0.1 port=5432 dbname=test user=postgres password=" + password + " sslmode=disable"
	cmd := exec.Command(binary(t), "serve", "--addr", "127.0.0.1:0", "--db", conn)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SUME_COM_WEBHOOK_SIGNING_SECRET="+e2eSecret)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	// Until it exits, or has had time to start and log.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && !strings.Contains(out.String(), `"listening"`) {
		select {
		case <-done:
			deadline = time.Now()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if strings.Contains(out.String(), password) {
		t.Errorf("serve's output holds the connection string's password:\n%s", out.String())
	}
	entries, err := os.ReadDir(dir)
	must(t, err)
	for _, e := range entries {
		if strings.Contains(e.Name(), password) {
			t.Errorf("serve created a file named with the password: %q", filepath.Join(dir, e.Name()))
		}
	}
}

// TestExecWithholdsPGPASSWORDCopy runs serve on PostgreSQL with the
// connection's password in PGPASSWORD (the URL has none), and the same
// value under the application's own name: the --exec command sees
// neither, as it sees no copy of a password given in the URL.
func TestExecWithholdsPGPASSWORDCopy(t *testing.T) {
	t.Parallel()
	const password = "pgpassword-copy-8e21d4"
	dsn := pgSchema(t)
	out := t.TempDir()
	srv := startInbox(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret, "PGPASSWORD=" + password,
		"APP_DB_PASSWORD=" + password, "APP_MODE=production"},
		"serve", "--addr", "127.0.0.1:0", "--db", dsn, "--exec", `env > "`+out+`/$INBOX_KEY.env"`)
	client := &http.Client{Timeout: 10 * time.Second}
	if status := send(t, client, srv.url, jobBody("job_pgpw"), e2eSecret); status != http.StatusNoContent {
		t.Fatalf("delivery: %d\n%s", status, srv.logs)
	}
	var dump []byte
	waitFor(t, "the command to run", func() bool {
		var err error
		dump, err = os.ReadFile(filepath.Join(out, "job_pgpw.env"))
		return err == nil && strings.Contains(string(dump), "INBOX_ATTEMPT=")
	})
	if !strings.Contains(string(dump), "APP_MODE=production\n") {
		t.Fatal("the command lost APP_MODE: the test proved nothing")
	}
	for _, kv := range strings.Split(string(dump), "\n") {
		if strings.Contains(kv, password) {
			name, _, _ := strings.Cut(kv, "=")
			t.Errorf("the command saw the database's password in %s", name)
		}
	}
}

// heldDispatch stores 4 rows, runs inbox dispatch on PostgreSQL with a
// destination that holds every request until release is closed, and
// returns once all 4 attempts are under way.
func heldDispatch(t *testing.T) (base string, d *server, release chan struct{}) {
	t.Helper()
	base = pgSchema(t)
	fillPG(t, base, 4)
	release = make(chan struct{})
	var arrived atomic.Int64
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		<-release
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(app.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	d = startInbox(t, nil, "dispatch", "--db", base, "--admin-addr", "127.0.0.1:0", "--busy-timeout", "1s",
		"--forward-url", app.URL, "--workers", "4", "--slow-after", "10s", "--timeout", "20s", "--lease", "1m")
	waitFor(t, "4 attempts under way", func() bool { return arrived.Load() == 4 })
	return base, d, release
}

// holdRows begins a transaction on a connection of its own that holds the
// rows where (FOR UPDATE); the returned func ends it.
func holdRows(t *testing.T, dsn, where string) (end func()) {
	t.Helper()
	conn := pgConnect(t, dsn)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `BEGIN; SELECT id FROM events WHERE `+where+` FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := conn.Exec(ctx, `ROLLBACK`); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDispatchHeldRowSettlesOthers holds one row (FOR UPDATE, as psql
// would) while inbox dispatch on PostgreSQL hands it and three others on:
// the three others are marked done within a few busy timeouts, as one
// held row fails only its own deliveries on serve; the held one is done
// once it is let go.
func TestDispatchHeldRowSettlesOthers(t *testing.T) {
	t.Parallel()
	base, d, release := heldDispatch(t)
	end := holdRows(t, base, `id = 'pg_0002'`)
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for pgQueryInt(t, base, `SELECT count(*) FROM events WHERE status = 'done' AND id <> 'pg_0002'`) != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the attempts ended, %d of the 3 rows not held are done, want 3\n%s",
				pgQueryInt(t, base, `SELECT count(*) FROM events WHERE status = 'done' AND id <> 'pg_0002'`), d.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	end()
	waitFor(t, "the held row done once let go", func() bool {
		return pgQueryInt(t, base, `SELECT count(*) FROM events WHERE status = 'done'`) == 4
	})
}

// TestDispatchReadyzFollowsSettle holds every row (FOR UPDATE) while
// inbox dispatch on PostgreSQL hands them on: its claims find nothing to
// take, and each Settle fails on the lock timeout. Its /readyz, which
// follows the Start and Settle commits, fails while the settlements fail,
// and passes again once they commit.
func TestDispatchReadyzFollowsSettle(t *testing.T) {
	t.Parallel()
	base, d, release := heldDispatch(t)
	end := holdRows(t, base, `true`)
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(d.logs.String(), "cannot write to the inbox") {
		if time.Now().After(deadline) {
			t.Fatalf("no Settle failed: the test proved nothing\n%s", d.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 2 {
		if got := readyz(d.admin); got != http.StatusServiceUnavailable {
			t.Errorf("dispatch's /readyz while its settlements fail: %d, want 503", got)
		}
		time.Sleep(300 * time.Millisecond)
	}
	end()
	waitFor(t, "every row done once let go", func() bool {
		return pgQueryInt(t, base, `SELECT count(*) FROM events WHERE status = 'done'`) == 4
	})
	waitFor(t, "dispatch's /readyz to pass again", func() bool { return readyz(d.admin) == http.StatusOK })
}
