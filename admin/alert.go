package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/inbox"
)

// Alert's exit codes besides 0 (fewer than --min-count old parked rows),
// for cron and monitoring. A mistake in the command line or the
// environment is broken too: exit 1 would read as an alert.
const (
	alertRaised = 1 // the lines printed say what
	alertBroken = 2 // the inbox could not be read, or alert was misconfigured
	alertUnsent = 3 // an alert was raised, as 1, and a --notify endpoint did not take it
)

// broken is err with alert's exit code 2.
func broken(err error) error { return cli.Exit(err, alertBroken) }

// report is what one check of alert found: the lines a person reads, and
// the objects --json prints, one per line. Empty: nothing to raise.
type report struct {
	check string
	text  bytes.Buffer
	json  bytes.Buffer
}

func (r *report) empty() bool { return r.text.Len() == 0 && r.json.Len() == 0 }

func alertCommand(open Opener) *cli.Command {
	return &cli.Command{
		Name:  "alert",
		Usage: "for cron: print parked rows older than --max-age (or parked in every hour), missed and overdue jobs, destinations no running dispatcher has, dispatchers routing by different tables, destinations down, quiet sources or sources failing verification; exit 1 if any",
		Description: `Counts the parked rows received more than --max-age ago. While there are
fewer than --min-count it prints nothing and exits 0, so cron mails nothing;
otherwise it prints one line per reason (count, oldest) and exits 1.

With --parked-every-hour DURATION (whole hours) it asks instead whether rows
kept being parked: it counts the rows parked (on receipt, or by the
dispatcher) in each hour-long window back from now over DURATION, and
alerts when every one of those hours had at least --min-count, printing the
hours, the rows and the fewest and most in an hour. A bug that parks every
delivery trips it; one old parked row does not.

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
it also POSTs what it prints, when it prints anything, to each webhook as
JSON: "text" (the message, as Slack, Mattermost and ntfy-style endpoints
show it), "host", "check" (parked, parked_every_hour, quiet, failing_verification,
destination_down, or unreadable when the inbox could not be read), "exit_code", "at", "lines" and
"findings" (the objects --json prints). It never carries the database's
address or a secret: the reason an inbox could not be read says [--db]
for the SQLite file and [user], [host], [port] and [dbname] for the parts
of a PostgreSQL URL, on stderr too. Only http:// and https:// URLs with a
host; a redirect is not followed; each POST has --notify-timeout, and only
a 2xx answer counts. An empty URL (--notify '', INBOX_NOTIFY=' , ', a
trailing comma) is a mistake: to notify nowhere, unset INBOX_NOTIFY.

It exits 2 when it cannot read the inbox (missing or unreadable database;
notified too) and on any mistake in its flags, arguments or INBOX_ALERT_*
or INBOX_NOTIFY* variables (not notified). It exits 3 when it raised an
alert (as exit 1) and an endpoint of --notify did not take it; each such
endpoint is named on stderr (scheme and host only). An unreadable inbox
whose notification failed still exits 2.

Examples:
   inbox alert --max-age 24h
   inbox alert --max-age 1h --min-count 10 --reason unknown_event
   inbox alert --max-age 24h --missed-after 30m
   inbox alert --parked-every-hour 24h
   inbox alert --parked-every-hour 2d --reason handler_failed --json
   inbox alert --quiet-for 2h --config /etc/inbox/inbox.toml
   inbox alert --quiet-for 30m --source vibe --notify https://hooks.slack.com/services/...
   inbox alert --down-for 10m --notify https://hooks.slack.com/services/...
   inbox alert --failing-for 15m --min-count 3 --config /etc/inbox/inbox.toml --notify https://hooks.slack.com/services/...
   INBOX_NOTIFY=https://ntfy.example.com/inbox,https://chat.example.com/hooks/x inbox alert --max-age 24h
   */15 * * * * inbox /usr/local/bin/inbox alert --db /var/lib/inbox/inbox.db --max-age 24h   (/etc/cron.d: as user inbox)`,
		Flags: []cli.Flag{
			config.DBFlag(),
			ageFlag("max-age", "24h", "parked rows received longer ago than this count", "INBOX_ALERT_MAX_AGE"),
			&cli.Int64Flag{Name: "min-count", Value: 1, Usage: "alert when at least this many parked rows are older than --max-age (with --parked-every-hour: were parked in each hour; with --failing-for: requests of a source failed verification)", EnvVars: []string{"INBOX_ALERT_MIN_COUNT"}},
			ageFlag("parked-every-hour", "", "alert when rows were parked in every hour of this long, counted back from now, instead of on --max-age", "INBOX_ALERT_PARKED_EVERY_HOUR"),
			reasonFlag("count only rows parked for this reason", "INBOX_ALERT_REASON"),
			ageFlag("missed-after", "1h", "also alert on keys refused with 503 longer ago than this and not delivered since", "INBOX_ALERT_MISSED_AFTER"),
			ageFlag("quiet-for", "", "alert instead when a source has had no verified delivery for this long (precise to about a minute)", "INBOX_ALERT_QUIET_FOR"),
			ageFlag("failing-for", "", "alert instead when a source had requests fail verification within this long and none verified since they began (a broken secret rotation)", "INBOX_ALERT_FAILING_FOR"),
			ageFlag("down-for", "", "alert instead when a destination has been down (its rows held, probed) for longer than this", "INBOX_ALERT_DOWN_FOR"),
			&cli.StringSliceFlag{Name: "source", Usage: "with --quiet-for or --failing-for: the source to watch (repeatable); default: those of --config", EnvVars: []string{"INBOX_ALERT_SOURCE"}},
			config.FileFlag("with --quiet-for or --failing-for: the TOML file of [[source]] tables serve reads, whose sources are watched"),
			&cli.StringSliceFlag{Name: "notify", Usage: "also POST the alert as JSON to this http(s) webhook (repeatable)", EnvVars: []string{"INBOX_NOTIFY"}},
			config.DurationFlag("notify-timeout", defaultNotifyTimeout, "how long each --notify POST may take", "INBOX_NOTIFY_TIMEOUT", config.Positive),
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
			rep := &report{check: check.name}
			if err := check.run(c, open, rep); err != nil {
				// Printed and notified, the error never names the database.
				err = errors.New(addressFree(err, c.String("db")))
				rep.check = "unreadable"
				rep.text.Reset()
				rep.json.Reset()
				fmt.Fprintf(&rep.text, "cannot read the inbox: %v\n", err)
				if errs := notify(c, n, rep, alertBroken); len(errs) > 0 {
					return broken(fmt.Errorf("%w; %w", err, errors.Join(errs...)))
				}
				return broken(err)
			}
			if rep.empty() {
				return nil
			}
			out := &rep.text
			if c.Bool("json") {
				out = &rep.json
			}
			if _, err := c.App.Writer.Write(out.Bytes()); err != nil {
				return broken(err)
			}
			if errs := notify(c, n, rep, alertRaised); len(errs) > 0 {
				return cli.Exit(errors.Join(errs...).Error(), alertUnsent)
			}
			// The lines above are the message; main prints nothing more.
			return cli.Exit("", alertRaised)
		},
	}
}

