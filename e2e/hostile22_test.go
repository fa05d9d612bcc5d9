package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// replayFixture serves rows to two destinations, jobs (job.completed
// only) and all, until each is done, and returns the completed, failed
// and push rows' ids and the server (SIGKILLed when the test ends).
func replayFixture(t *testing.T, db string, completed int) (done, fail, gh []string) {
	t.Helper()
	done, fail, gh, _, _, _ = replayServe(t, db, completed)
	return done, fail, gh
}

// replayServe is replayFixture, which also returns the server, its
// config file and the two applications.
func replayServe(t *testing.T, db string, completed int) (done, fail, gh []string, s *server, cfg string, apps [2]*destApp) {
	t.Helper()
	jobs, all := newDestApp(t, 204), newDestApp(t, 204)
	cfg = fanOutConfig(t, replayDests(jobs, all, ""))
	s = startServer(t, db, "--config", cfg)
	done, fail, gh = sendFanOut(t, s, completed, 1, 1)
	rows := len(done) + len(fail) + len(gh)
	waitLong(t, 60*time.Second, "every row handed on", func() bool {
		st := destinationStats(t, db)
		return st["jobs"].ByStatus["done"] == len(done) && st["all"].ByStatus["done"] == rows
	})
	return done, fail, gh, s, cfg, [2]*destApp{jobs, all}
}

// replayDests is the [[destination]] tables of replayServe, all's
// filter lines allFilter.
func replayDests(jobs, all *destApp, allFilter string) string {
	return `
[[destination]]
name = "jobs"
url = "` + jobs.URL + `"
events = ["job.completed"]

[[destination]]
name = "all"
url = "` + all.URL + `"
` + allFilter + "\n"
}

// TestReplayKeepsToTheFiltersNow and ...Postgres: once a destination is
// narrowed (all takes job.failed alone, reloaded), inbox replay --config
// with that file hands its rows on again only to the destinations whose
// filters take them now, and counts the pairs it leaves; without it a
// replay handed all the job.completed and push rows it no longer takes.
func TestReplayKeepsToTheFiltersNow(t *testing.T) {
	t.Parallel()
	testReplayKeepsToTheFiltersNow(t, filepath.Join(t.TempDir(), "inbox.db"))
}

func TestReplayKeepsToTheFiltersNowPostgres(t *testing.T) {
	t.Parallel()
	testReplayKeepsToTheFiltersNow(t, pgSchema(t))
}

func testReplayKeepsToTheFiltersNow(t *testing.T, db string) {
	done, fail, gh, s, cfg, apps := replayServe(t, db, 3)
	jobs, all := apps[0], apps[1]
	if err := os.WriteFile(cfg, []byte(fanOutText(replayDests(jobs, all, `events = ["job.failed"]`))), 0o600); err != nil {
		t.Fatal(err)
	}
	s.signal(syscall.SIGHUP)
	waitLong(t, 10*time.Second, "the reload", func() bool { return strings.Count(s.logs.String(), "reloaded destinations") == 1 })
	before := [2]int{jobs.requests(), all.requests()}
	out, errOut, code := runCLI(t, nil, "replay", "--db", db, "--config", cfg, "--json", "--status", "done")
	var rep struct {
		Rows     int `json:"rows"`
		Pairs    int `json:"pairs"`
		Filtered int `json:"filtered"`
	}
	// jobs takes its 3 again, all only job_f0: its 3 job.completed and 1 push pairs stay.
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Rows != 4 || rep.Pairs != 4 || rep.Filtered != 4 {
		t.Fatalf("replay --config --status done: exit %d %q %s, want 4 rows, 4 pairs, 4 filtered", code, out, errOut)
	}
	waitLong(t, 30*time.Second, "the replayed pairs", func() bool {
		return jobs.requests() == before[0]+3 && all.requests() == before[1]+1
	})
	time.Sleep(500 * time.Millisecond) // anything more would have come by now
	if n := all.requests(); n != before[1]+1 || len(all.attempts(fail[0])) != 2 {
		t.Errorf("all got %d requests after the replay (%s %d times), want %d: job_f0 alone again", n, fail[0], len(all.attempts(fail[0])), before[1]+1)
	}
	for _, id := range append(done, gh...) {
		if n := len(all.attempts(id)); n != 1 {
			t.Errorf("all got %s %d times, want once: its filters no longer take it", id, n)
		}
	}
	if st := destinationStats(t, db); st["all"].ByStatus["done"] != 5 || st["jobs"].ByStatus["done"] != 3 {
		t.Errorf("after the replay: all %v, jobs %v, want every pair done", st["all"].ByStatus, st["jobs"].ByStatus)
	}
}

