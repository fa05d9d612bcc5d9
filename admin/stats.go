package admin

import (
	"encoding/json"
	"fmt"
	"slices"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
)

func statsCommand() *cli.Command {
	return &cli.Command{
		Name:  "stats",
		Usage: "count rows per status and parked rows per reason",
		Description: `Examples:
   inbox stats
   inbox stats --json`,
		Flags: []cli.Flag{DBFlag(), jsonFlag()},
		Action: func(c *cli.Context) error {
			store, err := openRead(c)
			if err != nil {
				return err
			}
			defer store.Close()
			st, err := store.Stats(c.Context)
			if err != nil {
				return err
			}
			w := c.App.Writer
			if c.Bool("json") {
				return json.NewEncoder(w).Encode(st)
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "STATUS\tROWS")
			for _, s := range inbox.Statuses {
				fmt.Fprintf(tw, "%s\t%d\n", s, st.ByStatus[s])
			}
			if len(st.ByReason) > 0 {
				fmt.Fprintln(tw, "\nPARKED REASON\tROWS")
				reasons := make([]inbox.Reason, 0, len(st.ByReason))
				for r := range st.ByReason {
					reasons = append(reasons, r)
				}
				slices.Sort(reasons)
				for _, r := range reasons {
					fmt.Fprintf(tw, "%s\t%d\n", r, st.ByReason[r])
				}
			}
			return tw.Flush()
		},
	}
}
