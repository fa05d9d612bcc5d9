package admin

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/inbox"
)

func replayCommand(open Opener) *cli.Command {
	return &cli.Command{
		Name:      "replay",
		Usage:     "hand rows on to their destinations again, done ones included",
		ArgsUsage: "[ID...]",
		Description: `Hands the selected rows on again, whatever became of them: each of their
(row, destination) pairs that is done, parked (handler_failed,
handler_rejected, too_large_for_destination) or dismissed becomes new, with no attempt, due now or at its paced
time, and the running dispatchers send it again; with none running, the
rows wait. A pair already new (waiting, retrying or in flight) is left
alone and counted as waiting. The old series of attempts is kept: inbox
show lists it under the destination ("series 1: 3 attempts, done ...,
replayed at ..."). A row no destination took when it was routed is routed
again under the destinations the dispatcher has now. Rows parked on
receipt (unparseable, unknown_event, conflict, ...) were never handed on:
they are skipped and counted; inbox reprocess is for them.

Select rows by id, or by --since/--until (received time), --source,
--event, --status, --reason, --job-status and --destination; given
together, a row must match them all. --status parked and --reason match a
row parked (with that reason) itself or by any of its destinations, though
another settled it later with another reason; with --destination,
--status and --reason are that destination's pair's. A row selected as
parked has only its parked pairs (of that --reason) reset, so a
destination that took it is not handed it again; one selected as
dismissed (--status dismissed) only its dismissed pairs, its dismissal
cleared. With --destination only the rows
routed to that destination are taken, and only their pair for it is
reset: no row reaches a destination whose filters did not take it. With
--config (INBOX_CONFIG, as dispatch reads it), a pair whose destination's
filters in that file no longer take its row, or that the file no longer
has, is left as it is and counted: no row reaches a destination narrowed
since, and none waits for one removed.

With --destination NAME and a --config that has NAME, the rows handed on
already that have no pair for NAME and that its filters take get one,
new, as if NAME had been configured when they were routed: a destination
added later is fed the rows it never had ("feed a new consumer the last
hour again"), and one that missed rows because another dispatcher routed
them by a table without it gets them. The output counts these pairs as
made; --dry-run counts them and changes nothing. --missing-only makes
only those, leaving the rows that have a pair for NAME as they are (not
handed to it again). Not with --status parked or --reason: a missing pair
was never parked. Rows not routed yet are left to the dispatcher that
routes them. A --destination the inbox does not know (no routed row,
not paused, no running dispatcher has it, not in --config) is refused.
It
refuses to run without a selection (--status done selects every done
row), and a selection flag given empty (--source "", or its variable set
to ""), which would select as the flag left out does. Rows named by id
that the other flags leave out are counted in the output.

--rate N/s (or N/m) spaces the rows: row i is due i/N seconds after the
start, so the application is never handed a whole backlog at once; the
destinations' own rate ceilings apply on top. A rate slower than one an
hour, or at which the last row would be due more than 30 days on, is
refused. Without it every row is due
at once. It prints how many rows and pairs it took, how many already
waited, how many it skipped and why, and when the last one is due;
--dry-run prints the same and the first rows (--show, as inbox list does)
and changes no row (it replays in transactions it rolls back, so it needs
the same write access as a real run, and upgrades an older database as
every command that writes does). The rows are those selected when it starts, taken
oldest first, 500 to a transaction.

Examples:
   inbox replay job_1 job_2
   inbox replay --since 2026-12-01T09:00:00Z --until 2026-12-01T10:00:00Z --event job.completed --destination crm --dry-run
   inbox replay --status done --since 6h --destination crm --rate 20/s
   inbox replay --status parked --reason handler_failed --source github
   inbox replay --job-status ERROR --since 24h --rate 600/m --json
   inbox replay --config /etc/inbox/inbox.toml --status done --since 6h
   inbox replay --config /etc/inbox/inbox.toml --destination newc --since 1h --dry-run
   inbox replay --config /etc/inbox/inbox.toml --destination crm --since 24h --missing-only --rate 20/s`,
		Flags: append([]cli.Flag{
			config.DBFlag(),
			config.FileFlag("the config whose [[destination]] filters the replay keeps to: a pair whose destination's sources or events no longer take its row is left as it is (only names and filters are read)"),
			sourceFlag("only rows of this source", "INBOX_REPLAY_SOURCE"),
			&cli.StringFlag{Name: "status", Usage: "only rows with this status (new, done, parked, dismissed)", EnvVars: []string{"INBOX_REPLAY_STATUS"}},
			reasonFlag("only rows parked for this reason (handler_failed, handler_rejected, too_large_for_destination)", "INBOX_REPLAY_REASON"),
			&cli.StringFlag{Name: "rate", Usage: "hand the rows on at most this fast, N/s or N/m (20/s, 600/m); every row due at once without it", EnvVars: []string{"INBOX_REPLAY_RATE"}},
			&cli.BoolFlag{Name: "missing-only", Usage: "with --destination and a --config that has it: only make the pairs the rows lack for it, leaving the rows it has as they are", EnvVars: []string{"INBOX_REPLAY_MISSING_ONLY"}},
			&cli.IntFlag{Name: "show", Usage: "with --dry-run, list this many of the first rows", Value: 10, EnvVars: []string{"INBOX_REPLAY_SHOW"}},
			dryRunFlag(),
			busyTimeoutFlag(),
			jsonFlag(),
			wideFlag(),
		}, selectFlags("INBOX_REPLAY_", "INBOX_REPLAY_SINCE", "")...),
		Action: func(c *cli.Context) error {
			ids, err := idArgs(c)
			if err != nil {
				return err
			}
			if err := refuseEmpty(c, "source", "event", "status", "reason", "job-status", "destination", "since", "until"); err != nil {
				return err
			}
			status := inbox.Status(c.String("status"))
			if status != "" && !status.Valid() {
				return fmt.Errorf("unknown status %q: want new, done, parked or dismissed", status)
			}
			r, err := reason(c)
			if err != nil {
				return err
			}
			source, err := sourceName(c)
			if err != nil {
				return err
			}
			f := inbox.Filter{Source: source, Status: status, Reason: r}
			if err := selectFilter(c, &f, time.Now(), false); err != nil {
				return err
			}
			opts := inbox.ReplayOptions{DryRun: c.Bool("dry-run"), Sample: c.Int("show")}
			if opts.Sample < 0 {
				return fmt.Errorf("--show %d: want 0 or more", opts.Sample)
			}
			if s := c.String("rate"); s != "" {
				if opts.Rate, err = config.ParseRate(s); err != nil {
					return fmt.Errorf("--rate: %w", err)
				}
			}
			if file := c.String("config"); file != "" {
				if opts.Routes, err = config.LoadRoutes(file); err != nil {
					return err
				}
			}
			if opts.MissingOnly = c.Bool("missing-only"); opts.MissingOnly &&
				(f.Destination == "" || f.Status == inbox.StatusParked || f.Reason != "" ||
					!slices.ContainsFunc(opts.Routes, func(r inbox.Route) bool { return r.Name == f.Destination })) {
				return errors.New("--missing-only goes with --destination NAME and a --config that has NAME, not with --status parked or --reason")
			}
			sel := inbox.ReplaySelection{IDs: ids, Filter: f}
			if err := sel.Check(); err != nil {
				return fmt.Errorf("replay: %w (see --help)", err)
			}
			store, err := openWrite(c, open)
			if err != nil {
				return err
			}
			defer store.Close()
			if f.Destination != "" {
				if err := knownDestination(c.Context, store, f.Destination, opts.Routes); err != nil {
					return err
				}
			}
			rep, err := store.Replay(c.Context, sel, opts)
			if err != nil {
				if rep.Rows+rep.Waiting+len(rep.Skipped) > 0 {
					// Say what the batches before the failed one did.
					err = errors.Join(err, printReplay(c, rep))
				}
				return err
			}
			return printReplay(c, rep)
		},
	}
}

