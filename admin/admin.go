// Package admin holds the operator's commands, one file each. Every command
// opens the inbox database on its own, so it works while serve runs.
package admin

import (
	"encoding/json"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
)

// Commands returns the admin commands.
func Commands() []*cli.Command {
	return []*cli.Command{
		listCommand(),
		statsCommand(),
	}
}

// DBFlag is the database path every command takes.
var DBFlag = &cli.StringFlag{
	Name:    "db",
	Usage:   "path of the inbox database",
	Value:   "inbox.db",
	EnvVars: []string{"INBOX_DB"},
}

var jsonFlag = &cli.BoolFlag{
	Name:    "json",
	Usage:   "print JSON, one object per line, for scripts",
	EnvVars: []string{"INBOX_JSON"},
}

// openRead opens the inbox named by --db for reading; it never creates one.
func openRead(c *cli.Context) (*inbox.Store, error) {
	return inbox.Open(c.Context, c.String(DBFlag.Name), inbox.Options{ReadOnly: true})
}

// printJSONLines writes each value as one line of JSON.
func printJSONLines[T any](w io.Writer, vals []T) error {
	enc := json.NewEncoder(w)
	for _, v := range vals {
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return nil
}

// timeFormat is how tables print times: UTC, to the second.
const timeFormat = "2006-01-02T15:04:05Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }
