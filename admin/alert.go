package admin

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/dbaddr"
	"inbox/inbox"
)

// Alert's exit codes besides 0 (nothing found), for cron and monitoring.
// A mistake in the command line or the environment is broken too: exit 1
// would read as an alert.
const (
	alertRaised = 1 // something was found: the lines printed say what
	alertBroken = 2 // the inbox could not be read, or alert was misconfigured
	alertUnsent = 3 // a --notify endpoint did not take a post (and, as 1, whether anything is open)
)

// broken is err with alert's exit code 2.
func broken(err error) error { return cli.Exit(err, alertBroken) }

// report is what one check of alert found, a finding each.
type report struct {
	check string
	found []finding
}

// finding is one thing a check found: a line of its report.
type finding struct {
	// key names it within its check, the same from run to run while it
	// stays open, with every stored text in it escaped (idCell).
	key string
	// count is its size (rows, requests, refusals): alert reports it
	// again once it has doubled. 1 for a finding that has none.
	count int64
	line  string // as printed: cells separated by tabs, no newline
	json  []byte // as --json prints it: one line
}

// add records a finding of key, count and line, obj its JSON.
func (r *report) add(key string, count int64, obj any, line string) error {
	var b strings.Builder
	if err := encodeExact(&b, obj); err != nil {
		return err
	}
	r.found = append(r.found, finding{key: key, count: count, line: line, json: []byte(b.String())})
	return nil
}

