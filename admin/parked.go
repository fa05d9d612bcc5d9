package admin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/inbox"
)

func parkedCommand(open Opener) *cli.Command {
	return &cli.Command{
		Name:  "parked",
		Usage: "list parked rows, newest first, or count them per reason",
		Description: `Lists the rows parked because they can never be processed as received:
id, source, reason, event, size, received time and deliveries. With --group-by reason,
one line per reason with its count and the oldest and newest receipt.
A row counts as parked when it is, or when any of its destinations parked it
(another may still have it): --reason finds each destination's own reason,
and --destination narrows it to that destination's; the REASON column is the
row's own (the destination that settled last), and --group-by reason counts
a row under every reason it is parked with.
With --per-hour, a chart of how many rows were parked in each hour (UTC) of
the last --since (whole hours, 48h unless given; at most 31d), by when they were parked:
on receipt, or when the dispatcher gave up on them. Rows should not keep
arriving here: "inbox alert --parked-every-hour 24h" mails when they did in
every hour for a day. The table escapes control and bidi characters and fits
120 columns, cutting the widest fields with "…" as list does (--wide: ids
whole); --json holds every field whole (one not UTF-8 also as
<field>_base64).

--since, --until, --event, --job-status, --destination, --contains and
--scan-limit find rows as they do for list (see inbox list --help); --per-hour takes --since
as its span and neither --until nor --contains.

Examples:
   inbox parked
   inbox parked --group-by reason
   inbox parked --per-hour
   inbox parked --per-hour --since 24h --reason handler_failed --json
   inbox parked --reason unknown_event --since 24h
   inbox parked --job-status ERROR --event job.failed
   inbox parked --destination crm --reason handler_failed
   inbox parked --contains '"code":"E42"' --until 2026-12-01T00:00:00Z
   inbox parked --json | jq -r .id`,
		Flags: append([]cli.Flag{
			config.DBFlag(),
			&cli.StringFlag{Name: "group-by", Usage: "reason: one line per reason", EnvVars: []string{"INBOX_GROUP_BY"}},
			&cli.BoolFlag{Name: "per-hour", Usage: "chart the rows parked in each hour of the last --since (48h unless given)", EnvVars: []string{"INBOX_PER_HOUR"}},
			reasonFlag("only rows parked for this reason", "INBOX_PARKED_REASON"),
			sourceFlag("only rows of this source", "INBOX_PARKED_SOURCE"),
			readTimeoutFlag(),
			jsonFlag(),
			wideFlag(),
		}, findFlags("INBOX_PARKED_", "INBOX_SINCE", "; with --per-hour, how many hours the chart covers (an age)")...),
		Action: func(c *cli.Context) error {
			if err := config.NoArgs(c); err != nil {
				return err
			}
			if g := c.String("group-by"); g != "" && g != "reason" {
				return fmt.Errorf("--group-by %q: only reason is supported", g)
			}
			r, err := reason(c)
			if err != nil {
				return err
			}
			source, err := sourceName(c)
			if err != nil {
				return err
			}
			f := inbox.Filter{Status: inbox.StatusParked, Reason: r, Source: source}
			perHour := c.Bool("per-hour")
			if err := findFilter(c, &f, time.Now(), perHour); err != nil {
				return err
			}
			ctx, cancel, err := readContext(c)
			if err != nil {
				return err
			}
			defer cancel()
			if perHour {
				return stopped(c, ctx, parkedPerHour(ctx, c, open, f), 0)
			}
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
			if c.String("group-by") != "" {
				groups, err := store.ParkedByReason(ctx, f)
				if err == nil {
					err = scanNote(ctx, c, store, f)
				}
				if err != nil {
					return stopped(c, ctx, err, 0)
				}
				return printRows(c, groups, "REASON\tCOUNT\tOLDEST\tNEWEST", func(g inbox.ReasonCount) []string {
					return []string{string(g.Reason), strconv.FormatInt(g.Count, 10), formatTime(g.Oldest), formatTime(g.Newest)}
				})
			}
			p := newRowPrinter(c, "ID\tSOURCE\tREASON\tEVENT\tJOB STATUS\tSIZE\tRECEIVED\tDELIVERIES", func(e inbox.Event) []string {
				return []string{e.ID, e.Source, string(e.Reason), dash(e.Event), dash(e.JobStatus), strconv.FormatInt(e.Size, 10),
					formatTime(e.ReceivedAt), strconv.FormatInt(e.Deliveries, 10)}
			})
			err = store.Each(ctx, f, p.add)
			if ferr := p.flush(); err == nil {
				err = ferr
			}
			if err == nil {
				err = scanNote(ctx, c, store, f)
			}
			return stopped(c, ctx, err, p.written)
		},
	}
}

// chartHours and maxChartHours bound parked --per-hour: two days unless
// --since says otherwise, a month at most.
const (
	chartHours    = 48
	maxChartHours = 31 * 24
)

// barWidth is the longest bar of the per-hour chart.
const barWidth = 50

// parkedPerHour prints the rows f selects parked in each clock hour (UTC)
// of the last --since (chartHours when not given), the current hour last.
func parkedPerHour(ctx context.Context, c *cli.Context, open Opener, f inbox.Filter) error {
	if c.String("group-by") != "" {
		return errors.New("--per-hour and --group-by: choose one")
	}
	for _, name := range []string{"until", "contains"} {
		if c.IsSet(name) {
			return fmt.Errorf("--per-hour and --%s: --per-hour counts the last --since by when rows were parked; leave --%s out", name, name)
		}
	}
	since, err := age(c, "since")
	if err != nil {
		return err
	}
	hours := chartHours
	// Whole hours, as alert --parked-every-hour takes them: a chart of
	// 90m would show two hours, and say it covered more than was asked.
	if c.IsSet("since") {
		if since < time.Hour || since%time.Hour != 0 || since > maxChartHours*time.Hour {
			return fmt.Errorf("--since %q with --per-hour: want whole hours from 1h to %dd, such as 24h or 2d", c.String("since"), maxChartHours/24)
		}
		hours = int(since / time.Hour)
	}
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
	end := time.Now().UTC().Truncate(time.Hour).Add(time.Hour)
	counts, err := store.ParkedPerHour(ctx, f, end, hours)
	if err != nil {
		return err
	}
	w := c.App.Writer
	if c.Bool("json") {
		return printJSONLines(w, counts)
	}
	var total, most int64
	busy := 0
	for _, h := range counts {
		total += h.Count
		most = max(most, h.Count)
		if h.Count > 0 {
			busy++
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOUR (UTC)\tPARKED\t")
	for i, h := range counts {
		bar := ""
		if h.Count > 0 {
			bar = strings.Repeat("#", int(max(1, h.Count*barWidth/most)))
		}
		label := h.Start.Format("2006-01-02T15:04Z")
		if i == len(counts)-1 {
			label += " (so far)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", label, h.Count, bar)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s parked in the last %d hours; rows in %d of them\n", thousands(total), hours, busy)
	return err
}
