package admin

import (
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

func alertCommand() *cli.Command {
	return &cli.Command{
		Name:  "alert",
		Usage: "for cron: print parked rows older than --max-age, exit 1 if there are enough",
		Description: `Counts the parked rows received more than --max-age ago. While there are
fewer than --min-count it prints nothing and exits 0, so cron mails nothing;
otherwise it prints one line per reason (count, oldest) and exits 1. It
exits 2 when it cannot read the inbox (missing or unreadable database) and on
any mistake in its flags, arguments or INBOX_ALERT_* variables.

Examples:
   inbox alert --max-age 24h
   inbox alert --max-age 1h --min-count 10 --reason unknown_event
   */15 * * * * inbox /usr/local/bin/inbox alert --db /var/lib/inbox/inbox.db --max-age 24h   (/etc/cron.d: as user inbox)`,
		Flags: []cli.Flag{
			DBFlag(),
			ageFlag("max-age", "24h", "parked rows received longer ago than this count", "INBOX_ALERT_MAX_AGE"),
			&cli.Int64Flag{Name: "min-count", Value: 1, Usage: "alert when at least this many parked rows are older than --max-age", EnvVars: []string{"INBOX_ALERT_MIN_COUNT"}},
			reasonFlag("count only rows parked for this reason", "INBOX_ALERT_REASON"),
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
			store, err := openRead(c)
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
				return nil
			}
			w := c.App.Writer
			if c.Bool("json") {
				if err := printJSONLines(w, groups); err != nil {
					return broken(err)
				}
				return cli.Exit("", alertRaised)
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, g := range groups {
				fmt.Fprintf(tw, "%s\t%d parked longer than %s\toldest received %s\n",
					g.Reason, g.Count, formatDuration(maxAge), formatTime(g.Oldest))
			}
			if err := tw.Flush(); err != nil {
				return broken(err)
			}
			// The lines above are the message; main prints nothing more.
			return cli.Exit("", alertRaised)
		},
	}
}