func alertCommand(open Opener) *cli.Command {
	return &cli.Command{
		Name:  "alert",
		Usage: "for cron: print parked rows older than --max-age (or parked in every hour, or more than --max-parked now), missed and overdue jobs, destinations no running dispatcher has, dispatchers routing by different tables, destinations down, quiet sources or sources failing verification; exit 1 if any",
		Description: `Counts the parked rows received more than --max-age ago. While there are
fewer than --min-count it prints nothing and exits 0, so cron mails nothing;
otherwise it prints one line per reason (count, oldest) and exits 1.

With --parked-every-hour DURATION (whole hours: 24h, 2d) it asks instead
whether rows kept being parked: it counts the rows parked (on receipt, or
by the dispatcher) in each hour-long window back from now over DURATION,
and alerts when every one of those hours had at least --min-count,
printing the hours, the rows and the fewest and most in an hour. A bug
that parks every delivery trips it; one old parked row does not.

With --max-parked N it asks instead how many rows are parked now, however
recently (of --reason only, when given): it prints the count, by reason,
and exits 1 when there are more than N (0: any parked row). A dismissed
row is not parked and is not counted.

With --quiet-for DURATION it asks instead whether a source has gone quiet:
it prints each source none of whose secrets has verified a delivery for
that long, with its last verified delivery, and exits 1. The sources are
those named by --source, else those of --config, else the Sume source
serve runs without --config and every source a delivery was ever verified
on. A source that has never had a verified delivery is always quiet. It
reads when each secret last verified a delivery as serve records it: every
minute and on exit, so it is precise to about a minute (a delivery of the
last minute may not be seen yet): give it well over a minute.

With --failing-for DURATION it asks instead whether a source's secret
rotation broke: it prints each source that had a request fail
verification (answered 401) within that long, at least --min-count of
them, and none of whose secrets has verified a delivery since the first
of those failures, with how many failed since when, and exits 1. A busy
source with a few forgeries among its verified deliveries is not printed:
a verified delivery after the failures began ends their run. --source and
--config choose the sources as for --quiet-for; without them, every source
with failures. serve records the failures (a count and the first and last
time, nothing of the request) every minute and on exit, so a failure of
the last minute may not be seen yet. One forgery at a source that is
quiet anyway looks the same as a broken rotation: --min-count 3 or so
asks for more.

With --down-for DURATION it asks instead whether a destination is down: it
prints each destination a dispatcher has found down (no answer, timeouts,
429 or 502-504, or the same failure for several rows in a row; see
docs/dispatch.md) for longer than DURATION, with since when, and exits 1;
not one an operator paused (inbox pause), nor one no running dispatcher
has (its dispatcher stopped), which no one probes.
Its rows wait meanwhile with no attempt counted; the dispatcher probes it
and resumes by itself. It reads what the dispatchers record in the
database (written again every 30 s while down, kept when the dispatcher
stops for the next one to probe first, deleted once up), never the
failure itself, which may name the application's host.

With --replica-lag DURATION it asks instead whether the replica of the
SQLite file (serve --replica) is behind: it prints the replica, by how
much and when a sync last reached it, and exits 1 when it may trail the
file by more than DURATION, or no sync reached it for that long (the
replica cannot be reached, or serve hangs or was killed). It reads what
serve saves beside the database after each sync, never serve's error,
which may name the replica's host; a serve that stopped cleanly, its last
sync done, is never behind. A database serve never replicated is a finding
too (exit 1).

It also prints, and exits 1 for, each key refused with 503 (the store was
down) more than --missed-after ago and not delivered since (inbox missed),
each expected job waiting past its window (inbox expected --overdue),
each destination with unfinished rows that no running dispatcher has
("unconfigured NAME": removed from the config, or an upgrade's default
left out of the [[destination]] tables; its rows wait for good), and
running dispatchers that route new rows by different destination tables
("routing": a destination only some have misses the rows the others
route; see inbox replay --help for --missing-only). The last two are
checked while a dispatcher runs (serve or dispatch with destinations
records its table every few seconds).

With --notify URL (repeatable; INBOX_NOTIFY holds several, comma-separated)
it also POSTs what it finds to each webhook as JSON: "text" (the message,
as Slack, Mattermost and ntfy-style endpoints show it), "host", "check"
(parked, parked_every_hour, max_parked, quiet, failing_verification,
destination_down, or unreadable when the inbox could not be read),
"exit_code", "at", "lines", "findings" (the objects --json prints) and
"changes" (each finding's key and whether it opened, grew, repeated or
resolved). It never carries the database's address or a secret: the
reason an inbox could not be read says [--db] for the SQLite file and
[user], [host], [port] and [dbname] for the parts of a PostgreSQL URL, on
stderr too. Only http:// and https:// URLs with a host; a redirect is not
followed; each POST has --notify-timeout, and only a 2xx answer counts. An
empty URL (--notify '', INBOX_NOTIFY=' , ', a trailing comma) is a
mistake: to notify nowhere, unset INBOX_NOTIFY.

With --notify or --on-change it remembers what it reported, in the
database (so it opens it for writing, waiting up to --busy-timeout for
serve's lock), and reports a finding only when it opens; when it grows
(its count at least doubled since it was last reported; a new reason,
source, key or destination is a finding of its own); again every --repeat
while it stays open; and once, as "resolved ...", when it is gone. In
between, nothing. --notify posts only those; --on-change prints only
those too, so cron's mail follows the same rule. What it remembers is
kept per check, its settings and its --notify list: a run resolves only
the findings of the same command line, and two runs at once report a
change once. A post an endpoint did not take (exit 3) is posted again,
to every endpoint, by the next run. When it cannot write to the database
it says so on stderr and in the post, and reports every open finding on
every run and none as resolved.

The exit code is the same with or without them: 1 while anything is
found, printed or not; 0 when nothing is (a "resolved" line included).
It exits 2 when it cannot read the inbox (missing or unreadable database;
notified too) and on any mistake in its flags, arguments or INBOX_ALERT_*
or INBOX_NOTIFY* variables (not notified). It exits 3 when an endpoint of
--notify did not take a post; each such endpoint is named on stderr
(scheme and host only). An unreadable inbox whose notification failed
still exits 2.

Examples:
   inbox alert --max-age 24h
   inbox alert --max-age 1h --min-count 10 --reason unknown_event
   inbox alert --max-age 24h --missed-after 30m
   inbox alert --parked-every-hour 24h
   inbox alert --parked-every-hour 2d --reason handler_failed --json
   inbox alert --max-parked 100
   inbox alert --max-parked 0 --reason handler_failed --on-change
   inbox alert --quiet-for 2h --config /etc/inbox/inbox.toml
   inbox alert --quiet-for 30m --source vibe --notify https://hooks.slack.com/services/...
   inbox alert --down-for 10m --notify https://hooks.slack.com/services/...
   inbox alert --replica-lag 1m
   inbox alert --failing-for 15m --min-count 3 --config /etc/inbox/inbox.toml --notify https://hooks.slack.com/services/...
   inbox alert --max-age 24h --on-change --repeat 12h --notify https://hooks.slack.com/services/...
   INBOX_NOTIFY=https://ntfy.example.com/inbox,https://chat.example.com/hooks/x inbox alert --max-age 24h --on-change
   */15 * * * * inbox /usr/local/bin/inbox alert --db /var/lib/inbox/inbox.db --max-age 24h --on-change   (/etc/cron.d: as user inbox)`,
		Flags: []cli.Flag{
			config.DBFlag(),
			ageFlag("max-age", "24h", "parked rows received longer ago than this count", "INBOX_ALERT_MAX_AGE"),
			&cli.Int64Flag{Name: "min-count", Value: 1, Usage: "alert when at least this many parked rows are older than --max-age (with --parked-every-hour: were parked in each hour; with --failing-for: requests of a source failed verification)", EnvVars: []string{"INBOX_ALERT_MIN_COUNT"}},
			// Not an ageFlag: its examples would offer 90m, which is refused.
			&cli.StringFlag{Name: "parked-every-hour", Usage: "alert when rows were parked in every hour of this long, counted back from now, instead of on --max-age (whole hours: 24h, 2d)", EnvVars: []string{"INBOX_ALERT_PARKED_EVERY_HOUR"}},
			&cli.Int64Flag{Name: "max-parked", Usage: "alert instead when more than this many rows are parked now, however recently (0: any parked row)", DefaultText: "off", EnvVars: []string{"INBOX_ALERT_MAX_PARKED"}},
			reasonFlag("count only rows parked for this reason", "INBOX_ALERT_REASON"),
			ageFlag("missed-after", "1h", "also alert on keys refused with 503 longer ago than this and not delivered since", "INBOX_ALERT_MISSED_AFTER"),
			ageFlag("quiet-for", "", "alert instead when a source has had no verified delivery for this long (precise to about a minute)", "INBOX_ALERT_QUIET_FOR"),
			ageFlag("failing-for", "", "alert instead when a source had requests fail verification within this long and none verified since they began (a broken secret rotation)", "INBOX_ALERT_FAILING_FOR"),
			ageFlag("down-for", "", "alert instead when a destination has been down (its rows held, probed) for longer than this", "INBOX_ALERT_DOWN_FOR"),
			ageFlag("replica-lag", "", "alert instead when the replica of the SQLite file (serve --replica) is behind by more than this, or no sync reached it for this long", "INBOX_ALERT_REPLICA_LAG"),
			&cli.StringSliceFlag{Name: "source", Usage: "with --quiet-for or --failing-for: the source to watch (repeatable); default: those of --config", EnvVars: []string{"INBOX_ALERT_SOURCE"}},
			config.FileFlag("with --quiet-for or --failing-for: the TOML file of [[source]] tables serve reads, whose sources are watched"),
			&cli.StringSliceFlag{Name: "notify", Usage: "also POST what opened, grew, repeated or resolved as JSON to this http(s) webhook (repeatable)", EnvVars: []string{"INBOX_NOTIFY"}},
			config.DurationFlag("notify-timeout", defaultNotifyTimeout, "how long each --notify POST may take", "INBOX_NOTIFY_TIMEOUT", config.Positive),
			&cli.BoolFlag{Name: "on-change", Usage: "print only what opened, grew, repeated or resolved since the last run of this command line (cron mails nothing in between); the exit code is unchanged", EnvVars: []string{"INBOX_ALERT_ON_CHANGE"}},
			ageFlag("repeat", "24h", "with --notify or --on-change: report a finding again after this long while it stays open", "INBOX_ALERT_REPEAT"),
			busyTimeoutFlag(),
			jsonFlag(),
		},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return broken(fmt.Errorf("%w (see --help)", err))
		},
		Action: func(c *cli.Context) error {
			check, err := alertCheck(c)
			if err != nil {
				return broken(err)
			}
			n, err := newNotifier(c)
			if err != nil {
				return broken(err)
			}
			repeat, err := age(c, "repeat")
			if err != nil {
				return broken(err)
			}
			if repeat <= 0 {
				return broken(errors.New("--repeat must be more than 0"))
			}
			remembers := c.Bool("on-change") || len(n.urls) > 0
			rep := &report{check: check.name}
			store, err := openRead(c, open)
			if err == nil {
				defer store.Close()
				err = check.run(c, store, rep)
			}
			if err != nil {
				return unreadable(c, n, err)
			}
			changes := fresh(rep.found)
			undo := func() error { return nil }
			var unkept error
			if remembers {
				var done func()
				changes, undo, done, unkept = rememberIn(c, open, store, check.scope+n.scope(), rep.found, repeat)
				defer done()
			}
			return reportChanges(c, n, rep, changes, undo, remembers, unkept)
		},
	}
}

