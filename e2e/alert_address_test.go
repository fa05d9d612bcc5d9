package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// checkUnreadableNotice runs alert --notify on db, which cannot be read,
// and checks that it exits 2 with one unreadable notice, and that neither
// the notice (its host field aside: the machine's name) nor stdout nor
// stderr names any of leaks, each a whole word: the database's user,
// host, port, name or path.
func checkUnreadableNotice(t *testing.T, name, db string, leaks ...string) {
	t.Helper()
	h := newHook(t, http.StatusOK)
	out, errOut, code := runCLI(t, nil, "alert", "--db", db, "--max-age", "0s", "--notify", h.url())
	if code != 2 || out != "" || !strings.HasPrefix(errOut, "inbox: ") {
		t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 and one line on stderr", name, code, out, errOut)
	}
	posts := h.posts(t)
	if len(posts) != 1 || posts[0]["check"] != "unreadable" || posts[0]["exit_code"] != 2.0 {
		t.Fatalf("%s: notified %v, want one unreadable notice", name, posts)
	}
	delete(posts[0], "host")
	body, _ := json.Marshal(posts[0])
	for _, leak := range leaks {
		if leak == "" {
			continue
		}
		re := regexp.MustCompile(`(^|\W)` + regexp.QuoteMeta(leak) + `(\W|$)`)
		for what, text := range map[string]string{"the notice": string(body), "stdout": out, "stderr": errOut} {
			if re.MatchString(text) {
				t.Errorf("%s: %s names the database's %q: %s", name, what, leak, text)
			}
		}
	}
}

// TestAlertNotifyNoAddressSQLite: whatever keeps alert from reading a
// SQLite inbox (no file, no database in it, a schema to upgrade), its
// unreadable notice and its output never name the file or its directory.
func TestAlertNotifyNoAddressSQLite(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "private-dir-r30")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage-r30.db")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("garbage "), 200), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing-r30.db")
	checkUnreadableNotice(t, "missing", missing, missing, dir, "private-dir-r30")
	checkUnreadableNotice(t, "garbage", garbage, garbage, dir, "private-dir-r30")
	old := oldSQLite(t)
	checkUnreadableNotice(t, "old schema", old, old, filepath.Dir(old))
	// As given, relative to the working directory.
	rel, err := filepath.Rel(mustGetwd(t), missing)
	if err != nil {
		t.Fatal(err)
	}
	checkUnreadableNotice(t, "relative", rel, rel, missing, dir)
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// TestAlertNotifyNoAddressPostgres: whatever keeps alert from reading a
// PostgreSQL inbox (a database, a role or a host that does not exist, a
// port nothing listens on, a connection cut, a schema to upgrade), its
// unreadable notice and its output never name the user, host, port,
// database or schema.
func TestAlertNotifyNoAddressPostgres(t *testing.T) {
	t.Parallel()
	base := pgDatabase(t)
	u, _ := url.Parse(base)
	host, port, dbname := u.Hostname(), cmpOr(u.Port(), "5432"), strings.TrimPrefix(u.Path, "/")
	user := u.User.Username()
	with := func(f func(*url.URL)) string {
		c := *u
		f(&c)
		return c.String()
	}
	checkUnreadableNotice(t, "no such database",
		with(func(c *url.URL) { c.Path = "/nosuchdb_r30" }), "nosuchdb_r30", user, host, port)
	checkUnreadableNotice(t, "no such role",
		with(func(c *url.URL) { c.User = url.UserPassword("carol_r30", "pw_r30") }), "carol_r30", "pw_r30", dbname, host, port)
	checkUnreadableNotice(t, "closed port",
		with(func(c *url.URL) { c.Host = "127.0.0.1:1" }), "127.0.0.1", user, dbname)
	checkUnreadableNotice(t, "no such host",
		with(func(c *url.URL) { c.Host = "db-r30.invalid:5433" }), "db-r30.invalid", "5433", user, dbname)
	p, proxied := startPGProxy(t, pgSchema(t))
	p.cut()
	pu, _ := url.Parse(proxied)
	checkUnreadableNotice(t, "cut", proxied, pu.Hostname(), pu.Port(), user, dbname)
	// A connection that answers nothing: alert gives up within the busy
	// timeout, and its reason names no address either.
	p2, stalled := startPGProxy(t, pgSchema(t))
	p2.stall()
	su, _ := url.Parse(stalled)
	checkUnreadableNotice(t, "stalled", stalled, su.Hostname(), su.Port(), user, dbname)
	schema := pgSchema(t)
	search := strings.TrimPrefix(mustQuery(t, schema).Get("options"), "-csearch_path=")
	checkUnreadableNotice(t, "empty schema", schema, search, user, dbname, host, port)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func mustQuery(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

// TestAlertNotifyEmpty: a --notify or INBOX_NOTIFY set to no URL, or with
// an empty one among them, or a URL with no host, is a mistake (exit 2,
// saying what to set), never an alert sent nowhere; nothing is posted.
func TestAlertNotifyEmpty(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db)
	if code := send(t, http.DefaultClient, srv.url, "not json", e2eSecret); code != http.StatusNoContent {
		t.Fatalf("poison delivery: %d, want 204", code)
	}
	h := newHook(t, http.StatusOK)
	for _, tt := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"--notify", ""}},
		{nil, []string{"--notify", "  "}},
		{nil, []string{"--notify", h.url(), "--notify", ""}},
		{nil, []string{"--notify", h.url() + ","}},
		{nil, []string{"--notify", ","}},
		{[]string{"INBOX_NOTIFY= , "}, nil},
		{[]string{"INBOX_NOTIFY="}, nil},
		{[]string{"INBOX_NOTIFY= "}, nil},
		{[]string{"INBOX_NOTIFY=" + h.url() + ","}, nil},
		{[]string{"INBOX_NOTIFY=," + h.url()}, nil},
		{[]string{"INBOX_NOTIFY=" + h.url() + ",,"}, nil},
		{nil, []string{"--notify", "http://:8080/hooks/x"}},
		{nil, []string{"--notify", "https://"}},
	} {
		out, errOut, code := runCLI(t, tt.env, append([]string{"alert", "--db", db, "--max-age", "0s"}, tt.args...)...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "--notify") || strings.Contains(errOut, "T0KEN") {
			t.Errorf("%q %q: exit %d, stdout %q, stderr %q; want 2 and one line on --notify", tt.env, tt.args, code, out, errOut)
		}
	}
	if n := len(h.posts(t)); n != 0 {
		t.Errorf("%d notifications from refused command lines, want none", n)
	}
	// The list as documented still works.
	if _, _, code := runCLI(t, []string{"INBOX_NOTIFY= " + h.url() + " , " + h.url()}, "alert", "--db", db, "--max-age", "0s"); code != 1 {
		t.Errorf("INBOX_NOTIFY of two URLs: exit %d, want 1", code)
	}
	if n := len(h.posts(t)); n != 2 {
		t.Errorf("INBOX_NOTIFY of two URLs: %d notifications, want 2", n)
	}
}
