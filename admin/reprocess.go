package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/inbox"
)

func reprocessCommand(open Opener) *cli.Command {
	return &cli.Command{
		Name:      "reprocess",
		Usage:     "classify parked rows again, with today's rules",
		ArgsUsage: "[ID...]",
		Description: `Runs the current classification (--event, --max-body: the same flags and
defaults as serve) over the stored bodies of parked rows; the signature is
not checked again. Without --config only Sume rows are classified; with
--config, every source's rows under its own events and max_body. The rows
of one job are taken together, so the outcome never depends on the order
of the ids; what becomes of each row is in docs/operating.md, "Reprocess
after a fix". Prints each row once, by where it ended. Needs row ids,
--reason or --all; it never runs by itself. A dismissed row (inbox
dismiss) is taken only by id, and brought back: it ends new, or parked
again, its dismissal cleared; --reason and --all pass over it. --dry-run runs the same
transactions and rolls them back: it prints what a real run does.

Examples:
   inbox reprocess --reason unknown_event --event job.completed --event job.exploded --dry-run
   inbox reprocess --reason too_large --max-body 4MiB
   inbox reprocess job_1 job_2
   inbox reprocess --config /etc/inbox/inbox.toml --reason handler_failed
   inbox reprocess --config inbox.toml github/0b5c9d4e-1f2a-11ef-9f1b-2d3e4f5a6b7c
   inbox reprocess --all --json`,
		Flags: []cli.Flag{
			config.DBFlag(),
			config.FileFlag("the TOML file of [[source]] tables serve reads: classify every source's rows under its own events and max_body (its secrets are not read); without it only Sume rows, under --event and --max-body"),
			reasonFlag("reprocess every parked row with this reason", "INBOX_REPROCESS_REASON"),
			&cli.BoolFlag{Name: "all", Usage: "reprocess every parked row", EnvVars: []string{"INBOX_REPROCESS_ALL"}},
			dryRunFlag(),
			config.EventsFlag(),
			config.MaxBodyFlag(),
			busyTimeoutFlag(),
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			r, err := reason(c)
			if err != nil {
				return err
			}
			ids, err := idArgs(c)
			if err != nil {
				return err
			}
			sel := inbox.Selection{IDs: ids, Reason: r, All: c.Bool("all")}
			if n := btoi(len(sel.IDs) > 0) + btoi(sel.Reason != "") + btoi(sel.All); n != 1 {
				return errors.New("reprocess needs exactly one of: row ids, --reason or --all")
			}
			rules, err := config.SourceRules(c)
			if err != nil {
				return err
			}
			store, err := openWrite(c, open)
			if err != nil {
				return err
			}
			defer store.Close()
			rep, err := store.Reprocess(c.Context, sel, rules, c.Bool("dry-run"))
			if err != nil {
				// Say what the batches before the failed one did.
				if printErr := printReprocess(c, rep); printErr != nil {
					return errors.Join(err, printErr)
				}
				return err
			}
			return printReprocess(c, rep)
		},
	}
}

// printReprocess prints the report: each row counted once, by where it
// ended.
func printReprocess(c *cli.Context, rep inbox.ReprocessReport) error {
	w := c.App.Writer
	if c.Bool("json") {
		return json.NewEncoder(w).Encode(rep)
	}
	if rep.DryRun {
		fmt.Fprintln(w, "dry run: nothing changed")
	}
	fmt.Fprintf(w, "moved to new: %d\n", rep.Moved)
	fmt.Fprintf(w, "folded into the job's new or done row: %d\n", rep.Folded)
	if rep.Changed > 0 {
		fmt.Fprintf(w, "changed meanwhile, left as they are: %d\n", rep.Changed)
	}
	if rep.JobRows > 0 {
		fmt.Fprintf(w, "parked job rows classified along with a selected row (counted here too): %d\n", rep.JobRows)
	}
	reasons := slices.Sorted(maps.Keys(rep.Parked))
	if len(reasons) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STILL PARKED\tROWS")
	for _, r := range reasons {
		fmt.Fprintf(tw, "%s\t%d\n", cell(string(r)), rep.Parked[r])
	}
	return tw.Flush()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