// rememberIn is remember on store, opened for reading, and, when there
// is something to record, on the store --db names opened for writing:
// it returns the changes, the undo of their records, what closes the
// store it opened, and why it could not remember, if so.
func rememberIn(c *cli.Context, open Opener, store inbox.Store, scope string, found []finding, repeat time.Duration) (changes []change, undo func() error, done func(), err error) {
	errNoMemory := errors.New("this store keeps no alerts")
	var w inbox.Store
	undo = func() error { return nil }
	done = func() {
		if w != nil {
			w.Close()
		}
	}
	mem, ok := store.(alertMemory)
	if !ok {
		return fresh(found), undo, done, errNoMemory
	}
	write := func() (alertMemory, error) {
		var err error
		if w, err = openWrite(c, open); err != nil {
			return nil, err
		}
		m, ok := w.(alertMemory)
		if !ok {
			return nil, errNoMemory
		}
		return m, nil
	}
	changes, swaps, wrote, err := remember(c.Context, mem, write, scope, found, time.Now(), repeat)
	if wrote != nil && len(swaps) > 0 {
		undo = func() error {
			if _, err := wrote.SwapAlerts(c.Context, swaps); err != nil {
				return fmt.Errorf("the next run may not post it again: %s", dbaddr.Free(err, c.String("db")))
			}
			return nil
		}
	}
	return changes, undo, done, err
}

