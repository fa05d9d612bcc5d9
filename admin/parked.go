package admin

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
)

func parkedCommand() *cli.Command {
	return &cli.Command{
		Name:  "parked",
		Usage: "list parked rows, newest first, or count them per reason",
		Description: `Lists the rows parked because they can never be processed as received:
id, source, reason, event, size, received time and deliveries. With --group-by reason,
one line per reason with its count and the oldest and newest receipt.

Examples:
   inbox parked
   inbox parked --group-by reason
   inbox parked --reason unknown_event --since 24h
   inbox parked --json | jq -r .id`,
		Flags: []cli.Flag{
			DBFlag(),
			&cli.StringFlag{Name: "group-by", Usage: "reason: one line per reason", EnvVars: []string{"INBOX_GROUP_BY"}},
			ageFlag("since", "", "only rows received within this long", "INBOX_SINCE"),
			reasonFlag("only rows parked for this reason", "INBOX_PARKED_REASON"),
			sourceFlag("only rows of this source", "INBOX_PARKED_SOURCE"),
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if err := NoArgs(c); err != nil {
				return err
			}
			if g := c.String("group-by"); g != "" && g != "reason" {
				return fmt.Errorf("--group-by %q: only reason is supported", g)
			}
			since, err := age(c, "since")
			if err != nil {
				return err
			}
			r, err := reason(c)
			if err != nil {
				return err
			}
			f := inbox.Filter{Status: inbox.StatusParked, Reason: r, Source: c.String("source")}
			if since > 0 {
				f.Since = time.Now().Add(-since)
			}
			store, err := openRead(c)
			if err != nil {
				return err
			}
			defer store.Close()
			if c.String("group-by") != "" {
				groups, err := store.ParkedByReason(c.Context, f)
				if err != nil {
					return err
				}
				return printRows(c, groups, "REASON\tCOUNT\tOLDEST\tNEWEST", func(g inbox.ReasonCount) string {
					return fmt.Sprintf("%s\t%d\t%s\t%s", g.Reason, g.Count, formatTime(g.Oldest), formatTime(g.Newest))
				})
			}
			rows, err := store.List(c.Context, f)
			if err != nil {
				return err
			}
			return printRows(c, rows, "ID\tSOURCE\tREASON\tEVENT\tSIZE\tRECEIVED\tDELIVERIES", func(e inbox.Event) string {
				return fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%s\t%d", e.ID, e.Source, e.Reason, dash(e.Event), e.Size,
					formatTime(e.ReceivedAt), e.Deliveries)
			})
		},
	}
}