// TestReplayRefusesEmptyFlags and TestReplayRefusesEmptyFlagsPostgres: a
// selection flag of inbox replay given empty, on the command line or as
// its variable set to "", is refused, naming the flag, and changes
// nothing; it used to select as the flag left out does, so
// --source "$SRC" with SRC unset replayed the rows of every source.
func TestReplayRefusesEmptyFlags(t *testing.T) {
	t.Parallel()
	testReplayRefusesEmptyFlags(t, filepath.Join(t.TempDir(), "inbox.db"))
}

func TestReplayRefusesEmptyFlagsPostgres(t *testing.T) {
	t.Parallel()
	testReplayRefusesEmptyFlags(t, pgSchema(t))
}

func testReplayRefusesEmptyFlags(t *testing.T, db string) {
	done, _, _ := replayFixture(t, db, 2)
	for _, flag := range []string{"source", "event", "status", "reason", "job-status", "destination", "since", "until"} {
		for _, via := range []string{"flag", "env"} {
			args := []string{"replay", "--db", db, "--json"}
			var env []string
			if via == "flag" {
				args = append(args, "--"+flag, "")
			} else {
				env = []string{"INBOX_REPLAY_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_")) + "="}
			}
			if flag != "status" {
				args = append(args, "--status", "done")
			} else {
				args = append(args, "--since", "1h")
			}
			out, errOut, code := runCLI(t, env, args...)
			if code == 0 || !strings.Contains(errOut, "--"+flag+" is empty") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
				t.Errorf("replay with --%s empty (%s): exit %d %q %q, want one line naming --%s", flag, via, code, out, errOut, flag)
			}
		}
	}
	st := destinationStats(t, db)
	if st["jobs"].ByStatus["done"] != len(done) || st["jobs"].ByStatus["new"] != 0 || st["all"].ByStatus["new"] != 0 {
		t.Errorf("after the refused replays: jobs %v, all %v, want every pair still done", st["jobs"].ByStatus, st["all"].ByStatus)
	}
	// A real value still works.
	if out, errOut, code := runCLI(t, nil, "replay", "--db", db, "--dry-run", "--source", "gh", "--status", "done"); code != 0 || !strings.Contains(out, "rows handed on again: 1 (1 pairs made new") {
		t.Errorf("replay --source gh --status done --dry-run: exit %d\n%s%s", code, out, errOut)
	}
}

// TestReplayRateBounds: inbox replay refuses a --rate that is not a
// finite rate of at least one an hour (NaN/s, inf/s and 0.0001/s were
// taken: the first two failed late, the last spaced rows months apart,
// and slower ones overflowed into rows all due at once), and a rate at
// which the last selected row would be due more than 30 days on; a
// destination's rate ceiling is read the same way, so serve refuses
// rate = "NaN/s" at start instead of running with no ceiling.
func TestReplayRateBounds(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	done, fail, gh := replayFixture(t, db, 800)
	rows := len(done) + len(fail) + len(gh)
	for _, rate := range []string{"NaN/s", "inf/s", "Infinity/m", "0.0001/s", "1e-300/s", "0.01/m"} {
		out, errOut, code := runCLI(t, nil, "replay", "--db", db, "--dry-run", "--status", "done", "--rate", rate)
		if code == 0 || !strings.Contains(errOut, "--rate") {
			t.Errorf("replay --rate %s: exit %d %q %q, want refused naming --rate", rate, code, out, errOut)
		}
	}
	// 0.0167/m is just over one an hour: 802 rows would take 33 days.
	out, errOut, code := runCLI(t, nil, "replay", "--db", db, "--status", "done", "--rate", "0.0167/m")
	if code == 0 || !strings.Contains(errOut, "more than 30") || !strings.Contains(errOut, "raise the rate") {
		t.Errorf("replay of %d rows at 0.0167/m: exit %d %q %q, want refused: the last due in more than 30 days", rows, code, out, errOut)
	}
	if st := destinationStats(t, db); st["all"].ByStatus["new"] != 0 {
		t.Errorf("after the refused replay all has %d new pairs, want none", st["all"].ByStatus["new"])
	}
	// The same rate, with fewer rows, is taken.
	out, errOut, code = runCLI(t, nil, "replay", "--db", db, "--dry-run", "--json", "--rate", "0.0167/m", gh[0])
	var rep struct{ Rows int }
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Rows != 1 {
		t.Errorf("replay --rate 0.0167/m %s: exit %d %q %q", gh[0], code, out, errOut)
	}

	for _, rate := range []string{"NaN/s", "inf/s", "1e-300/s"} {
		cfg := fanOutConfig(t, `
[[destination]]
name = "slow"
url = "http://127.0.0.1:1/"
rate = "`+rate+`"
`)
		_, errOut, code := runBriefly(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret},
			"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "inbox.db"), "--config", cfg)
		if code != 1 || !strings.Contains(errOut, `rate "`+rate+`"`) {
			t.Errorf("serve with a destination's rate = %q: exit %d %q, want refused at start naming the rate", rate, code, errOut)
		}
	}
}