// notify sends rep to n's endpoints, if any, and returns what failed.
func notify(c *cli.Context, n *notifier, rep *report, code int) []error {
	if len(n.urls) == 0 {
		return nil
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	var secrets []string
	if u, err := url.Parse(c.String("db")); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			secrets = append(secrets, pw, url.QueryEscape(pw))
		}
	}
	secrets = append(secrets, os.Getenv("PGPASSWORD"))
	return n.send(c.Context, newNotice(host, rep.check, code, rep.text.Bytes(), rep.json.Bytes(), secrets...))
}

// check is one of alert's checks, its flags read and valid.
type check struct {
	name string
	run  func(c *cli.Context, open Opener, rep *report) error
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
	if c.Int64("min-count") < 1 {
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
	if _, err := age(c, "missed-after"); err != nil {
		return check{}, err
	}
	switch {
	case c.IsSet("down-for"):
		return downCheck(c)
	case c.IsSet("failing-for"):
		return sourceCheck(c, "failing-for", failing, "failing_verification", alertFailing, "max-age", "parked-every-hour", "quiet-for")
	case c.IsSet("quiet-for"):
		return sourceCheck(c, "quiet-for", quiet, "quiet", alertQuiet, "max-age", "parked-every-hour")
	case c.IsSet("source"):
		// --config is not refused: INBOX_CONFIG may be set for serve.
		return check{}, errors.New("--source goes with --quiet-for or --failing-for")
	case c.IsSet("parked-every-hour"):
		if every < time.Hour || every%time.Hour != 0 || every > maxAlertHours*time.Hour {
			return check{}, fmt.Errorf("--parked-every-hour %q: want whole hours from 1h to %dd, such as 24h or 2d", c.String("parked-every-hour"), maxAlertHours/24)
		}
		if c.IsSet("max-age") {
			return check{}, errors.New("--parked-every-hour and --max-age (or INBOX_ALERT_MAX_AGE) are two alerts: run one command for each")
		}
		return check{"parked_every_hour", func(c *cli.Context, open Opener, rep *report) error {
			return alertEveryHour(c, open, every, r, rep)
		}}, nil
	}
	return check{"parked", func(c *cli.Context, open Opener, rep *report) error {
		return alertParked(c, open, maxAge, r, rep)
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
	for _, other := range []string{"max-age", "parked-every-hour", "quiet-for", "failing-for", "source"} {
		if c.IsSet(other) {
			return check{}, fmt.Errorf("--down-for and --%s (or its INBOX_ALERT_ variable) are two alerts: run one command for each", other)
		}
	}
	return check{"destination_down", func(c *cli.Context, open Opener, rep *report) error {
		return alertDown(c, open, d, rep)
	}}, nil
}

// sourceCheck is the check named name that --flag asks for, watching
// sources over d with run: it refuses a d not above 0 and any of the
// flags of others beside it.
func sourceCheck(c *cli.Context, flag string, d time.Duration, name string,
	run func(c *cli.Context, open Opener, d time.Duration, sources []string, rep *report) error, others ...string) (check, error) {
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
	return check{name, func(c *cli.Context, open Opener, rep *report) error {
		return run(c, open, d, sources, rep)
	}}, nil
}

// alertParked reports the parked rows older than maxAge, when there are at
// least --min-count, and the keys missed and the jobs overdue.
func alertParked(c *cli.Context, open Opener, maxAge time.Duration, r inbox.Reason, rep *report) error {
	store, err := openRead(c, open)
	if err != nil {
		return err
	}
	defer store.Close()
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
	late, err := lateJobs(c, store)
	if err != nil {
		return err
	}
	if len(groups) == 0 && late.empty() {
		return nil
	}
	if err := printJSONLines(&rep.json, groups); err != nil {
		return err
	}
	if err := late.printJSON(&rep.json); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(&rep.text, 0, 0, 2, ' ', 0)
	for _, g := range groups {
		fmt.Fprintf(tw, "%s\t%d parked longer than %s\toldest received %s\n",
			cell(string(g.Reason)), g.Count, formatDuration(maxAge), formatTime(g.Oldest))
	}
	late.print(tw)
	return tw.Flush()
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
func alertEveryHour(c *cli.Context, open Opener, every time.Duration, r inbox.Reason, rep *report) error {
	store, err := openRead(c, open)
	if err != nil {
		return err
	}
	defer store.Close()
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
	if err := json.NewEncoder(&rep.json).Encode(e); err != nil {
		return err
	}
	what := "rows were parked"
	if r != "" {
		what = cell(string(r)) + " rows were parked"
	}
	fmt.Fprintf(&rep.text, "%s in every hour of the last %s: %s rows, %d to %d an hour (inbox parked --per-hour)\n",
		what, formatDuration(every), thousands(e.Rows), e.Fewest, e.Most)
	return nil
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
func alertQuiet(c *cli.Context, open Opener, quiet time.Duration, sources []string, rep *report) error {
	store, err := openRead(c, open)
	if err != nil {
		return err
	}
	defer store.Close()
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
	tw := tabwriter.NewWriter(&rep.text, 0, 0, 2, ' ', 0)
	enc := json.NewEncoder(&rep.json)
	for _, s := range sources {
		t, ok := last[s]
		if ok && now.Sub(t) < quiet {
			continue
		}
		q := quietSource{Source: s, LastVerified: t, Never: !ok}
		if ok {
			q.QuietSeconds = now.Sub(t).Round(time.Second).Seconds()
			fmt.Fprintf(tw, "quiet %s\tno verified delivery for %s\tlast %s\t(inbox sources)\n",
				cell(s), formatDuration(now.Sub(t).Round(time.Second)), formatTime(t))
		} else {
			fmt.Fprintf(tw, "quiet %s\tnever had a verified delivery\t\t(inbox sources)\n", cell(s))
		}
		if err := enc.Encode(q); err != nil {
			return err
		}
	}
	return tw.Flush()
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
