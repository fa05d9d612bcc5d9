package admin

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"inbox/bodyview"
	"inbox/config"
	"inbox/inbox"
)

func showCommand(open Opener) *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print one row and its body",
		ArgsUsage: "ID | --source NAME KEY",
		Description: `Prints the row's fields, then its body: indented when it is JSON, as text
when it is UTF-8 (control characters escaped, so a body cannot drive the
terminal), as a hex dump otherwise; the first 256 KiB of that, and a line saying
how much was cut. With --json, the fields and the body whole, as it is
stored (as "body" when it is UTF-8, else base64 as "body_base64"). A row is named
by its id (a Sume row's is its key, another source's <source>/<key>), or
by --source and its key. A row handed to destinations has a line per
destination: where it stands there (new, done, parked), its attempts, next
attempt, lease and last error ("destinations" with --json), then the
earlier series inbox replay replaced ("series 1: 3 attempts, done ...,
replayed at ...", each destination's "earlier" with --json). The row's own
status sums them up: new while any destination has yet to take it, else
parked while any parked it, else done.

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
			e, err := store.Get(ctx, ids[0])
			if errors.Is(err, inbox.ErrNotFound) {
				return fmt.Errorf("no row with id %q", ids[0])
			}
			if err != nil {
				return stopped(c, ctx, err, 0)
			}
			dests, err := store.Deliveries(ctx, e.ID)
			if err != nil {
				return stopped(c, ctx, err, 0)
			}
			w := c.App.Writer
			if c.Bool("json") {
				return encodeExact(w, showJSON(e, dests))
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, f := range inbox.EventFields() {
				// Fields come from the sender's body too (event, job_id),
				// and last_error is the application's own words.
				fmt.Fprintf(tw, "%s\t%s\n", f.Name, escapeControls(dash(f.Text(e)), ""))
			}
			if len(dests) > 0 {
				fmt.Fprintln(tw, "\nDESTINATION\tSTATUS\tATTEMPTS\tNEXT ATTEMPT\tLEASE\tLAST ERROR")
				for _, d := range dests {
					lease := ""
					if d.LeaseOwner != "" {
						lease = d.LeaseOwner + " until " + formatTime(d.LeaseUntil)
					}
					status := string(d.Status)
					if d.Reason != "" {
						status += " (" + string(d.Reason) + ")"
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", cell(d.Destination), status, d.Attempts,
						dash(inbox.FormatTime(d.NextAttemptAt)), dash(lease), escapeControls(dash(d.LastError), ""))
				}
				if slices.ContainsFunc(dests, func(d inbox.Pairing) bool { return len(d.Earlier) > 0 }) {
					fmt.Fprintln(tw, "\nDESTINATION\tEARLIER SERIES")
					for _, d := range dests {
						for _, h := range d.Earlier {
							fmt.Fprintf(tw, "%s\t%s\n", cell(d.Destination), formatSeries(h))
						}
					}
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(w)
			return writeBody(w, e.Body)
		},
	}
}

// formatSeries is a line of an earlier series of a destination's
// attempts: "series 1: 3 attempts, done 2026-12-01T09:00:00Z, replayed at
// 2026-12-02T10:00:00Z".
func formatSeries(h inbox.Series) string {
	attempts := "attempts"
	if h.Attempts == 1 {
		attempts = "attempt"
	}
	outcome := string(h.Status)
	if h.Reason != "" {
		outcome += " (" + string(h.Reason) + ")"
	}
	at := h.UpdatedAt
	if !h.DoneAt.IsZero() {
		at = h.DoneAt
	}
	line := fmt.Sprintf("series %d: %d %s, %s %s, replayed at %s", h.N, h.Attempts, attempts, outcome, formatTime(at), formatTime(h.ReplayedAt))
	if h.LastError != "" {
		line += ", last error: " + h.LastError
	}
	return escapeControls(line, "")
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

// writeBody prints a body for a terminal: indented when it is JSON, as
// text with control characters escaped when it is UTF-8, as a hex dump
// otherwise; the first bodyview.Limit bytes of that, then a line saying
// the rest was cut (--json has the body whole).
func writeBody(w io.Writer, body []byte) error {
	if len(body) == 0 {
		_, err := fmt.Fprintln(w, "(empty body)")
		return err
	}
	if !utf8.Valid(body) {
		v := bodyview.Hex(body, bodyview.Limit)
		if _, err := fmt.Fprintf(w, "(not UTF-8: hex dump)\n%s", v.Text); err != nil {
			return err
		}
		return writeCut(w, v)
	}
	esc := func(s string) (string, int) { return escapeRune(s, "\n\t") }
	v, ok := bodyview.JSON(body, bodyview.Limit, esc)
	if !ok {
		v = bodyview.Text(body, bodyview.Limit, esc)
	}
	text := v.Text
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if _, err := io.WriteString(w, text); err != nil {
		return err
	}
	return writeCut(w, v)
}

// writeCut says, after a body cut at bodyview.Limit, how much it left out.
func writeCut(w io.Writer, v bodyview.View) error {
	if v.Left == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "(truncated: the first %d KiB shown, %d bytes of the body left out; inbox show --json has it whole)\n",
		bodyview.Limit>>10, v.Left)
	return err
}
