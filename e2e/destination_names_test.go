package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUnknownDestinationRefused: every command that takes a destination
// name refuses one the inbox does not know (a misspelt billing), exit
// non-zero, writing nothing, and says the names it knows; a name a
// running dispatcher has, or that --config has, is known before its first
// row, and a paused name can always be resumed.
func TestUnknownDestinationRefused(t *testing.T) {
	t.Parallel()
	testUnknownDestinationRefused(t, filepath.Join(t.TempDir(), "inbox.db"))
}

// TestUnknownDestinationRefusedPostgres is TestUnknownDestinationRefused
// on PostgreSQL.
func TestUnknownDestinationRefusedPostgres(t *testing.T) {
	t.Parallel()
	testUnknownDestinationRefused(t, pgSchema(t))
}

func testUnknownDestinationRefused(t *testing.T, db string) {
	billing, audit := newDestApp(t, 204), newDestApp(t, 204)
	cfg := fanOutConfig(t, destTable("billing", billing.URL)+destTable("audit", audit.URL)+
		destTable("quiet", audit.URL, `events = ["never.sent"]`))
	s := startServer(t, db, "--config", cfg, "--admin-addr", "127.0.0.1:0")
	sendBatch(t, s, "a", 3, 0, 0)
	waitLong(t, 20*time.Second, "billing and audit to take the rows", func() bool {
		st := destinationStats(t, db)
		return st["billing"].ByStatus["done"] == 3 && st["audit"].ByStatus["done"] == 3
	})
	for _, args := range [][]string{
		{"pause", "billig"},
		{"resume", "billig"},
		{"list", "--destination", "billig"},
		{"parked", "--destination", "billig"},
		{"parked", "--destination", "billig", "--per-hour"},
		{"replay", "--destination", "billig", "--since", "1h"},
		{"replay", "--destination", "billig", "--since", "1h", "--dry-run"},
	} {
		out, errOut, code := runCLI(t, nil, append([]string{args[0], "--db", db}, args[1:]...)...)
		if code == 0 || !strings.Contains(errOut, `unknown destination "billig"`) ||
			!strings.Contains(errOut, "billing") || !strings.Contains(errOut, "--config") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want refused, naming the known ones", args, code, out, errOut)
		}
	}
	st := destinationStats(t, db)
	if _, ok := st["billig"]; ok {
		t.Errorf("stats shows billig after the refusals: %+v", st["billig"])
	}
	if st["billing"].Paused {
		t.Error("billing paused by a pause of billig")
	}
	// billing goes on.
	sendBatch(t, s, "b", 2, 0, 0)
	waitLong(t, 20*time.Second, "billing to take the later rows", func() bool {
		return destinationStats(t, db)["billing"].ByStatus["done"] == 5
	})
	// A destination of the running dispatcher, before its first row.
	if out, errOut, code := runCLI(t, nil, "pause", "--db", db, "quiet"); code != 0 || !strings.Contains(out, "paused quiet") {
		t.Errorf("pause quiet (running, no row yet): %d %q %s", code, out, errOut)
	}
	// One no dispatcher has yet: refused, but known with --config.
	later := fanOutConfig(t, destTable("newc", audit.URL))
	if _, errOut, code := runCLI(t, nil, "pause", "--db", db, "newc"); code == 0 {
		t.Errorf("pause newc (no row, no dispatcher) succeeded")
	} else if !strings.Contains(errOut, "audit, billing, quiet") {
		t.Errorf("pause newc: %s, want the known names listed", errOut)
	}
	if out, errOut, code := runCLI(t, nil, "pause", "--db", db, "--config", later, "newc"); code != 0 {
		t.Errorf("pause --config newc: %d %q %s", code, out, errOut)
	}
	if d := destinationStats(t, db)["newc"]; !d.Paused {
		t.Errorf("newc = %+v, want paused", d)
	}
	// Paused: known, so resumable, with no config.
	if out, errOut, code := runCLI(t, nil, "resume", "--db", db, "newc"); code != 0 {
		t.Errorf("resume newc: %d %q %s", code, out, errOut)
	}
	if _, ok := destinationStats(t, db)["newc"]; ok {
		t.Error("newc still listed after resume")
	}
	// Known names work as before.
	if out, errOut, code := runCLI(t, nil, "list", "--db", db, "--destination", "billing"); code != 0 || strings.Count(out, "job_") != 5 {
		t.Errorf("list --destination billing: %d %q %s", code, out, errOut)
	}
	s.signal(syscall.SIGTERM)
	<-s.done
}

