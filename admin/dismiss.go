package admin

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/inbox"
)

func dismissCommand(open Opener) *cli.Command {
	return &cli.Command{
		Name:      "dismiss",
		Usage:     "mark parked rows as needing nothing, so no alert or parked count names them again",
		ArgsUsage: "[ID...]",
		Description: `Dismisses parked rows a person has read and decided need nothing (a test
event, a job that no longer exists): each becomes dismissed, keeping its
body, key and reason, and records when, who ran the command (the OS user)
and --note, which inbox show prints. A dismissed row is in no parked count
(inbox stats, inbox parked, the metrics, the console) and in no inbox
alert; inbox list --status dismissed lists them. A later delivery of the
same bytes is counted on it and it stays dismissed; a storable delivery of
a job whose row was parked on receipt takes the row over, new, as it would
the parked row. inbox purge deletes dismissed rows past the retention as
it does done ones; inbox reprocess ID (parked again, or new) and inbox
replay bring one back.

Select rows by id, or by --since/--until (received time), --source,
--event, --reason, --job-status and --destination; given together, a row
must match them all. Only parked rows are taken, and rows a destination
parked while another still has them: their parked (row, destination)
pairs are dismissed (only --destination's, and only those of --reason,
when given), and the row becomes dismissed once nothing of it is left new
or parked. It refuses to run without a selection (it never dismisses
every parked row by accident: --since 30d selects the last month's), and
without --note. Ids that name no row, and rows named that are not parked,
are said and left as they are, and the command then exits 1. --dry-run
prints what it would dismiss, and the first rows (--show), and changes
nothing (it runs the same transactions and rolls them back).

Examples:
   inbox dismiss --note "test events from the provider's dashboard" job_42 job_43
   inbox dismiss --reason unknown_event --event job.test --note "provider test events" --dry-run
   inbox dismiss --destination crm --reason handler_rejected --since 24h --note "crm deleted these customers"`,
		Flags: append([]cli.Flag{
			config.DBFlag(),
			&cli.StringFlag{Name: "note", Usage: "why the rows need nothing, recorded on each (required)", EnvVars: []string{"INBOX_DISMISS_NOTE"}},
			sourceFlag("only rows of this source", "INBOX_DISMISS_SOURCE"),
			reasonFlag("only rows parked for this reason (their own, or a destination's)", "INBOX_DISMISS_REASON"),
			&cli.IntFlag{Name: "show", Usage: "with --dry-run, list this many of the first rows", Value: 10, EnvVars: []string{"INBOX_DISMISS_SHOW"}},
			dryRunFlag(),
			busyTimeoutFlag(),
			jsonFlag(),
		}, selectFlags("INBOX_DISMISS_", "INBOX_DISMISS_SINCE", "")...),
		Action: func(c *cli.Context) error {
			ids, err := idArgs(c)
			if err != nil {
				return err
			}
			if err := refuseEmpty(c, "source", "event", "reason", "job-status", "destination", "since", "until"); err != nil {
				return err
			}
			note := strings.TrimSpace(c.String("note"))
			switch {
			case note == "":
				return errors.New(`--note is required: say why the rows need nothing (--note "test event"); it is recorded on each row`)
			case !utf8.ValidString(note):
				return errors.New("--note is not UTF-8 text: write it in UTF-8; both stores keep it as text")
			case len(note) > maxNote:
				return fmt.Errorf("--note is %d bytes, more than %d: say why in a sentence, and link to the rest", len(note), maxNote)
			}
			r, err := reason(c)
			if err != nil {
				return err
			}
			source, err := sourceName(c)
			if err != nil {
				return err
			}
			f := inbox.Filter{Source: source, Reason: r}
			if err := selectFilter(c, &f, time.Now(), false); err != nil {
				return err
			}
			opts := inbox.DismissOptions{Dismissal: inbox.Dismissal{By: operator(), Note: note}, DryRun: c.Bool("dry-run"), Sample: c.Int("show")}
			if opts.Sample < 0 {
				return fmt.Errorf("--show %d: want 0 or more", opts.Sample)
			}
			sel := inbox.DismissSelection{IDs: ids, Filter: f}
			if err := sel.Check(); err != nil {
				return fmt.Errorf("dismiss: %w (inbox list --status parked shows them; see --help)", err)
			}
			store, err := openWrite(c, open)
			if err != nil {
				return err
			}
			defer store.Close()
			if f.Destination != "" {
				if err := knownDestination(c.Context, store, f.Destination, nil); err != nil {
					return err
				}
			}
			rep, err := store.Dismiss(c.Context, sel, opts)
			if err != nil {
				if rep.Rows+rep.Waiting > 0 {
					// Say what the batches before the failed one did.
					err = errors.Join(err, printDismiss(c, store, rep))
				}
				return err
			}
			if err := printDismiss(c, store, rep); err != nil {
				return err
			}
			return refusedError(rep)
		},
	}
}

// maxNote is the longest --note dismiss records, in bytes: a sentence or
// a link, shown whole by show and the console.
const maxNote = 2048

// printDismiss prints the report: the rows and pairs dismissed, the rows
// that still wait for another destination, what was asked for and left as
// it is (a row not parked with its status, read from store), and with
// --dry-run the first rows.
func printDismiss(c *cli.Context, store inbox.Store, rep inbox.DismissReport) error {
	w := c.App.Writer
	if c.Bool("json") {
		return encodeExact(w, rep)
	}
	if rep.DryRun {
		fmt.Fprintln(w, "dry run: nothing changed")
	}
	fmt.Fprintf(w, "rows dismissed: %s (destination pairs: %s)\n", thousands(int64(rep.Rows)), thousands(int64(rep.Pairs)))
	if rep.Waiting > 0 {
		fmt.Fprintf(w, "parked pairs dismissed, the row still new or parked for another destination: %s rows\n", thousands(int64(rep.Waiting)))
	}
	if rep.Changed > 0 {
		fmt.Fprintf(w, "changed meanwhile (no longer parked), left as they are: %s\n", thousands(int64(rep.Changed)))
	}
	for _, id := range rep.Missing {
		fmt.Fprintf(w, "no row %s\n", cell(id))
	}
	for _, id := range rep.NotParked {
		status := "not parked"
		if e, err := store.Get(c.Context, id); err == nil {
			status = string(e.Status)
		}
		fmt.Fprintf(w, "not dismissed, %s: %s\n", status, cell(id))
	}
	if !rep.DryRun || len(rep.First) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	return printRows(c, rep.First, listHead, listCells)
}

// refusedError is the command's error when something asked for was not
// dismissed; nil when everything was.
func refusedError(rep inbox.DismissReport) error {
	var parts []string
	if n := len(rep.Missing); n > 0 {
		parts = append(parts, fmt.Sprintf("%d ids name no row", n))
	}
	if n := len(rep.NotParked); n > 0 {
		parts = append(parts, fmt.Sprintf("%d rows named are not parked (or the other flags leave them out)", n))
	}
	if rep.Changed > 0 {
		parts = append(parts, fmt.Sprintf("%d rows changed before they were taken", rep.Changed))
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("not everything asked for was dismissed: %s; check them with inbox show ID", strings.Join(parts, ", "))
}

// operator returns who runs the command, as a dismissal records it: the
// OS user's login name, else $USER, else "unknown".
func operator() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}