// unreadable reports err, why the inbox could not be read, on stderr and
// to the endpoints, and exits 2.
func unreadable(c *cli.Context, n *notifier, err error) error {
	// Printed and notified, the error never names the database.
	err = errors.New(dbaddr.Free(err, c.String("db")))
	text := fmt.Sprintf("cannot read the inbox: %v\n", err)
	if errs := notify(c, n, "unreadable", alertBroken, []byte(text), nil, nil); len(errs) > 0 {
		return broken(fmt.Errorf("%w; %w", err, errors.Join(errs...)))
	}
	return broken(err)
}

// reportChanges prints and posts what the run found as changes says
// (every finding, or with --on-change only what changed; the endpoints
// only what changed), and returns the exit. A post an endpoint did not
// take is undone (undo), so the next run posts it again. unkept, when alert
// remembers, says why it could not.
func reportChanges(c *cli.Context, n *notifier, rep *report, changes []change, undo func() error, remembers bool, unkept error) error {
	open := len(rep.found) > 0
	var printed, posted []change
	for _, ch := range changes {
		if ch.kind != unchanged {
			posted = append(posted, ch)
		}
		if ch.kind != unchanged || (ch.open && !c.Bool("on-change")) {
			printed = append(printed, ch)
		}
	}
	var note string
	if remembers && unkept != nil && len(posted) > 0 {
		note = fmt.Sprintf("alert could not keep what it reported (%s): it reports every open finding on every run, and none as resolved, until it can write to --db",
			dbaddr.Free(unkept, c.String("db")))
		fmt.Fprintf(c.App.ErrWriter, "inbox: %s\n", note)
	}
	text, js, err := render(printed)
	if err != nil {
		return broken(err)
	}
	out := text
	if c.Bool("json") {
		out = js
	}
	if _, err := c.App.Writer.Write(out); err != nil {
		return broken(err)
	}
	code := 0
	if open {
		code = alertRaised
	}
	if len(posted) > 0 && len(n.urls) > 0 {
		text, js, err := render(posted)
		if err != nil {
			return broken(err)
		}
		if note != "" {
			text = append(text, note+"\n"...)
		}
		if errs := notify(c, n, rep.check, code, text, js, posted); len(errs) > 0 {
			if err := undo(); err != nil {
				errs = append(errs, err)
			}
			return cli.Exit(errors.Join(errs...).Error(), alertUnsent)
		}
	}
	if open {
		// The lines above are the message; main prints nothing more.
		return cli.Exit("", alertRaised)
	}
	return nil
}

