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

// minRetention is the shortest --older-than purge takes: anything shorter
// would delete rows the provider is still retrying.
const minRetention = time.Hour

func purgeCommand() *cli.Command {
	return &cli.Command{
		Name:  "purge",
		Usage: "delete done and ignored rows not delivered for longer than the retention",
		Description: `Deletes done and ignored rows last delivered more than --older-than ago
(at least 1h), and parked ones too with --include-parked; never new rows, which
the application still has to take. Retention counts from a row's last
delivery (last_seen_at): a row is what makes the next delivery of its job a
counted repeat rather than a new job, so keep rows well beyond the provider's
retry window and any redelivery you may ask for (30 days or more). A done row
is kept while a parked row of its job stays (with --include-parked, parked
rows past retention go first, and the done rows they kept with them): were it
gone, reprocessing that parked row would hand the job on again as new.
Prints the rows deleted per status, and the done rows kept.

Examples:
   inbox purge --older-than 30d --dry-run
   inbox purge --older-than 30d
   inbox purge --older-than 90d --include-parked --json`,
		Flags: []cli.Flag{
			DBFlag(),
			ageFlag("older-than", "", "required: delete rows last delivered longer ago than this, at least 1h", "INBOX_PURGE_OLDER_THAN"),
			&cli.BoolFlag{Name: "include-parked", Usage: "delete old parked rows too", EnvVars: []string{"INBOX_PURGE_INCLUDE_PARKED"}},
			dryRunFlag(),
			busyTimeoutFlag(),
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if err := NoArgs(c); err != nil {
				return err
			}
			olderThan, err := age(c, "older-than")
			if err != nil {
				return err
			}
			if olderThan <= 0 {
				return errors.New("purge needs --older-than, a retention such as 30d")
			}
			if olderThan < minRetention {
				return fmt.Errorf("--older-than %s: the retention must be at least %s", formatDuration(olderThan), formatDuration(minRetention))
			}
			before := time.Now().Add(-olderThan)
			statuses := []inbox.Status{inbox.StatusDone, inbox.StatusIgnored}
			if c.Bool("include-parked") {
				statuses = append(statuses, inbox.StatusParked)
			}
			open, count := openWrite, (*inbox.Store).Purge
			if c.Bool("dry-run") {
				open, count = openRead, (*inbox.Store).Purgeable
			}
			store, err := open(c)
			if err != nil {
				return err
			}
			defer store.Close()
			rep, err := count(store, c.Context, before, statuses)
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
			for _, st := range statuses {
				fmt.Fprintf(tw, "%s\t%d\n", st, rep.Deleted[st])
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if rep.KeptDone > 0 {
				_, err = fmt.Fprintf(w, "done rows kept while parked rows of their job stay: %d\n", rep.KeptDone)
			}
			return err
		},
	}
}
