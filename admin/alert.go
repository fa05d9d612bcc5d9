package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
)

// Alert's exit codes besides 0 (fewer than --min-count old parked rows),
// for cron and monitoring. A mistake in the command line or the
// environment is broken too: exit 1 would read as an alert.
const (
	alertRaised = 1 // the lines printed say what
	alertBroken = 2 // the inbox could not be read, or alert was misconfigured
)

// broken is err with alert's exit code 2.
func broken(err error) error { return cli.Exit(err, alertBroken) }

func alertCommand(open Opener) *cli.Command {
	return &cli.Command{
		Name:  "alert",
		Usage: "for cron: print parked rows older than --max-age (or parked in every hour), missed and overdue jobs; exit 1 if any",
		Description: `Counts the parked rows received more than --max-age ago. While there are
fewer than --min-count it prints nothing and exits 0, so cron mails nothing;
otherwise it prints one line per reason (count, oldest) and exits 1.

With --parked-every-hour DURATION (whole hours) it asks instead whether rows
kept being parked: it counts the rows parked (on receipt, or by the
dispatcher) in each hour-long window back from now over DURATION, and
alerts when every one of those hours had at least --min-count, printing the
hours, the rows and the fewest and most in an hour. A bug that parks every
delivery trips it; one old parked row does not.

It also prints, and exits 1 for, each key refused with 503 (the store was
down) more than --missed-after ago and not delivered since (inbox missed),
and each expected job waiting past its window (inbox expected --overdue).

It exits 2 when it cannot read the inbox (missing or unreadable database) and
on any mistake in its flags, arguments or INBOX_ALERT_* variables.

Examples:
   inbox alert --max-age 24h
   inbox alert --max-age 1h --min-count 10 --reason unknown_event
   inbox alert --max-age 24h --missed-after 30m
   inbox alert --parked-every-hour 24h
   inbox alert --parked-every-hour 2d --reason handler_failed --json
   */15 * * * * inbox /usr/local/bin/inbox alert --db /var/lib/inbox/inbox.db --max-age 24h   (/etc/cron.d: as user inbox)`,
		Flags: []cli.Flag{
			DBFlag(),
			ageFlag("max-age", "24h", "parked rows received longer ago than this count", "INBOX_ALERT_MAX_AGE"),
			&cli.Int64Flag{Name: "min-count", Value: 1, Usage: "alert when at least this many parked rows are older than --max-age (with --parked-every-hour: were parked in each hour)", EnvVars: []string{"INBOX_ALERT_MIN_COUNT"}},
			ageFlag("parked-every-hour", "", "alert when rows were parked in every hour of this long, counted back from now, instead of on --max-age", "INBOX_ALERT_PARKED_EVERY_HOUR"),
			reasonFlag("count only rows parked for this reason", "INBOX_ALERT_REASON"),
			ageFlag("missed-after", "1h", "also alert on keys refused with 503 longer ago than this and not delivered since", "INBOX_ALERT_MISSED_AFTER"),
			jsonFlag(),
		},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return broken(fmt.Errorf("%w (see --help)", err))
		},
		Action: func(c *cli.Context) error {
			if err := NoArgs(c); err != nil {
				return broken(err)
			}
			maxAge, err := age(c, "max-age")
			if err != nil {
				return broken(err)
			}
			if c.Int64("min-count") < 1 {
				return broken(errors.New("--min-count must be at least 1"))
			}
			r, err := reason(c)
			if err != nil {
				return broken(err)
			}
			every, err := age(c, "parked-every-hour")
			if err != nil {
				return broken(err)
			}
			if c.IsSet("parked-every-hour") {
				return alertEveryHour(c, open, every, r)
			}
			store, err := openRead(c, open)
			if err != nil {
				return broken(err)
			}
			defer store.Close()
			groups, err := store.ParkedByReason(c.Context, inbox.Filter{
				Reason: r,
				Before: time.Now().Add(-maxAge),
			})
			if err != nil {
				return broken(err)
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
				return broken(err)
			}
			if len(groups) == 0 && late.empty() {
				return nil
			}
			w := c.App.Writer
			if c.Bool("json") {
				if err := printJSONLines(w, groups); err != nil {
					return broken(err)
				}
				if err := late.printJSON(w); err != nil {
					return broken(err)
				}
				return cli.Exit("", alertRaised)
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, g := range groups {
				fmt.Fprintf(tw, "%s\t%d parked longer than %s\toldest received %s\n",
					cell(string(g.Reason)), g.Count, formatDuration(maxAge), formatTime(g.Oldest))
			}
			late.print(tw)
			if err := tw.Flush(); err != nil {
				return broken(err)
			}
			// The lines above are the message; main prints nothing more.
			return cli.Exit("", alertRaised)
		},
	}
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
func alertEveryHour(c *cli.Context, open Opener, every time.Duration, r inbox.Reason) error {
	if every < time.Hour || every%time.Hour != 0 || every > maxAlertHours*time.Hour {
		return broken(fmt.Errorf("--parked-every-hour %q: want whole hours from 1h to %dd, such as 24h or 2d", c.String("parked-every-hour"), maxAlertHours/24))
	}
	if c.IsSet("max-age") {
		return broken(errors.New("--parked-every-hour and --max-age (or INBOX_ALERT_MAX_AGE) are two alerts: run one command for each"))
	}
	store, err := openRead(c, open)
	if err != nil {
		return broken(err)
	}
	defer store.Close()
	hours := int(every / time.Hour)
	counts, err := store.ParkedPerHour(c.Context, inbox.Filter{Reason: r}, time.Now(), hours)
	if err != nil {
		return broken(err)
	}
	rep := everyHour{Hours: hours, PerHour: counts, Fewest: counts[0].Count}
	for _, h := range counts {
		rep.Rows += h.Count
		rep.Fewest, rep.Most = min(rep.Fewest, h.Count), max(rep.Most, h.Count)
	}
	if rep.Fewest < c.Int64("min-count") {
		return nil
	}
	w := c.App.Writer
	if c.Bool("json") {
		if err := json.NewEncoder(w).Encode(rep); err != nil {
			return broken(err)
		}
		return cli.Exit("", alertRaised)
	}
	what := "rows were parked"
	if r != "" {
		what = cell(string(r)) + " rows were parked"
	}
	if _, err := fmt.Fprintf(w, "%s in every hour of the last %s: %s rows, %d to %d an hour (inbox parked --per-hour)\n",
		what, formatDuration(every), thousands(rep.Rows), rep.Fewest, rep.Most); err != nil {
		return broken(err)
	}
	return cli.Exit("", alertRaised)
}
