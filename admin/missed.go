package admin

import (
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/inbox"
)

func missedCommand(open Opener) *cli.Command {
	return &cli.Command{
		Name:  "missed",
		Usage: "list keys answered 503 (the store was down) and not delivered since",
		Description: `While the store cannot take a write, serve answers 503 and the provider
retries; when the outage outlasts its attempts (Sume: 10, 10 s each), the
job is never delivered. serve remembers each refused key in memory (up to
100,000; inbox_refusals_dropped_total counts the rest) and writes it to the
database once the store takes writes again. This lists them, first refused
first: source, key, event, first and last refusal, how many times. A later
delivery of the key removes it. Fetch Sume's jobs back with inbox redeliver
--missed; inbox alert mails those older than --missed-after.

Examples:
   inbox missed
   inbox missed --json | jq -r .job_id
   SUME_API_KEY=... inbox redeliver --missed`,
		Flags: []cli.Flag{config.DBFlag(), readTimeoutFlag(), jsonFlag(), wideFlag()},
		Action: func(c *cli.Context) error {
			if err := config.NoArgs(c); err != nil {
				return err
			}
			ctx, cancel, err := readContext(c)
			if err != nil {
				return err
			}
			defer cancel()
			store, err := openRead(c, open)
			if err != nil {
				return err
			}
			defer store.Close()
			missed, err := store.Missed(ctx, time.Time{})
			if err != nil {
				return stopped(c, ctx, err, 0)
			}
			return printRows(c, missed, "SOURCE\tKEY\tEVENT\tFIRST REFUSED\tLAST REFUSED\tREFUSALS", func(r inbox.Refusal) []string {
				return []string{r.Source, r.Key, dash(r.Event), formatTime(r.First), formatTime(r.Last), strconv.FormatInt(r.Count, 10)}
			})
		},
	}
}