// TestUnconfiguredDestinationSaid: a reload (and a start) with a config
// that no longer has a destination whose rows are unfinished says so in a
// warn line naming it and the count, on /readyz, and through inbox alert
// (exit 1, in --notify too).
func TestUnconfiguredDestinationSaid(t *testing.T) {
	t.Parallel()
	testUnconfiguredDestinationSaid(t, filepath.Join(t.TempDir(), "inbox.db"))
}

// TestUnconfiguredDestinationSaidPostgres is
// TestUnconfiguredDestinationSaid on PostgreSQL.
func TestUnconfiguredDestinationSaidPostgres(t *testing.T) {
	t.Parallel()
	testUnconfiguredDestinationSaid(t, pgSchema(t))
}

func testUnconfiguredDestinationSaid(t *testing.T, db string) {
	keep, gone := newDestApp(t, 204), newDestApp(t, 204)
	dir := t.TempDir()
	both := fanOutText(destTable("keep", keep.URL) + destTable("gone", gone.URL))
	cfg := writeConfig(t, dir, both)
	s := startServer(t, db, "--config", cfg, "--admin-addr", "127.0.0.1:0")
	pause(t, s, db, "gone")
	sendBatch(t, s, "a", 4, 3, 0)
	waitLong(t, 20*time.Second, "keep to take the rows", func() bool {
		st := destinationStats(t, db)
		return st["keep"].ByStatus["done"] == 7 && st["gone"].ByStatus["new"] == 7
	})
	if out, errOut, code := runCLI(t, nil, "alert", "--db", db); code != 0 {
		t.Fatalf("alert before the reload: %d %q %s", code, out, errOut)
	}
	writeConfig(t, dir, fanOutText(destTable("keep", keep.URL)))
	s.signal(syscall.SIGHUP)
	said := func(logs string) bool {
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, `"level":"warn"`) && strings.Contains(l, `"destination":"gone"`) && strings.Contains(l, `"unfinished":7`) {
				return true
			}
		}
		return false
	}
	waitLong(t, 10*time.Second, "a warn line naming gone and its 7 rows", func() bool { return said(s.logs.String()) })
	waitLong(t, 10*time.Second, "/readyz to name gone", func() bool {
		_, body := get(t, s.admin+"/readyz")
		return strings.Contains(body, "destination gone: 7 unfinished rows wait and no running dispatcher has it")
	})
	hook := newHook(t, 200)
	out, errOut, code := runCLI(t, nil, "alert", "--db", db, "--notify", hook.url())
	if code != 1 || !strings.Contains(out, "unconfigured gone") || !strings.Contains(out, "7 unfinished rows") {
		t.Errorf("alert after the reload: exit %d %q %s, want 1 naming gone", code, out, errOut)
	}
	if p := hook.posts(t); len(p) != 1 || !strings.Contains(fmt.Sprint(p[0]["text"]), "unconfigured gone") {
		t.Errorf("notified %v, want one notice naming gone", p)
	}
	out, _, code = runCLI(t, nil, "alert", "--db", db, "--json")
	if code != 1 || !strings.Contains(out, `"unconfigured_destination":{"destination":"gone","unfinished":7}`) {
		t.Errorf("alert --json: %d %s", code, out)
	}
	s.signal(syscall.SIGTERM)
	<-s.done
	// At start too.
	s = startServer(t, db, "--config", cfg, "--admin-addr", "127.0.0.1:0")
	waitLong(t, 10*time.Second, "a warn line at start naming gone", func() bool { return said(s.logs.String()) })
	// Named again: nothing to say, and gone takes its rows once resumed.
	writeConfig(t, dir, both)
	s.signal(syscall.SIGHUP)
	if out, errOut, code := runCLI(t, nil, "resume", "--db", db, "gone"); code != 0 {
		t.Fatalf("resume gone: %d %q %s", code, out, errOut)
	}
	waitLong(t, 20*time.Second, "gone to take its rows", func() bool {
		return destinationStats(t, db)["gone"].ByStatus["done"] == 7
	})
	if out, errOut, code := runCLI(t, nil, "alert", "--db", db); code != 0 {
		t.Errorf("alert once gone is back: %d %q %s", code, out, errOut)
	}
	s.signal(syscall.SIGTERM)
	<-s.done
}

// TestReplayFeedsNewDestination: a destination added later gets the rows
// routed before it through inbox replay --destination NEW --config FILE,
// those its filters take only, each once; --dry-run counts them and
// changes nothing.
func TestReplayFeedsNewDestination(t *testing.T) {
	t.Parallel()
	testReplayFeedsNewDestination(t, filepath.Join(t.TempDir(), "inbox.db"))
}

// TestReplayFeedsNewDestinationPostgres is TestReplayFeedsNewDestination
// on PostgreSQL.
func TestReplayFeedsNewDestinationPostgres(t *testing.T) {
	t.Parallel()
	testReplayFeedsNewDestination(t, pgSchema(t))
}

func testReplayFeedsNewDestination(t *testing.T, db string) {
	app, newc := newDestApp(t, 204), newDestApp(t, 204)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fanOutText(destTable("app", app.URL)))
	s := startServer(t, db, "--config", cfg, "--admin-addr", "127.0.0.1:0")
	completed, _, _ := sendBatch(t, s, "a", 4, 2, 1)
	waitLong(t, 20*time.Second, "app to take the rows", func() bool {
		return destinationStats(t, db)["app"].ByStatus["done"] == 7
	})
	withNew := fanOutText(destTable("app", app.URL) + destTable("newc", newc.URL, `events = ["job.completed"]`))
	later := filepath.Join(t.TempDir(), "later.toml")
	writeConfigAt(t, later, withNew)
	// Without the config that has it, newc is a name the inbox does not know.
	if out, errOut, code := runCLI(t, nil, "replay", "--db", db, "--destination", "newc", "--since", "1h"); code == 0 || !strings.Contains(errOut, `unknown destination "newc"`) {
		t.Errorf("replay --destination newc without --config: %d %q %s, want refused", code, out, errOut)
	}
	out, errOut, code := runCLI(t, nil, "replay", "--db", db, "--config", later, "--destination", "newc", "--since", "1h", "--dry-run")
	if code != 0 || !strings.Contains(out, "rows handed on again: 4") || !strings.Contains(out, "4 pairs made for a destination the rows had none of") {
		t.Fatalf("replay --dry-run: %d %q %s", code, out, errOut)
	}
	if _, ok := destinationStats(t, db)["newc"]; ok {
		t.Fatal("the dry run made pairs")
	}
	out, errOut, code = runCLI(t, nil, "replay", "--db", db, "--config", later, "--destination", "newc", "--since", "1h")
	if code != 0 || !strings.Contains(out, "4 pairs made") {
		t.Fatalf("replay: %d %q %s", code, out, errOut)
	}
	writeConfig(t, dir, withNew)
	s.signal(syscall.SIGHUP)
	waitLong(t, 20*time.Second, "newc to take the 4 rows", func() bool {
		return destinationStats(t, db)["newc"].ByStatus["done"] == 4
	})
	if got := newc.rows(); !slices.Equal(sorted(got), sorted(completed)) {
		t.Errorf("newc got %v, want %v", got, completed)
	}
	if bad := onceEach(newc, completed); len(bad) > 0 {
		t.Errorf("newc: %v, want each once at attempt 1", bad)
	}
	if n := app.requests(); n != 7 {
		t.Errorf("app had %d requests, want its 7: the replay touched it", n)
	}
	// Again, missing only: nothing to make.
	out, errOut, code = runCLI(t, nil, "replay", "--db", db, "--config", later, "--destination", "newc", "--since", "1h", "--missing-only")
	if code != 0 || !strings.Contains(out, "rows handed on again: 0") || !strings.Contains(out, "--missing-only): 4 rows") {
		t.Errorf("replay --missing-only: %d %q %s", code, out, errOut)
	}
	s.signal(syscall.SIGTERM)
	<-s.done
}

// writeConfigAt writes text to path, readable by its owner alone.
func writeConfigAt(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRoutingTablesDiffer runs two dispatchers on one PostgreSQL with
// different destination tables, as a rolling reload does: it is said in a
// warn line, on /readyz and by inbox alert, and replay --missing-only
// gives crm the rows the other dispatcher routed without it, each once.
func TestRoutingTablesDiffer(t *testing.T) {
	t.Parallel()
	testRoutingTablesDiffer(t, pgSchema(t))
}

// TestRoutingTablesDifferSQLite is TestRoutingTablesDiffer on SQLite.
func TestRoutingTablesDifferSQLite(t *testing.T) {
	t.Parallel()
	testRoutingTablesDiffer(t, filepath.Join(t.TempDir(), "inbox.db"))
}

func testRoutingTablesDiffer(t *testing.T, db string) {
	app, crm := newDestApp(t, 204), newDestApp(t, 204)
	recv := startServer(t, db, "--config", fanOutConfig(t, ""))
	oldT := fanOutText(destTable("app", app.URL))
	newT := fanOutText(destTable("app", app.URL) + destTable("crm", crm.URL))
	oldCfg, newCfg := filepath.Join(t.TempDir(), "old.toml"), filepath.Join(t.TempDir(), "new.toml")
	writeConfigAt(t, oldCfg, oldT)
	writeConfigAt(t, newCfg, newT)
	env := []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}
	d1 := startInbox(t, env, "dispatch", "--db", db, "--config", oldCfg, "--admin-addr", "127.0.0.1:0")
	d2 := startInbox(t, env, "dispatch", "--db", db, "--config", newCfg, "--admin-addr", "127.0.0.1:0")
	waitLong(t, 15*time.Second, "a warn line that the tables differ", func() bool {
		for _, d := range []*server{d1, d2} {
			if strings.Contains(d.logs.String(), "route new rows by different destination tables") {
				return true
			}
		}
		return false
	})
	waitLong(t, 15*time.Second, "both /readyz to say the tables differ", func() bool {
		for _, d := range []*server{d1, d2} {
			_, body := get(t, d.admin+"/readyz")
			if !strings.Contains(body, "routing: dispatchers route by different destination tables") || !strings.Contains(body, "crm") {
				return false
			}
		}
		return true
	})
	out, errOut, code := runCLI(t, nil, "alert", "--db", db)
	if code != 1 || !strings.Contains(out, "different destination tables") || !strings.Contains(out, "[app, crm]") {
		t.Errorf("alert: %d %q %s, want 1 naming both tables", code, out, errOut)
	}
	ids, _, _ := sendBatch(t, recv, "a", 30, 0, 0)
	waitLong(t, 30*time.Second, "app to take the rows", func() bool {
		return destinationStats(t, db)["app"].ByStatus["done"] == 30
	})
	// The rolling reload ends: one table again.
	d1.signal(syscall.SIGTERM)
	<-d1.done
	waitLong(t, 15*time.Second, "/readyz to drop the routing line", func() bool {
		_, body := get(t, d2.admin+"/readyz")
		return !strings.Contains(body, "routing:")
	})
	out, errOut, code = runCLI(t, nil, "replay", "--db", db, "--config", newCfg, "--destination", "crm", "--since", "1h", "--missing-only")
	if code != 0 {
		t.Fatalf("replay --missing-only: %d %q %s", code, out, errOut)
	}
	waitLong(t, 30*time.Second, "crm to take every row", func() bool {
		return destinationStats(t, db)["crm"].ByStatus["done"] == 30
	})
	if bad := onceEach(crm, ids); len(bad) > 0 {
		t.Errorf("crm: %v, want each row once", bad)
	}
	if out, errOut, code := runCLI(t, nil, "alert", "--db", db); code != 0 {
		t.Errorf("alert with one table: %d %q %s", code, out, errOut)
	}
	d2.signal(syscall.SIGTERM)
	<-d2.done
}