// render writes changes as their lines (aligned) and as their JSON
// objects, one a line.
func render(changes []change) (text, js []byte, err error) {
	var t, j strings.Builder
	tw := tabwriter.NewWriter(&t, 0, 0, 2, ' ', 0)
	for _, ch := range changes {
		fmt.Fprintln(tw, ch.text())
		b, err := ch.object()
		if err != nil {
			return nil, nil, err
		}
		j.Write(b)
	}
	if err := tw.Flush(); err != nil {
		return nil, nil, err
	}
	return []byte(t.String()), []byte(j.String()), nil
}

// notify sends what a check found to n's endpoints, if any, and returns
// what failed.
func notify(c *cli.Context, n *notifier, check string, code int, text, findings []byte, changes []change) []error {
	if len(n.urls) == 0 {
		return nil
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	nt := newNotice(host, check, code, text, findings, dbSecrets(c.String("db"))...)
	for _, ch := range changes {
		nt.Changes = append(nt.Changes, ch.notice())
	}
	return n.send(c.Context, nt)
}

// check is one of alert's checks, its flags read and valid: scope names
// it and the settings that decide what it finds (see inbox.Alert).
type check struct {
	name  string
	scope string
	run   func(c *cli.Context, store inbox.Store, rep *report) error
}

// alertCheck reads alert's flags and returns the check they ask for. It
// fails on any flag out of range, and on flags of two checks at once.
func alertCheck(c *cli.Context) (check, error) {
	if err := config.NoArgs(c); err != nil {
		return check{}, err
	}
	maxAge, err := age(c, "max-age")
	if err != nil {
		return check{}, err
	}
	minCount := c.Int64("min-count")
	if minCount < 1 {
		return check{}, errors.New("--min-count must be at least 1")
	}
	r, err := reason(c)
	if err != nil {
		return check{}, err
	}
	every, err := age(c, "parked-every-hour")
	if err != nil {
		return check{}, err
	}
	quiet, err := age(c, "quiet-for")
	if err != nil {
		return check{}, err
	}
	failing, err := age(c, "failing-for")
	if err != nil {
		return check{}, err
	}
	missedAfter, err := age(c, "missed-after")
	if err != nil {
		return check{}, err
	}
	switch {
	case c.IsSet("replica-lag"):
		return replicaCheck(c)
	case c.IsSet("down-for"):
		return downCheck(c)
	case c.IsSet("failing-for"):
		return sourceCheck(c, "failing-for", failing, "failing_verification", alertFailing, "max-age", "parked-every-hour", "quiet-for", "max-parked")
	case c.IsSet("quiet-for"):
		return sourceCheck(c, "quiet-for", quiet, "quiet", alertQuiet, "max-age", "parked-every-hour", "max-parked")
	case c.IsSet("source"):
		// --config is not refused: INBOX_CONFIG may be set for serve.
		return check{}, errors.New("--source goes with --quiet-for or --failing-for")
	case c.IsSet("max-parked"):
		most := c.Int64("max-parked")
		if most < 0 {
			return check{}, errors.New("--max-parked must be 0 or more (0: alert on any parked row)")
		}
		for _, other := range []string{"max-age", "parked-every-hour"} {
			if c.IsSet(other) {
				return check{}, fmt.Errorf("--max-parked and --%s (or its INBOX_ALERT_ variable) are two alerts: run one command for each", other)
			}
		}
		return check{"max_parked", fmt.Sprintf("max_parked %d --reason %s", most, r), func(c *cli.Context, store inbox.Store, rep *report) error {
			return alertMaxParked(c, store, most, r, rep)
		}}, nil
	case c.IsSet("parked-every-hour"):
		if every < time.Hour || every%time.Hour != 0 || every > maxAlertHours*time.Hour {
			return check{}, fmt.Errorf("--parked-every-hour %q: want whole hours from 1h to %dd, such as 24h or 2d", c.String("parked-every-hour"), maxAlertHours/24)
		}
		if c.IsSet("max-age") {
			return check{}, errors.New("--parked-every-hour and --max-age (or INBOX_ALERT_MAX_AGE) are two alerts: run one command for each")
		}
		return check{"parked_every_hour", fmt.Sprintf("parked_every_hour %s --min-count %d --reason %s", every, minCount, r), func(c *cli.Context, store inbox.Store, rep *report) error {
			return alertEveryHour(c, store, every, r, rep)
		}}, nil
	}
	return check{"parked", fmt.Sprintf("parked %s --min-count %d --reason %s --missed-after %s", maxAge, minCount, r, missedAfter), func(c *cli.Context, store inbox.Store, rep *report) error {
		return alertParked(c, store, maxAge, r, rep)
	}}, nil
}

// downCheck is alert --down-for: it refuses a duration not above 0 and
// the flags of the other checks beside it.
func downCheck(c *cli.Context) (check, error) {
	d, err := age(c, "down-for")
	if err != nil {
		return check{}, err
	}
	if d <= 0 {
		return check{}, errors.New("--down-for must be more than 0")
	}
	for _, other := range []string{"max-age", "parked-every-hour", "max-parked", "quiet-for", "failing-for", "source"} {
		if c.IsSet(other) {
			return check{}, fmt.Errorf("--down-for and --%s (or its INBOX_ALERT_ variable) are two alerts: run one command for each", other)
		}
	}
	return check{"destination_down", fmt.Sprintf("destination_down %s", d), func(c *cli.Context, store inbox.Store, rep *report) error {
		return alertDown(c, store, d, rep)
	}}, nil
}

// sourceCheck is the check named name that --flag asks for, watching
// sources over d with run: it refuses a d not above 0 and any of the
// flags of others beside it.
func sourceCheck(c *cli.Context, flag string, d time.Duration, name string,
	run func(c *cli.Context, store inbox.Store, d time.Duration, sources []string, rep *report) error, others ...string) (check, error) {
	if d <= 0 {
		return check{}, fmt.Errorf("--%s must be more than 0", flag)
	}
	for _, other := range others {
		if c.IsSet(other) {
			return check{}, fmt.Errorf("--%s and --%s (or its INBOX_ALERT_ variable) are two alerts: run one command for each", flag, other)
		}
	}
	sources, err := watchedSources(c)
	if err != nil {
		return check{}, err
	}
	watched := "(all)"
	if sources != nil {
		sorted := slices.Sorted(slices.Values(sources))
		watched = strings.Join(slices.Compact(sorted), ",")
	}
	scope := fmt.Sprintf("%s %s --min-count %d --source %s", name, d, c.Int64("min-count"), watched)
	return check{name, scope, func(c *cli.Context, store inbox.Store, rep *report) error {
		return run(c, store, d, sources, rep)
	}}, nil
}

// alertParked reports the parked rows older than maxAge, when there are at
// least --min-count, a finding per reason, and the keys missed and the
// jobs overdue.
func alertParked(c *cli.Context, store inbox.Store, maxAge time.Duration, r inbox.Reason, rep *report) error {
	groups, err := store.ParkedByReason(c.Context, inbox.Filter{
		Reason: r,
		Before: time.Now().Add(-maxAge),
	})
	if err != nil {
		return err
	}
	var total int64
	for _, g := range groups {
		total += g.Count
	}
	if total < c.Int64("min-count") {
		groups = nil
	}
	for _, g := range groups {
		what := fmt.Sprintf("parked longer than %s", formatDuration(maxAge))
		line := fmt.Sprintf("%s\t%d %s\toldest received %s", cell(string(g.Reason)), g.Count, what, formatTime(g.Oldest))
		if err := rep.add(idCell(string(g.Reason))+" "+what, g.Count, g, line); err != nil {
			return err
		}
	}
	late, err := lateJobs(c, store)
	if err != nil {
		return err
	}
	return late.add(rep)
}

// maxParked is what alert --max-parked --json prints when it alerts.
type maxParked struct {
	Parked   int64               `json:"parked"`
	Max      int64               `json:"max_parked"`
	ByReason []inbox.ReasonCount `json:"by_reason"`
}

// alertMaxParked reports the rows parked now (of r only, when set), by
// reason, when there are more than most. It counts as inbox parked
// --group-by reason does, so a row that is not parked (a dismissed one)
// is not counted.
func alertMaxParked(c *cli.Context, store inbox.Store, most int64, r inbox.Reason, rep *report) error {
	groups, err := store.ParkedByReason(c.Context, inbox.Filter{Reason: r})
	if err != nil {
		return err
	}
	m := maxParked{Max: most, ByReason: groups}
	var parts []string
	for _, g := range groups {
		m.Parked += g.Count
		parts = append(parts, fmt.Sprintf("%s %s", cell(string(g.Reason)), thousands(g.Count)))
	}
	if m.Parked <= most {
		return nil
	}
	what := "rows"
	if r != "" {
		what = cell(string(r)) + " rows"
	}
	key := fmt.Sprintf("more than %d %s parked", most, what)
	line := fmt.Sprintf("%s %s parked now, more than %d\t%s\t(inbox parked --group-by reason)",
		thousands(m.Parked), what, most, strings.Join(parts, ", "))
	return rep.add(key, m.Parked, m, line)
}

// maxAlertHours bounds --parked-every-hour: a month.
const maxAlertHours = 31 * 24

// everyHour is what alert --parked-every-hour --json prints when it alerts.
type everyHour struct {
	Hours   int               `json:"hours"`
	Rows    int64             `json:"rows"`
	Fewest  int64             `json:"fewest_in_an_hour"`
	Most    int64             `json:"most_in_an_hour"`
	PerHour []inbox.HourCount `json:"per_hour"`
}

// alertEveryHour raises when at least --min-count rows were parked in each
// of the hour-long windows that cover every back from now.
func alertEveryHour(c *cli.Context, store inbox.Store, every time.Duration, r inbox.Reason, rep *report) error {
	hours := int(every / time.Hour)
	counts, err := store.ParkedPerHour(c.Context, inbox.Filter{Reason: r}, time.Now(), hours)
	if err != nil {
		return err
	}
	e := everyHour{Hours: hours, PerHour: counts, Fewest: counts[0].Count}
	for _, h := range counts {
		e.Rows += h.Count
		e.Fewest, e.Most = min(e.Fewest, h.Count), max(e.Most, h.Count)
	}
	if e.Fewest < c.Int64("min-count") {
		return nil
	}
	what := "rows were parked"
	if r != "" {
		what = cell(string(r)) + " rows were parked"
	}
	what += " in every hour of the last " + formatDuration(every)
	line := fmt.Sprintf("%s: %s rows, %d to %d an hour (inbox parked --per-hour)", what, thousands(e.Rows), e.Fewest, e.Most)
	return rep.add(what, e.Rows, e, line)
}

// quietSource is what alert --quiet-for --json prints for each quiet source.
type quietSource struct {
	Source       string    `json:"source"`
	LastVerified time.Time `json:"last_verified_at,omitzero"` // absent: never
	QuietSeconds float64   `json:"quiet_seconds,omitempty"`
	Never        bool      `json:"never_verified,omitempty"`
}

// alertQuiet reports each watched source whose newest secret use is older
// than quiet, or that has none.
func alertQuiet(c *cli.Context, store inbox.Store, quiet time.Duration, sources []string, rep *report) error {
	uses, err := store.SecretUses(c.Context)
	if err != nil {
		return err
	}
	last := inbox.LastVerified(uses)
	if sources == nil {
		// Without --source or --config: the Sume source serve runs on its
		// own, and every source anything was verified on.
		sources = []string{inbox.DefaultSource}
		for s := range last {
			sources = append(sources, s)
		}
	}
	slices.Sort(sources)
	sources = slices.Compact(sources)
	now := time.Now()
	for _, s := range sources {
		t, ok := last[s]
		if ok && now.Sub(t) < quiet {
			continue
		}
		q := quietSource{Source: s, LastVerified: t, Never: !ok}
		line := fmt.Sprintf("quiet %s\tnever had a verified delivery\t\t(inbox sources)", cell(s))
		if ok {
			q.QuietSeconds = now.Sub(t).Round(time.Second).Seconds()
			line = fmt.Sprintf("quiet %s\tno verified delivery for %s\tlast %s\t(inbox sources)",
				cell(s), formatDuration(now.Sub(t).Round(time.Second)), formatTime(t))
		}
		if err := rep.add("quiet "+idCell(s), 1, q, line); err != nil {
			return err
		}
	}
	return nil
}

// watchedSources returns the sources --source or --config name, or nil when
// neither is given: those --quiet-for and --failing-for watch.
func watchedSources(c *cli.Context) ([]string, error) {
	var out []string
	for _, s := range c.StringSlice("source") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	file := c.String("config")
	if file == "" {
		return nil, nil
	}
	sources, err := config.DescribeSources(file, os.Getenv)
	if err != nil {
		return nil, err
	}
	for _, s := range sources {
		out = append(out, s.Name)
	}
	return out, nil
}