// TestReplaySaysRowsLeftOut: rows named by id that the other filters
// leave out (here, not routed to --destination) are counted in the
// report, text and JSON, instead of vanishing from it: inbox replay
// --destination jobs job_f0 used to print "rows handed on again: 0" and
// nothing of why.
func TestReplaySaysRowsLeftOut(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	done, fail, _ := replayFixture(t, db, 2)
	out, errOut, code := runCLI(t, nil, "replay", "--db", db, "--dry-run", "--destination", "jobs", fail[0], done[0], done[0])
	if code != 0 || !strings.Contains(out, "rows handed on again: 1 (1 pairs made new") || !strings.Contains(out, "named but left out by the other filters: 1\n") {
		t.Errorf("replay --destination jobs %s %s: exit %d\n%s%s", fail[0], done[0], code, out, errOut)
	}
	out, errOut, code = runCLI(t, nil, "replay", "--db", db, "--json", "--destination", "jobs", fail[0])
	var rep struct {
		Rows    int `json:"rows"`
		LeftOut int `json:"left_out"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Rows != 0 || rep.LeftOut != 1 {
		t.Errorf("replay --json --destination jobs %s: exit %d %q %s, want rows 0, left_out 1", fail[0], code, out, errOut)
	}
}

// TestMigrateWithoutCreatePostgres: on a schema of an older version, a
// role that may write the tables (SELECT, INSERT, UPDATE, DELETE) but
// has no CREATE on the schema is told that the upgrade needs a role with
// CREATE that owns the tables, by inbox migrate and by a command that
// writes; it used to be told to connect as a role with the very
// privileges it had. Nothing is changed, and once the owner migrates,
// the same role runs the command.
func TestMigrateWithoutCreatePostgres(t *testing.T) {
	t.Parallel()
	dsn := oldPostgres(t)
	role, asRole := pgRole(t, dsn)
	schema := pgSearchPath(dsn)
	pgExec(t, pgDatabase(t), `REVOKE CREATE ON SCHEMA `+schema+` FROM `+role)
	pgExec(t, pgDatabase(t), `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA `+schema+` TO `+role)
	for _, args := range [][]string{{"migrate"}, {"replay", "--status", "done"}, {"pause", "billing"}} {
		out, errOut, code := adminRun(t, asRole, args...)
		if code == 0 || !strings.Contains(errOut, "version 3 and this inbox needs") || !strings.Contains(errOut, "CREATE on the schema") || !strings.Contains(errOut, "run inbox migrate once as") {
			t.Errorf("%v as a role without CREATE: exit %d %q %q, want told the upgrade needs CREATE and the tables' owner", args, code, out, errOut)
		}
	}
	if n := pgQueryInt(t, dsn, `SELECT max(version) FROM inbox_migrations`); n != 3 {
		t.Fatalf("schema version after the refused upgrades = %d, want still 3", n)
	}
	if out, errOut, code := adminRun(t, dsn, "migrate"); code != 0 || !strings.Contains(out, "upgraded") {
		t.Fatalf("inbox migrate as the owner: exit %d %q %s", code, out, errOut)
	}
	pgExec(t, pgDatabase(t), `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA `+schema+` TO `+role)
	if out, errOut, code := adminRun(t, asRole, "pause", "default"); code != 0 {
		t.Errorf("pause as the role once the owner migrated: exit %d %q %s", code, out, errOut)
	}
}

// TestForwardErrorsNameOnlyTheOrigin: a destination whose URL carries
// its credential in the path and query (as Slack's and Discord's hook
// URLs do) and cannot be reached: the attempt's log line, the pair's
// last_error in inbox show (text and JSON) name the host it tried, never
// the path, the query or the password; GET /destinations names no URL
// either. They used to quote the whole URL, password masked, on every
// failed attempt.
func TestForwardErrorsNameOnlyTheOrigin(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	cfg := fanOutConfig(t, `
[[destination]]
name = "hook"
url = "http://user:pw-SEKRIT-3@127.0.0.1:1/services/T0/B0/path-SEKRIT-1?token=query-SEKRIT-2"
retry_schedule = "1m"
`)
	s := startServer(t, db, "--config", cfg, "--admin-addr", "127.0.0.1:0")
	done, _, _ := sendFanOut(t, s, 1, 0, 0)
	waitLong(t, 30*time.Second, "the first attempt to fail", func() bool {
		return destinationStats(t, db)["hook"].Retrying == 1
	})
	text, _, _ := runCLI(t, nil, "show", "--db", db, done[0])
	js, _, _ := runCLI(t, nil, "show", "--db", db, "--json", done[0])
	dests, _, _ := runCLI(t, nil, "destinations", "--admin", s.admin, "--json")
	if !strings.Contains(dests, `"hook"`) {
		t.Errorf("inbox destinations --json does not list hook: %q", dests)
	}
	if !strings.Contains(text, "127.0.0.1:1") || !strings.Contains(s.logs.String(), "127.0.0.1:1") {
		t.Errorf("the failure does not name the host it tried:\n%s\n%s", text, s.logs)
	}
	for what, out := range map[string]string{"serve's log": s.logs.String(), "show": text, "show --json": js, "destinations": dests} {
		if strings.Contains(out, "SEKRIT") || strings.Contains(out, "/services/") {
			t.Errorf("%s holds the URL's path, query or password:\n%s", what, out)
		}
	}
}

// TestEmptyFileNotAnInbox: --db naming an empty file (a copy or restore
// that did not finish, a touch) is refused by inbox migrate, the commands
// that write and those that read, one line naming the file, and the file
// stays empty. inbox migrate used to say it was up to date, a command
// that writes made an empty inbox in it, and one that reads failed with
// "no such table".
func TestEmptyFileNotAnInbox(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"migrate"}, {"pause", "billing"}, {"replay", "--status", "done"}, {"purge"}, {"stats"}, {"list"}} {
		out, errOut, code := adminRun(t, db, args...)
		if code == 0 || !strings.Contains(errOut, db+" is an empty file, not an inbox database") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v on an empty file: exit %d %q %q, want one line saying it is empty", args, code, out, errOut)
		}
	}
	if fi, err := os.Stat(db); err != nil || fi.Size() != 0 {
		t.Errorf("the empty file after the commands: %v, %v bytes, want still empty", err, fi.Size())
	}
}

// TestNATSTokenNotLogged: a JetStream destination whose servers carry a
// token (nats://TOKEN@host, NATS's token form) and a user and password:
// serve's log names the servers with both masked. The token, a user with
// no password, used to be logged as it is, as url.URL.Redacted leaves it.
func TestNATSTokenNotLogged(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	cfg := fanOutConfig(t, `
[[destination]]
name = "stream"
nats_url = "nats://user:pw-SEKRIT-1@127.0.0.1:1,nats://tok-SEKRIT-2@127.0.0.1:2"
nats_subject = "jobs.terminal"
`)
	s := startServer(t, db, "--config", cfg)
	waitLong(t, 10*time.Second, "the unreachable servers logged", func() bool {
		return strings.Contains(s.logs.String(), "nats server unreachable")
	})
	if logs := s.logs.String(); strings.Contains(logs, "SEKRIT") || !strings.Contains(logs, "nats://xxxxx@127.0.0.1:2") {
		t.Errorf("serve's log holds a NATS credential, or does not name the servers masked:\n%s", logs)
	}
}
