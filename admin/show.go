package admin

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"inbox/bodyview"
	"inbox/config"
	"inbox/inbox"
	"inbox/rowview"
)

func showCommand(open Opener) *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print one row and its body",
		ArgsUsage: "ID | --source NAME KEY",
		Description: `Prints the row's fields, then its body: indented when it is JSON, as text
when it is UTF-8 (control characters escaped, so a body cannot drive the
terminal), as a hex dump otherwise; the first 256 KiB of that, and a line saying
how much was cut; then the answer saved with the row, if any (Vibe's). With
--json, the fields and the body whole, as it is stored (as "body" when it is
UTF-8, else base64 as "body_base64"). A row is named by its id (a Sume row's
is its key, another source's <source>/<key>), or by --source and its key. A
row handed to destinations has a line per destination: where it stands there
(new, done, parked), its attempts, next attempt, lease, when it last changed,
when it was done and its last error ("destinations" with --json), then the
earlier series inbox replay replaced ("series 1: 3 attempts, done ...,
replayed at ...", each destination's "earlier" with --json). The row's own
status sums them up: new while any destination has yet to take it, else
parked while any parked it, else done. Last, the other rows of the row's
job, the newest 100: the job's own row, and the deliveries kept beside it
(a conflict, a poison repeat: keyed sha256:<hex of the body>, parked).
The console's row page shows these same lines.

Examples:
   inbox show job_1
   inbox show sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
   inbox show --json job_1 | jq -r .body | jq .payload
   inbox show vibe/run_1
   inbox show --source vibe run_1`,
		Flags: []cli.Flag{config.DBFlag(), sourceFlag("the source the key is of; the row is then <source>/<key>", "INBOX_SHOW_SOURCE"), readTimeoutFlag(), jsonFlag()},
		Action: func(c *cli.Context) error {
			ids, err := idArgs(c)
			if err != nil {
				return err
			}
			if len(ids) != 1 {
				return errors.New("show takes one row id (see --help)")
			}
			source, err := sourceName(c)
			if err != nil {
				return err
			}
			if source != "" {
				ids[0] = inbox.RowID(source, ids[0])
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
			row, err := rowview.Read(ctx, store, ids[0])
			if errors.Is(err, inbox.ErrNotFound) {
				return fmt.Errorf("no row with id %q", ids[0])
			}
			if err != nil {
				return stopped(c, ctx, err, 0)
			}
			w := c.App.Writer
			if c.Bool("json") {
				return encodeExact(w, showJSON(row.Event, row.Pairs))
			}
			return writeRow(w, row)
		},
	}
}

// writeRow prints row for a terminal: its tables, aligned, a blank line
// between them, then its body and the answer saved with it.
func writeRow(w io.Writer, row rowview.Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, t := range row.Tables {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		if len(t.Lines) == 0 {
			fmt.Fprintf(tw, "(%s)\n", t.Empty)
			continue
		}
		if t.Columns != nil {
			heads := make([]string, len(t.Columns))
			for i, col := range t.Columns {
				heads[i] = strings.ToUpper(col.Head)
			}
			fmt.Fprintln(tw, strings.Join(heads, "\t"))
		}
		for _, l := range t.Lines {
			cells := make([]string, len(l.Cells))
			for i, cell := range l.Cells {
				cells[i] = cell.Text
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		if t.Note != "" {
			fmt.Fprintf(tw, "(%s)\n", t.Note)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := writeBody(w, row.Body); err != nil || !row.Response.Shown {
		return err
	}
	fmt.Fprintf(w, "\n(the %s, %s)\n", row.Response.What, row.Response.Kind)
	return writeBody(w, row.Response)
}

// showJSON is a row with its body, for --json.
func showJSON(e inbox.Event, dests []inbox.Pairing) any {
	out := struct {
		inbox.Event
		Body         *string         `json:"body,omitempty"`
		BodyBase64   []byte          `json:"body_base64,omitempty"`
		Destinations []inbox.Pairing `json:"destinations,omitempty"`
	}{Event: e, Destinations: dests}
	if utf8.Valid(e.Body) {
		s := string(e.Body)
		out.Body = &s
	} else {
		out.BodyBase64 = e.Body
	}
	return out
}

// writeBody prints a body as rowview shows it: a line before a hex dump,
// and after a body cut at bodyview.Limit a line saying how much was left
// out (--json has the body whole).
func writeBody(w io.Writer, b rowview.Body) error {
	if b.Empty {
		_, err := fmt.Fprintf(w, "(empty %s)\n", b.What)
		return err
	}
	text := b.Text
	if b.Kind == bodyview.KindHex {
		text = "(not UTF-8: hex dump)\n" + text
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if _, err := io.WriteString(w, text); err != nil {
		return err
	}
	if cut := b.Cut(); cut != "" {
		_, err := fmt.Fprintf(w, "(%s)\n", cut)
		return err
	}
	return nil
}