// TestUpgradeWithoutDefaultSaid: an older database upgraded by a serve
// whose [[destination]] tables leave out default, while a row of it
// waits: the start says default and its row in a warn line, /readyz and
// inbox alert name it.
func TestUpgradeWithoutDefaultSaid(t *testing.T) {
	t.Parallel()
	testUpgradeWithoutDefaultSaid(t, oldSQLite(t))
}

// TestUpgradeWithoutDefaultSaidPostgres is TestUpgradeWithoutDefaultSaid
// on PostgreSQL.
func TestUpgradeWithoutDefaultSaidPostgres(t *testing.T) {
	t.Parallel()
	testUpgradeWithoutDefaultSaid(t, oldPostgres(t))
}

func testUpgradeWithoutDefaultSaid(t *testing.T, db string) {
	app := newDestApp(t, 204)
	s := startServer(t, db, "--config", fanOutConfig(t, destTable("app", app.URL)), "--admin-addr", "127.0.0.1:0")
	waitLong(t, 10*time.Second, "a warn line naming default", func() bool {
		return strings.Contains(s.logs.String(), `"destination":"default","unfinished":1`)
	})
	waitLong(t, 10*time.Second, "/readyz to name default", func() bool {
		_, body := get(t, s.admin+"/readyz")
		return strings.Contains(body, "destination default: 1 unfinished rows wait")
	})
	if out, errOut, code := runCLI(t, nil, "alert", "--db", db, "--max-age", "10000d"); code != 1 || !strings.Contains(out, "unconfigured default") {
		t.Errorf("alert: %d %q %s, want 1 naming default", code, out, errOut)
	}
	s.signal(syscall.SIGTERM)
	<-s.done
}

// TestAllDestinationsRemovedSaid: a reload that removes every destination
// of a serve while one has unfinished rows says so too.
func TestAllDestinationsRemovedSaid(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	only := newDestApp(t, 500)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fanOutText(destTable("only", only.URL, `retry_schedule = "1h"`)))
	s := startServer(t, db, "--config", cfg, "--admin-addr", "127.0.0.1:0")
	sendBatch(t, s, "a", 3, 0, 0)
	waitLong(t, 10*time.Second, "only's rows to wait for a retry", func() bool {
		return destinationStats(t, db)["only"].Retrying == 3
	})
	writeConfig(t, dir, fanOutText(""))
	s.signal(syscall.SIGHUP)
	waitLong(t, 10*time.Second, "a warn line naming only and its 3 rows", func() bool {
		return strings.Contains(s.logs.String(), `"destination":"only","unfinished":3`)
	})
	waitLong(t, 10*time.Second, "/readyz to name only", func() bool {
		_, body := get(t, s.admin+"/readyz")
		return strings.Contains(body, "destination only: 3 unfinished rows wait")
	})
	s.signal(syscall.SIGTERM)
	<-s.done
}
