package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
)

func reprocessCommand() *cli.Command {
	return &cli.Command{
		Name:      "reprocess",
		Usage:     "classify parked rows again, with today's rules",
		ArgsUsage: "[ID...]",
		Description: `Runs the current classification (--event, --max-body: the same flags and
defaults as serve) over the stored bodies of parked rows, with each row's
recorded delivery timestamp; the signature is not checked again, it was
checked on receipt. A row that is now storable becomes new: it becomes its
job's row, takes over a parked job row, or is folded into the job's new or
done row when that holds the same event and status (its deliveries added,
the parked row removed); when the job's row differs it stays parked
conflict. The rest stay parked with their reason as classified now.
Needs row ids, --reason or --all; it never runs by itself. --dry-run runs
the same transactions and rolls them back.

Examples:
   inbox reprocess --reason unknown_event --event job.completed --event job.exploded --dry-run
   inbox reprocess --reason too_large --max-body 4MiB
   inbox reprocess job_1 job_2
   inbox reprocess --all --json`,
		Flags: []cli.Flag{
			DBFlag,
			reasonFlag("reprocess every parked row with this reason"),
			&cli.BoolFlag{Name: "all", Usage: "reprocess every parked row", EnvVars: []string{"INBOX_REPROCESS_ALL"}},
			dryRunFlag(),
			EventsFlag(),
			MaxBodyFlag(),
			busyTimeoutFlag(),
			jsonFlag,
		},
		Action: func(c *cli.Context) error {
			r, err := reason(c)
			if err != nil {
				return err
			}
			ids, err := args(c)
			if err != nil {
				return err
			}
			sel := inbox.Selection{IDs: ids, Reason: r, All: c.Bool("all")}
			if n := btoi(len(sel.IDs) > 0) + btoi(sel.Reason != "") + btoi(sel.All); n != 1 {
				return errors.New("reprocess needs exactly one of: row ids, --reason or --all")
			}
			rules, err := Rules(c)
			if err != nil {
				return err
			}
			store, err := openWrite(c)
			if err != nil {
				return err
			}
			defer store.Close()
			rep, err := store.Reprocess(c.Context, sel, rules, c.Bool("dry-run"))
			if err != nil {
				return err
			}
			w := c.App.Writer
			if c.Bool(jsonFlag.Name) {
				return json.NewEncoder(w).Encode(rep)
			}
			if rep.DryRun {
				fmt.Fprintln(w, "dry run: nothing changed")
			}
			fmt.Fprintf(w, "moved to new: %d (%d folded into their job's row)\n", rep.Moved, rep.Merged)
			reasons := make([]inbox.Reason, 0, len(rep.Parked))
			for r := range rep.Parked {
				reasons = append(reasons, r)
			}
			if len(reasons) == 0 {
				return nil
			}
			slices.Sort(reasons)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "STILL PARKED\tROWS")
			for _, r := range reasons {
				fmt.Fprintf(tw, "%s\t%d\n", r, rep.Parked[r])
			}
			return tw.Flush()
		},
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
