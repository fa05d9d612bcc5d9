package admin

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/inbox"
)

func purgeCommand(open Opener) *cli.Command {
	return &cli.Command{
		Name:  "purge",
		Usage: "delete done, ignored and dismissed rows not delivered for longer than the retention",
		Description: `Deletes done, ignored and dismissed rows last delivered more than --older-than ago
(90d unless given; at least 7d), parked ones too with --include-parked, and
parked ones of each --reason; never new rows (waiting or in flight), which
the application still has to take, and never the rows the dispatcher
parked (handler_failed, handler_rejected, too_large_for_destination: work
the application never finished) unless --reason names them. Retention counts from a row's last
delivery (last_seen_at): a row is the acceptance record that makes the next
delivery of its job a counted repeat rather than new work, so it is kept
as long as the platform keeps a run's history (90 days by default, at
least 7, beyond Vibe's 96-hour delivery lifetime and Sume's 10 attempts)
and any redelivery you may ask for. A done row is kept while a parked (or
dismissed) row of its job stays (parked rows past retention go first, and the done rows they
kept with them): were it gone, reprocessing that parked row would hand the
job on again as new. Prints the rows deleted per status (parked ones per
reason), and the rows kept.

Examples:
   inbox purge --dry-run
   inbox purge --older-than 30d
   inbox purge --include-parked --json
   inbox purge --older-than 180d --reason handler_rejected --dry-run`,
		Flags: []cli.Flag{
			config.DBFlag(),
			&cli.StringFlag{Name: "older-than", Value: "90d", Usage: "delete rows last delivered longer ago than this, at least 7d (30d, 180d, 240h)", EnvVars: []string{"INBOX_PURGE_OLDER_THAN"}},
			&cli.BoolFlag{Name: "include-parked", Usage: "delete old rows parked on receipt too (not the dispatcher's: name those with --reason)", EnvVars: []string{"INBOX_PURGE_INCLUDE_PARKED"}},
			&cli.StringSliceFlag{Name: "reason", Usage: "delete old parked rows with this reason too; repeat for several (--reason handler_failed)", EnvVars: []string{"INBOX_PURGE_REASON"}},
			dryRunFlag(),
			busyTimeoutFlag(),
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if err := config.NoArgs(c); err != nil {
				return err
			}
			olderThan, err := age(c, "older-than")
			if err != nil {
				return err
			}
			if olderThan < inbox.MinRetention {
				return fmt.Errorf("--older-than %q: the retention must be at least %dd, beyond the providers' delivery lifetimes (see --help)",
					c.String("older-than"), inbox.MinRetention/(24*time.Hour))
			}
			var reasons, named []inbox.Reason
			if c.Bool("include-parked") {
				reasons = inbox.ReceiptReasons()
			}
			for _, name := range c.StringSlice("reason") {
				r := inbox.Reason(name)
				if !r.Valid() {
					return fmt.Errorf("unknown reason %q: want one of %s", r, joinReasons())
				}
				named = append(named, r)
				if !slices.Contains(reasons, r) {
					reasons = append(reasons, r)
				}
			}
			sel := inbox.PurgeSelection{
				Before:   time.Now().Add(-olderThan),
				Statuses: []inbox.Status{inbox.StatusDone, inbox.StatusIgnored, inbox.StatusDismissed},
				Reasons:  reasons,
			}
			opened, count := openWrite, inbox.Store.Purge
			if c.Bool("dry-run") {
				opened, count = openRead, inbox.Store.Purgeable
			}
			store, err := opened(c, open)
			if err != nil {
				return err
			}
			defer store.Close()
			rep, err := count(store, c.Context, sel)
			if err != nil {
				return err
			}
			w := c.App.Writer
			if c.Bool("json") {
				return json.NewEncoder(w).Encode(struct {
					inbox.PurgeReport
					DryRun bool `json:"dry_run"`
				}{rep, c.Bool("dry-run")})
			}
			head := "STATUS\tDELETED"
			if c.Bool("dry-run") {
				head = "STATUS\tWOULD DELETE"
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, head)
			for _, st := range sel.Statuses {
				fmt.Fprintln(tw, tableLine(string(st), strconv.FormatInt(rep.Deleted[st], 10)))
			}
			if len(reasons) > 0 {
				fmt.Fprintln(tw, tableLine(string(inbox.StatusParked), strconv.FormatInt(rep.Deleted[inbox.StatusParked], 10)))
			}
			// Per reason: those named, and those --include-parked found.
			for _, r := range reasons {
				if n := rep.DeletedParked[r]; n > 0 || slices.Contains(named, r) {
					fmt.Fprintln(tw, tableLine("  "+string(r), strconv.FormatInt(n, 10)))
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if rep.KeptDone > 0 {
				fmt.Fprintf(w, "done rows kept while parked or dismissed rows of their job stay: %d\n", rep.KeptDone)
			}
			if rep.KeptUnfinished > 0 {
				fmt.Fprintf(w, "rows kept as unfinished work (new, or parked by the dispatcher and not named with --reason): %d\n", rep.KeptUnfinished)
			}
			return nil
		},
	}
}
