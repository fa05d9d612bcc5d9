package admin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/inbox"
)

func listCommand(open Opener) *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list rows, newest first",
		Description: `Lists the inbox's rows without their bodies, at most --limit (100; 0 for
all): when there are more, it says so on stderr ("100 of 2,345 rows; --limit
0 for all"), so a script's stdout holds rows only. A Sume row's id is its key
(the job_id); another source's is <source>/<key>. The table escapes control
and bidi characters and fits 120 columns: the widest fields are cut with
"…", a long id in the middle (gh/sha256:3f1a…9c2e), which no command takes
for an id; --wide prints every id whole (and a field to 72 characters),
--json every field whole (one not UTF-8 also as <field>_base64, its exact
bytes). Rows are written as they are read (a
table in blocks of 256, each aligned on its own), so a million rows start
at once; past --timeout (30s) it stops, saying how many rows it wrote, and
exits 1.

--since and --until take an RFC 3339 time or an age (24h: since a day ago);
--event and --job-status (the body's "status": COMPLETED, ERROR, ...) match
exactly; --destination keeps the rows routed to that destination, and with
--status only those whose pair with it has that status. Without
--destination, --status parked takes a row parked by any of its
destinations (another may still have it); any other status is the row's
own, which sums up its destinations. --contains searches the bodies of the newest --scan-limit
(100,000) rows the other flags select for its text, byte for byte (no
wildcards, case-sensitive), and says on stderr when older rows were left
unsearched ("scanned the newest 100,000 rows; older ones not searched:
raise --scan-limit").

Examples:
   inbox list
   inbox list --status parked
   inbox list --wide
   inbox list --status new --limit 0 --json | jq -r .id
   inbox list --source github --status parked
   inbox list --job-status ERROR --since 24h
   inbox list --event job.failed --since 2026-12-01T09:00:00Z --until 2026-12-01T10:00:00Z
   inbox list --destination crm --status parked
   inbox list --contains job_8f3a --scan-limit 0
   inbox list --limit 0 --json --timeout 10m > rows.jsonl`,
		Flags: append([]cli.Flag{
			config.DBFlag(),
			sourceFlag("only rows of this source (sume, or a [[source]] name of --config)", "INBOX_LIST_SOURCE"),
			&cli.StringFlag{Name: "status", Usage: "only rows with this status (new, done, parked, ignored, dismissed)", EnvVars: []string{"INBOX_STATUS"}},
			&cli.IntFlag{Name: "limit", Usage: "at most this many rows, newest first; 0 for all (--limit 0)", Value: 100, EnvVars: []string{"INBOX_LIMIT"}},
			readTimeoutFlag(),
			jsonFlag(),
			wideFlag(),
		}, findFlags("INBOX_LIST_", "INBOX_LIST_SINCE", "")...),
		Action: func(c *cli.Context) error {
			if err := config.NoArgs(c); err != nil {
				return err
			}
			status := inbox.Status(c.String("status"))
			if status != "" && !status.Valid() {
				return fmt.Errorf("unknown status %q: want new, done, parked, ignored or dismissed", status)
			}
			source, err := sourceName(c)
			if err != nil {
				return err
			}
			limit := c.Int("limit")
			if limit < 0 {
				return fmt.Errorf("--limit %d: want 0 (all rows) or more", limit)
			}
			f := inbox.Filter{Source: source, Status: status, Limit: limit}
			if err := findFilter(c, &f, time.Now(), false); err != nil {
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
			if f.Destination != "" {
				if err := knownDestination(ctx, store, f.Destination, nil); err != nil {
					return err
				}
			}
			p := newRowPrinter(c, listHead, listCells)
			err = store.Each(ctx, f, p.add)
			if ferr := p.flush(); err == nil {
				err = ferr
			}
			if err == nil {
				err = scanNote(ctx, c, store, f)
			}
			if err != nil {
				return stopped(c, ctx, err, p.written)
			}
			if limit == 0 || p.written < limit {
				return nil
			}
			// Counted after the rows were read: rows stored meanwhile only
			// make the total larger, never smaller than what was printed.
			total, err := store.Count(ctx, f)
			if err != nil {
				return stopped(c, ctx, err, p.written)
			}
			if total > int64(p.written) {
				fmt.Fprintf(c.App.ErrWriter, "%s of %s rows; --limit 0 for all\n", thousands(int64(p.written)), thousands(total))
			}
			return nil
		},
	}
}

// listColumns are list's table, which replay shows too: fields of
// inbox.EventFields by name, in the table's order.
var listColumns = []string{"id", "source", "status", "reason", "event", "job_status", "size", "deliveries", "received_at"}

// listHead is the table's heading line: each column's Field.Column.
var listHead = strings.Join(eventColumns(func(f inbox.Field) string { return f.Column }), "\t")

// listCells are a row's cells in the table, as EventFields writes them.
func listCells(e inbox.Event) []string {
	return eventColumns(func(f inbox.Field) string { return dash(f.Text(e)) })
}

// eventColumns is what of returns for each of listColumns' fields.
func eventColumns(of func(inbox.Field) string) []string {
	fields := inbox.EventFields()
	out := make([]string, 0, len(listColumns))
	for _, name := range listColumns {
		i := slices.IndexFunc(fields, func(f inbox.Field) bool { return f.Name == name })
		out = append(out, of(fields[i]))
	}
	return out
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
	if s != "" && !config.ValidName(s) {
		return "", fmt.Errorf("--source %q: a source name is 1 to 32 of a-z, 0-9, - and _", s)
	}
	return s, nil
}

// thousands prints n with commas between groups of three digits: 2,345.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
