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

func purgeCommand() *cli.Command {
	return &cli.Command{
		Name:  "purge",
		Usage: "delete done and ignored rows received before the retention",
		Description: `Deletes done and ignored rows received more than --older-than ago, and
parked ones too with --include-parked; never new rows, which the application
still has to take. Retention counts from receipt (received_at), the clock the
provider's retries and redeliveries run on, not from when a row was handed on.
Keep receipts well beyond the provider's retry window and any redelivery you
may ask for (30 days or more): a job whose row is gone is stored as new again
when it is delivered again. Prints the rows deleted per status.

Examples:
   inbox purge --older-than 30d --dry-run
   inbox purge --older-than 30d
   inbox purge --older-than 90d --include-parked --json`,
		Flags: []cli.Flag{
			DBFlag,
			ageFlag("older-than", "", "required: delete rows received longer ago than this", "INBOX_PURGE_OLDER_THAN"),
			&cli.BoolFlag{Name: "include-parked", Usage: "delete old parked rows too", EnvVars: []string{"INBOX_PURGE_INCLUDE_PARKED"}},
			dryRunFlag(),
			busyTimeoutFlag(),
			jsonFlag,
		},
		Action: func(c *cli.Context) error {
			olderThan, err := age(c, "older-than")
			if err != nil {
				return err
			}
			if olderThan <= 0 {
				return errors.New("purge needs --older-than, a retention such as 30d")
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
			counts, err := count(store, c.Context, before, statuses)
			if err != nil {
				return err
			}
			w := c.App.Writer
			if c.Bool(jsonFlag.Name) {
				return json.NewEncoder(w).Encode(struct {
					Deleted map[inbox.Status]int64 `json:"deleted"`
					DryRun  bool                   `json:"dry_run"`
				}{counts, c.Bool("dry-run")})
			}
			head := "STATUS\tDELETED"
			if c.Bool("dry-run") {
				head = "STATUS\tWOULD DELETE"
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, head)
			for _, st := range statuses {
				fmt.Fprintf(tw, "%s\t%d\n", st, counts[st])
			}
			return tw.Flush()
		},
	}
}
