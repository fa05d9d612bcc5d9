package e2e

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"inbox/deploy/deploytest"
)

// dbPassword is a recognisable password for the test database's URL; the
// test server trusts loopback connections, so any password opens it.
const dbPassword = "Pw-e2e-7QxZ41rLmK"

// TestPostgresPasswordHidden runs serve and dispatch with the database's
// password in INBOX_DB (and in --db) and checks it appears nowhere: not
// in their logs, which show the URL masked, nor in --help, /metrics,
// /readyz, the errors of a URL that cannot be opened or used, or the
// environment of an --exec command, even where another variable holds the
// URL or the password.
func TestPostgresPasswordHidden(t *testing.T) {
	t.Parallel()
	dsn := withUser(pgSchema(t), "postgres", dbPassword)
	dir := t.TempDir()
	leaks := func(what, text string) {
		t.Helper()
		enc := url.QueryEscape(dbPassword)
		if strings.Contains(text, dbPassword) || strings.Contains(text, enc) {
			t.Errorf("%s holds the database password:\n%s", what, text)
		}
	}
	// Where an --exec command could find the password besides INBOX_DB.
	around := []string{"DATABASE_URL=" + dsn, "APP_DB_PASSWORD=" + dbPassword, "PGPASSWORD=" + dbPassword,
		"SOME_LIST=a," + dbPassword + ",b"}
	execCmd := `env > "` + dir + `/env-$INBOX_ATTEMPT-$$"`

	srv := startInbox(t, append([]string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret, "INBOX_DB=" + dsn}, around...),
		"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--exec", execCmd)
	if got := send(t, http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"job_pw","status":"COMPLETED"}`, e2eSecret); got != http.StatusNoContent {
		t.Fatalf("delivery: status %d\n%s", got, srv.logs)
	}
	for _, path := range []string{"/metrics", "/readyz", "/healthz"} {
		resp, err := http.Get(srv.admin + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		leaks(path, string(b))
	}
	waitFiles(t, dir, 1)

	// dispatch with the URL in --db, a row for it to hand on.
	dsp := startInbox(t, around, "dispatch", "--db", dsn, "--exec", execCmd, "--admin-addr", "127.0.0.1:0")
	if got := send(t, http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"job_pw2","status":"COMPLETED"}`, e2eSecret); got != http.StatusNoContent {
		t.Fatalf("second delivery: status %d", got)
	}
	waitFiles(t, dir, 2)
	files, _ := filepath.Glob(filepath.Join(dir, "env-*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		leaks("an --exec command's environment", string(b))
		if !strings.Contains(string(b), "INBOX_ROW_ID=job_pw") {
			t.Errorf("%s is not a command's environment:\n%s", f, b)
		}
	}
	srv.signal(15)
	dsp.signal(15)
	<-srv.done
	<-dsp.done
	for name, logs := range map[string]string{"serve's log": srv.logs.String(), "dispatch's log": dsp.logs.String()} {
		leaks(name, logs)
		if !strings.Contains(logs, `"db":"postgres"`) || strings.Contains(logs, "127.0.0.1:5432") || strings.Contains(logs, "database=test") {
			t.Errorf("%s does not name the store by its kind alone:\n%s", name, logs)
		}
	}

	// --help, with the URL in the environment.
	for _, cmd := range []string{"serve", "dispatch", "list", "stats", "purge"} {
		out, errOut, _ := runCLI(t, []string{"INBOX_DB=" + dsn}, cmd, "--help")
		leaks(cmd+" --help", out+errOut)
	}

	// serve and dispatch wait for a server that is not there: the outage
	// they log names no password either.
	closed := withUser("postgres://127.0.0.1:1/test?sslmode=disable", "postgres", dbPassword)
	for _, args := range [][]string{{"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, {"dispatch", "--exec", "true", "--admin-addr", "127.0.0.1:0"}} {
		w := startInbox(t, []string{"INBOX_DB=" + closed, "SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, args...)
		for deadline := time.Now().Add(10 * time.Second); logCount(w.logs.String(), msgDBDown) == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not log the outage:\n%s", args[0], w.logs)
			}
		}
		w.signal(15)
		<-w.done
		leaks(args[0]+"'s log of the outage", w.logs.String())
		for _, addr := range []string{"127.0.0.1:1", "user=postgres", "database=test"} {
			if strings.Contains(w.logs.String(), addr) {
				t.Errorf("%s's log of the outage names the database (%s):\n%s", args[0], addr, w.logs)
			}
		}
	}

	// Errors: a server that is not there, one that refuses the database, a
	// URL that does not parse, one Go's parser refuses, a command the store
	// cannot do.
	u, _ := url.Parse(dsn)
	u.Path = "/no_such_database_pw"
	refused := u.String()
	for _, tt := range []struct {
		env  []string
		args []string
	}{
		{[]string{"INBOX_DB=" + closed}, []string{"list"}},
		{[]string{"INBOX_DB=" + closed}, []string{"stats", "--json"}},
		{[]string{"INBOX_DB=" + refused, "SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, []string{"serve", "--addr", "127.0.0.1:0"}},
		{nil, []string{"dispatch", "--db", refused, "--exec", "true"}},
		{[]string{"INBOX_DB=" + dsn + "&sslmode=bogus"}, []string{"list"}},
		{[]string{"INBOX_DB=postgres://postgres:" + dbPassword + "@127.0.0.1:1,127.0.0.1:2/test?sslmode=disable"}, []string{"purge", "--older-than", "30d"}},
		{[]string{"INBOX_DB=postgresql://postgres@127.0.0.1:1/test?password=" + dbPassword}, []string{"parked"}},
		{[]string{"INBOX_DB=" + dsn}, []string{"backup", filepath.Join(dir, "copy.db")}},
	} {
		cmd := append([]string{}, tt.args...)
		done := make(chan struct{})
		var out, errOut string
		var code int
		go func() {
			defer close(done)
			out, errOut, code = runCLI(t, tt.env, cmd...)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%v: still running after 30s", tt.args)
		}
		if code == 0 {
			t.Errorf("%v: exit 0", tt.args)
		}
		leaks(strings.Join(tt.args, " ")+"'s error", out+errOut)
		if lines := strings.Count(strings.TrimSpace(errOut), "\n") + 1; lines != 1 {
			t.Errorf("%v: want one line on stderr, got %q", tt.args, errOut)
		}
	}
}

// waitFiles waits until dir holds n files named env-*.
func waitFiles(t *testing.T, dir string, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		files, _ := filepath.Glob(filepath.Join(dir, "env-*"))
		if len(files) >= n {
			time.Sleep(100 * time.Millisecond) // the last one written whole
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d --exec runs in 20s", len(files), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPostgresPlaceholderRefused: INBOX_DB as deploy/inbox-postgres.env
// ships it, its password a placeholder, is refused at once by serve,
// dispatch and the operator's commands, in one line naming INBOX_DB, with
// nothing connected to.
func TestPostgresPlaceholderRefused(t *testing.T) {
	t.Parallel()
	set, _ := deploytest.EnvFile(t, "inbox-postgres.env")
	shipped := set["INBOX_DB"]
	if shipped == "" {
		t.Fatal("inbox-postgres.env sets no INBOX_DB")
	}
	// The shipped host, and one that answers: refused before either is asked.
	u, _ := url.Parse(shipped)
	local := *u
	local.Host = "127.0.0.1:1"
	local.RawQuery = "sslmode=disable"
	for _, db := range []string{shipped, local.String()} {
		for _, args := range [][]string{
			{"serve", "--addr", "127.0.0.1:0"},
			{"dispatch", "--forward-url", "http://127.0.0.1:1/"},
			{"list"},
			{"purge", "--older-than", "30d"},
		} {
			start := time.Now()
			out, errOut, code := runCLI(t, []string{"INBOX_DB=" + db, "SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, args...)
			took := time.Since(start)
			if code == 0 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "INBOX_DB") || !strings.Contains(errOut, "placeholder") {
				t.Errorf("%s with %s: exit %d, stdout %q, stderr %q; want refused in one line naming INBOX_DB", args[0], db, code, out, errOut)
			}
			if took > 5*time.Second {
				t.Errorf("%s: refused after %s: it tried to connect first", args[0], took)
			}
		}
	}
}