// printReplay prints the report: what was taken, what waited, what was
// skipped and why, when the last row is due, and with --dry-run the
// first rows.
func printReplay(c *cli.Context, rep inbox.ReplayReport) error {
	w := c.App.Writer
	if d := c.String("destination"); rep.Rows+rep.Waiting+rep.Changed == 0 && d != "" && c.String("config") == "" {
		fmt.Fprintf(c.App.ErrWriter, "no selected row has a pair for %s to hand on again: to make the pairs of rows routed before it was configured, give --config FILE with its [[destination]] table (see --help)\n", d)
	}
	if c.Bool("json") {
		return encodeExact(w, rep)
	}
	if rep.DryRun {
		fmt.Fprintln(w, "dry run: nothing changed")
	}
	fmt.Fprintf(w, "rows handed on again: %s (%s pairs made new", thousands(int64(rep.Rows)), thousands(int64(rep.Pairs)))
	if rep.Added > 0 {
		fmt.Fprintf(w, "; %s pairs made for a destination the rows had none of", thousands(int64(rep.Added)))
	}
	if rep.Rerouted > 0 {
		fmt.Fprintf(w, "; %s rows no destination had taken, to be routed again", thousands(int64(rep.Rerouted)))
	}
	fmt.Fprintln(w, ")")
	if rep.Waiting > 0 {
		fmt.Fprintf(w, "already waiting, left alone: %s\n", thousands(int64(rep.Waiting)))
	}
	if rep.Changed > 0 {
		fmt.Fprintf(w, "changed meanwhile, left as they are: %s pairs\n", thousands(int64(rep.Changed)))
	}
	if rep.Filtered > 0 {
		fmt.Fprintf(w, "left as they are, their destination in --config no longer takes them or is gone: %s pairs\n", thousands(int64(rep.Filtered)))
	}
	if rep.Present > 0 {
		fmt.Fprintf(w, "left as they are, they have a pair for the destination (--missing-only): %s rows\n", thousands(int64(rep.Present)))
	}
	if rep.LeftOut > 0 {
		fmt.Fprintf(w, "named but left out by the other filters: %s\n", thousands(int64(rep.LeftOut)))
	}
	if n := rep.Skipped["ignored"]; n > 0 {
		fmt.Fprintf(w, "skipped, ignored (test pings): %s\n", thousands(int64(n)))
	}
	var receipt []string
	total := 0
	for _, k := range slices.Sorted(maps.Keys(rep.Skipped)) {
		if k != "ignored" {
			receipt = append(receipt, fmt.Sprintf("%s %s", cell(k), thousands(int64(rep.Skipped[k]))))
			total += rep.Skipped[k]
		}
	}
	if total > 0 {
		fmt.Fprintf(w, "skipped, parked on receipt and never handed on: %s (%s): see inbox reprocess --help\n",
			thousands(int64(total)), strings.Join(receipt, ", "))
	}
	switch {
	case rep.Pairs+rep.Added == 0:
	case formatTime(rep.LastDue) == formatTime(rep.FirstDue):
		// Due within the same second: batches of an unpaced run differ by milliseconds.
		fmt.Fprintf(w, "due: at once (%s)\n", formatTime(rep.FirstDue))
	default:
		fmt.Fprintf(w, "due: from %s to %s (the last one)\n", formatTime(rep.FirstDue), formatTime(rep.LastDue))
	}
	if !rep.DryRun || len(rep.First) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	return printRows(c, rep.First, listHead, listCells)
}

// refuseEmpty fails when one of the selection flags names is given empty,
// on the command line or as its variable set to "": an empty one selects
// as the flag left out does, so --source "$SRC" with SRC unset would
// replay the rows of every source.
func refuseEmpty(c *cli.Context, names ...string) error {
	for _, n := range names {
		if c.IsSet(n) && strings.TrimSpace(c.String(n)) == "" {
			return fmt.Errorf("--%s is empty (given so, or its variable set to \"\"): name one, or leave the flag out", n)
		}
	}
	return nil
}
