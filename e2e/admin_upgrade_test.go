package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// readCommands are the admin commands that only read, with their
// arguments, and the exit codes that mean they ran (alert exits 1 when it
// finds something).
var readCommands = []struct {
	args []string
	ok   []int
}{
	{[]string{"list"}, []int{0}},
	{[]string{"stats"}, []int{0}},
	{[]string{"parked"}, []int{0}},
	{[]string{"show", "job_new"}, []int{0}},
	{[]string{"missed"}, []int{0}},
	{[]string{"expected"}, []int{0}},
	{[]string{"sources"}, []int{0}},
	{[]string{"alert"}, []int{0, 1}},
	{[]string{"purge", "--dry-run"}, []int{0}},
	{[]string{"list", "--destination", "default"}, []int{0}},
}

// writeCommands are the admin commands that write, with their arguments.
var writeCommands = [][]string{
	// default: the older rows' destination once upgraded; a name the
	// inbox does not know is refused.
	{"pause", "default"},
	{"resume", "default"},
	{"expect", "job_later"},
	{"reprocess", "--all"},
	{"purge"},
	{"replay", "--status", "done"},
	// A dry run replays in a transaction it rolls back, so it opens the
	// store as the real run does.
	{"replay", "--status", "done", "--dry-run"},
}

// adminRun runs inbox with args before --db db.
func adminRun(t *testing.T, db string, args ...string) (string, string, int) {
	t.Helper()
	full := append([]string{args[0], "--db", db}, args[1:]...)
	return runCLI(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, full...)
}

// TestAdminUpgrades runs every admin command on a SQLite database of the
// version before destinations: each that writes upgrades it, as serve
// would, so every command works after it; each that only reads refuses it
// with one line saying to run inbox migrate, never an SQL error; and
// inbox migrate upgrades it, keeping its rows.
func TestAdminUpgrades(t *testing.T) {
	t.Parallel()
	testAdminUpgrades(t, oldSQLite)
}

// TestAdminUpgradesPostgres is TestAdminUpgrades on a PostgreSQL schema
// at version 3.
func TestAdminUpgradesPostgres(t *testing.T) {
	t.Parallel()
	testAdminUpgrades(t, oldPostgres)
}

// adminStart starts inbox with args before --db db, and returns the wait
// for it as startCLI does.
func adminStart(t *testing.T, db string, args ...string) func() (string, string, int, time.Duration) {
	t.Helper()
	full := append([]string{args[0], "--db", db}, args[1:]...)
	return startCLI(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, full...)
}

// readAll starts every read command on db at once (they only read), and
// returns the waits for them, in readCommands' order.
func readAll(t *testing.T, db string) []func() (string, string, int, time.Duration) {
	t.Helper()
	var runs []func() (string, string, int, time.Duration)
	for _, r := range readCommands {
		runs = append(runs, adminStart(t, db, r.args...))
	}
	return runs
}

func testAdminUpgrades(t *testing.T, old func(*testing.T) string) {
	for _, w := range writeCommands {
		db := old(t)
		if _, errOut, code := adminRun(t, db, w...); code != 0 {
			t.Errorf("%v on the older database: exit %d: %s", w, code, errOut)
			continue
		}
		runs := readAll(t, db)
		for i, r := range readCommands {
			if _, errOut, code, _ := runs[i](); !slices.Contains(r.ok, code) {
				t.Errorf("%v after %v upgraded the database: exit %d: %s", r.args, w, code, errOut)
			}
		}
	}

	db := old(t)
	runs := readAll(t, db)
	for i, r := range readCommands {
		_, errOut, code, _ := runs[i]()
		if slices.Contains(r.ok, code) || !strings.Contains(errOut, "inbox migrate") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v on the older database: exit %d %q, want one line saying to run inbox migrate", r.args, code, errOut)
		}
		for _, bad := range []string{"SQL", "no such", "does not exist"} {
			if strings.Contains(errOut, bad) {
				t.Errorf("%v on the older database: %q holds %q", r.args, errOut, bad)
			}
		}
	}
	out, errOut, code := adminRun(t, db, "migrate")
	if code != 0 || !strings.Contains(out, "upgraded") {
		t.Fatalf("inbox migrate: exit %d %q %s", code, out, errOut)
	}
	if !strings.HasPrefix(db, "postgres") {
		// The copy taken first says where it is, and holds the database
		// as it was: still the older schema.
		_, copied, ok := strings.Cut(strings.SplitN(out, "\n", 2)[0], " to ")
		if !ok || !strings.Contains(out, "copied the database as it was") {
			t.Fatalf("inbox migrate on SQLite: %q, want it to say where it copied the database first", out)
		}
		if _, errOut, code := adminRun(t, copied, "stats"); code == 0 || !strings.Contains(errOut, "inbox migrate") {
			t.Errorf("stats on the copy taken before the upgrade: exit %d %q, want the older schema refused", code, errOut)
		}
	}
	if out, errOut, code := adminRun(t, db, "migrate"); code != 0 || !strings.Contains(out, "up to date") {
		t.Errorf("inbox migrate again: exit %d %q %s, want up to date", code, out, errOut)
	}
	runs = readAll(t, db)
	for i, r := range readCommands {
		if _, errOut, code, _ := runs[i](); !slices.Contains(r.ok, code) {
			t.Errorf("%v after inbox migrate: exit %d: %s", r.args, code, errOut)
		}
	}
	st := destinationStats(t, db)
	if d := st["default"]; d.ByStatus["new"] != 1 || d.ByStatus["done"] != 1 || d.ByStatus["parked"] != 1 {
		t.Errorf("destination default after inbox migrate = %+v, want the older rows' state: 1 new, 1 done, 1 parked", d)
	}
}
