package admin

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
)

func listCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list rows, newest first",
		Description: `Lists the inbox's rows without their bodies. A Sume row's id is its key
(the job_id); another source's is <source>/<key>.

Examples:
   inbox list
   inbox list --status parked
   inbox list --status new --json | jq -r .id
   inbox list --source github --status parked`,
		Flags: []cli.Flag{
			DBFlag(),
			sourceFlag("only rows of this source (sume, or a [[source]] name of --config)", "INBOX_LIST_SOURCE"),
			&cli.StringFlag{Name: "status", Usage: "only rows with this status (new, done, parked, ignored)", EnvVars: []string{"INBOX_STATUS"}},
			&cli.IntFlag{Name: "limit", Usage: "at most this many rows (0: all)", Value: 100, EnvVars: []string{"INBOX_LIMIT"}},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if err := NoArgs(c); err != nil {
				return err
			}
			status := inbox.Status(c.String("status"))
			if status != "" && !status.Valid() {
				return fmt.Errorf("unknown status %q: want new, done, parked or ignored", status)
			}
			source, err := sourceName(c)
			if err != nil {
				return err
			}
			store, err := openRead(c)
			if err != nil {
				return err
			}
			defer store.Close()
			rows, err := store.List(c.Context, inbox.Filter{Source: source, Status: status, Limit: c.Int("limit")})
			if err != nil {
				return err
			}
			return printRows(c, rows, "ID\tSOURCE\tSTATUS\tREASON\tEVENT\tSIZE\tDELIVERIES\tRECEIVED", func(e inbox.Event) string {
				return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s", e.ID, e.Source, e.Status, dash(string(e.Reason)),
					dash(e.Event), e.Size, e.Deliveries, formatTime(e.ReceivedAt))
			})
		},
	}
}

// dash stands in for an empty table cell.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// sourceFlag is --source, with an environment variable of each command's
// own, as --reason has.
func sourceFlag(usage, env string) *cli.StringFlag {
	return &cli.StringFlag{Name: "source", Usage: usage, EnvVars: []string{env}}
}

// sourceName reads --source; "" when it is not set.
func sourceName(c *cli.Context) (string, error) {
	s := c.String("source")
	if s != "" && !validName(s) {
		return "", fmt.Errorf("--source %q: a source name is 1 to 32 of a-z, 0-9, - and _", s)
	}
	return s, nil
}
